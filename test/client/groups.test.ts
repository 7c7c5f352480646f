// The SDK's groups against a scripted worker (fake-worker.ts), which sends exactly what a test
// says when it says: the login with groups (and the acks it implies), sendToGroup's result and
// its typed refusals, group deliveries as typed events, each (group, seq) once however often it
// is replayed, one cumulative ack per group per tick, this device's own messages never shown
// again, and the bounds of what the SDK keeps per group.

import t, { type Test } from 'tap';
import { ImClient, type GroupEventMessage, type GroupMessage, type ImClientOptions, type IncomingMessage } from '../../src/client/im-client.js';
import { GroupPositions, MAX_GROUPS, MAX_OWN_SEQS } from '../../src/client/group-positions.js';
import { HeadType, type ImMessage } from '../../src/protocol/types.js';
import { sleep, until } from '../../testkit/wait.js';
import { FakeWorker } from './fake-worker.js';

const G1 = 'gaaaaaaaaaaaa';
const G2 = 'gbbbbbbbbbbbb';

interface Tracked {
  client: ImClient;
  messages: GroupMessage[];
  events: GroupEventMessage[];
  inbox: IncomingMessage[];
}

function track(t: Test, worker: FakeWorker, options: Partial<ImClientOptions> = {}): Tracked {
  const client = new ImClient({ host: '127.0.0.1', port: worker.port, uid: 'alice', deviceId: 'phone', token: 'tok', groups: true, retryStrategy: () => 20, requestTimeoutMs: 60_000, ...options });
  const tracked: Tracked = { client, messages: [], events: [], inbox: [] };
  client.on('groupMessage', (m) => tracked.messages.push(m));
  client.on('groupEvent', (e) => tracked.events.push(e));
  client.on('message', (m) => tracked.inbox.push(m));
  t.teardown(() => client.close());
  return tracked;
}

async function online(t: Test, options: Partial<ImClientOptions> = {}): Promise<{ worker: FakeWorker } & Tracked> {
  const worker = await FakeWorker.start(t);
  const tracked = track(t, worker, options);
  await tracked.client.connect();
  return { worker, ...tracked };
}

/** The group acks the worker received, as [group, seq], inbox acks left out. */
const groupAcks = (worker: FakeWorker, connection?: number) => worker.acks(connection).filter(([g]) => g !== '');
const loginOf = (worker: FakeWorker, connection = 0) => worker.seen(HeadType.LOGIN_REQUEST, connection)[0]!.loginRequest!;
const requests = (worker: FakeWorker, connection?: number) => worker.seen(HeadType.MESSAGE_REQUEST, connection);

t.test('groups: true logs in with groups and acks; acks: false beside it is refused; without it neither is asked', async (t) => {
  const { worker } = await online(t);
  t.match(loginOf(worker), { groups: true, acks: true }, 'groups implies acks');

  t.throws(() => new ImClient({ uid: 'x', token: 't', groups: true, acks: false }), { code: 'SB_ERR_CONFIG' }, 'groups without acks is refused before any connection');

  const plain = await FakeWorker.start(t);
  const c = track(t, plain, { groups: undefined });
  await c.client.connect();
  t.notOk(loginOf(plain).groups, 'no groups unless asked');
  t.equal(loginOf(plain).acks, true, 'acks stay the default');
});

t.test('group deliveries are typed events: messages with their fields, events with their JSON parsed', async (t) => {
  const { worker, messages, events, inbox } = await online(t);
  worker.deliverGroup(G1, 1, { from: 'bob', event: { type: 'created', actor: 'bob', uids: ['alice'], name: 'team' } });
  worker.deliverGroup(G1, 2, { from: 'bob', content: 'hello team', msgId: 77, storedAt: 1_700_000_000_123 });
  worker.deliverGroup(G1, 3, { from: 'bob', event: { type: 'added', actor: 'bob', uids: ['carol'] } });
  await until('three entries', () => messages.length + events.length === 3);
  t.match(events, [
    { group: G1, seq: 1, actor: 'bob', event: { type: 'created', actor: 'bob', uids: ['alice'], name: 'team' } },
    { group: G1, seq: 3, actor: 'bob', event: { type: 'added', uids: ['carol'] } },
  ]);
  t.match(messages, [{ group: G1, seq: 2, from: 'bob', content: 'hello team', msgId: '77', storedAt: 1_700_000_000_123 }]);
  t.same(inbox, [], 'nothing of a group reaches the inbox listeners');
});

