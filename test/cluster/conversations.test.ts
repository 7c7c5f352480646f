// Conversations across three real worker processes on one real Redis (PROTOCOL.md §14): senders
// on every worker race messages to one user whose own devices, on two workers, send at the same
// time; every count in every list then agrees with the conversation's history. A read mark made
// on one worker reaches the user's devices on the others as the same inbox entry. The same for a
// group: members on three workers race their messages, and the list's unread count, read
// position and read count agree with the group's history. So do a recall and an edit.

import t from 'tap';
import { startZooKeeper } from '../helpers/zookeeper.js';
import { sleep } from '../../testkit/wait.js';
import { LOGIN_RECHECKS_MS, startCluster, type WorkerProcess } from '../helpers/cluster.js';
import { connectLoggedIn } from '../helpers/raw-session.js';
import { isDelivery, isType, seqOf, u64, type RawClient } from '../../testkit/raw-client.js';
import { ConversationOp, HeadType, ReceiptKind, type ImMessage, type MessageRequest } from '../../src/protocol/types.js';
import { GroupAdmin } from '../helpers/groups.js';

const zk = await startZooKeeper(t);
const cluster = await startCluster(t, zk, { workers: 3 });
const [a, b, c] = cluster.workers as [WorkerProcess, WorkerProcess, WorkerProcess];

const login = (worker: WorkerProcess, uid: string, device: string) => connectLoggedIn(t, worker.port, uid, cluster.token(uid, device), device, { acks: true, ownCopies: true });

/** Sends `count` messages without waiting, then resolves once all are acknowledged. */
async function burst(client: RawClient, to: string, count: number, tag: string): Promise<void> {
  const sequences = Array.from({ length: count }, (_, i) => client.chat(to, `${tag} ${i}`, { msgId: 1000 + i }));
  for (const s of sequences) {
    const r = (await client.response(s, 20_000)).messageResponse;
    if (!r?.result) throw new Error(`refused: ${JSON.stringify(r)}`);
  }
}

/** Every message of `uid`'s conversation with `peer`, paging back to the start. */
async function wholeHistory(client: RawClient, peer: string): Promise<MessageRequest[]> {
  const all: MessageRequest[] = [];
  let before = 0;
  for (;;) {
    const page = (await client.conversation({ op: ConversationOp.HISTORY, peer, before, limit: 100 })).conversationResponse!;
    all.unshift(...(page.messages ?? []));
    before = Number(u64(page.nextBefore));
    if (before === 0) return all;
  }
}

const isReadEvent = (m: ImMessage) => isDelivery(m) && !!m.messageRequest?.event;

t.test('racing senders on three workers: every unread count and read position agrees with the history', async (t) => {
  const phone = await login(a, 'bob', 'phone');
  const laptop = await login(b, 'bob', 'laptop');
  const alice = await login(a, 'alice', 'a1');
  const carol = await login(b, 'carol', 'c1');
  const dave = await login(c, 'dave', 'd1');
  await sleep(LOGIN_RECHECKS_MS);

  await Promise.all([burst(alice, 'bob', 40, 'alice'), burst(carol, 'bob', 40, 'carol'), burst(dave, 'bob', 40, 'dave'), burst(phone, 'alice', 15, 'bob phone'), burst(laptop, 'carol', 15, 'bob laptop')]);

  const list = (await laptop.conversation({ op: ConversationOp.LIST })).conversationResponse!;
  t.same(list.conversations?.map((e) => e.peer).sort(), ['alice', 'carol', 'dave']);
  for (const entry of list.conversations!) {
    const history = await wholeHistory(laptop, entry.peer!);
    const readSeq = Number(u64(entry.readSeq));
    const own = history.filter((m) => m.from === 'bob');
    const received = history.filter((m) => m.from === entry.peer);
    t.equal(received.length, 40, `${entry.peer}: every message of the burst, once`);
    t.equal(own.length, entry.peer === 'dave' ? 0 : 15, `${entry.peer}: and bob's own`);
    t.equal(readSeq, own.length > 0 ? Number(u64(own.at(-1)!.seq)) : 0, `${entry.peer}: read up to bob's last reply`);
    t.equal(entry.unread, received.filter((m) => Number(u64(m.seq)) > readSeq).length, `${entry.peer}: unread counts what came after it`);
    t.equal(Number(u64(entry.lastSeq)), Number(u64(history.at(-1)!.seq)), `${entry.peer}: the last message is the history's last`);
  }
  // The other side's lists, kept by the same appends in their inboxes.
  for (const [client, peer, sentByPeer] of [[alice, 'bob', 15], [dave, 'bob', 0]] as const) {
    const [entry] = (await client.conversation({ op: ConversationOp.LIST })).conversationResponse!.conversations!;
    const history = await wholeHistory(client, peer);
    t.equal(history.filter((m) => m.from === peer).length, sentByPeer);
    const readSeq = Number(u64(entry!.readSeq));
    t.equal(entry!.unread, history.filter((m) => m.from === peer && Number(u64(m.seq)) > readSeq).length, `${client === alice ? 'alice' : 'dave'}: unread agrees`);
  }
});

