// Groups in conversations over the wire (PROTOCOL.md §14, "Groups in the chat list"): the chat
// list with groups merged in by last activity and paged by cursor, a group's history page, a
// group read mark with its event for the user's other devices, and the members' read positions
// and read counts for a sender. Run on memory stores and on real Redis ones. The attacks: other
// users' groups, forged group ids and cursors, a former member, and a user with receipts off
// reading others' positions.

import t, { type Test } from 'tap';
import { startNode, type TestNode } from '../helpers/node.js';
import { startRedis } from '../helpers/redis.js';
import { connectLoggedIn } from '../helpers/raw-session.js';
import { isDelivery, seqOf, u64, type RawClient } from '../../testkit/raw-client.js';
import { ConversationOp, HeadType, type Conversation, type ConversationRequest, type ConversationResponse } from '../../src/protocol/types.js';
import { MemoryGroupStore } from '../../src/groups/memory-group-store.js';
import { RedisGroupStore } from '../../src/groups/redis-group-store.js';
import { RedisInboxStore } from '../../src/inbox/redis-inbox-store.js';
import { MemoryUserStore } from '../../src/users/memory-user-store.js';
import type { NodeOptions } from '../../src/node.js';
import { decodeStoredRequest } from '../../src/protocol/codec.js';
import type { WorkerLimits } from '../../src/config.js';

type Stores = (t: Test) => Promise<Partial<NodeOptions>>;

const memory: Stores = async () => ({ groups: new MemoryGroupStore() });
const redis: Stores = async (t) => {
  const server = await startRedis(t);
  return { groups: new RedisGroupStore({ url: server.url }), inbox: new RedisInboxStore({ url: server.url }) };
};

async function start(t: Test, stores: Stores, limits: Partial<WorkerLimits> = {}, options: Partial<NodeOptions> = {}): Promise<{ tn: TestNode; users: MemoryUserStore }> {
  const users = new MemoryUserStore();
  for (const username of ['alice', 'bob', 'carol', 'dave', 'mallory']) await users.create({ username, passwordHash: 'x', createdAt: 1 });
  return { tn: await startNode(t, limits, { users, ...(await stores(t)), ...options }), users };
}

/** What the user's inbox holds: a refused request must store nothing there. */
const inboxSize = async (tn: TestNode, uid: string) => (await tn.node.inbox.range(uid, 0, 1000)).messages.length;

const login = (t: Test, tn: TestNode, uid: string, device: string) => connectLoggedIn(t, tn.port, uid, tn.token(uid, device), device, { acks: true, groups: true, ownCopies: true });

async function createGroup(tn: TestNode, owner: string, members: string[], name = 'team'): Promise<string> {
  const group = await tn.node.groups.create(owner, name, members);
  tn.node.groupNotifier.publish({ group: group.id, seq: 1, added: [owner, ...members] });
  return group.id;
}

async function ask(client: RawClient, request: ConversationRequest): Promise<ConversationResponse> {
  return (await client.conversation(request)).conversationResponse!;
}

/** Sends to a group and waits for the answer: the group seq. */
async function said(client: RawClient, group: string, content: string): Promise<number> {
  const sequence = client.groupChat(group, content);
  const r = (await client.next((m) => m.type === HeadType.MESSAGE_RESPONSE && Number(u64(m.sequence)) === sequence)).messageResponse!;
  if (!r.result) throw new Error(`refused: ${JSON.stringify(r)}`);
  return Number(u64(r.seq));
}

async function sent(client: RawClient, to: string, content: string): Promise<number> {
  const r = (await client.chatAndWait(to, content)).messageResponse!;
  if (!r.result) throw new Error(`refused: ${JSON.stringify(r)}`);
  return Number(u64(r.seq));
}

const row = (c: Conversation) => ({ who: c.group || c.peer, lastSeq: Number(u64(c.lastSeq)), readSeq: Number(u64(c.readSeq)), unread: c.unread ?? 0 });
const refusal = (r: ConversationResponse) => ({ result: r.result, errorCode: r.errorCode });
const tick = () => new Promise((resolve) => setTimeout(resolve, 5));

