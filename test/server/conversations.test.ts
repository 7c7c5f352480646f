// Conversations over the wire (PROTOCOL.md §14): the chat list, history pages, read marks and
// their events for the user's other devices, and a login that replays nothing. Run on the
// memory inbox and on a real Redis one. The attacks: another user's conversations, requests
// before login, unknown ops, floods, pages that would exceed the frame limit.

import t, { type Test } from 'tap';
import { startNode, type TestNode } from '../helpers/node.js';
import { startRedis } from '../helpers/redis.js';
import { connect, connectLoggedIn, nothingMoreDelivered } from '../helpers/raw-session.js';
import { isDelivery, seqOf, u64, type RawClient } from '../../testkit/raw-client.js';
import { ConversationOp, HeadType, type Conversation, type ImMessage } from '../../src/protocol/types.js';
import { RedisInboxStore } from '../../src/inbox/redis-inbox-store.js';
import { MemoryInboxStore } from '../../src/inbox/memory-inbox-store.js';
import type { InboxLimits, InboxStore } from '../../src/inbox/inbox-store.js';
import type { WorkerLimits } from '../../src/config.js';

type Start = (t: Test, limits?: Partial<WorkerLimits>, inboxLimits?: Partial<InboxLimits>) => Promise<TestNode>;

const memory: Start = (t, limits = {}, inboxLimits = {}) => startNode(t, limits, { inbox: new MemoryInboxStore(inboxLimits) });
const redis: Start = async (t, limits = {}, inboxLimits = {}) => {
  const server = await startRedis(t);
  const inbox: InboxStore = new RedisInboxStore({ url: server.url, limits: inboxLimits });
  return startNode(t, limits, { inbox });
};

function login(t: Test, tn: TestNode, uid: string, device: string, options: { ownCopies?: boolean; acks?: boolean; noReplay?: boolean } = {}): Promise<RawClient> {
  return connectLoggedIn(t, tn.port, uid, tn.token(uid, device), device, { acks: true, ownCopies: true, ...options });
}

async function sent(client: RawClient, to: string, content: string): Promise<number> {
  const r = (await client.chatAndWait(to, content)).messageResponse!;
  if (!r.result) throw new Error(`refused: ${JSON.stringify(r)}`);
  return Number(u64(r.seq));
}

const listOf = async (client: RawClient, before = 0, limit = 0) => (await client.conversation({ op: ConversationOp.LIST, before, limit })).conversationResponse!;
const rows = (list: Conversation[] | undefined) => (list ?? []).map((c) => ({ peer: c.peer, lastSeq: Number(u64(c.lastSeq)), readSeq: Number(u64(c.readSeq)), unread: c.unread ?? 0 }));
const isReadEvent = (m: ImMessage) => isDelivery(m) && !!m.messageRequest?.event;

