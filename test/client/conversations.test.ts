// The chat list, history pages and read marks through the SDK, against a real node
// (PROTOCOL.md §14): conversations(), history() and markRead() page and answer as the server
// does; a mark made on one device reaches the user's other devices with ownCopies as a 'read'
// event, never as a message, acknowledged like any delivery; noReplay skips the replay of a
// device's first login only.

import t, { type Test } from 'tap';
import { ImClient, type ImClientOptions, type IncomingMessage, type ReadEvent } from '../../src/client/im-client.js';
import type { SwitchboardError } from '../../src/errors.js';
import { uint64Number } from '../../src/protocol/codec.js';
import { HeadType } from '../../src/protocol/types.js';
import { startNode, type TestNode } from '../helpers/node.js';
import { until } from '../../testkit/wait.js';
import { FrameProxy } from './frame-proxy.js';

interface Device {
  client: ImClient;
  messages: IncomingMessage[];
  reads: ReadEvent[];
}

async function online(t: Test, n: { port: number; token: TestNode['token'] }, uid: string, options: Partial<ImClientOptions> = {}): Promise<Device> {
  const client = new ImClient({ host: '127.0.0.1', port: n.port, uid, token: n.token(uid), retryStrategy: false, ...options });
  const d: Device = { client, messages: [], reads: [] };
  client.on('message', (m) => d.messages.push(m));
  client.on('read', (r) => d.reads.push(r));
  t.teardown(() => client.close());
  await client.connect();
  return d;
}

t.test('conversations() lists the chat, pages with nextBefore, and previews the last message', async (t) => {
  const n = await startNode(t);
  const bob = await online(t, n, 'bob', { deviceId: 'phone' });
  for (const peer of ['p1', 'p2', 'p3']) {
    const sender = await online(t, n, peer);
    await sender.client.send('bob', `hello from ${peer}`);
    await sender.client.send('bob', 'x'.repeat(300));
  }
  await bob.client.send('p1', 'answer');

  const first = await bob.client.conversations({ limit: 2 });
  t.same(first.conversations.map((c) => [c.peer, c.lastSeq, c.readSeq, c.unread]), [
    ['p1', 7, 7, 0],
    ['p3', 6, 0, 2],
  ]);
  t.not(first.nextBefore, 0, 'more to come');
  const p3 = first.conversations[1]!;
  t.equal(p3.last?.from, 'p3');
  t.equal(p3.last?.content, 'x'.repeat(256), 'the preview is cut');
  t.equal(p3.truncated, true);
  t.equal(p3.lastAt, p3.last?.storedAt, "the last message's server time");
  const own = first.conversations[0]!.last!;
  t.match(own, { own: true, from: 'bob', to: 'p1', content: 'answer', originDevice: 'phone' }, 'an own last message is marked as such');

  const second = await bob.client.conversations({ before: first.nextBefore, limit: 2 });
  t.same(second.conversations.map((c) => c.peer), ['p2']);
  t.equal(second.nextBefore, 0, 'the last page');
});

t.test('history() pages back through one conversation, own messages marked', async (t) => {
  const n = await startNode(t);
  const bob = await online(t, n, 'bob', { deviceId: 'phone' });
  const alice = await online(t, n, 'alice');
  for (let i = 1; i <= 5; i++) {
    await alice.client.send('bob', `a${i}`);
    if (i % 2 === 0) await bob.client.send('alice', `b${i}`);
  }
  const newest = await bob.client.history('alice', { limit: 4 });
  t.same(newest.messages.map((m) => m.content), ['a3', 'a4', 'b4', 'a5'], 'the newest, ascending');
  t.same(newest.messages.map((m) => m.own), [false, false, true, false]);
  t.not(newest.nextBefore, 0);
  t.equal(newest.pruned, false);
  const older = await bob.client.history('alice', { before: newest.nextBefore, limit: 4 });
  t.same(older.messages.map((m) => m.content), ['a1', 'a2', 'b2']);
  t.equal(older.nextBefore, 0, 'the beginning');
  t.same((await bob.client.history('nobody')).messages, [], 'no such conversation: an empty page');
});

