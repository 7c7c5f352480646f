// The SDK's side of stored delivery, against real nodes: offline messages arrive at login with
// their seq; deliveries lost with a connection come again and are shown once; acks, lastSeq,
// savePosition and 'gap'; sends whose answer was lost are resent with the same msgId and stored
// once. Losses happen at exact protocol points through a frame-aware proxy (frame-proxy.ts),
// or by stopping a node that keeps its inbox in Redis.

import t, { type Test } from 'tap';
import { ImClient, type ClientStatus, type ImClientOptions, type IncomingMessage } from '../../src/client/im-client.js';
import { createNode, type SwitchboardNode } from '../../src/node.js';
import { MemoryInboxStore } from '../../src/inbox/memory-inbox-store.js';
import { RedisInboxStore } from '../../src/inbox/redis-inbox-store.js';
import type { InboxStore } from '../../src/inbox/inbox-store.js';
import { decodeMessage } from '../../src/protocol/codec.js';
import { HeadType } from '../../src/protocol/types.js';
import { startNode, TEST_SECRET, type TestNode } from '../helpers/node.js';
import { startRedis } from '../helpers/redis.js';
import { freePort } from '../../testkit/services.js';
import { FrameProxy } from './frame-proxy.js';

const FAST_RETRY = () => 20;

interface Tracked {
  client: ImClient;
  messages: IncomingMessage[];
  statuses: ClientStatus[];
  saved: number[];
  /** The epochs savePosition was given, one per saved position. */
  savedEpochs: number[];
  gaps: { requested: number; from: number }[];
  resets: { requested: number; previousEpoch: number; from: number; epoch: number }[];
}

/** A client whose events are recorded from before connect(): a replay may arrive in the same read as the login answer. */
function track(t: Test, port: number, uid: string, token: string, options: Partial<ImClientOptions> = {}): Tracked {
  const saved: number[] = [];
  const savedEpochs: number[] = [];
  const client = new ImClient({
    host: '127.0.0.1',
    port,
    uid,
    deviceId: `${uid}-device`,
    token,
    retryStrategy: FAST_RETRY,
    savePosition: (seq, epoch) => {
      saved.push(seq);
      savedEpochs.push(epoch);
    },
    ...options,
  });
  const tracked: Tracked = { client, messages: [], statuses: [], saved, savedEpochs, gaps: [], resets: [] };
  client.on('message', (m) => tracked.messages.push(m));
  client.on('status', (s) => tracked.statuses.push(s));
  client.on('gap', (g) => tracked.gaps.push(g));
  client.on('reset', (r) => tracked.resets.push(r));
  t.teardown(() => client.close());
  return tracked;
}

async function online(t: Test, n: TestNode, uid: string, options: Partial<ImClientOptions> = {}): Promise<Tracked> {
  const tracked = track(t, n.port, uid, n.token(uid), options);
  await tracked.client.connect();
  return tracked;
}

