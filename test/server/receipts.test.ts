// Receipts over the wire (PROTOCOL.md §14): a recipient device's ack makes one DELIVERED receipt
// per sender, a read mark one READ receipt, each to the sender's devices that asked for
// receipts (LoginRequest.receipts), never stored. The privacy setting turns both directions off.
// The attacks: a client sending RECEIPT or PEER_RECEIPT frames itself, an ack of what was never
// delivered, a legacy device that does not acknowledge.

import t, { type Test } from 'tap';
import { startNode, type TestNode } from '../helpers/node.js';
import { connect, connectLoggedIn } from '../helpers/raw-session.js';
import { isType, u64, type RawClient } from '../../testkit/raw-client.js';
import { ConversationOp, HeadType, ReceiptKind, type ImMessage } from '../../src/protocol/types.js';
import { MemoryUserStore } from '../../src/users/memory-user-store.js';
import { sleep, until } from '../../testkit/wait.js';

const isReceipt = isType(HeadType.RECEIPT);

async function node(t: Test, receiptSettingTtlMs?: number): Promise<{ tn: TestNode; users: MemoryUserStore }> {
  const users = new MemoryUserStore();
  for (const username of ['alice', 'bob', 'carol']) await users.create({ username, passwordHash: 'x', createdAt: 1 });
  return { tn: await startNode(t, {}, { users, ...(receiptSettingTtlMs === undefined ? {} : { receiptSettingTtlMs }) }), users };
}

function login(t: Test, tn: TestNode, uid: string, device: string, options: { receipts?: boolean; acks?: boolean } = {}): Promise<RawClient> {
  return connectLoggedIn(t, tn.port, uid, tn.token(uid, device), device, { acks: true, ...options });
}

async function sent(client: RawClient, to: string, content: string, msgId: number): Promise<number> {
  const r = (await client.chatAndWait(to, content, { msgId })).messageResponse!;
  if (!r.result) throw new Error(`refused: ${JSON.stringify(r)}`);
  return Number(u64(r.seq));
}

const fields = (m: ImMessage) => ({ kind: m.receipt?.kind, peer: m.receipt?.peer, seq: Number(u64(m.receipt?.seq)), msgId: Number(u64(m.receipt?.msgId)) });

/** Receipts that came to `client` up to now (a round trip: whatever the server wrote before has arrived). */
async function receiptsOf(client: RawClient): Promise<ImMessage[]> {
  await client.roundTrip();
  const out: ImMessage[] = [];
  for (;;) {
    const m = await client.next(isReceipt, 1).catch(() => undefined);
    if (!m) return out;
    out.push(m);
  }
}

t.test('an ack makes one DELIVERED receipt for the newest message it covers, to every device of the sender that asked', async (t) => {
  const { tn } = await node(t);
  const phone = await login(t, tn, 'alice', 'phone', { receipts: true });
  const laptop = await login(t, tn, 'alice', 'laptop', { receipts: true });
  const tablet = await login(t, tn, 'alice', 'tablet');
  const bob = await login(t, tn, 'bob', 'b1');
  await sent(phone, 'bob', 'one', 101);
  await sent(phone, 'bob', 'two', 102);
  const third = await sent(laptop, 'bob', 'three', 103);
  await bob.deliveries(3);
  t.same(await receiptsOf(phone), [], 'nothing before the ack');

  bob.ack(third);
  const receipt = await phone.next(isReceipt);
  t.same(fields(receipt), { kind: ReceiptKind.DELIVERED, peer: 'bob', seq: third, msgId: 103 }, 'cumulative: the newest covered');
  t.ok(Number(u64(receipt.receipt?.at)) > 0, 'with the server time');
  t.same((await receiptsOf(phone)).map(fields), [], 'one receipt for the three');
  t.same((await laptop.next(isReceipt)).receipt?.seq, receipt.receipt?.seq, 'the other device that asked gets it too');
  t.same(await receiptsOf(tablet), [], 'a device that did not ask gets none');
  t.same(await receiptsOf(bob), [], 'and the recipient none');

  bob.ack(third);
  t.same(await receiptsOf(phone), [], 'the same ack again: nothing new');
});

