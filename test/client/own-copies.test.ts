// Own copies through the SDK, against a real node: what alice sends from one device reaches her
// devices that asked for them (ownCopies) as a 'message' with `own` set, live and by replay at
// login, and never the device that sent it nor one that did not ask; SendResult.ownSeq is where
// the copy is, 0 when the server keeps none. The size pre-check counts the copy, as the server does.
//
// "Nothing arrived" is checked behind a barrier: bob writes to alice afterwards, and alice's
// inbox is delivered in order, so a device that has bob's marker would have had the copy before it.

import t, { type Test } from 'tap';
import { ImClient, type ImClientOptions, type IncomingMessage } from '../../src/client/im-client.js';
import type { SwitchboardError } from '../../src/errors.js';
import { HeadType } from '../../src/protocol/types.js';
import { startNode, type TestNode } from '../helpers/node.js';
import { until } from '../../testkit/wait.js';
import { FrameProxy } from './frame-proxy.js';

interface Device {
  client: ImClient;
  messages: IncomingMessage[];
}

/** A client whose messages are recorded from before connect(): the replay may come with the login's answer. */
function device(t: Test, n: TestNode | { port: number; token: TestNode['token'] }, uid: string, options: Partial<ImClientOptions> = {}): Device {
  const client = new ImClient({ host: '127.0.0.1', port: n.port, uid, token: n.token(uid), retryStrategy: false, ...options });
  const d: Device = { client, messages: [] };
  client.on('message', (m) => d.messages.push(m));
  t.teardown(() => client.close());
  return d;
}

async function online(t: Test, n: TestNode, uid: string, options: Partial<ImClientOptions> = {}): Promise<Device> {
  const d = device(t, n, uid, options);
  await d.client.connect();
  return d;
}

/** bob writes `marker` to alice; resolves with its seq once every one of `devices` has it. */
async function barrier(bob: Device, devices: Device[], marker = 'marker'): Promise<number> {
  const { seq } = await bob.client.send('alice', marker);
  for (const d of devices) await until(`${d.client.deviceId} has ${marker}`, () => d.messages.some((m) => m.content === marker));
  return seq;
}

const contents = (d: Device) => d.messages.map((m) => m.content);

t.test("a message from alice's laptop reaches her phone (ownCopies) as her own, at its ownSeq; not the laptop, not her tablet (no ownCopies)", async (t) => {
  const n = await startNode(t);
  const bob = await online(t, n, 'bob', { deviceId: 'bob-phone' });
  // The laptop asks for own copies too: still not its own one back.
  const laptop = await online(t, n, 'alice', { deviceId: 'alice-laptop', ownCopies: true });
  const phone = await online(t, n, 'alice', { deviceId: 'alice-phone', ownCopies: true });
  const tablet = await online(t, n, 'alice', { deviceId: 'alice-tablet' });
  const positionBefore = laptop.client.lastSeq;

  const sent = await laptop.client.send('bob', 'hi bob');
  t.equal(sent.seq, 1, "bob's first");
  t.equal(sent.ownSeq, 1, "the copy is the first of alice's inbox");
  t.equal(laptop.client.lastSeq, positionBefore, "ownSeq does not move the sender's position: the deliveries do");

  await until('the phone has the copy', () => phone.messages.length === 1);
  const copy = phone.messages[0]!;
  t.match(copy, { own: true, from: 'alice', to: 'bob', originDevice: 'alice-laptop', seq: sent.ownSeq, content: 'hi bob', msgId: sent.msgId });
  await until('bob has it', () => bob.messages.length === 1);
  t.match(bob.messages[0], { own: false, originDevice: '', from: 'alice', to: 'bob', seq: 1, content: 'hi bob' });

  const markerSeq = await barrier(bob, [laptop, phone, tablet]);
  t.equal(markerSeq, sent.ownSeq + 1, "bob's message follows the copy in alice's inbox");
  t.same(contents(laptop), ['marker'], 'the laptop sent it: no copy for it');
  t.same(contents(tablet), ['marker'], 'the tablet did not ask for copies');
  t.same(contents(phone), ['hi bob', 'marker']);
  t.match(phone.messages[1], { own: false, originDevice: '', from: 'bob', to: 'alice' });
  for (const d of [laptop, phone, tablet]) t.equal(d.client.lastSeq, markerSeq, `${d.client.deviceId}'s position is past the copy`);
});

t.test('a device that logs in later gets the copy in the replay; the sending device and one without ownCopies do not', async (t) => {
  const n = await startNode(t);
  const bob = await online(t, n, 'bob', { deviceId: 'bob-phone' });
  const laptop = await online(t, n, 'alice', { deviceId: 'alice-laptop', ownCopies: true });
  const first = await laptop.client.send('bob', 'while the phone was off');
  const second = await laptop.client.send('bob', 'and again');
  t.same([first.ownSeq, second.ownSeq], [1, 2]);
  laptop.client.close();

  const phone = await online(t, n, 'alice', { deviceId: 'alice-phone', ownCopies: true });
  await until('the phone has both copies', () => phone.messages.length === 2);
  t.same(
    phone.messages.map((m) => ({ own: m.own, seq: m.seq, to: m.to, originDevice: m.originDevice, content: m.content })),
    [
      { own: true, seq: 1, to: 'bob', originDevice: 'alice-laptop', content: 'while the phone was off' },
      { own: true, seq: 2, to: 'bob', originDevice: 'alice-laptop', content: 'and again' },
    ],
    'replayed at login, in order',
  );
  // The laptop again, from the start of the inbox, and a tablet that never asked for copies.
  const laptopAgain = await online(t, n, 'alice', { deviceId: 'alice-laptop', ownCopies: true, lastSeq: 0 });
  const tablet = await online(t, n, 'alice', { deviceId: 'alice-tablet' });
  await barrier(bob, [phone, laptopAgain, tablet]);
  t.same(contents(laptopAgain), ['marker'], 'its own copies are not replayed to the device that sent them');
  t.same(contents(tablet), ['marker'], 'nor to a device without ownCopies');
});