async function until(what: string, probe: () => boolean | Promise<boolean>, withinMs = 10_000): Promise<void> {
  const deadline = Date.now() + withinMs;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`not within ${withinMs} ms: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

function waitStatus(client: ImClient, status: ClientStatus): Promise<void> {
  return until(`client ${client.uid} ${status}`, () => client.status === status);
}

const seqs = (messages: IncomingMessage[]) => messages.map((m) => m.seq);
const contents = (messages: IncomingMessage[]) => messages.map((m) => m.content);
const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

/** What the inbox holds for `uid`, decoded: seq and content. */
async function stored(inbox: InboxStore, uid: string): Promise<{ seq: number; content: string; msgId: string }[]> {
  const { messages } = await inbox.range(uid, 0, 1000);
  return messages.map((m) => {
    // The stored body is a MessageRequest; wrap it in an envelope to decode it with the codec.
    const request = decodeMessage(Buffer.concat([Buffer.from([0x32]), varint(m.body.length), m.body])).messageRequest!;
    return { seq: m.seq, content: request.content ?? '', msgId: String(request.msgId) };
  });
}

function varint(n: number): Buffer {
  const out: number[] = [];
  while (n >= 0x80) {
    out.push((n & 0x7f) | 0x80);
    n >>>= 7;
  }
  out.push(n);
  return Buffer.from(out);
}

/** A node on a fixed port with the given inbox, as a restarted process would be. */
async function nodeOn(t: Test, port: number, inbox: InboxStore, limits = {}): Promise<SwitchboardNode> {
  const node = createNode({ host: '127.0.0.1', port, secret: TEST_SECRET, limits: { closeGraceMs: 200, ...limits }, inbox });
  await node.start();
  t.teardown(() => node.stop());
  return node;
}

t.test('a message sent while bob is offline arrives at his connect(), with its seq', async (t) => {
  const n = await startNode(t);
  const alice = await online(t, n, 'alice');
  const first = await alice.client.send('bob', 'while you were out');
  const second = await alice.client.send('bob', 'and this too', { fromNick: 'Al' });
  t.match(first, { seq: 1, duplicate: false }, 'stored as the first message of his inbox');
  t.match(second, { seq: 2, duplicate: false });
  t.same((await stored(n.node.inbox, 'bob')).map((m) => m.content), ['while you were out', 'and this too'], 'both are in the inbox');

  const bob = track(t, n.port, 'bob', n.token('bob'));
  t.equal(bob.client.lastSeq, undefined, 'no position before the first login');
  await bob.client.connect();
  await until('bob got both', () => bob.messages.length >= 2);
  t.match(bob.messages, [
    { seq: 1, from: 'alice', to: 'bob', content: 'while you were out', msgId: first.msgId },
    { seq: 2, from: 'alice', to: 'bob', content: 'and this too', msgId: second.msgId, fromNick: 'Al' },
  ]);
  t.equal(bob.client.lastSeq, 2);
  t.same(bob.saved, [1, 2], 'each processed one is offered to savePosition');

  // Live delivery goes on from there.
  const third = await alice.client.send('bob', 'now you are here');
  await until('bob got the live one', () => bob.messages.length === 3);
  t.match(bob.messages[2], { seq: 3, content: 'now you are here', msgId: third.msgId });
  t.equal(third.seq, 3);
});

t.test('the SDK declares acks at login and acknowledges cumulatively; acks: false sends none', async (t) => {
  const n = await startNode(t);
  const alice = await online(t, n, 'alice');
  for (let i = 0; i < 5; i++) await alice.client.send('bob', `m${i}`);
  for (let i = 0; i < 3; i++) await alice.client.send('carol', `c${i}`);

  const proxy = await FrameProxy.start(t, n.port);
  const bob = track(t, proxy.port, 'bob', n.token('bob'));
  await bob.client.connect();
  await until('bob acknowledged everything', () => proxy.seen('toServer', HeadType.MESSAGE_ACK).some((m) => Number(m.ack?.seq) === 5));
  t.equal(proxy.seen('toServer', HeadType.LOGIN_REQUEST)[0]?.loginRequest?.acks, true, 'LoginRequest.acks is set');
  const acked = proxy.seen('toServer', HeadType.MESSAGE_ACK).map((m) => Number(m.ack?.seq));
  t.ok(acked.length <= 5, `cumulative: at most one ack per delivery (${acked.join(',')})`);
  t.same(
    acked,
    [...acked].sort((a, b) => a - b),
    'acks never go backwards',
  );
  t.same(seqs(bob.messages), [1, 2, 3, 4, 5]);

  const carol = track(t, proxy.port, 'carol', n.token('carol'), { acks: false });
  await carol.client.connect();
  await until('carol got hers', () => carol.messages.length === 3);
  t.equal(proxy.seen('toServer', HeadType.LOGIN_REQUEST, 1)[0]?.loginRequest?.acks ?? false, false, 'LoginRequest.acks is not set');
  await alice.client.send('carol', 'one more'); // a round trip after the deliveries: an ack would have been written by now
  await until('carol got the live one', () => carol.messages.length === 4);
  t.same(proxy.seen('toServer', HeadType.MESSAGE_ACK, 1), [], 'no MESSAGE_ACK from a client without acks');
  t.equal(carol.client.lastSeq, 4, 'lastSeq is tracked all the same');
});

t.test('deliveries lost with the connection come again after the reconnect; each is shown once', async (t) => {
  const n = await startNode(t);
  const alice = await online(t, n, 'alice');
  for (let i = 1; i <= 4; i++) await alice.client.send('bob', `m${i}`);

  // On bob's first connection: pass seq 1 and 2, lose seq 3 and the connection with it.
  const proxy = await FrameProxy.start(t, n.port, (m, direction, connection) => {
    if (connection === 0 && direction === 'toClient' && m.type === HeadType.MESSAGE_REQUEST && Number(m.messageRequest?.seq) === 3) return 'drop-and-cut';
  });
  const bob = track(t, proxy.port, 'bob', n.token('bob'));
  await bob.client.connect();
  await until('bob has all four', () => bob.client.lastSeq === 4);

  t.same(seqs(bob.messages), [1, 2, 3, 4], 'each once, in order');
  t.same(contents(bob.messages), ['m1', 'm2', 'm3', 'm4']);
  t.ok(bob.statuses.includes('reconnecting'), 'the connection was lost in between');
  const delivered = (connection: number) => proxy.seen('toClient', HeadType.MESSAGE_REQUEST, connection).map((m) => Number(m.messageRequest?.seq));
  t.same(delivered(0).slice(0, 3), [1, 2, 3], 'the server had written 1..3 on the first connection');
  t.same(delivered(1), [3, 4], 'after the reconnect it writes 3 again, and resumes after what bob processed');
  t.equal(Number(proxy.seen('toServer', HeadType.LOGIN_REQUEST, 1)[0]?.loginRequest?.lastSeq), 2, 'the second login asks to resume after seq 2');
});

t.test('unacknowledged deliveries are resent on the same connection; the SDK shows each once and acks again', async (t) => {
  const n = await startNode(t, { ackTimeoutMs: 200 });
  const alice = await online(t, n, 'alice');
  let dropAcks = true;
  const proxy = await FrameProxy.start(t, n.port, (m, direction) => (dropAcks && direction === 'toServer' && m.type === HeadType.MESSAGE_ACK ? 'drop' : 'forward'));
  const bob = track(t, proxy.port, 'bob', n.token('bob'));
  await bob.client.connect();
  for (let i = 1; i <= 3; i++) await alice.client.send('bob', `m${i}`);

  const deliveries = (seq: number) => proxy.seen('toClient', HeadType.MESSAGE_REQUEST).filter((m) => Number(m.messageRequest?.seq) === seq).length;
  await until('the server resent all three', () => deliveries(1) >= 2 && deliveries(3) >= 2);
  dropAcks = false;
  await until('an ack for 3 got through', () => proxy.frames.some((f) => f.verdict === 'forward' && f.message.type === HeadType.MESSAGE_ACK && Number(f.message.ack?.seq) === 3));
  // Once acknowledged, resends stop: a message sent now is written exactly once.
  await alice.client.send('bob', 'm4');
  await until('bob got m4', () => bob.client.lastSeq === 4);

  t.same(seqs(bob.messages), [1, 2, 3, 4], 'every message shown once, however often it came');
  t.same(contents(bob.messages), ['m1', 'm2', 'm3', 'm4']);
  t.same(bob.saved, [1, 2, 3, 4], 'savePosition only for new positions');
  t.equal(bob.client.status, 'ready', 'resends happen on the same connection');
  t.same(bob.statuses, ['connecting', 'ready']);
  t.equal(proxy.connections, 1);
});

t.test('a node restarted on the same port with the same Redis inbox: nothing lost, nothing shown twice', async (t) => {
  const redis = await startRedis(t);
  const port = await freePort();
  const first = await nodeOn(t, port, new RedisInboxStore({ url: redis.url }));
  const token = (uid: string) => first.signer.mint({ uid, ttlMs: 60_000 });
  const alice = track(t, port, 'alice', token('alice'));
  const bob = track(t, port, 'bob', token('bob'));
  await alice.client.connect();
  await bob.client.connect();

  // The node goes down from inside bob's listener for seq 3: before bob's ack can be written.
  let stopping: Promise<void> | undefined;
  bob.client.on('message', (m) => {
    if (m.seq === 3) stopping ??= first.stop();
  });
  // Not awaited one by one: an answer lost in the stop is only given after the restart.
  const sentBefore = [1, 2, 3].map((i) => alice.client.send('bob', `m${i}`));
  await until('node stopping', () => stopping !== undefined);
  await stopping;
  await waitStatus(bob.client, 'reconnecting');

  const sentWhileDown = alice.client.send('bob', 'm4'); // waits for the reconnect
  const second = await nodeOn(t, port, new RedisInboxStore({ url: redis.url }));
  t.same(
    (await Promise.all(sentBefore)).map((r) => r.seq),
    [1, 2, 3],
  );
  t.match(await sentWhileDown, { seq: 4, duplicate: false }, 'the sequence continues in the same inbox');
  await alice.client.send('bob', 'm5');
  await until('bob caught up', () => bob.client.lastSeq === 5);

  t.same(seqs(bob.messages), [1, 2, 3, 4, 5], 'each once, in order, across the restart');
  t.same(contents(bob.messages), ['m1', 'm2', 'm3', 'm4', 'm5']);
  t.same(bob.saved, [1, 2, 3, 4, 5]);
  t.equal(bob.client.status, 'ready');
  t.same((await stored(second.inbox, 'bob')).map((m) => m.seq), [1, 2, 3, 4, 5], 'the inbox holds each once');
});

t.test('a node restarted with an empty inbox: the client follows the server, it does not drop the new seq 1', async (t) => {
  const port = await freePort();
  const first = await nodeOn(t, port, new MemoryInboxStore());
  const token = (uid: string) => first.signer.mint({ uid, ttlMs: 60_000 });
  const alice = track(t, port, 'alice', token('alice'));
  const bob = track(t, port, 'bob', token('bob'));
  await alice.client.connect();
  await bob.client.connect();
  for (let i = 1; i <= 3; i++) await alice.client.send('bob', `old ${i}`);
  await until('bob got the old ones', () => bob.client.lastSeq === 3);

  const oldEpoch = bob.client.inboxEpoch;
  t.ok(oldEpoch > 0, 'the login told the inbox epoch');
  t.same(bob.savedEpochs, [oldEpoch, oldEpoch, oldEpoch], 'each position is saved with its epoch');

  await first.stop(); // the memory inbox goes with it
  await waitStatus(bob.client, 'reconnecting');
  await nodeOn(t, port, new MemoryInboxStore());
  await waitStatus(bob.client, 'ready');
  t.equal(bob.client.lastSeq, 0, 'the position is the new server\'s');
  const newEpoch = bob.client.inboxEpoch;
  t.not(newEpoch, oldEpoch, 'of a new epoch');
  t.same(bob.resets, [{ requested: 3, previousEpoch: oldEpoch, from: 0, epoch: newEpoch }], "the application is told its position was reset");
  t.same(bob.gaps, [], 'a reset is not a gap');
  const result = await alice.client.send('bob', 'new 1');
  t.equal(result.seq, 1, 'a fresh inbox numbers from 1 again');
  await until('bob got the new one', () => bob.messages.length === 4);
  t.same(contents(bob.messages), ['old 1', 'old 2', 'old 3', 'new 1']);
  t.equal(bob.client.lastSeq, 1);
  t.same(bob.saved, [1, 2, 3, 0, 1], 'the application is told to persist the lowered position, then the new ones');
  t.same(bob.savedEpochs, [oldEpoch, oldEpoch, oldEpoch, newEpoch, newEpoch]);
});

t.test('a position saved with its epoch: the same epoch resumes after it, another one is a reset', async (t) => {
  const n = await startNode(t);
  const alice = await online(t, n, 'alice');
  for (let i = 1; i <= 4; i++) await alice.client.send('bob', `m${i}`);
  const phone = await online(t, n, 'bob', { deviceId: 'phone' });
  await until('phone got four', () => phone.client.lastSeq === 4);
  const epoch = phone.client.inboxEpoch;
  phone.client.close();

  const resumed = await online(t, n, 'bob', { deviceId: 'tablet', lastSeq: 2, inboxEpoch: epoch });
  await until('resumed caught up', () => resumed.client.lastSeq === 4);
  t.same(seqs(resumed.messages), [3, 4], 'the same epoch: the replay starts after the position');
  t.same(resumed.resets, []);

  // As if saved against an inbox that has since been lost and recreated.
  const stale = await online(t, n, 'bob', { deviceId: 'laptop', lastSeq: 3, inboxEpoch: epoch + 1 });
  await until('stale caught up', () => stale.client.lastSeq === 4);
  t.same(seqs(stale.messages), [1, 2, 3, 4], 'another epoch: everything the inbox holds, from the oldest');
  t.same(stale.resets, [{ requested: 3, previousEpoch: epoch + 1, from: 0, epoch }]);
  t.same(stale.saved, [0, 1, 2, 3, 4], 'the forgotten position is replaced at once');
  t.same(stale.savedEpochs, [epoch, epoch, epoch, epoch, epoch]);
});

t.test('savePosition is called with increasing seqs; a new client created with lastSeq resumes after it', async (t) => {
  const n = await startNode(t);
  const alice = await online(t, n, 'alice');
  for (let i = 1; i <= 3; i++) await alice.client.send('bob', `m${i}`);
  const bob = await online(t, n, 'bob', { deviceId: 'phone' });
  await until('bob got three', () => bob.client.lastSeq === 3);
  t.same(bob.saved, [1, 2, 3], 'one call per processed message, increasing');
  bob.client.close();
  for (let i = 4; i <= 5; i++) await alice.client.send('bob', `m${i}`);

  // Another device has no saved position on the server: only lastSeq makes it skip 1..3.
  const resumed = await online(t, n, 'bob', { deviceId: 'tablet', lastSeq: bob.saved.at(-1)! });
  await until('resumed got two', () => resumed.client.lastSeq === 5);
  t.same(seqs(resumed.messages), [4, 5], 'the replay starts after the given position');
  t.same(resumed.saved, [3, 4, 5], 'a position given without its epoch is offered back with it at the login, then the new ones');
  t.ok(resumed.savedEpochs.every((e) => e === bob.client.inboxEpoch && e > 0));

  // On the same device, lastSeq wins over the server's saved position (3).
  const replayed = await online(t, n, 'bob', { deviceId: 'phone', lastSeq: 1 });
  await until('replayed caught up', () => replayed.client.lastSeq === 5);
  t.same(seqs(replayed.messages), [2, 3, 4, 5], 'the device processed only up to 1: it gets 2..5');

  const fresh = await online(t, n, 'bob', { deviceId: 'laptop', lastSeq: 5 });
  await alice.client.send('bob', 'm6');
  await until('fresh got m6', () => fresh.client.lastSeq === 6);
  t.same(seqs(fresh.messages), [6], 'nothing replayed when the position is the head');
});

t.test('a send whose response is lost with the connection is resent with the same msgId and stored once', async (t) => {
  const n = await startNode(t);
  const proxy = await FrameProxy.start(t, n.port, (m, direction, connection) =>
    connection === 0 && direction === 'toClient' && m.type === HeadType.MESSAGE_RESPONSE ? 'drop-and-cut' : 'forward',
  );
  const alice = track(t, proxy.port, 'alice', n.token('alice'));
  await alice.client.connect();

  const result = await alice.client.send('bob', 'exactly once');
  t.ok(alice.statuses.includes('reconnecting'), 'the first answer was lost with the connection');
  const requests = proxy.seen('toServer', HeadType.MESSAGE_REQUEST);
  t.equal(requests.length, 2, 'the request went out twice');
  t.same(
    requests.map((m) => String(m.messageRequest?.msgId)),
    [result.msgId, result.msgId],
    'with the same msgId',
  );
  t.match(result, { seq: 1, duplicate: true }, 'the server had stored it: the resend is a duplicate with the original seq');
  t.same((await stored(n.node.inbox, 'bob')).map((m) => [m.seq, m.content, m.msgId]), [[1, 'exactly once', result.msgId]], 'stored once');

  const bob = await online(t, n, 'bob');
  await until('bob got it', () => bob.client.lastSeq === 1);
  t.same(contents(bob.messages), ['exactly once'], 'and delivered once');
});

t.test('acks: false: a send whose response was lost is not resent (no dedupe without acks), it rejects', async (t) => {
  const n = await startNode(t);
  const proxy = await FrameProxy.start(t, n.port, (m, direction, connection) =>
    connection === 0 && direction === 'toClient' && m.type === HeadType.MESSAGE_RESPONSE ? 'drop-and-cut' : 'forward',
  );
  const alice = track(t, proxy.port, 'alice', n.token('alice'), { acks: false });
  await alice.client.connect();
  await t.rejects(alice.client.send('bob', 'at most once'), { code: 'SB_ERR_CLIENT_CONNECTION_LOST' });
  await waitStatus(alice.client, 'ready');
  t.equal(proxy.seen('toServer', HeadType.MESSAGE_REQUEST).length, 1, 'sent once, not again after the reconnect');
  t.same((await stored(n.node.inbox, 'bob')).map((m) => m.content), ['at most once'], 'the server had stored it: stored once');
});

t.test('a send lost on its way to the server is resent after the reconnect and stored once', async (t) => {
  const n = await startNode(t);
  const proxy = await FrameProxy.start(t, n.port, (m, direction, connection) =>
    connection === 0 && direction === 'toServer' && m.type === HeadType.MESSAGE_REQUEST ? 'drop-and-cut' : 'forward',
  );
  const alice = track(t, proxy.port, 'alice', n.token('alice'));
  await alice.client.connect();
  const result = await alice.client.send('bob', 'second try');
  t.match(result, { seq: 1, duplicate: false }, 'the server first saw it on the second connection');
  t.same((await stored(n.node.inbox, 'bob')).map((m) => m.content), ['second try']);
});

t.test('the same msgId sent three times gets the same seq each time and is stored once', async (t) => {
  const n = await startNode(t);
  const alice = await online(t, n, 'alice');
  const one = await alice.client.send('bob', 'same', { msgId: '424242' });
  const two = await alice.client.send('bob', 'same', { msgId: '424242' });
  const three = await alice.client.send('bob', 'same', { msgId: 424242 });
  t.same(
    [one, two, three].map((r) => [r.msgId, r.seq, r.duplicate]),
    [
      ['424242', 1, false],
      ['424242', 1, true],
      ['424242', 1, true],
    ],
  );
  // Three at once, as a burst of retries would be: one of them is stored.
  const burst = await Promise.all([1, 2, 3].map(() => alice.client.send('bob', 'burst', { msgId: '777' })));
  t.same(
    burst.map((r) => r.seq),
    [2, 2, 2],
    'the same seq for all three',
  );
  t.equal(burst.filter((r) => !r.duplicate).length, 1, 'exactly one was new');
  t.same((await stored(n.node.inbox, 'bob')).map((m) => m.content), ['same', 'burst'], 'stored once each');
  // The same msgId from another sender is another message.
  const carol = await online(t, n, 'carol');
  t.match(await carol.client.send('bob', 'mine', { msgId: '424242' }), { seq: 3, duplicate: false }, 'dedupe is per sender');

  const bob = await online(t, n, 'bob');
  await until('bob got all', () => bob.client.lastSeq === 3);
  t.same(contents(bob.messages), ['same', 'burst', 'mine']);
});

t.test("'gap': messages pruned before the device resumed are reported, the replay starts at the oldest kept", async (t) => {
  const n = await startNode(t, {}, { inbox: new MemoryInboxStore({ maxMessages: 2 }) });
  const alice = await online(t, n, 'alice');
  for (let i = 1; i <= 5; i++) await alice.client.send('bob', `m${i}`);
  const bob = await online(t, n, 'bob', { lastSeq: 1 });
  await until('bob got what is left', () => bob.client.lastSeq === 5);
  t.same(bob.gaps, [{ requested: 1, from: 3 }], 'seq 2 and 3 were pruned');
  t.same(seqs(bob.messages), [4, 5]);
  t.same(bob.saved, [3, 4, 5], 'the position after the gap is offered to savePosition too');
});