t.test('one receipt per sender: an ack covering two senders tells each about its own', async (t) => {
  const { tn } = await node(t);
  const alice = await login(t, tn, 'alice', 'a', { receipts: true });
  const carol = await login(t, tn, 'carol', 'c', { receipts: true });
  const bob = await login(t, tn, 'bob', 'b');
  const a = await sent(alice, 'bob', 'from alice', 7);
  const c = await sent(carol, 'bob', 'from carol', 9);
  await bob.deliveries(2);
  bob.ack(c);
  t.same(fields(await alice.next(isReceipt)), { kind: ReceiptKind.DELIVERED, peer: 'bob', seq: a, msgId: 7 });
  t.same(fields(await carol.next(isReceipt)), { kind: ReceiptKind.DELIVERED, peer: 'bob', seq: c, msgId: 9 });
});

t.test("a read mark makes a READ receipt for the newest of the sender's messages it covers, not the reader's own", async (t) => {
  const { tn } = await node(t);
  const alice = await login(t, tn, 'alice', 'a', { receipts: true });
  const bob = await login(t, tn, 'bob', 'b');
  const one = await sent(alice, 'bob', 'one', 1);
  // Another conversation's entry (bob's own copy to carol) lies between alice's two messages.
  const bobLaptop = await login(t, tn, 'bob', 'laptop');
  await sent(bobLaptop, 'carol', 'elsewhere', 40);
  const two = await sent(alice, 'bob', 'two', 2);
  await bob.deliveries(2);
  bob.ack(two);
  await alice.next(isReceipt); // delivered
  let mark = (await bob.conversation({ op: ConversationOp.READ, peer: 'alice', seq: one })).conversationResponse!;
  t.equal(mark.result, true);
  t.same(fields(await alice.next(isReceipt)), { kind: ReceiptKind.READ, peer: 'bob', seq: one, msgId: 1 });
  mark = (await bob.conversation({ op: ConversationOp.READ, peer: 'alice', seq: 1_000 })).conversationResponse!;
  t.equal(Number(u64(mark.readSeq)), two, 'a mark past the last message is taken as the last');
  t.same(fields(await alice.next(isReceipt)), { kind: ReceiptKind.READ, peer: 'bob', seq: two, msgId: 2 });
  await bob.conversation({ op: ConversationOp.READ, peer: 'alice', seq: 1_000 });
  t.same(await receiptsOf(alice), [], 'a mark that moves nothing sends nothing');

  // A reply marks the conversation read on bob's side (PROTOCOL.md §14); a mark after it covers
  // bob's reply: the receipt names alice's newest message before it, never bob's own.
  const three = await sent(alice, 'bob', 'three', 3);
  await bob.deliveries(1);
  await sent(bob, 'alice', 'a reply', 50);
  const four = await sent(alice, 'bob', 'four', 4);
  await bob.deliveries(1);
  await bob.conversation({ op: ConversationOp.READ, peer: 'alice', seq: four });
  t.same(fields(await alice.next(isReceipt)), { kind: ReceiptKind.READ, peer: 'bob', seq: four, msgId: 4 });
  t.ok(three < four);
});

t.test('the privacy setting: a user with receipts off sends none and gets none', async (t) => {
  const { tn, users } = await node(t);
  await users.setReceipts('bob', false);
  const alice = await login(t, tn, 'alice', 'a', { receipts: true });
  const bob = await login(t, tn, 'bob', 'b', { receipts: true });
  const seq = await sent(alice, 'bob', 'hi', 1);
  await bob.deliveries(1);
  bob.ack(seq);
  await bob.conversation({ op: ConversationOp.READ, peer: 'alice', seq });
  t.same(await receiptsOf(alice), [], "bob's ack and mark tell alice nothing");

  const back = await sent(bob, 'alice', 'hello', 2);
  await alice.deliveries(1);
  alice.ack(back);
  await alice.conversation({ op: ConversationOp.READ, peer: 'bob', seq: back });
  t.same(await receiptsOf(bob), [], 'nor is bob told of alice\'s');
  t.equal((await alice.conversation({ op: ConversationOp.LIST })).conversationResponse?.result, true, 'everything else works as before');
});