t.test('acks: one cumulative MESSAGE_ACK per group per tick, each with its group; the inbox keeps its own', async (t) => {
  const { client, worker, messages } = await online(t);
  // One burst, read in one go: the acks of a tick are coalesced per group.
  const c = worker.current;
  const frames: ImMessage[] = [];
  for (let seq = 1; seq <= 5; seq++) frames.push({ type: HeadType.MESSAGE_REQUEST, sequence: seq, messageRequest: { from: 'bob', to: G1, content: `m${seq}`, group: G1, seq } });
  frames.push({ type: HeadType.MESSAGE_REQUEST, sequence: 9, messageRequest: { from: 'bob', to: G2, content: 'other', group: G2, seq: 9 } });
  const { encodeMessageFrame } = await import('../../src/protocol/codec.js');
  c.socket.write(Buffer.concat(frames.map((m) => encodeMessageFrame({ sessionId: c.sessionId, ...m }))));
  await until('six delivered', () => messages.length === 6);
  await until('acks of both groups', () => groupAcks(worker).length >= 2);
  await sleep(50);
  t.same(groupAcks(worker).sort(), [[G1, 5], [G2, 9]], 'one ack per group, at its highest seq');
  t.equal(client.groupSeq(G1), 5);
  t.equal(client.groupSeq(G2), 9);

  worker.deliverInbox(1, 'bob', 'a 1:1 message');
  await until('the inbox ack', () => worker.acks().some(([g, seq]) => g === '' && seq === 1));
  t.equal(groupAcks(worker).length, 2, 'an inbox delivery acks the inbox only');

  worker.deliverGroup(G1, 6, { content: 'six' });
  await until('the next ack', () => groupAcks(worker).length === 3);
  t.same(groupAcks(worker).at(-1), [G1, 6], 'cumulative: the new highest');
});

t.test('a replayed (group, seq) is dropped and acknowledged again; a reconnect replays from the server and only the new entries show', async (t) => {
  const saved: [string, number][] = [];
  const { worker, messages } = await online(t, { saveGroupPosition: (g, seq) => saved.push([g, seq]) });
  worker.deliverGroup(G1, 1, { content: 'one' });
  worker.deliverGroup(G1, 2, { content: 'two' });
  await until('two', () => messages.length === 2);
  await until('acked 2', () => groupAcks(worker).some(([, s]) => s === 2));
  // The server sends them again (its ack was lost, say): nothing is shown twice, the ack goes again.
  const before = groupAcks(worker).length;
  worker.deliverGroup(G1, 1, { content: 'one' });
  worker.deliverGroup(G1, 2, { content: 'two' });
  await until('re-acked', () => groupAcks(worker).length > before);
  t.same(groupAcks(worker).at(-1), [G1, 2], 'the position, again');
  t.equal(messages.length, 2, 'the replay is not shown');

  worker.cut();
  const second = await worker.loggedIn(2);
  t.match(loginOf(worker, 1), { groups: true, acks: true }, 'the reconnect logs in with groups again');
  for (let seq = 1; seq <= 4; seq++) worker.deliverGroup(G1, seq, { content: `#${seq}` }, second);
  await until('the new ones', () => messages.length === 4);
  await sleep(50);
  t.same(messages.map((m) => m.seq), [1, 2, 3, 4], 'each seq once, in order');
  t.same(groupAcks(worker, 1).at(-1), [G1, 4]);
  t.same(saved.at(-1), [G1, 4], 'saveGroupPosition follows');
});

t.test('groupPositions given at construction drop what the server replays at or below them', async (t) => {
  const { worker, messages } = await online(t, { groupPositions: { [G1]: 3 } });
  t.equal(worker.connections.length, 1);
  for (let seq = 1; seq <= 5; seq++) worker.deliverGroup(G1, seq, { content: `#${seq}` });
  await until('after the position', () => messages.length === 2);
  await sleep(30);
  t.same(messages.map((m) => m.seq), [4, 5]);
});