t.test('a read mark on one worker reaches the devices on the others, as one inbox entry', async (t) => {
  const phone = await login(a, 'erin', 'phone');
  const laptop = await login(b, 'erin', 'laptop');
  const tablet = await login(c, 'erin', 'tablet');
  const frank = await login(c, 'frank', 'f1');
  await sleep(LOGIN_RECHECKS_MS);
  await burst(frank, 'erin', 3, 'frank');
  for (const device of [phone, laptop, tablet]) {
    const got = await device.deliveries(3);
    device.ack(seqOf(got.at(-1)!));
  }
  const mark = (await phone.conversation({ op: ConversationOp.READ, peer: 'frank', seq: 3 })).conversationResponse!;
  t.match(mark, { result: true, unread: 0 });
  const eventSeq = Number(u64(mark.eventSeq));
  t.equal(eventSeq, 4);
  for (const device of [laptop, tablet]) {
    const event = await device.next(isReadEvent, 10_000);
    t.equal(seqOf(event), eventSeq, 'the same entry on every worker');
    t.same(JSON.parse(event.messageRequest!.event!), { type: 'read', peer: 'frank', seq: 3 });
    t.equal(event.messageRequest?.originDevice, 'phone');
  }
  const [entry] = (await tablet.conversation({ op: ConversationOp.LIST })).conversationResponse!.conversations!;
  t.match({ peer: entry!.peer, readSeq: Number(u64(entry!.readSeq)), unread: entry!.unread ?? 0 }, { peer: 'frank', readSeq: 3, unread: 0 });
});

t.test('receipts cross workers: an ack on one worker and a mark on another reach the sender on a third, once each', async (t) => {
  const isReceipt = isType(HeadType.RECEIPT);
  const sender = await connectLoggedIn(t, a.port, 'grace', cluster.token('grace', 'e1'), 'e1', { acks: true, receipts: true });
  const senderTablet = await connectLoggedIn(t, b.port, 'grace', cluster.token('grace', 'e2'), 'e2', { acks: true, receipts: true });
  const phone = await login(b, 'heidi', 'phone');
  const laptop = await login(c, 'heidi', 'laptop');
  await sleep(LOGIN_RECHECKS_MS);
  const r = (await sender.chatAndWait('heidi', 'hello heidi', { msgId: 77 })).messageResponse!;
  const seq = Number(u64(r.seq));
  await phone.next((m) => isDelivery(m) && seqOf(m) === seq);
  phone.ack(seq);
  for (const device of [sender, senderTablet]) {
    const receipt = (await device.next(isReceipt, 10_000)).receipt!;
    t.same({ kind: receipt.kind, peer: receipt.peer, seq: Number(u64(receipt.seq)), msgId: Number(u64(receipt.msgId)) }, { kind: ReceiptKind.DELIVERED, peer: 'heidi', seq, msgId: 77 }, 'delivered, from a device on another worker');
  }
  await laptop.next((m) => isDelivery(m) && seqOf(m) === seq);
  const mark = (await laptop.conversation({ op: ConversationOp.READ, peer: 'grace', seq })).conversationResponse!;
  t.equal(mark.result, true);
  const read = (await sender.next(isReceipt, 10_000)).receipt!;
  t.same({ kind: read.kind, seq: Number(u64(read.seq)), msgId: Number(u64(read.msgId)) }, { kind: ReceiptKind.READ, seq, msgId: 77 }, 'read, marked on the third worker');
  await sender.roundTrip();
  t.same(sender.pending.filter(isReceipt), [], 'one receipt each, nothing more');
});

