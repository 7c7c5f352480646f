// Own copies at their edges, each a bug a review found (PROTOCOL.md §14): a msg_id reused for
// another recipient or for a note to oneself, a copy refused after the message was stored, the
// server's field sent by a client (empty, or on a group message), and a resend over a batch
// mixing copies and messages.

import t, { type Test } from 'tap';
import { startNode, type TestNode } from '../helpers/node.js';
import { startRedis } from '../helpers/redis.js';
import { connectLoggedIn } from '../helpers/raw-session.js';
import { frameHeader, isDelivery, seqOf, u64, type RawClient } from '../../testkit/raw-client.js';
import { HeadType } from '../../src/protocol/types.js';
import { RedisInboxStore } from '../../src/inbox/redis-inbox-store.js';
import { MemoryInboxStore } from '../../src/inbox/memory-inbox-store.js';
import { SwitchboardError } from '../../src/errors.js';
import type { AppendRequest, AppendResult } from '../../src/inbox/inbox-store.js';

type Start = (t: Test) => Promise<TestNode>;
const memory: Start = (t) => startNode(t, { ownCopies: true });
const redis: Start = async (t) => {
  const server = await startRedis(t);
  return startNode(t, { ownCopies: true }, { inbox: new RedisInboxStore({ url: server.url }) });
};
function login(t: Test, tn: TestNode, uid: string, device: string, ownCopies = true, acks = true): Promise<RawClient> {
  return connectLoggedIn(t, tn.port, uid, tn.token(uid, device), device, { acks, ownCopies });
}

for (const [store, start] of [['memory', memory], ['redis', redis]] as const) {
  t.test(`${store}: the same msg_id to two recipients (PROTOCOL §5: another message) keeps both own copies`, async (t) => {
    const tn = await start(t);
    await login(t, tn, 'bob', 'b1');
    await login(t, tn, 'carol', 'c1');
    const phone = await login(t, tn, 'alice', 'phone');
    const laptop = await login(t, tn, 'alice', 'laptop');
    const toBob = (await phone.chatAndWait('bob', 'to bob', { msgId: 5 })).messageResponse!;
    const toCarol = (await phone.chatAndWait('carol', 'to carol', { msgId: 5 })).messageResponse!;
    t.equal(toCarol.result, true);
    t.equal(toCarol.duplicate ?? false, false, 'carol got a new message');
    t.not(u64(toCarol.ownSeq), u64(toBob.ownSeq), 'its own copy is another seq than the copy of the message to bob');
    await laptop.deliveries(1);
    await laptop.roundTrip();
    const more = laptop.takeDeliveries().map((d) => d.messageRequest?.content);
    t.same(more, ['to carol'], "alice's laptop sees the message to carol too");
  });

  t.test(`${store}: a note to oneself with a msg_id used before for a message to bob is stored`, async (t) => {
    const tn = await start(t);
    await login(t, tn, 'bob', 'b1');
    const phone = await login(t, tn, 'alice', 'phone');
    const laptop = await login(t, tn, 'alice', 'laptop');
    await phone.chatAndWait('bob', 'to bob', { msgId: 9 });
    const note = (await phone.chatAndWait('alice', 'note to self', { msgId: 9 })).messageResponse!;
    t.equal(note.duplicate ?? false, false, 'the note is a new message (key: recipient alice, sender alice, 9)');
    await laptop.deliveries(1);
    await laptop.roundTrip();
    t.same(laptop.takeDeliveries().map((d) => d.messageRequest?.content), ['note to self']);
  });
}

/** A memory inbox whose append to `uid` is refused as full `times` times (the bound hit between the two appends). */
class FullFor extends MemoryInboxStore {
  constructor(readonly uid: string, public times: number) {
    super();
  }
  override append(request: AppendRequest): AppendResult {
    if (request.uid === this.uid && this.times > 0) {
      this.times--;
      throw new SwitchboardError('SB_ERR_STORE_FULL', 'full');
    }
    return super.append(request);
  }
  // Through append(), so that the second of the two can be the one refused.
  override appendPair(first: AppendRequest, second: AppendRequest): [AppendResult, AppendResult] {
    return [this.append(first), this.append(second)];
  }
}

t.test('memory: own copy refused STORE_FULL after the recipient\'s was stored: the recipient still gets it live', async (t) => {
  const inbox = new FullFor('alice', 1);
  const tn = await startNode(t, { ownCopies: true }, { inbox });
  const bob = await login(t, tn, 'bob', 'b1');
  const phone = await login(t, tn, 'alice', 'phone');
  const refused = (await phone.chatAndWait('bob', 'hi', { msgId: 3 })).messageResponse!;
  t.equal(refused.errorCode, 'SB_ERR_STORE_FULL');
  t.equal((await tn.node.inbox.range('bob', 0, 0)).head, 1, "bob's copy was stored nonetheless");
  // The documented recovery: resend with the same msg_id.
  const again = (await phone.chatAndWait('bob', 'hi', { msgId: 3 })).messageResponse!;
  t.equal(again.result, true);
  t.equal(again.duplicate, true, "bob's is a duplicate now, and the copy is stored");
  const got = await bob.deliveries(1, 3000).then(
    (d) => d.map((m) => m.messageRequest?.content),
    () => [],
  );
  t.same(got, ['hi'], 'bob (online all along) gets the message within 3 s');
});

/**
 * A memory inbox whose first appendPair stores only the own copy, then fails: what a Redis
 * Cluster does when the recipient's master fails the call and the sender's stores the copy.
 */