t.test('markRead() on one device: the others with ownCopies get a read event, not a message; the marking device and one without ownCopies get nothing', async (t) => {
  const n = await startNode(t);
  const phone = await online(t, n, 'bob', { deviceId: 'phone', ownCopies: true });
  const laptop = await online(t, n, 'bob', { deviceId: 'laptop', ownCopies: true });
  const tablet = await online(t, n, 'bob', { deviceId: 'tablet' });
  const alice = await online(t, n, 'alice');
  await alice.client.send('bob', 'one');
  const { seq } = await alice.client.send('bob', 'two');
  await until('the devices have both', () => [phone, laptop, tablet].every((d) => d.messages.length === 2));

  const mark = await phone.client.markRead('alice', seq);
  t.match(mark, { readSeq: seq, unread: 0 });
  t.ok(mark.eventSeq > seq, 'the event has its own seq');
  await until('the laptop has the read event', () => laptop.reads.length === 1);
  t.same(laptop.reads[0], { peer: 'alice', group: '', seq, originDevice: 'phone', eventSeq: mark.eventSeq, storedAt: laptop.reads[0]!.storedAt });
  t.ok(laptop.reads[0]!.storedAt! > 0);
  t.equal(laptop.messages.length, 2, 'and no message for it');
  await until('the laptop processed it', () => laptop.client.lastSeq === mark.eventSeq);

  // A barrier: alice's next message comes after the event in bob's inbox.
  await alice.client.send('bob', 'three');
  await until('every device has three', () => [phone, laptop, tablet].every((d) => d.messages.length === 3));
  t.same(phone.reads, [], 'the marking device got the answer only');
  t.same(tablet.reads, [], 'a device without ownCopies is not sent the event');
  t.same((await laptop.client.conversations()).conversations.map((c) => [c.readSeq, c.unread]), [[seq, 1]], 'the same unread count on every device');

  t.match(await phone.client.markRead('alice', seq), { readSeq: seq, eventSeq: 0 }, 'the same mark again: nothing new');
  await t.rejects(phone.client.markRead('nobody', 1), { code: 'SB_ERR_NO_CONVERSATION' });
  await t.rejects(phone.client.markRead('alice', 0), { code: 'SB_ERR_BAD_REQUEST' }, 'refused before the round trip');
});

t.test('a read event is replayed at login, and once only when its ack is lost with the connection', async (t) => {
  const n = await startNode(t);
  let cutAck = true;
  let hiSeq = Infinity;
  // The laptop's first ack of the event is lost, and the connection with it.
  const proxy = await FrameProxy.start(t, n.port, (message, direction) => {
    if (direction === 'toServer' && message.type === HeadType.MESSAGE_ACK && cutAck && uint64Number(message.ack?.seq) > hiSeq) {
      cutAck = false;
      return 'drop-and-cut';
    }
  });
  const phone = await online(t, n, 'bob', { deviceId: 'phone' });
  const alice = await online(t, n, 'alice');
  const { seq } = await alice.client.send('bob', 'hi');
  hiSeq = seq;
  const laptop = await online(t, { port: proxy.port, token: n.token }, 'bob', { deviceId: 'laptop', ownCopies: true, retryStrategy: () => 20 });
  await until('the laptop has hi', () => laptop.messages.length === 1);
  await phone.client.markRead('alice', seq);
  await until('the connection was cut and made again', () => !cutAck && laptop.client.status === 'ready');
  await alice.client.send('bob', 'after');
  await until('the laptop has after', () => laptop.messages.length === 2);
  t.equal(laptop.reads.length, 1, 'the replayed event is not shown again');
  t.equal(laptop.reads[0]!.seq, seq);
  t.same(laptop.messages.map((m) => m.content), ['hi', 'after'], 'and never as a message');
});

t.test('noReplay: a new device starts at the inbox head and pages instead; its later logins replay from its position', async (t) => {
  const n = await startNode(t);
  const alice = await online(t, n, 'alice');
  for (let i = 1; i <= 5; i++) await alice.client.send('bob', `old ${i}`);

  const saved: number[] = [];
  const fresh = await online(t, n, 'bob', { deviceId: 'new-phone', noReplay: true, savePosition: (seq) => saved.push(seq) });
  t.equal(fresh.client.lastSeq, 5, 'the position is the head');
  t.same(saved, [5], 'and saved at once: an app restarted now resumes there instead of skipping again');
  t.same((await fresh.client.history('alice', { limit: 2 })).messages.map((m) => m.content), ['old 4', 'old 5'], 'what it skipped, by page');
  await alice.client.send('bob', 'live');
  await until('the live message', () => fresh.messages.length === 1);
  t.same(fresh.messages.map((m) => m.content), ['live'], 'nothing replayed');
  const position = fresh.client.lastSeq!;
  fresh.client.close();

  await alice.client.send('bob', 'while away');
  // The same device, resuming from its position: noReplay no longer applies.
  const back = await online(t, n, 'bob', { deviceId: 'new-phone', noReplay: true, lastSeq: position, inboxEpoch: fresh.client.inboxEpoch });
  await until('the replay', () => back.messages.length === 1);
  t.same(back.messages.map((m) => m.content), ['while away']);
});

t.test("a refused request rejects with the server's code", async (t) => {
  const n = await startNode(t);
  const bob = await online(t, n, 'bob');
  const err = (await bob.client.history('').catch((e: unknown) => e)) as SwitchboardError;
  t.equal(err.code, 'SB_ERR_BAD_REQUEST', 'a history without a peer');
});