for (const [name, stores] of [['memory', memory], ['redis', redis]] as const) {
  t.test(`${name}: LIST with groups merges the user's groups into the chat list by last activity, pages by cursor; without, nothing changes`, async (t) => {
    const { tn } = await start(t, stores);
    const g1 = await createGroup(tn, 'alice', ['bob'], 'climbing');
    const g2 = await createGroup(tn, 'carol', ['bob'], 'books');
    const alice = await login(t, tn, 'alice', 'a1');
    const bob = await login(t, tn, 'bob', 'b1');
    const carol = await login(t, tn, 'carol', 'c1');
    await said(alice, g1, 'first');
    await tick();
    await sent(carol, 'bob', 'a 1:1 hello');
    await tick();
    await said(carol, g2, 'a book');
    await tick();
    await said(alice, g1, 'second');
    const all = await ask(bob, { op: ConversationOp.LIST, groups: true });
    t.equal(all.result, true);
    t.same(all.conversations!.map(row), [
      { who: g1, lastSeq: 3, readSeq: 0, unread: 2 },
      { who: g2, lastSeq: 2, readSeq: 0, unread: 1 },
      { who: 'carol', lastSeq: 1, readSeq: 0, unread: 1 },
    ]);
    const climbing = all.conversations![0]!;
    t.equal(climbing.name, 'climbing');
    t.equal(climbing.peer, '', 'a group entry has no peer');
    t.equal(climbing.last?.content, 'second');
    t.equal(climbing.last?.group, g1);
    t.equal(u64(climbing.lastAt), u64(climbing.last?.storedAt), "the server's time");
    t.equal(all.nextCursor, '', 'one page');
    t.same((await ask(alice, { op: ConversationOp.LIST, groups: true })).conversations!.map(row), [{ who: g1, lastSeq: 3, readSeq: 3, unread: 0 }], "the sender's own messages are read");

    const plain = await ask(bob, { op: ConversationOp.LIST });
    t.same(plain.conversations!.map(row), [{ who: 'carol', lastSeq: 1, readSeq: 0, unread: 1 }], 'a LIST without groups is the 1:1 list it always was');
    t.equal(plain.nextCursor, '');

    const seen: string[] = [];
    let cursor = '';
    for (let pages = 0; pages < 5; pages++) {
      const page = await ask(bob, { op: ConversationOp.LIST, groups: true, limit: 1, cursor });
      t.equal(page.conversations!.length, 1, `page ${pages + 1} holds one`);
      seen.push(...page.conversations!.map((c) => c.group || c.peer!));
      cursor = page.nextCursor ?? '';
      if (cursor === '') break;
    }
    t.same(seen, [g1, g2, 'carol'], 'pages of one, in the same order, each once');
    t.same(refusal(await ask(bob, { op: ConversationOp.LIST, groups: true, cursor: '1~999.gzzzz' })), { result: false, errorCode: 'SB_ERR_BAD_REQUEST' }, 'a forged cursor is refused');
  });

  t.test(`${name}: a group READ moves the position, tells the user's other devices, and the list and unread follow; HISTORY pages back`, async (t) => {
    const { tn } = await start(t, stores);
    const g = await createGroup(tn, 'alice', ['bob']);
    const alice = await login(t, tn, 'alice', 'a1');
    const phone = await login(t, tn, 'bob', 'phone');
    const laptop = await login(t, tn, 'bob', 'laptop');
    const seqs = [];
    for (const n of [1, 2, 3, 4]) seqs.push(await said(alice, g, `m${n}`));
    t.same(seqs, [2, 3, 4, 5]);
    const mark = await ask(phone, { op: ConversationOp.READ, group: g, seq: 3 });
    t.match({ readSeq: Number(u64(mark.readSeq)), unread: mark.unread }, { readSeq: 3, unread: 2 });
    const eventSeq = Number(u64(mark.eventSeq));
    t.ok(eventSeq > 0, 'a read event was stored');
    const event = await laptop.next((m) => isDelivery(m) && !!m.messageRequest?.event && !m.messageRequest.group);
    t.same(JSON.parse(event.messageRequest!.event!), { type: 'read', group: g, seq: 3 }, "bob's other device is told");
    t.equal(seqOf(event), eventSeq, 'at its inbox seq');
    t.equal(event.messageRequest!.originDevice, 'phone');
    t.same(refusal(mark), { result: true, errorCode: '' });
    t.same((await ask(laptop, { op: ConversationOp.LIST, groups: true })).conversations!.map(row), [{ who: g, lastSeq: 5, readSeq: 3, unread: 2 }], 'the laptop lists the same');
    t.equal(Number(u64((await ask(phone, { op: ConversationOp.READ, group: g, seq: 2 })).eventSeq)), 0, 'a mark behind the position moves nothing, stores no event');
    const clamp = await ask(phone, { op: ConversationOp.READ, group: g, seq: 1_000 });
    t.match({ readSeq: Number(u64(clamp.readSeq)), unread: clamp.unread }, { readSeq: 5, unread: 0 }, 'clamped to the head');

    const page = await ask(phone, { op: ConversationOp.HISTORY, group: g, limit: 2 });
    t.same(page.messages!.map((m) => [Number(u64(m.seq)), m.content]), [[4, 'm3'], [5, 'm4']], 'the newest two, oldest first');
    t.equal(Number(u64(page.nextBefore)), 4);
    const older = await ask(phone, { op: ConversationOp.HISTORY, group: g, before: 4, limit: 10 });
    t.same(older.messages!.map((m) => Number(u64(m.seq))), [1, 2, 3], 'back to the created event');
    t.equal(JSON.parse(older.messages![0]!.event!).type, 'created', 'events are part of the history');
    t.equal(Number(u64(older.nextBefore)), 0, 'nothing before');
    t.equal(older.pruned, false);
  });

  t.test(`${name}: READERS gives the members' shared read positions and how many read a message; receipts off shares nothing and sees nothing`, async (t) => {
    const { tn, users } = await start(t, stores);
    await users.setReceipts('dave', false);
    const g = await createGroup(tn, 'alice', ['bob', 'carol', 'dave']);
    const alice = await login(t, tn, 'alice', 'a1');
    const bob = await login(t, tn, 'bob', 'b1');
    const carol = await login(t, tn, 'carol', 'c1');
    const dave = await login(t, tn, 'dave', 'd1');
    const seq = await said(alice, g, 'did everyone read this?');
    t.match(await ask(alice, { op: ConversationOp.READERS, group: g, seq }), { result: true, readCount: 0, memberCount: 3 });
    await ask(bob, { op: ConversationOp.READ, group: g, seq });
    await ask(dave, { op: ConversationOp.READ, group: g, seq });
    const counted = await ask(alice, { op: ConversationOp.READERS, group: g, seq });
    t.match(counted, { readCount: 1, memberCount: 3 }, "bob's read counts, dave's (private) does not");
    t.same(counted.readers!.map((r) => [r.uid, Number(u64(r.readSeq))]), [['alice', seq], ['bob', seq], ['carol', 0], ['dave', 0]]);
    t.equal(counted.nextAfter, '');
    t.match((await ask(dave, { op: ConversationOp.LIST, groups: true })).conversations!.map(row), [{ who: g, readSeq: seq, unread: 0 }], "dave's own position moved");
    t.same(refusal(await ask(dave, { op: ConversationOp.READERS, group: g, seq })), { result: false, errorCode: 'SB_ERR_RECEIPTS_OFF' });
    const page = await ask(carol, { op: ConversationOp.READERS, group: g, limit: 2 });
    t.same(page.readers!.map((r) => r.uid), ['alice', 'bob']);
    t.equal(page.nextAfter, 'bob');
    t.same((await ask(carol, { op: ConversationOp.READERS, group: g, after: 'bob', limit: 2 })).readers!.map((r) => r.uid), ['carol', 'dave']);
    const reply = await said(bob, g, 'read it');
    t.match(await ask(carol, { op: ConversationOp.READERS, group: g, seq: reply }), { readCount: 1, memberCount: 3 }, "bob's reply: bob read up to it");
  });

  t.test(`${name}: attacks: strangers, forged group ids and former members get refusals and change nothing`, async (t) => {
    const { tn } = await start(t, stores);
    const g = await createGroup(tn, 'alice', ['bob', 'carol']);
    const alice = await login(t, tn, 'alice', 'a1');
    const mallory = await login(t, tn, 'mallory', 'm1');
    const seq = await said(alice, g, 'private plans');
    for (const request of [
      { op: ConversationOp.READ, group: g, seq },
      { op: ConversationOp.READERS, group: g, seq },
      { op: ConversationOp.HISTORY, group: g },
    ]) {
      t.same(refusal(await ask(mallory, request)), { result: false, errorCode: 'SB_ERR_GROUP_NOT_MEMBER' }, `op ${request.op} by a stranger`);
    }
    t.same((await ask(mallory, { op: ConversationOp.LIST, groups: true })).conversations, [], "the stranger's list has no group");
    t.equal(await inboxSize(tn, 'mallory'), 0, "the stranger's refused READ stored no read event");
    t.same(refusal(await ask(mallory, { op: ConversationOp.HISTORY, group: 'g' + 'a'.repeat(12) })), { result: false, errorCode: 'SB_ERR_GROUP_NOT_FOUND' });
    t.same(refusal(await ask(alice, { op: ConversationOp.HISTORY, group: 'not-a-group' })), { result: false, errorCode: 'SB_ERR_BAD_GROUP' });
    t.same(refusal(await ask(alice, { op: ConversationOp.READ, group: 'not-a-group', seq: 1 })), { result: false, errorCode: 'SB_ERR_BAD_REQUEST' });
    t.same(refusal(await ask(alice, { op: ConversationOp.READ, group: g })), { result: false, errorCode: 'SB_ERR_BAD_REQUEST' }, 'a READ without seq');
    t.same(refusal(await ask(alice, { op: ConversationOp.READERS })), { result: false, errorCode: 'SB_ERR_BAD_REQUEST' }, 'READERS without a group');
    t.match(await ask(alice, { op: ConversationOp.READERS, group: g, seq }), { readCount: 0 }, "nobody's position moved");

    // carol leaves: she reads up to her departure, and marks nothing any more.
    const left = await tn.node.groups.leave(g, 'carol');
    await said(alice, g, 'after carol left');
    const carol = await login(t, tn, 'carol', 'c1');
    const stored = await inboxSize(tn, 'carol');
    const history = await ask(carol, { op: ConversationOp.HISTORY, group: g });
    t.same(history.messages!.map((m) => Number(u64(m.seq))), [1, 2, left], 'up to her departure, nothing after');
    t.same(refusal(await ask(carol, { op: ConversationOp.READ, group: g, seq: left })), { result: false, errorCode: 'SB_ERR_GROUP_NOT_MEMBER' });
    t.equal(await inboxSize(tn, 'carol'), stored, 'her refused READ stored no read event');
    t.same((await ask(carol, { op: ConversationOp.LIST, groups: true })).conversations, [], 'a group she left is not listed');
  });

  t.test(`${name}: a dissolved group takes no READ; HISTORY with a before past the head pages back from the head`, async (t) => {
    const { tn } = await start(t, stores);
    const g = await createGroup(tn, 'alice', ['bob']);
    const alice = await login(t, tn, 'alice', 'a1');
    const bob = await login(t, tn, 'bob', 'b1');
    for (const n of [1, 2, 3]) await said(alice, g, `m${n}`); // 2..4
    const far = await ask(bob, { op: ConversationOp.HISTORY, group: g, before: 1_000, limit: 2 });
    t.same(far.messages!.map((m) => Number(u64(m.seq))), [3, 4], 'the newest two, as without before');
    t.equal(Number(u64(far.nextBefore)), 3);
    await tn.node.groups.dissolve(g, 'alice');
    const stored = await inboxSize(tn, 'bob');
    t.same(refusal(await ask(bob, { op: ConversationOp.READ, group: g, seq: 4 })), { result: false, errorCode: 'SB_ERR_GROUP_DISSOLVED' });
    t.equal(await inboxSize(tn, 'bob'), stored, 'no read event stored');
  });

  t.test(`${name}: receipts turned off reach the group paths within the setting's TTL: the member's sends share nothing, its READERS are refused`, async (t) => {
    const { tn, users } = await start(t, stores, {}, { receiptSettingTtlMs: 0 });
    const g = await createGroup(tn, 'alice', ['bob']);
    const alice = await login(t, tn, 'alice', 'a1');
    const bob = await login(t, tn, 'bob', 'b1');
    const first = await said(bob, g, 'shared');
    t.match(await ask(alice, { op: ConversationOp.READERS, group: g, seq: first }), { readCount: 1 }, "bob's send shares his position");
    await users.setReceipts('bob', false);
    // Each group request re-reads the setting in the background once it is older than the TTL (0 here).
    await ask(bob, { op: ConversationOp.READERS, group: g });
    await tick();
    t.same(refusal(await ask(bob, { op: ConversationOp.READERS, group: g })), { result: false, errorCode: 'SB_ERR_RECEIPTS_OFF' });
    const second = await said(bob, g, 'private now');
    t.match(await ask(alice, { op: ConversationOp.READERS, group: g, seq: first }), { readCount: 0 }, 'his send withdrew the shared position');
    t.same((await ask(alice, { op: ConversationOp.READERS, group: g })).readers!.map((r) => [r.uid, Number(u64(r.readSeq))]), [['alice', 0], ['bob', 0]]);
    t.ok(second > first);
  });
}

