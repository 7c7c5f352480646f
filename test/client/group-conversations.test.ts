// Groups in the chat list through the SDK, against a real node (PROTOCOL.md §14, "Groups in the
// chat list"): chatList() merges groups and pages by cursor, groupHistory() pages back,
// markGroupRead() reaches the user's other devices as a 'read' event with `group` (never a
// message, and not a group delivery), and groupReaders() counts who read a message.

import t, { type Test } from 'tap';
import { ImClient, type GroupMessage, type ImClientOptions, type IncomingMessage, type ReadEvent } from '../../src/client/im-client.js';
import type { SwitchboardError } from '../../src/errors.js';
import { startNode, type TestNode } from '../helpers/node.js';
import { until } from '../../testkit/wait.js';

interface Device {
  client: ImClient;
  messages: IncomingMessage[];
  groupMessages: GroupMessage[];
  reads: ReadEvent[];
}

async function online(t: Test, n: TestNode, uid: string, deviceId: string, options: Partial<ImClientOptions> = {}): Promise<Device> {
  const client = new ImClient({ host: '127.0.0.1', port: n.port, uid, deviceId, token: n.token(uid), retryStrategy: false, groups: true, ownCopies: true, ...options });
  const d: Device = { client, messages: [], groupMessages: [], reads: [] };
  client.on('message', (m) => d.messages.push(m));
  client.on('groupMessage', (m) => d.groupMessages.push(m));
  client.on('read', (r) => d.reads.push(r));
  t.teardown(() => client.close());
  await client.connect();
  return d;
}

async function groupOf(n: TestNode, owner: string, members: string[], name: string): Promise<string> {
  const g = await n.node.groups.create(owner, name, members);
  n.node.groupNotifier.publish({ group: g.id, seq: 1, added: [owner, ...members] });
  return g.id;
}

t.test('chatList() merges groups by last activity, pages by cursor; markGroupRead() tells the other devices; groupReaders() counts', async (t) => {
  const n = await startNode(t);
  const g = await groupOf(n, 'alice', ['bob', 'carol'], 'climbing');
  const alice = await online(t, n, 'alice', 'a1');
  const phone = await online(t, n, 'bob', 'phone');
  const laptop = await online(t, n, 'bob', 'laptop');
  const carol = await online(t, n, 'carol', 'c1');
  await carol.client.send('bob', 'a 1:1 first');
  await new Promise((resolve) => setTimeout(resolve, 5));
  await alice.client.sendToGroup(g, 'up for it?');
  const { seq } = await alice.client.sendToGroup(g, 'at 6?');
  await until('the laptop has both group messages', () => laptop.groupMessages.length === 2);

  const list = await phone.client.chatList();
  t.same(list.entries.map((e) => [e.group || e.peer, e.name, e.unread]), [[g, 'climbing', 2], ['carol', '', 1]]);
  t.match(list.entries[0]!.lastGroupEntry, { group: g, seq, from: 'alice', content: 'at 6?' });
  t.equal(list.entries[0]!.last, undefined, 'a group entry has no 1:1 last message');
  t.equal(list.nextCursor, '');
  const first = await phone.client.chatList({ limit: 1 });
  t.same(first.entries.map((e) => e.group || e.peer), [g]);
  const rest = await phone.client.chatList({ limit: 1, cursor: first.nextCursor });
  t.same(rest.entries.map((e) => e.group || e.peer), ['carol']);
  t.equal(rest.nextCursor, '');

  const history = await phone.client.groupHistory(g, { limit: 2 });
  t.same(history.entries.map((e) => ('content' in e ? e.content : `#${e.event.type}`)), ['up for it?', 'at 6?']);
  const older = await phone.client.groupHistory(g, { before: history.nextBefore });
  t.same(older.entries.map((e) => ('event' in e ? `#${e.event.type}` : e.content)), ['#created']);
  t.equal(older.nextBefore, 0);

  const mark = await phone.client.markGroupRead(g, seq);
  t.match(mark, { readSeq: seq, unread: 0 });
  t.ok(mark.eventSeq > 0);
  await until('the laptop is told', () => laptop.reads.length === 1);
  t.match(laptop.reads[0], { group: g, peer: '', seq, originDevice: 'phone', eventSeq: mark.eventSeq });
  t.same(phone.reads, [], 'the marking device gets the answer only');
  t.same(laptop.messages.map((m) => m.content), ['a 1:1 first'], 'the read event is never shown as a message');
  t.same((await laptop.client.chatList()).entries.map((e) => [e.group || e.peer, e.unread]), [[g, 0], ['carol', 1]]);

  const readers = await alice.client.groupReaders(g, { seq });
  t.match(readers, { readCount: 1, memberCount: 2, nextAfter: '' });
  t.same(readers.readers, [{ uid: 'alice', readSeq: seq }, { uid: 'bob', readSeq: seq }, { uid: 'carol', readSeq: 0 }]);
  const refused = await phone.client.groupReaders('g' + 'a'.repeat(12)).catch((err: SwitchboardError) => err.code);
  t.equal(refused, 'SB_ERR_GROUP_NOT_FOUND');
  await t.rejects(phone.client.markGroupRead(g, 0), { code: 'SB_ERR_BAD_REQUEST' });
});