t.test('an event that is not an event object is not emitted, but its seq is processed and acknowledged', async (t) => {
  const { worker, events, messages } = await online(t);
  worker.deliverGroup(G1, 1, { event: '{not json' });
  worker.deliverGroup(G1, 2, { event: '["an array"]' });
  worker.deliverGroup(G1, 3, { content: 'after them' });
  await until('the message', () => messages.length === 1);
  await until('acked 3', () => groupAcks(worker).some(([, s]) => s === 3));
  t.same(events, []);
});

t.test('sendToGroup: the request names the group, `to` empty; resolves with the group seq and duplicate', async (t) => {
  const { client, worker } = await online(t);
  worker.onRequest = (r) => (r.group === G1 ? { seq: 7, duplicate: false } : undefined);
  const r = await client.sendToGroup(G1, 'hi all', { json: '{"k":1}' });
  t.match(r, { seq: 7, duplicate: false });
  t.match(r.msgId, /^\d+$/);
  const sent = requests(worker)[0]!.messageRequest!;
  t.match(sent, { group: G1, content: 'hi all', json: '{"k":1}', from: 'alice' });
  t.notOk(sent.to, '`to` is empty: a server without groups cannot take the group for a user');
  t.notOk(sent.event, 'no event on a request');

  worker.onRequest = () => ({ seq: 7, duplicate: true });
  t.match(await client.sendToGroup(G1, 'hi all', { msgId: r.msgId }), { seq: 7, duplicate: true, msgId: r.msgId }, 'a retry of the same msgId');
});

t.test('sendToGroup rejects with the code of the refusal', async (t) => {
  const { client, worker } = await online(t);
  const codes = ['SB_ERR_GROUP_NOT_MEMBER', 'SB_ERR_GROUP_NOT_FOUND', 'SB_ERR_GROUP_DISSOLVED', 'SB_ERR_BAD_GROUP', 'SB_ERR_RATE_LIMITED', 'SB_ERR_STORE_UNAVAILABLE'] as const;
  for (const code of codes) {
    worker.onRequest = () => ({ code, reason: `refused: ${code}` });
    await t.rejects(client.sendToGroup(G1, 'x'), { code, message: `refused: ${code}` }, code);
  }
  worker.onRequest = (_r, m, c) => {
    worker.send({ type: HeadType.MESSAGE_RESPONSE, sequence: m.sequence, messageResponse: { result: false, code: 12, info: 'new', errorCode: 'SB_ERR_FROM_THE_FUTURE' } }, c);
    return undefined;
  };
  await t.rejects(client.sendToGroup(G1, 'x'), { code: 'SB_ERR_INTERNAL' }, 'a code this SDK does not know');
  t.equal(client.status, 'ready', 'a refusal ends nothing');
  t.equal(client.groupSeq(G1), undefined, 'nothing refused moved the position');
});

t.test('sendToGroup refuses a message too large for a frame before writing it', async (t) => {
  const { client, worker } = await online(t);
  await t.rejects(client.sendToGroup(G1, 'x'.repeat(70_000)), { code: 'SB_ERR_MESSAGE_TOO_LARGE' });
  t.same(requests(worker), []);
});

t.test("sendToGroup's answer lost with the connection: sent again after the reconnect with the same msgId", async (t) => {
  const { client, worker } = await online(t);
  worker.onRequest = (_r, _m, c) => {
    if (c.index === 0) {
      c.socket.destroy();
      return undefined;
    }
    return { seq: 3, duplicate: true };
  };
  const r = await client.sendToGroup(G1, 'once');
  t.match(r, { seq: 3, duplicate: true });
  const [first, second] = requests(worker).map((m) => m.messageRequest!);
  t.ok(first && second, 'written on both connections');
  t.equal(String(second!.msgId), String(first!.msgId), 'the same msgId: stored once');
  t.equal(second!.group, G1);
});