t.test('a setting changed during a session reaches it within the TTL, both ways, on both sides', async (t) => {
  const ttlMs = 50;
  const { tn, users } = await node(t, ttlMs);
  const alice = await login(t, tn, 'alice', 'a', { receipts: true });
  const bob = await login(t, tn, 'bob', 'b', { receipts: true });
  const bobSession = () => tn.node.server.sessions.byUser('bob')[0]!;
  const aliceSession = () => tn.node.server.sessions.byUser('alice')[0]!;
  let msgId = 0;
  /** alice sends one, bob acknowledges it: the receipts alice got for it. */
  const exchange = async () => {
    const seq = await sent(alice, 'bob', 'm', ++msgId);
    await bob.next((m) => m.type === HeadType.MESSAGE_REQUEST && Number(u64(m.messageRequest?.seq)) === seq);
    bob.ack(seq);
    return (await receiptsOf(alice)).filter((m) => Number(u64(m.receipt?.seq)) === seq);
  };
  t.equal((await exchange()).length, 1, 'on');

  await users.setReceipts('bob', false);
  await sleep(ttlMs * 2);
  await exchange(); // bob's ack re-reads the setting; the last one holds meanwhile
  await until('bob\'s session has it', () => bobSession().receiptsOn === false);
  t.same(await exchange(), [], 'bob turned them off: his acks tell alice nothing');

  await users.setReceipts('bob', true);
  await sleep(ttlMs * 2);
  await exchange(); // its ack re-reads the setting (the message was written while off: no receipt)
  await until('bob\'s session has it again', () => bobSession().receiptsOn === true);
  t.equal((await exchange()).length, 1, 'on again');

  await users.setReceipts('alice', false);
  await sleep(ttlMs * 2);
  await exchange(); // a receipt for alice re-reads hers
  await until('alice\'s session has it', () => aliceSession().receiptsOn === false);
  t.same(await exchange(), [], 'alice turned them off: she is sent none');
});

t.test('a UserStore that does not answer at login does not refuse it: receipts are off for the session', async (t) => {
  const users = new MemoryUserStore();
  await users.create({ username: 'bob', passwordHash: 'x', createdAt: 1 });
  users.receipts = () => Promise.reject(new Error('store down'));
  const tn = await startNode(t, {}, { users });
  const bob = await login(t, tn, 'bob', 'b', { receipts: true });
  t.equal(bob.loginResponse?.result, true, 'logged in');
  t.equal(tn.node.server.sessions.byUser('bob')[0]!.receiptsOn, false, 'the private choice');
});

t.test('a device that does not acknowledge produces no receipt; an ack beyond what was delivered covers only what was', async (t) => {
  const { tn } = await node(t);
  const alice = await login(t, tn, 'alice', 'a', { receipts: true });
  const legacy = await login(t, tn, 'bob', 'old', { acks: false });
  const forger = await login(t, tn, 'bob', 'forger');
  forger.ack(1_000_000);
  t.same(await receiptsOf(alice), [], 'an ack of what was never written to the device is no receipt');
  const seq = await sent(alice, 'bob', 'one', 1);
  await legacy.deliveries(1);
  await forger.deliveries(1);
  legacy.ack(seq); // not an ack client: the server ignores it
  t.same(await receiptsOf(alice), [], 'a device that does not acknowledge makes no receipt');
  forger.ack(1_000_000);
  t.same(fields(await alice.next(isReceipt)), { kind: ReceiptKind.DELIVERED, peer: 'bob', seq, msgId: 1 }, 'only what it was sent');
});

t.test('a client that sends RECEIPT or PEER_RECEIPT frames is closed; the named user is told nothing', async (t) => {
  const { tn } = await node(t);
  const alice = await login(t, tn, 'alice', 'a', { receipts: true });
  for (const type of [HeadType.RECEIPT, HeadType.PEER_RECEIPT]) {
    const mallory = await login(t, tn, 'bob', `m${type}`);
    const forged = { kind: ReceiptKind.READ, peer: 'carol', seq: 5, msgId: 5 };
    mallory.send(type === HeadType.RECEIPT ? { type, sessionId: mallory.sessionId, receipt: forged } : { type, sessionId: mallory.sessionId, peerReceipt: { uid: 'alice', receipt: forged } });
    t.equal((await mallory.nextClosing()).code, 'SB_ERR_UNKNOWN_TYPE', `type ${type} refused`);
    await mallory.waitClosed();
  }
  t.same(await receiptsOf(alice), [], 'nothing reached alice');
  const raw = await connect(t, tn.port);
  raw.send({ type: HeadType.RECEIPT, receipt: { kind: 1, peer: 'x' } });
  t.equal((await raw.nextClosing()).code, 'SB_ERR_UNKNOWN_TYPE', 'before login too');
});