t.test('two devices marking a group at once: only a mark that moved the position stores a read event, and it carries the position', async (t) => {
  // Each mark waits in the store, so both requests are in flight together.
  class SlowMarks extends MemoryGroupStore {
    override async markRead(group: string, uid: string, seq: number, share: boolean) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      return super.markRead(group, uid, seq, share);
    }
  }
  const { tn } = await start(t, async () => ({ groups: new SlowMarks() }));
  const g = await createGroup(tn, 'alice', ['bob']);
  const alice = await login(t, tn, 'alice', 'a1');
  for (const n of [1, 2, 3, 4, 5]) await said(alice, g, `m${n}`); // 2..6
  const phone = await login(t, tn, 'bob', 'phone');
  const tablet = await login(t, tn, 'bob', 'tablet');
  const [ahead, behind] = await Promise.all([ask(phone, { op: ConversationOp.READ, group: g, seq: 6 }), ask(tablet, { op: ConversationOp.READ, group: g, seq: 3 })]);
  t.match({ readSeq: Number(u64(ahead.readSeq)), moved: Number(u64(ahead.eventSeq)) > 0 }, { readSeq: 6, moved: true });
  t.same({ readSeq: Number(u64(behind.readSeq)), eventSeq: Number(u64(behind.eventSeq)) }, { readSeq: 6, eventSeq: 0 }, 'the mark behind moved nothing and stored nothing');
  const events = (await tn.node.inbox.range('bob', 0, 100)).messages.map((m) => decodeStoredRequest(m.body).event).filter(Boolean);
  t.same(events.map((e) => JSON.parse(e!)), [{ type: 'read', group: g, seq: 6 }], "one read event in bob's inbox, at the position");
});