t.test('a recall on one worker reaches the recipient on another and the sender\'s device on a third', async (t) => {
  const writer = await connectLoggedIn(t, a.port, 'ivan', cluster.token('ivan', 'i1'), 'i1', { acks: true, ownCopies: true, inboxEvents: true });
  const writerLaptop = await connectLoggedIn(t, c.port, 'ivan', cluster.token('ivan', 'i2'), 'i2', { acks: true, ownCopies: true, inboxEvents: true });
  const reader = await connectLoggedIn(t, b.port, 'judy', cluster.token('judy', 'j1'), 'j1', { acks: true, inboxEvents: true });
  await sleep(LOGIN_RECHECKS_MS);
  const r = (await writer.chatAndWait('judy', 'take this back', { msgId: 5 })).messageResponse!;
  const seq = Number(u64(r.seq));
  await reader.next((m) => isDelivery(m) && seqOf(m) === seq);
  const ownSeq = seqOf(await writerLaptop.next(isDelivery));
  const done = (await writerLaptop.conversation({ op: ConversationOp.RECALL, peer: 'judy', msgId: 5 })).conversationResponse!;
  t.equal(done.result, true, 'recalled from a device on a third worker');
  const event = await reader.next((m) => isDelivery(m) && !!m.messageRequest?.event, 10_000);
  t.same(JSON.parse(event.messageRequest!.event!), { type: 'recall', peer: 'ivan', seq, msgId: '5' });
  const own = await writer.next((m) => isDelivery(m) && !!m.messageRequest?.event, 10_000);
  t.same(JSON.parse(own.messageRequest!.event!), { type: 'recall', peer: 'judy', seq: ownSeq, msgId: '5' }, "the sender's device on the first worker is told too");
  const [tombstone] = (await reader.conversation({ op: ConversationOp.HISTORY, peer: 'ivan' })).conversationResponse!.messages!;
  t.match(tombstone, { recalled: true, content: '[recalled]' });
});