class CopyOnlyOnce extends MemoryInboxStore {
  failed = false;
  override appendPair(first: AppendRequest, second: AppendRequest): [AppendResult, AppendResult] {
    if (this.failed) return super.appendPair(first, second);
    this.failed = true;
    super.append(second);
    throw new SwitchboardError('SB_ERR_STORE_UNAVAILABLE', "the recipient's Redis failed");
  }
}

t.test("the recipient's append failed, the own copy stored: the resend delivers the copy to the sender's other devices too", async (t) => {
  const tn = await startNode(t, { ownCopies: true }, { inbox: new CopyOnlyOnce() });
  const bob = await login(t, tn, 'bob', 'b1');
  const phone = await login(t, tn, 'alice', 'phone');
  const laptop = await login(t, tn, 'alice', 'laptop');
  t.equal((await phone.chatAndWait('bob', 'hi', { msgId: 4 })).messageResponse?.errorCode, 'SB_ERR_STORE_UNAVAILABLE');
  const again = (await phone.chatAndWait('bob', 'hi', { msgId: 4 })).messageResponse!;
  t.equal(again.result, true);
  t.equal(again.duplicate ?? false, false, "bob's is new");
  t.equal((await bob.next(isDelivery)).messageRequest?.content, 'hi', 'bob gets it live');
  const copy = await laptop.next(isDelivery, 3000).catch(() => undefined);
  t.equal(copy?.messageRequest?.content, 'hi', 'and so does the laptop: its copy was stored by the failed send, and delivered by the resend');
  t.equal(copy?.messageRequest?.originDevice, 'phone');
});

t.test('an empty origin_device (a2 01 00) first in a request is no origin: the stored bodies are the server\'s, the copy names the phone', async (t) => {
  const tn = await memory(t);
  const bob = await login(t, tn, 'bob', 'b1');
  const phone = await login(t, tn, 'alice', 'phone');
  const laptop = await login(t, tn, 'alice', 'laptop');
  // Message { type 5, sequence 5, messageRequest { origin_device "" (first), msg_id 1, to "bob", content "x" } }
  const req = Buffer.from([0xa2, 0x01, 0x00, 0x08, 0x01, 0x1a, 0x03, 0x62, 0x6f, 0x62, 0x32, 0x01, 0x78]);
  const body = Buffer.concat([Buffer.from([0x08, 0x05, 0x10, 0x05, 0x32, req.length]), req]);
  phone.sendRaw(Buffer.concat([frameHeader(body.length), body]));
  t.equal((await phone.response(5)).messageResponse?.result, true, 'taken as a message without it (protobuf cannot tell an empty string from none)');
  const [stored] = (await tn.node.inbox.range('bob', 0, 10)).messages;
  t.not(Buffer.from(stored!.body).subarray(0, 2).toString('hex'), 'a201', "bob's stored body does not start as an own copy's");
  t.equal((await bob.next(isDelivery)).messageRequest?.content, 'x');
  t.equal((await laptop.next(isDelivery)).messageRequest?.originDevice, 'phone', "the copy's origin is the server's");
});

t.test('a group message carrying origin_device is refused as the server\'s field (PROTOCOL §14)', async (t) => {
  const tn = await startNode(t, { ownCopies: true });
  const group = await tn.node.groups.create('mallory', 'team', ['bob']);
  tn.node.groupNotifier.publish({ group: group.id, seq: 1, added: ['mallory', 'bob'] });
  const glogin = (uid: string) => connectLoggedIn(t, tn.port, uid, tn.token(uid), 'd1', { acks: true, groups: true });
  const mallory = await glogin('mallory');
  const bob = await glogin('bob');
  const isG = (m: import('../../src/protocol/types.js').ImMessage) => m.type === HeadType.MESSAGE_REQUEST && m.messageRequest?.group === group.id;
  await mallory.next(isG);
  await bob.next(isG);
  const r = await mallory.response(mallory.groupChat(group.id, 'hi', { originDevice: 'bobs-phone' }));
  t.equal(r.messageResponse?.errorCode, 'SB_ERR_BAD_REQUEST', 'refused');
  const d = await bob.next(isG, 1000).catch(() => undefined);
  t.equal(d?.messageRequest?.originDevice ?? '', '', 'no member is sent a client-chosen origin_device');
});

t.test('an ack-timeout resend over a batch mixing own copies and messages resends only what was written, then stops', async (t) => {
  const tn = await startNode(t, { ackTimeoutMs: 200, ownCopies: true, syncBatchSize: 2 });
  const bob = await login(t, tn, 'bob', 'b1');
  const phone = await login(t, tn, 'alice', 'phone');
  await bob.chatAndWait('alice', 'm1');
  await phone.chatAndWait('bob', 'own2');
  await phone.chatAndWait('bob', 'own3');
  await bob.chatAndWait('alice', 'm4');
  await phone.chatAndWait('bob', 'own5');
  const first = await phone.deliveries(2);
  t.same(first.map(seqOf), [1, 4]);
  await new Promise((r) => setTimeout(r, 700));
  const resent = phone.takeDeliveries().map(seqOf);
  t.ok(resent.length >= 2 && resent.every((s) => s === 1 || s === 4), `resent only 1 and 4: ${resent}`);
  phone.ack(4);
  await phone.roundTrip();
  // A resend the timer wrote before the ack was read arrives before the round trip's answer.
  phone.takeDeliveries();
  await new Promise((r) => setTimeout(r, 600));
  await phone.roundTrip();
  t.same(phone.takeDeliveries().map(seqOf), [], 'no resend once 4 is acked');
  phone.destroy();
  const until = Date.now() + 3000;
  while ((await tn.node.inbox.cursor('alice', 'phone')) === undefined && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
  t.equal(await tn.node.inbox.cursor('alice', 'phone'), 5, 'the ack of 4 covers the passed-over 5');
});