for (const [store, start] of [['memory', memory], ['redis', redis]] as const) {
  t.test(`${store}: the chat list: one entry per peer, most recent first, unread counts, a preview of the last message`, async (t) => {
    const tn = await start(t);
    const bob = await login(t, tn, 'bob', 'phone');
    const alice = await login(t, tn, 'alice', 'a1');
    const carol = await login(t, tn, 'carol', 'c1');
    await sent(alice, 'bob', 'hi bob');
    await sent(carol, 'bob', 'hello');
    const long = 'é'.repeat(200); // 400 bytes: the preview is cut at 256, between characters
    await sent(alice, 'bob', long);
    await sent(bob, 'dave', 'to dave');
    const list = await listOf(bob);
    t.equal(list.result, true);
    t.same(rows(list.conversations), [
      { peer: 'dave', lastSeq: 4, readSeq: 4, unread: 0 },
      { peer: 'alice', lastSeq: 3, readSeq: 0, unread: 2 },
      { peer: 'carol', lastSeq: 2, readSeq: 0, unread: 1 },
    ]);
    const a = list.conversations![1]!;
    t.equal(a.last?.content, 'é'.repeat(128), 'the content cut to 256 bytes');
    t.equal(a.truncated, true);
    t.equal(a.last?.from, 'alice');
    t.equal(Number(u64(a.last?.seq)), 3);
    t.equal(u64(a.lastAt), u64(a.last?.storedAt), "the server's time");
    t.equal(list.conversations![2]!.truncated, false, 'a short message whole');
    t.equal(list.conversations![0]!.last?.originDevice, 'phone', "bob's own message, as his other devices get it");
    t.equal(Number(u64(list.nextBefore)), 0, 'one page');
    t.same(rows((await listOf(alice)).conversations), [{ peer: 'bob', lastSeq: 2, readSeq: 2, unread: 0 }], "alice's own list: her messages to bob, read");

    const page = await listOf(bob, 0, 2);
    t.same(rows(page.conversations).map((r) => r.peer), ['dave', 'alice']);
    t.equal(Number(u64(page.nextBefore)), 3);
    const rest = await listOf(bob, Number(u64(page.nextBefore)), 2);
    t.same(rows(rest.conversations).map((r) => r.peer), ['carol']);
    t.equal(Number(u64(rest.nextBefore)), 0);
  });

  t.test(`${store}: history pages back through one conversation, and says where retention ended it`, async (t) => {
    const tn = await start(t, {}, { maxMessages: 6 });
    const bob = await login(t, tn, 'bob', 'phone');
    const alice = await login(t, tn, 'alice', 'a1');
    for (let i = 1; i <= 4; i++) await sent(alice, 'bob', `a${i}`);
    await sent(bob, 'alice', 'b1');
    await sent(await login(t, tn, 'carol', 'c1'), 'bob', 'c1');
    for (let i = 5; i <= 6; i++) await sent(alice, 'bob', `a${i}`);
    // bob's inbox: a1 a2 a3 a4 b1 c1 a5 a6 (1..8); six retained: 3..8.
    const first = (await bob.conversation({ op: ConversationOp.HISTORY, peer: 'alice', limit: 3 })).conversationResponse!;
    t.same(first.messages?.map((m) => m.content), ['b1', 'a5', 'a6'], 'newest three, oldest first, carol left out');
    t.same(first.messages?.map((m) => Number(u64(m.seq))), [5, 7, 8]);
    t.equal(first.messages![0]!.from, 'bob');
    t.ok(first.messages!.every((m) => Number(u64(m.storedAt)) > 0));
    t.equal(Number(u64(first.nextBefore)), 5);
    const second = (await bob.conversation({ op: ConversationOp.HISTORY, peer: 'alice', before: 5, limit: 3 })).conversationResponse!;
    t.same(second.messages?.map((m) => m.content), ['a3', 'a4']);
    t.equal(Number(u64(second.nextBefore)), 0, 'no more');
    t.equal(second.pruned, true, 'a1 and a2 were pruned: the retention edge');
    t.equal(Number(u64(second.oldest)), 3);
    const none = (await bob.conversation({ op: ConversationOp.HISTORY, peer: 'zed' })).conversationResponse!;
    t.match(none, { result: true, pruned: false });
    t.same(none.messages ?? [], []);
  });

  t.test(`${store}: a read mark on one device reaches the user's other devices as an event, stored, in order, replayed`, async (t) => {
    const tn = await start(t);
    const phone = await login(t, tn, 'bob', 'phone');
    const laptop = await login(t, tn, 'bob', 'laptop');
    const legacy = await login(t, tn, 'bob', 'old', { ownCopies: false });
    const alice = await login(t, tn, 'alice', 'a1');
    for (let i = 1; i <= 3; i++) await sent(alice, 'bob', `a${i}`);
    for (const device of [phone, laptop, legacy]) {
      const got = await device.deliveries(3);
      device.ack(seqOf(got.at(-1)!));
    }

    const mark = (await phone.conversation({ op: ConversationOp.READ, peer: 'alice', seq: 2 })).conversationResponse!;
    t.match(mark, { result: true, unread: 1 });
    t.equal(Number(u64(mark.readSeq)), 2);
    t.equal(Number(u64(mark.eventSeq)), 4, "the event's seq in bob's inbox");

    const event = await laptop.next(isReadEvent);
    t.equal(seqOf(event), 4);
    t.same(JSON.parse(event.messageRequest!.event!), { type: 'read', peer: 'alice', seq: 2 });
    t.equal(event.messageRequest?.originDevice, 'phone');
    t.equal(event.messageRequest?.from, 'bob');
    t.equal(event.messageRequest?.to, 'alice');
    laptop.ack(4);
    await nothingMoreDelivered(t, phone, 'the marking device gets its response, not the event');
    await nothingMoreDelivered(t, legacy, 'a device that did not ask for own entries sees nothing new');
    t.same(rows((await listOf(laptop)).conversations), [{ peer: 'alice', lastSeq: 3, readSeq: 2, unread: 1 }], 'the list agrees on every device');

    // A message after the event, then a tablet that was offline: the event is replayed in inbox order.
    await sent(alice, 'bob', 'a4');
    const tablet = await login(t, tn, 'bob', 'tablet');
    const replay = await tablet.deliveries(5);
    t.same(
      replay.map((d) => [seqOf(d), d.messageRequest?.event ? 'read' : d.messageRequest?.content]),
      [
        [1, 'a1'],
        [2, 'a2'],
        [3, 'a3'],
        [4, 'read'],
        [5, 'a4'],
      ],
    );

    // Marking the same point again, or an earlier one, appends nothing.
    const again = (await laptop.conversation({ op: ConversationOp.READ, peer: 'alice', seq: 1 })).conversationResponse!;
    t.match(again, { result: true, unread: 2 });
    t.equal(Number(u64(again.eventSeq)), 0, 'no event: the position did not move');
    t.equal(Number(u64(again.readSeq)), 2);
    const all = (await laptop.conversation({ op: ConversationOp.READ, peer: 'alice', seq: 5 })).conversationResponse!;
    t.match(all, { result: true, unread: 0 });
    t.equal(Number(u64(all.eventSeq)), 6);
    t.equal(seqOf(await phone.next(isReadEvent)), 6, 'and the phone gets the laptop\'s mark');
  });

  t.test(`${store}: no_replay: a new device replays nothing, its position is the head, live delivery goes on`, async (t) => {
    const tn = await start(t);
    const alice = await login(t, tn, 'alice', 'a1');
    for (let i = 1; i <= 5; i++) await sent(alice, 'bob', `a${i}`);
    const fresh = await login(t, tn, 'bob', 'new', { noReplay: true });
    t.equal(Number(u64(fresh.loginResponse?.syncFrom)), 5);
    t.equal(Number(u64(fresh.loginResponse?.inboxHead)), 5);
    t.equal(await tn.node.inbox.cursor('bob', 'new'), 5, 'saved at once');
    await nothingMoreDelivered(t, fresh, 'nothing replayed');
    const history = (await fresh.conversation({ op: ConversationOp.HISTORY, peer: 'alice', limit: 2 })).conversationResponse!;
    t.same(history.messages?.map((m) => m.content), ['a4', 'a5'], 'it pages what it shows');
    await sent(alice, 'bob', 'live');
    const [live] = await fresh.deliveries(1);
    t.equal(seqOf(live!), 6);
    t.equal(live!.messageRequest?.content, 'live');
  });

  t.test(`${store}: attacks: no one reads another user's conversations; bad requests are refused with a code`, async (t) => {
    const tn = await start(t, { messageRate: 1, messageBurst: 20 });
    const bob = await login(t, tn, 'bob', 'phone');
    const alice = await login(t, tn, 'alice', 'a1');
    const mallory = await login(t, tn, 'mallory', 'm1');
    await sent(alice, 'bob', 'secret');
    // Mallory names alice as the peer: she gets her own (empty) conversation with alice, not bob's.
    const h = (await mallory.conversation({ op: ConversationOp.HISTORY, peer: 'alice' })).conversationResponse!;
    t.same(h.messages ?? [], []);
    t.same((await listOf(mallory)).conversations ?? [], []);
    t.match((await mallory.conversation({ op: ConversationOp.READ, peer: 'alice', seq: 1 })).conversationResponse, { result: false, errorCode: 'SB_ERR_NO_CONVERSATION' });
    t.same(rows((await listOf(bob)).conversations), [{ peer: 'alice', lastSeq: 1, readSeq: 0, unread: 1 }], "bob's list untouched");

    t.match((await bob.conversation({ op: 9 })).conversationResponse, { result: false, errorCode: 'SB_ERR_BAD_REQUEST' }, 'unknown op');
    t.match((await bob.conversation({ op: ConversationOp.HISTORY })).conversationResponse, { result: false, errorCode: 'SB_ERR_BAD_REQUEST' }, 'history without a peer');
    t.match((await bob.conversation({ op: ConversationOp.READ, peer: 'alice' })).conversationResponse, { result: false, errorCode: 'SB_ERR_BAD_REQUEST' }, 'read without a seq');

    // A flood is refused by the message rate, like chat messages.
    const sequences: number[] = [];
    for (let i = 0; i < 30; i++) {
      const sequence = mallory.nextSequence();
      sequences.push(sequence);
      mallory.send({ type: HeadType.CONVERSATION_REQUEST, sequence, sessionId: mallory.sessionId, conversationRequest: { op: ConversationOp.LIST } });
    }
    const answers = await Promise.all(sequences.map((s) => mallory.next((m) => m.type === HeadType.CONVERSATION_RESPONSE && u64(m.sequence) === String(s))));
    t.ok(answers.some((a) => a.conversationResponse?.errorCode === 'SB_ERR_RATE_LIMITED'), 'over the rate: refused');
    t.equal((await sent(alice, 'bob', 'still here')) > 0, true, 'everyone else is unaffected');

    // Before login: closed, like every request but login and heartbeat.
    const anonymous = await connect(t, tn.port);
    anonymous.send({ type: HeadType.CONVERSATION_REQUEST, sequence: 1, conversationRequest: { op: ConversationOp.LIST } });
    t.equal((await anonymous.nextClosing()).code, 'SB_ERR_NOT_LOGGED_IN');
  });

  t.test(`${store}: a history page stops at the frame limit and says where the next one starts`, async (t) => {
    const tn = await start(t);
    const bob = await login(t, tn, 'bob', 'phone');
    const alice = await login(t, tn, 'alice', 'a1');
    for (let i = 1; i <= 3; i++) await sent(alice, 'bob', String(i).repeat(30_000));
    const page = (await bob.conversation({ op: ConversationOp.HISTORY, peer: 'alice', limit: 3 })).conversationResponse!;
    t.same(page.messages?.map((m) => Number(u64(m.seq))), [2, 3], 'two of 30 000 bytes fit a 64 KiB frame');
    t.equal(Number(u64(page.nextBefore)), 2);
    const next = (await bob.conversation({ op: ConversationOp.HISTORY, peer: 'alice', before: 2, limit: 3 })).conversationResponse!;
    t.same(next.messages?.map((m) => Number(u64(m.seq))), [1]);
    t.equal(next.messages![0]!.content, '1'.repeat(30_000));
  });
}
