// Own copies (PROTOCOL.md §14): what a user sends from one device reaches the user's other
// devices that asked for it, live and by replay, in the user's inbox order; never the device
// that sent it, never a device that did not ask (an original client sees what it saw before).
// Run on the memory inbox and on a real Redis one, where the appends answer later.

import t, { type Test } from 'tap';
import { startNode, type TestNode } from '../helpers/node.js';
import { startRedis } from '../helpers/redis.js';
import { connectLoggedIn } from '../helpers/raw-session.js';
import { frameHeader, isDelivery, seqOf, u64, type RawClient } from '../../testkit/raw-client.js';
import { HeadType } from '../../src/protocol/types.js';
import { RedisInboxStore } from '../../src/inbox/redis-inbox-store.js';

/** Polls `check` until it holds (a position is saved behind, on release). */
async function until(check: () => Promise<boolean>, timeoutMs = 5000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

type Start = (t: Test, ownCopies?: boolean) => Promise<TestNode>;

const memory: Start = (t, ownCopies = true) => startNode(t, { ownCopies });
const redis: Start = async (t, ownCopies = true) => {
  const server = await startRedis(t);
  return startNode(t, { ownCopies }, { inbox: new RedisInboxStore({ url: server.url }) });
};

/** Logs `uid` in on `device` with acks (and own copies unless `ownCopies` is false). */
function login(t: Test, tn: TestNode, uid: string, device: string, ownCopies = true, acks = true): Promise<RawClient> {
  return connectLoggedIn(t, tn.port, uid, tn.token(uid, device), device, { acks, ownCopies });
}

for (const [store, start] of [['memory', memory], ['redis', redis]] as const) {
  t.test(`${store}: a message from alice's phone reaches her laptop live, as hers, and not her phone`, async (t) => {
    const tn = await start(t);
    const bob = await login(t, tn, 'bob', 'b1');
    const phone = await login(t, tn, 'alice', 'phone');
    const laptop = await login(t, tn, 'alice', 'laptop');

    const response = (await phone.chatAndWait('bob', 'from the phone')).messageResponse!;
    t.equal(response.result, true);
    t.equal(u64(response.ownSeq), '1', "the response tells where the copy is in alice's inbox");

    const copy = await laptop.next(isDelivery);
    const m = copy.messageRequest!;
    t.equal(m.from, 'alice', 'marked as sent by her');
    t.equal(m.to, 'bob', 'to the peer');
    t.equal(m.content, 'from the phone');
    t.equal(m.originDevice, 'phone', 'from which device');
    t.equal(seqOf(copy), 1, "at the seq of alice's inbox the response gave");
    t.equal(u64(m.storedAt), u64((await bob.next(isDelivery)).messageRequest?.storedAt), "the server's time, the same as bob's copy");

    // The phone gets nothing of its own message; the heartbeat barrier proves it was not written.
    await phone.roundTrip();
    t.same(phone.takeDeliveries(), [], 'the sending device gets its response, not a copy');

    // And bob's reply reaches both of alice's devices at her seq 2, which the phone acks.
    t.equal((await bob.chatAndWait('alice', 'reply')).messageResponse?.result, true);
    const [onPhone] = await phone.deliveries(1);
    t.equal(seqOf(onPhone!), 2);
    t.equal(seqOf((await laptop.deliveries(1))[0]!), 2);
  });

  t.test(`${store}: a device that logs in later gets alice's own messages by replay, in her inbox order; the sender's next login does not`, async (t) => {
    const tn = await start(t);
    const bob = await login(t, tn, 'bob', 'b1');
    const phone = await login(t, tn, 'alice', 'phone');
    await phone.chatAndWait('bob', 'one');
    await bob.chatAndWait('alice', 'two');
    await phone.chatAndWait('bob', 'three');
    const own = await phone.deliveries(1);
    t.equal(own[0]!.messageRequest?.content, 'two', 'the phone is sent only what bob sent');
    phone.ack(seqOf(own[0]!));
    await phone.roundTrip();

    const tablet = await login(t, tn, 'alice', 'tablet');
    const replay = await tablet.deliveries(3);
    t.same(
      replay.map((d) => [seqOf(d), d.messageRequest?.from, d.messageRequest?.content]),
      [
        [1, 'alice', 'one'],
        [2, 'bob', 'two'],
        [3, 'alice', 'three'],
      ],
      'the whole conversation, as on every device',
    );

    // The phone reconnects from the position the server saved: its own "three" is not replayed.
    phone.destroy();
    await until(async () => (await tn.node.inbox.cursor('alice', 'phone')) === 3);
    const again = await login(t, tn, 'alice', 'phone');
    t.equal(u64(again.loginResponse?.inboxHead), '3');
    await again.roundTrip();
    t.same(again.takeDeliveries().map((d) => d.messageRequest?.content), [], 'nothing of its own after a reconnect');
  });

  t.test(`${store}: an acknowledging device that passed over its own copy is acknowledged past it; no resend follows`, async (t) => {
    const tn = await startNode(t, { ackTimeoutMs: 200, ownCopies: true }, store === 'redis' ? { inbox: new RedisInboxStore({ url: (await startRedis(t)).url }) } : {});
    await login(t, tn, 'bob', 'b1');
    const phone = await login(t, tn, 'alice', 'phone');
    const bob = await login(t, tn, 'bob', 'b2');
    await bob.chatAndWait('alice', 'first');
    const [first] = await phone.deliveries(1);
    // Sent (not yet acked) 1, then its own 2 is passed over; the ack of 1 covers 2.
    await phone.chatAndWait('bob', 'mine');
    phone.ack(seqOf(first!));
    await phone.roundTrip();
    await new Promise((resolve) => setTimeout(resolve, 600));
    await phone.roundTrip();
    t.same(phone.takeDeliveries(), [], 'no resend after the ack timeout');
    phone.destroy();
    await until(async () => (await tn.node.inbox.cursor('alice', 'phone')) !== undefined);
    t.equal(await tn.node.inbox.cursor('alice', 'phone'), 2, 'the saved position is past the own copy');
  });
}

t.test('a device that did not ask for own copies, and an original client, see what they saw before', async (t) => {
  const tn = await memory(t);
  await login(t, tn, 'bob', 'b1');
  const phone = await login(t, tn, 'alice', 'phone');
  const ackClient = await login(t, tn, 'alice', 'old-sdk', false);
  const legacy = await login(t, tn, 'alice', 'original', false, false);
  await phone.chatAndWait('bob', 'mine');
  const bob = await login(t, tn, 'bob', 'b2');
  await bob.chatAndWait('alice', 'theirs');
  for (const device of [ackClient, legacy]) {
    const [d] = await device.deliveries(1);
    t.equal(d!.messageRequest?.content, 'theirs', 'only what was sent to alice');
    await device.roundTrip();
    t.same(device.takeDeliveries(), []);
  }
  // The legacy device's position moves past the copy it was not sent, once the kernel took what came before.
  legacy.destroy();
  await until(async () => (await tn.node.inbox.cursor('alice', 'original')) !== undefined);
  t.equal(await tn.node.inbox.cursor('alice', 'original'), 2);
});

t.test('--no-own-copies: nothing is kept in the sender\'s inbox and the response has no own_seq', async (t) => {
  const tn = await memory(t, false);
  await login(t, tn, 'bob', 'b1');
  const phone = await login(t, tn, 'alice', 'phone');
  const laptop = await login(t, tn, 'alice', 'laptop');
  const response = (await phone.chatAndWait('bob', 'hi')).messageResponse!;
  t.equal(response.result, true);
  t.equal(u64(response.ownSeq), '0');
  t.equal((await tn.node.inbox.range('alice', 0, 0)).head, 0);
  await laptop.roundTrip();
  t.same(laptop.takeDeliveries(), []);
});

t.test('a message to oneself is stored once, and every device gets it, the sending one too (as before)', async (t) => {
  const tn = await memory(t);
  const phone = await login(t, tn, 'alice', 'phone');
  const laptop = await login(t, tn, 'alice', 'laptop');
  const response = (await phone.chatAndWait('alice', 'note to self')).messageResponse!;
  t.equal(u64(response.seq), '1');
  t.equal(u64(response.ownSeq), '0', 'no copy: it is in her inbox already');
  for (const device of [phone, laptop]) t.equal((await device.next(isDelivery)).messageRequest?.originDevice ?? '', '');
});

t.test('a resent msg_id keeps one own copy; the resend is answered with the same own_seq', async (t) => {
  const tn = await memory(t);
  await login(t, tn, 'bob', 'b1');
  const phone = await login(t, tn, 'alice', 'phone');
  const laptop = await login(t, tn, 'alice', 'laptop');
  const first = (await phone.chatAndWait('bob', 'once', { msgId: 77 })).messageResponse!;
  const again = (await phone.chatAndWait('bob', 'once', { msgId: 77 })).messageResponse!;
  t.equal(again.duplicate, true);
  t.equal(u64(again.ownSeq), u64(first.ownSeq));
  t.equal((await tn.node.inbox.range('alice', 0, 0)).head, 1, 'one copy');
  await laptop.deliveries(1);
  await laptop.roundTrip();
  t.same(laptop.takeDeliveries(), [], 'delivered once');
});

t.test('attack: a request carrying origin_device (to hide a message from devices, or pass it off as another device\'s) is refused, nothing stored', async (t) => {
  const tn = await memory(t);
  await login(t, tn, 'bob', 'b1');
  const mallory = await login(t, tn, 'mallory', 'm1');
  // Written first (raw bytes: an encoder writes fields in number order), as the server writes
  // own copies, so that a body stored as it came would start with it: a2 01 02 "b2", then msg_id 1, to "bob", content "x".
  const request = Buffer.from('a201026232' + '0801' + '1a03626f62' + '320178', 'hex');
  const body = Buffer.concat([Buffer.from([0x08, 0x05, 0x10, 0x05, 0x32, request.length]), request]);
  mallory.sendRaw(Buffer.concat([frameHeader(body.length), body]));
  const refused = (await mallory.response(5)).messageResponse!;
  t.equal(refused.errorCode, 'SB_ERR_BAD_REQUEST');
  t.equal((await tn.node.inbox.range('bob', 0, 0)).head, 0, 'nothing stored for bob');
  t.equal((await tn.node.inbox.range('mallory', 0, 0)).head, 0, 'nor for mallory');
  await mallory.roundTrip();
  t.equal(mallory.isClosed, false, 'refused, not closed');
});