t.test("own messages: the position moves past them, and a replay of them is not shown", async (t) => {
  const { client, worker, messages } = await online(t);
  worker.deliverGroup(G1, 1, { content: 'one' });
  await until('one', () => messages.length === 1);

  // Right after the position: it moves there, and the ack says so.
  worker.onRequest = () => ({ seq: 2, duplicate: false });
  await client.sendToGroup(G1, 'mine');
  t.equal(client.groupSeq(G1), 2);
  await until('acked 2', () => groupAcks(worker).some(([g, s]) => g === G1 && s === 2));

  // Above it (3 is someone else's, still on its way): remembered, passed once 3 is processed.
  worker.onRequest = () => ({ seq: 4, duplicate: false });
  await client.sendToGroup(G1, 'mine too');
  t.equal(client.groupSeq(G1), 2, 'not past a seq not yet seen');
  worker.deliverGroup(G1, 3, { from: 'bob', content: 'three' });
  await until('three', () => messages.length === 2);
  t.equal(client.groupSeq(G1), 4, 'past its own 4 once 3 is processed');
  await until('acked 4', () => groupAcks(worker).some(([g, s]) => g === G1 && s === 4));

  // The reconnect's replay carries them all: none is shown again.
  worker.cut();
  const second = await worker.loggedIn(2);
  for (let seq = 1; seq <= 5; seq++) worker.deliverGroup(G1, seq, { from: seq === 2 || seq === 4 ? 'alice' : 'bob', content: `#${seq}` }, second);
  await until('five', () => messages.length === 3);
  await sleep(30);
  t.same(messages.map((m) => m.seq), [1, 3, 5]);
  t.same(messages.map((m) => m.from), ['someone', 'bob', 'bob']);
});

t.test('own message of a group not heard from yet: shown never, even when the first delivery is older', async (t) => {
  const { client, worker, messages } = await online(t);
  worker.onRequest = () => ({ seq: 10, duplicate: false });
  await client.sendToGroup(G2, 'first word');
  t.equal(client.groupSeq(G2), undefined, 'no position to move yet');
  await sleep(30);
  t.same(groupAcks(worker), [], 'nothing to acknowledge yet');
  // The server's sync of the group (the last entries of a new device) comes after.
  for (let seq = 8; seq <= 11; seq++) worker.deliverGroup(G2, seq, { content: `#${seq}` });
  await until('three of four', () => messages.length === 3);
  await sleep(30);
  t.same(messages.map((m) => m.seq), [8, 9, 11]);
  t.equal(client.groupSeq(G2), 11);
});

t.test('a client without groups acknowledges no group and sends to none', async (t) => {
  const { client, worker, messages } = await online(t, { groups: false });
  worker.deliverGroup(G1, 1, { content: 'stray' });
  worker.deliverInbox(1, 'bob', 'hello');
  await until('inbox ack', () => worker.acks().length === 1);
  await sleep(30);
  t.same(groupAcks(worker), [], 'no group ack from a device that did not ask for groups');
  t.equal(messages.length, 1);
  await t.rejects(client.sendToGroup(G1, 'x'), { code: 'SB_ERR_BAD_REQUEST' }, 'no group messages either, as the server would answer');
  t.same(requests(worker), [], 'refused before anything is written');
});

t.test('GroupPositions: bounded per group and in groups', async (t) => {
  const p = new GroupPositions();
  for (let i = 0; i < MAX_GROUPS + 5; i++) p.processed(`g${i}`, 1);
  t.equal(p.size, MAX_GROUPS, 'at most MAX_GROUPS positions');
  t.equal(p.seq('g0'), undefined, 'the least recently heard from is forgotten first');
  t.equal(p.seq(`g${MAX_GROUPS + 4}`), 1);
  t.ok(p.takeAcks().length <= MAX_GROUPS, 'acks of forgotten groups are forgotten too');

  const q = new GroupPositions({ g: 1 });
  for (let seq = 3; seq < 3 + MAX_OWN_SEQS + 10; seq++) q.sent('g', seq * 2);
  t.notOk(q.seen('g', 6), 'the lowest own seqs are forgotten beyond MAX_OWN_SEQS');
  t.ok(q.seen('g', (3 + MAX_OWN_SEQS + 9) * 2), 'the latest kept');
  t.ok(q.seen('g', 1) && !q.seen('g', 2), 'the position itself');

  const r = new GroupPositions({ g: 5, bad: -1, worse: Number.NaN });
  t.equal(r.size, 1, 'initial positions that are not positive whole numbers are ignored');
});