t.test('a group raced by members on three workers: the list, the read position and the read count agree with its history; a mark reaches the other workers', async (t) => {
  const admin = new GroupAdmin(t, cluster.redis.url);
  const group = await admin.create('gina', ['hal', 'ivy']);
  const joinGroups = (worker: WorkerProcess, uid: string, device: string) => connectLoggedIn(t, worker.port, uid, cluster.token(uid, device), device, { acks: true, ownCopies: true, groups: true });
  const phone = await joinGroups(a, 'hal', 'phone');
  const laptop = await joinGroups(b, 'hal', 'laptop');
  const gina = await joinGroups(c, 'gina', 'g1');
  const ivy = await joinGroups(b, 'ivy', 'i1');
  await sleep(LOGIN_RECHECKS_MS);
  const groupBurst = async (client: RawClient, count: number, tag: string) => {
    const sequences = Array.from({ length: count }, (_, i) => client.groupChat(group, `${tag} ${i}`, { msgId: 5000 + i }));
    const seqs: number[] = [];
    for (const s of sequences) {
      const r = (await client.response(s, 20_000)).messageResponse;
      if (!r?.result) throw new Error(`refused: ${JSON.stringify(r)}`);
      seqs.push(Number(u64(r.seq)));
    }
    return seqs;
  };
  const [, ivys, mine] = await Promise.all([groupBurst(gina, 30, 'gina'), groupBurst(ivy, 30, 'ivy'), groupBurst(phone, 10, 'hal')]);
  const ownLast = Math.max(...mine!);
  const list = (await laptop.conversation({ op: ConversationOp.LIST, groups: true })).conversationResponse!;
  const entry = list.conversations!.find((c) => c.group === group)!;
  const history = (await laptop.conversation({ op: ConversationOp.HISTORY, group, limit: 100 })).conversationResponse!.messages!;
  t.equal(history.filter((m) => !m.event).length, 70, 'every message of the race, once');
  const after = history.filter((m) => !m.event && Number(u64(m.seq)) > ownLast);
  t.equal(Number(u64(entry.readSeq)), ownLast, "hal's position is his last message");
  t.equal(entry.unread, after.length, `unread = the others' messages after it (${after.length})`);
  t.equal(Number(u64(entry.lastSeq)), 71, 'created + 70');

  // One more, from gina: when hal's own message ended the race, his position is at the end
  // already and a mark there moves nothing (no event); one after it always does.
  const last = (await gina.response(gina.groupChat(group, 'after the race', { msgId: 6000 }), 20_000)).messageResponse!;
  t.equal(Number(u64(last.seq)), 72);
  const mark = (await phone.conversation({ op: ConversationOp.READ, group, seq: 72 })).conversationResponse!;
  t.match({ result: mark.result, unread: mark.unread ?? 0, readSeq: Number(u64(mark.readSeq)) }, { result: true, unread: 0, readSeq: 72 });
  const event = await laptop.next((m) => isReadEvent(m) && !m.messageRequest?.group, 10_000);
  t.same(JSON.parse(event.messageRequest!.event!), { type: 'read', group, seq: 72 }, 'the laptop on another worker is told');
  t.equal(seqOf(event), Number(u64(mark.eventSeq)));
  const counted = (await gina.conversation({ op: ConversationOp.READERS, group, seq: 72 })).conversationResponse!;
  // hal read it; ivy's position is her own last message of the race, before it.
  t.ok(Math.max(...ivys!) < 72);
  t.match(counted, { result: true, readCount: 1, memberCount: 2 }, 'hal read the last message, ivy not');
});

t.test("an edit on one worker reaches the recipient on another and the sender's device on a third, with its content", async (t) => {
  const writer = await connectLoggedIn(t, a.port, 'kim', cluster.token('kim', 'k1'), 'k1', { acks: true, ownCopies: true, inboxEvents: true });
  const writerLaptop = await connectLoggedIn(t, c.port, 'kim', cluster.token('kim', 'k2'), 'k2', { acks: true, ownCopies: true, inboxEvents: true });
  const reader = await connectLoggedIn(t, b.port, 'lee', cluster.token('lee', 'l1'), 'l1', { acks: true, inboxEvents: true });
  await sleep(LOGIN_RECHECKS_MS);
  const r = (await writer.chatAndWait('lee', 'meet at 8', { msgId: 6 })).messageResponse!;
  const seq = Number(u64(r.seq));
  await reader.next((m) => isDelivery(m) && seqOf(m) === seq);
  const ownSeq = seqOf(await writerLaptop.next(isDelivery));
  const done = (await writerLaptop.conversation({ op: ConversationOp.EDIT, peer: 'lee', msgId: 6, content: 'meet at 9' })).conversationResponse!;
  t.equal(done.result, true, 'edited from a device on a third worker');
  const event = await reader.next((m) => isDelivery(m) && !!m.messageRequest?.event, 10_000);
  t.same(JSON.parse(event.messageRequest!.event!), { type: 'edit', peer: 'kim', seq, msgId: '6' });
  t.equal(event.messageRequest!.content, 'meet at 9', 'the event carries the new content');
  const own = await writer.next((m) => isDelivery(m) && !!m.messageRequest?.event, 10_000);
  t.same(JSON.parse(own.messageRequest!.event!), { type: 'edit', peer: 'lee', seq: ownSeq, msgId: '6' }, "the sender's device on the first worker is told too");
  const [edited] = (await reader.conversation({ op: ConversationOp.HISTORY, peer: 'kim' })).conversationResponse!.messages!;
  t.match(edited, { edited: true, content: 'meet at 9' });
});