t.test('a copy sent from a device with no id is own too (its empty origin_device decodes as none)', async (t) => {
  const n = await startNode(t);
  const bob = await online(t, n, 'bob', { deviceId: 'bob-phone' });
  const noId = await online(t, n, 'alice');
  const phone = await online(t, n, 'alice', { deviceId: 'alice-phone', ownCopies: true });
  const sent = await noId.client.send('bob', 'from nowhere');
  t.ok(sent.ownSeq > 0);
  await until('the phone has the copy', () => phone.messages.length === 1);
  t.match(phone.messages[0], { own: true, originDevice: '', from: 'alice', to: 'bob', seq: sent.ownSeq });
  await barrier(bob, [noId]);
  t.same(contents(noId), ['marker'], 'the device with no id is not sent its own copy');
});

t.test('a message to oneself has no copy: ownSeq is 0 and it arrives once, not as own', async (t) => {
  const n = await startNode(t);
  const laptop = await online(t, n, 'alice', { deviceId: 'alice-laptop', ownCopies: true });
  const phone = await online(t, n, 'alice', { deviceId: 'alice-phone', ownCopies: true });
  const sent = await laptop.client.send('alice', 'a note');
  t.equal(sent.ownSeq, 0);
  await until('the phone has it', () => phone.messages.length === 1);
  t.match(phone.messages[0], { own: false, originDevice: '', from: 'alice', to: 'alice', seq: sent.seq });
  // The next one is the inbox's next seq: nothing else was stored for alice.
  const again = await laptop.client.send('alice', 'another');
  t.equal(again.seq, sent.seq + 1);
});

t.test('a server that keeps no copies (--no-own-copies): ownSeq is 0 and no device gets one', async (t) => {
  const n = await startNode(t, { ownCopies: false });
  const bob = await online(t, n, 'bob', { deviceId: 'bob-phone' });
  const laptop = await online(t, n, 'alice', { deviceId: 'alice-laptop', ownCopies: true });
  const phone = await online(t, n, 'alice', { deviceId: 'alice-phone', ownCopies: true });
  const sent = await laptop.client.send('bob', 'hi bob');
  t.equal(sent.seq, 1);
  t.equal(sent.ownSeq, 0, 'no copy, no own_seq');
  const markerSeq = await barrier(bob, [phone]);
  t.same(contents(phone), ['marker'], 'the phone gets no copy');
  t.equal(markerSeq, 1, "alice's inbox holds bob's marker only");
});

t.test('the size pre-check counts the own copy: near the limit what the SDK sends to bob is stored, and the first length it refuses the server refuses too', async (t) => {
  const n = await startNode(t);
  const proxy = await FrameProxy.start(t, n.port);
  const viaProxy = { port: proxy.port, token: n.token };
  const alice = device(t, viaProxy, 'alice', { deviceId: 'dev-1' });
  await alice.client.connect();
  // msg_ids of one varint length, so that only the content's length changes the size.
  let msgId = 1000;
  const outcome = (client: ImClient, to: string, length: number) =>
    client.send(to, 'z'.repeat(length), { msgId: msgId++ }).then(
      () => 'stored',
      (err: SwitchboardError) => err.code,
    );
  let largest = 0;
  for (let length = 65_420; length <= 65_480; length++) {
    const result = await outcome(alice.client, 'bob', length);
    t.ok(result === 'stored' || result === 'SB_ERR_MESSAGE_TOO_LARGE', `${length}: ${result}`);
    if (result === 'stored') largest = length;
  }
  t.ok(largest > 65_420 && largest < 65_480, `the range spans the SDK's limit (the largest stored: ${largest})`);
  const responses = proxy.seen('toClient', HeadType.MESSAGE_RESPONSE);
  t.same(responses.filter((r) => !r.messageResponse?.result).map((r) => r.messageResponse?.errorCode), [], 'the server refused none: what the SDK refused it refused itself');
  t.equal(proxy.seen('toServer', HeadType.MESSAGE_REQUEST).length, largest - 65_420 + 1, 'only what was stored was sent');
  alice.client.close();

  // The SDK's limit is the server's: a client that does not check (its frame limit set higher)
  // sends one byte more, and the server refuses it, for the copy (to alice herself it fits).
  const lax = device(t, viaProxy, 'alice', { deviceId: 'dev-1', maxFrameLength: 70_000 });
  await lax.client.connect();
  t.equal(await outcome(lax.client, 'bob', largest + 1), 'SB_ERR_MESSAGE_TOO_LARGE');
  t.equal(proxy.seen('toClient', HeadType.MESSAGE_RESPONSE).at(-1)?.messageResponse?.errorCode, 'SB_ERR_MESSAGE_TOO_LARGE', "the server's refusal");
  t.equal(await outcome(lax.client, 'alice', largest + 1), 'stored', 'no copy to oneself: the same length is stored');
});