t.test('a chat list with groups costs one message of the rate and one more per ten groups read', async (t) => {
  const { tn } = await start(t, memory, { messageRate: 1, messageBurst: 12 });
  for (let n = 0; n < 50; n++) await createGroup(tn, 'alice', ['bob'], `g${n}`);
  const bob = await login(t, tn, 'bob', 'b1');
  t.same(refusal(await ask(bob, { op: ConversationOp.LIST, groups: true, limit: 5 })), { result: true, errorCode: '' }, '1 + 5 of 12');
  t.same(refusal(await ask(bob, { op: ConversationOp.LIST, groups: true, limit: 5 })), { result: true, errorCode: '' }, '6 more: none left');
  t.same(refusal(await ask(bob, { op: ConversationOp.LIST, groups: true, limit: 5 })), { result: false, errorCode: 'SB_ERR_RATE_LIMITED' }, 'a third is refused');
});

t.test('a READERS page is cut to what fits the frame, and pages on from where it was cut', async (t) => {
  const { tn } = await start(t, memory, { maxFrameLength: 1024 });
  const members = Array.from({ length: 20 }, (_, i) => `member-${String(i).padStart(2, '0')}-${'x'.repeat(50)}`);
  const g = await createGroup(tn, 'alice', members);
  const alice = await login(t, tn, 'alice', 'a1');
  const seen: string[] = [];
  let after = '';
  let pages = 0;
  do {
    const page = await ask(alice, { op: ConversationOp.READERS, group: g, after, limit: 100 });
    t.equal(page.result, true, `page ${++pages} fits`);
    seen.push(...page.readers!.map((r) => r.uid ?? ''));
    after = page.nextAfter ?? '';
  } while (after !== '' && pages < 10);
  t.ok(pages > 1, `cut into ${pages} pages`);
  t.same(seen, ['alice', ...members].sort(), 'every member once, in order');
});
