// Store-and-forward delivery over real sockets, with raw clients (what native clients are):
// messages to offline users are stored and replayed at login, the seam between replay and live
// delivery, acknowledgements and resends, legacy devices, dedupe, retention gaps, several devices.
//
// "Nothing more was delivered" is checked with a heartbeat round trip (RawClient.roundTrip):
// the server writes in order, so a delivery written before the echo has arrived by then.

import t, { type Test } from 'tap';
import { startNode } from '../helpers/node.js';
import { contents, isDelivery, isType, sendAll, seqOf, seqs, u64, RawClient, PRE_LOGIN_SEQUENCE, DEFAULT_TIMEOUT_MS } from '../../testkit/raw-client.js';
import { until } from '../../testkit/wait.js';
import { connect, connectLoggedIn, nothingMoreDelivered } from '../helpers/raw-session.js';
import { MemoryInboxStore } from '../../src/inbox/memory-inbox-store.js';
import type { InboxRange } from '../../src/inbox/inbox-store.js';
import { encodeMessage } from '../../src/protocol/codec.js';
import { DEFAULT_MAX_FRAME_LENGTH } from '../../src/protocol/frame.js';
import { HeadType, ResultCode, type ImMessage } from '../../src/protocol/types.js';

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

t.test('messages to an offline user are stored and replayed in order at login', async (t) => {
  const tn = await startNode(t);
  const alice = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'));
  const n = 6;

  for (let i = 1; i <= n; i++) {
    const r = await alice.chatAndWait('bob', `offline ${i}`);
    t.equal(r.messageResponse?.result, true, `message ${i} accepted although bob is offline`);
    t.equal(r.messageResponse?.code, ResultCode.SUCCESS);
    t.equal(u64(r.messageResponse?.seq), String(i), `message ${i} got seq ${i}`);
    t.equal(r.messageResponse?.duplicate, false);
  }
  const stored = await tn.node.inbox.range('bob', 0, 100);
  t.equal(stored.head, n, "stored in bob's inbox");
  t.same(
    stored.messages.map((m) => m.seq),
    range(1, n),
  );

  const bob = await connect(t, tn.port);
  const login = await bob.login('bob', tn.token('bob'), 'phone');
  t.equal(login.loginResponse?.result, true);
  t.equal(u64(login.loginResponse?.inboxHead), String(n), 'inbox_head is the last stored seq');
  t.equal(u64(login.loginResponse?.syncFrom), '0', 'a new device syncs from the beginning');
  t.equal(login.loginResponse?.gap, false);

  const replayed = await bob.deliveries(n);
  t.same(seqs(replayed), range(1, n), 'replayed in order, each with its seq');
  t.same(
    contents(replayed),
    range(1, n).map((i) => `offline ${i}`),
  );
  t.ok(
    replayed.every((m) => m.messageRequest?.from === 'alice' && m.messageRequest?.to === 'bob'),
    'from and to as sent',
  );
  t.same(
    bob.received.slice(0, n + 1).map((m) => m.type),
    [HeadType.LOGIN_RESPONSE, ...Array<number>(n).fill(HeadType.MESSAGE_REQUEST)],
    'the LoginResponse comes first, then the replay',
  );
  await nothingMoreDelivered(t, bob, 'each stored message is replayed once');

  // Live from here on.
  t.equal(u64((await alice.chatAndWait('bob', 'live')).messageResponse?.seq), String(n + 1));
  const live = await bob.next(isDelivery);
  t.equal(seqOf(live), n + 1);
  t.equal(live.messageRequest?.content, 'live');
});

type HoldWhen = (after: number, read: InboxRange, limit: number) => boolean;

/**
 * A MemoryInboxStore whose range() can be held: the read is taken at once, but its answer is
 * returned only when the test releases it, as a slow Redis reply would be. Messages stored
 * while it is held are not in the answer: the pump must find them anyway.
 */
class HeldInbox extends MemoryInboxStore {
  readonly #holds: { uid: string; when: HoldWhen; reached: () => void; released: Promise<void> }[] = [];

  /** Holds the first read of `uid`'s inbox for which `when` is true. */
  hold(uid: string, when: HoldWhen): { reached: Promise<void>; release: () => void } {
    let reached!: () => void;
    let release!: () => void;
    const reachedPromise = new Promise<void>((resolve) => (reached = resolve));
    const released = new Promise<void>((resolve) => (release = resolve));
    this.#holds.push({ uid, when, reached, released });
    return { reached: reachedPromise, release };
  }

  override async range(uid: string, after: number, limit: number): Promise<InboxRange> {
    const read = await super.range(uid, after, limit);
    const i = limit > 0 ? this.#holds.findIndex((h) => h.uid === uid && h.when(after, read, limit)) : -1;
    if (i >= 0) {
      const [hold] = this.#holds.splice(i, 1);
      hold!.reached();
      await hold!.released;
    }
    return read;
  }
}

t.test('the seam: live messages sent during a long replay are delivered once, in order, after it', async (t) => {
  const inbox = new HeldInbox();
  const tn = await startNode(t, { syncBatchSize: 7 }, { inbox });
  const alice = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'));
  const stored = 500;
  t.same(await sendAll(alice, 'bob', range(1, stored).map((i) => `m${i}`)), range(1, stored), 'stored as 1..500');

  // Two places where the replay is held while alice sends: in the middle, and at the short read
  // that reaches the head, after which the replay would end if it missed what came meanwhile.
  const middle = inbox.hold('bob', (after) => after >= 98);
  const end = inbox.hold('bob', (_, read, limit) => read.messages.length < limit);

  const bob = await connect(t, tn.port);
  const login = await bob.login('bob', tn.token('bob'), 'phone');
  t.equal(u64(login.loginResponse?.inboxHead), String(stored));
  t.equal(u64(login.loginResponse?.syncFrom), '0');

  let next = stored + 1;
  const live = async (count: number) => {
    const texts = range(next, next + count - 1).map((i) => `m${i}`);
    t.same(await sendAll(alice, 'bob', texts), range(next, next + count - 1), `live ${next}..${next + count - 1} stored in order`);
    next += count;
  };

  await middle.reached;
  await live(20);
  middle.release();
  await end.reached;
  await live(20);
  end.release();
  // The pump itself must pick up what was stored during that last read, not the periodic sweep
  // or the next live message: it does so at once, before the server handles bob's next frame.
  await bob.roundTrip();
  const written = bob.received.filter(isDelivery);
  t.equal(written.length, next - 1, 'everything stored so far was written before the echo');
  t.equal(seqOf(written.at(-1)!), next - 1);
  // And free-running: live messages racing the rest of the replay, sent in small bursts.
  for (let burst = 0; burst < 20; burst++) await live(5);
  const total = next - 1;

  const got = await bob.deliveries(total);
  t.same(seqs(got), range(1, total), `1..${total}: each exactly once, strictly increasing, no gap`);
  t.same(
    contents(got),
    range(1, total).map((i) => `m${i}`),
    'each seq carries its own message',
  );
  await nothingMoreDelivered(t, bob, 'no duplicate after the last one');
});

t.test('an ack-capable device', async (t) => {
  const tn = await startNode(t);
  const alice = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'));
  await sendAll(alice, 'bob', ['a1', 'a2', 'a3', 'a4', 'a5']);

  const bob = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'phone', { acks: true });
  t.equal(u64(bob.loginResponse?.syncFrom), '0');
  t.equal(u64(bob.loginResponse?.inboxHead), '5');
  t.same(seqs(await bob.deliveries(5)), [1, 2, 3, 4, 5]);
  t.equal(await tn.node.inbox.cursor('bob', 'phone'), undefined, 'receiving is not processing: no position yet');

  bob.ack(3);
  await until('the sweep to save the acked position', async () => (await tn.node.inbox.cursor('bob', 'phone')) === 3, DEFAULT_TIMEOUT_MS);

  // Dropped after receiving 4 and 5 but before acknowledging them.
  bob.destroy();
  await until('bob to be gone', () => tn.node.server.sessions.byUser('bob').length === 0, DEFAULT_TIMEOUT_MS);
  t.equal(await tn.node.inbox.cursor('bob', 'phone'), 3, 'the position is the acked one, not the received one');

  const again = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'phone', { acks: true });
  t.equal(u64(again.loginResponse?.syncFrom), '3', 'the replay starts after the acked position');
  const redelivered = await again.deliveries(2);
  t.same(seqs(redelivered), [4, 5], 'the unacknowledged messages are delivered again');
  t.same(contents(redelivered), ['a4', 'a5']);
  await nothingMoreDelivered(t, again, 'and nothing before them');

  // An ack beyond what was delivered only covers what was delivered.
  again.ack(1000);
  again.send({ type: HeadType.LOGOUT_REQUEST, sequence: again.nextSequence(), sessionId: again.sessionId });
  t.equal((await again.next(isType(HeadType.LOGOUT_RESPONSE))).type, HeadType.LOGOUT_RESPONSE);
  await until('bob to be gone', () => tn.node.server.sessions.byUser('bob').length === 0, DEFAULT_TIMEOUT_MS);
  t.equal(await tn.node.inbox.cursor('bob', 'phone'), 5, 'saved at once on logout, capped at the last delivered seq');

  await sendAll(alice, 'bob', ['a6', 'a7', 'a8']);
  const explicit = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'phone', { acks: true, lastSeq: 6 });
  t.equal(u64(explicit.loginResponse?.syncFrom), '6', 'last_seq given: the replay starts after it');
  t.equal(u64(explicit.loginResponse?.inboxHead), '8');
  t.same(seqs(await explicit.deliveries(2)), [7, 8]);
  await nothingMoreDelivered(t, explicit, 'not 6, nor anything before it');

  // last_seq 0 is a position too, and wins over the saved one (5): everything again.
  const fromZero = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'phone', { acks: true, lastSeq: 0 });
  t.equal(u64(fromZero.loginResponse?.syncFrom), '0');
  t.same(seqs(await fromZero.deliveries(8)), range(1, 8));
});

t.test('deliveries left unacknowledged are sent again after ackTimeoutMs', async (t) => {
  const tn = await startNode(t, { ackTimeoutMs: 300 });
  const alice = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'));
  const bob = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'phone', { acks: true });

  await sendAll(alice, 'bob', ['r1', 'r2', 'r3']);
  t.same(seqs(await bob.deliveries(3)), [1, 2, 3], 'delivered live');
  const resent = await bob.deliveries(3);
  t.same(seqs(resent), [1, 2, 3], 'never acknowledged: the same seqs again, on the same connection');
  t.same(contents(resent), ['r1', 'r2', 'r3']);
  t.equal(bob.isClosed, false);

  bob.ack(2);
  await bob.roundTrip(); // the ack is handled; a resend that raced it is dropped below
  bob.takeDeliveries();
  t.equal(seqOf(await bob.next(isDelivery)), 3, 'after acking 2, only 3 is resent');

  bob.ack(3);
  await bob.roundTrip();
  bob.takeDeliveries();
  await sendAll(alice, 'bob', ['r4']);
  t.equal(seqOf(await bob.next(isDelivery)), 4, 'the next live message');
  // Its resend proves a full ack timeout has passed: 3, acked, was not sent again meanwhile.
  t.equal(seqOf(await bob.next(isDelivery)), 4, 'the unacked 4 is resent, the acked 3 is not');

  bob.ack(4);
  await until('the position to be saved', async () => (await tn.node.inbox.cursor('bob', 'phone')) === 4, DEFAULT_TIMEOUT_MS);
});

t.test('a legacy device (no acks) is replayed from the last message written to it', async (t) => {
  const tn = await startNode(t);
  const alice = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'));
  const bob = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'phone');
  t.equal(u64(bob.loginResponse?.syncFrom), '0');

  await sendAll(alice, 'bob', ['l1', 'l2', 'l3']);
  const live = await bob.deliveries(3);
  t.same(seqs(live), [1, 2, 3], 'live deliveries carry their seq');
  t.same(contents(live), ['l1', 'l2', 'l3']);

  bob.send({ type: HeadType.LOGOUT_REQUEST, sequence: bob.nextSequence(), sessionId: bob.sessionId });
  await bob.next(isType(HeadType.LOGOUT_RESPONSE));
  await until('bob to be gone', () => tn.node.server.sessions.byUser('bob').length === 0, DEFAULT_TIMEOUT_MS);
  t.equal(await tn.node.inbox.cursor('bob', 'phone'), 3, 'the position written to the device is saved on logout');

  await sendAll(alice, 'bob', ['l4', 'l5']);
  const again = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'phone');
  t.equal(u64(again.loginResponse?.syncFrom), '3');
  t.equal(u64(again.loginResponse?.inboxHead), '5');
  const replayed = await again.deliveries(2);
  t.same(seqs(replayed), [4, 5], 'only what was stored while it was away');
  t.same(contents(replayed), ['l4', 'l5']);
  await nothingMoreDelivered(t, again, 'nothing it had already been sent');

  // Between sweeps a legacy position is saved too, while the device stays connected.
  await sendAll(alice, 'bob', ['l6']);
  t.equal(seqOf(await again.next(isDelivery)), 6);
  await until('the sweep to save the position', async () => (await tn.node.inbox.cursor('bob', 'phone')) === 6, DEFAULT_TIMEOUT_MS);
});

t.test('a repeated msg_id is stored and delivered once', async (t) => {
  const tn = await startNode(t);
  // Senders that declared acks speak the extensions: their msg_id is a dedupe key.
  const alice = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'), 'dev-1', { acks: true });
  const carol = await connectLoggedIn(t, tn.port, 'carol', tn.token('carol'), 'dev-1', { acks: true });
  const bob = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'));

  // The same message three times in one burst, as a client retrying after a lost response.
  const sequences = [1, 2, 3].map(() => alice.chat('bob', 'once only', { msgId: 777 }));
  const responses = await Promise.all(sequences.map((s) => alice.response(s)));
  t.same(
    responses.map((r) => [r.messageResponse?.result, u64(r.messageResponse?.seq), r.messageResponse?.duplicate]),
    [
      [true, '1', false],
      [true, '1', true],
      [true, '1', true],
    ],
    'three responses, one seq, the first not a duplicate and the others duplicates',
  );
  const stored = await tn.node.inbox.range('bob', 0, 100);
  t.equal(stored.head, 1);
  t.equal(stored.messages.length, 1, 'stored once');
  const delivered = await bob.next(isDelivery);
  t.equal(seqOf(delivered), 1);
  t.equal(u64(delivered.messageRequest?.msgId), '777');
  await nothingMoreDelivered(t, bob, 'delivered once');

  // The same msg_id from another sender is another message.
  const fromCarol = await carol.chatAndWait('bob', 'same id, other sender', { msgId: 777 });
  t.same([u64(fromCarol.messageResponse?.seq), fromCarol.messageResponse?.duplicate], ['2', false], 'dedupe is per sender');
  t.equal(seqOf(await bob.next(isDelivery)), 2);

  // msg_id 0 means "no id": never deduplicated.
  const zeros = await Promise.all([1, 2].map(() => alice.response(alice.chat('bob', 'no id', { msgId: 0 }))));
  t.same(
    zeros.map((r) => [u64(r.messageResponse?.seq), r.messageResponse?.duplicate]),
    [
      ['3', false],
      ['4', false],
    ],
    'msg_id 0 twice: two messages',
  );
  t.same(seqs(await bob.deliveries(2)), [3, 4]);
  t.equal((await tn.node.inbox.range('bob', 0, 100)).messages.length, 4);

  // A duplicate of a message bob has not received yet is not delivered a second time either.
  bob.destroy();
  await until('bob to be gone', () => tn.node.server.sessions.byUser('bob').length === 0, DEFAULT_TIMEOUT_MS);
  const offlineTwice = await Promise.all([1, 2].map(() => alice.response(alice.chat('bob', 'while away', { msgId: 900 }))));
  t.same(
    offlineTwice.map((r) => [u64(r.messageResponse?.seq), r.messageResponse?.duplicate]),
    [
      ['5', false],
      ['5', true],
    ],
  );
  const back = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'other', { lastSeq: 4 });
  t.same(seqs(await back.deliveries(1)), [5]);
  await nothingMoreDelivered(t, back, 'the offline duplicate is replayed once');

  // An original client (no acks) may reuse ids: its messages are never deduplicated.
  const legacy = await connectLoggedIn(t, tn.port, 'dave', tn.token('dave'));
  const repeated = await Promise.all([1, 2].map(() => legacy.response(legacy.chat('bob', 'legacy', { msgId: 5 }))));
  t.same(
    repeated.map((r) => [u64(r.messageResponse?.seq), r.messageResponse?.duplicate]),
    [
      ['6', false],
      ['7', false],
    ],
    'a legacy sender repeating msg_id 5: two messages',
  );
  t.same(seqs(await back.deliveries(2)), [6, 7]);
});

t.test('a position older than the retained messages is reported as a gap', async (t) => {
  const tn = await startNode(t, {}, { inbox: new MemoryInboxStore({ maxMessages: 5 }) });
  const alice = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'));
  t.same(await sendAll(alice, 'bob', range(1, 12).map((i) => `g${i}`)), range(1, 12));

  const bob = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'phone', { acks: true, lastSeq: 2 });
  t.equal(bob.loginResponse?.gap, true, '3..7 were pruned: a gap');
  t.equal(u64(bob.loginResponse?.syncFrom), '7', 'the replay starts at the oldest retained message');
  t.equal(u64(bob.loginResponse?.inboxHead), '12');
  const replayed = await bob.deliveries(5);
  t.same(seqs(replayed), range(8, 12));
  t.same(
    contents(replayed),
    range(8, 12).map((i) => `g${i}`),
  );
  await nothingMoreDelivered(t, bob, 'nothing else');

  // A position inside the retained window is no gap.
  const tablet = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'tablet', { acks: true, lastSeq: 9 });
  t.equal(tablet.loginResponse?.gap, false);
  t.equal(u64(tablet.loginResponse?.syncFrom), '9');
  t.same(seqs(await tablet.deliveries(3)), [10, 11, 12]);
  await tablet.roundTrip();
  tablet.ack(12);
  await tablet.roundTrip();
  tablet.destroy();
  await tablet.closed;

  // PROTOCOL.md §6: a device the server has never seen starts from 0, so it is told of the gap too.
  const fresh = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'new-laptop', { acks: true });
  t.equal(fresh.loginResponse?.gap, true, 'a brand-new device: gap=true once old messages were pruned');
  t.equal(u64(fresh.loginResponse?.syncFrom), '7');
  // last_seq 0 written out is "from the beginning"; left out, the position the server saved.
  await until('the tablet to be logged out', () => tn.node.server.sessions.find('bob', 'tablet') === undefined, DEFAULT_TIMEOUT_MS);
  const zero = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'tablet', { acks: true, lastSeq: 0 });
  t.same([zero.loginResponse?.gap, u64(zero.loginResponse?.syncFrom)], [true, '7'], 'last_seq 0: from the beginning, a gap');
  zero.destroy();
  await zero.closed;
  await until('the tablet to be logged out', () => tn.node.server.sessions.find('bob', 'tablet') === undefined, DEFAULT_TIMEOUT_MS);
  const absent = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'tablet', { acks: true });
  t.same([absent.loginResponse?.gap, u64(absent.loginResponse?.syncFrom)], [false, '12'], 'no last_seq: the saved position (12)');
});

t.test("each of a user's devices syncs and acknowledges on its own", async (t) => {
  const tn = await startNode(t);
  const alice = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'));
  await sendAll(alice, 'bob', ['d1', 'd2', 'd3', 'd4']);

  const phone = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'phone', { acks: true });
  const tablet = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'tablet', { acks: true });
  t.same(seqs(await phone.deliveries(4)), [1, 2, 3, 4], 'the phone is replayed everything');
  t.same(seqs(await tablet.deliveries(4)), [1, 2, 3, 4], 'so is the tablet');

  await sendAll(alice, 'bob', ['d5']);
  t.equal(seqOf(await phone.next(isDelivery)), 5, 'live to the phone');
  t.equal(seqOf(await tablet.next(isDelivery)), 5, 'live to the tablet');

  phone.ack(5); // the tablet acknowledges nothing
  await phone.roundTrip();
  phone.destroy();
  tablet.destroy();
  await until('both devices to be gone', () => tn.node.server.sessions.byUser('bob').length === 0, DEFAULT_TIMEOUT_MS);
  t.equal(await tn.node.inbox.cursor('bob', 'phone'), 5, "the phone's position");
  t.equal(await tn.node.inbox.cursor('bob', 'tablet'), undefined, 'the tablet has none');

  await sendAll(alice, 'bob', ['d6']);
  const phone2 = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'phone', { acks: true });
  const tablet2 = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'tablet', { acks: true });
  t.equal(u64(phone2.loginResponse?.syncFrom), '5');
  t.equal(u64(tablet2.loginResponse?.syncFrom), '0');
  t.same(seqs(await phone2.deliveries(1)), [6], 'the phone gets only what is new to it');
  t.same(seqs(await tablet2.deliveries(6)), range(1, 6), 'the tablet gets everything again');
  await nothingMoreDelivered(t, phone2, 'the phone: nothing more');
});

t.test('a burst of 1000 messages keeps per-sender order and dense sequences', async (t) => {
  const tn = await startNode(t);
  const alice = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'));
  const bob = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'));
  const count = 1000;
  const texts = range(1, count).map((i) => `b${i}`);

  t.same(await sendAll(alice, 'bob', texts), range(1, count), 'responses in request order, seqs 1..1000');
  const got = await bob.deliveries(count);
  t.same(seqs(got), range(1, count));
  t.same(contents(got), texts, 'in the order alice sent them');
  await nothingMoreDelivered(t, bob, 'each once');
});

t.test('a message whose delivery would exceed maxFrameLength is refused with SB_ERR_MESSAGE_TOO_LARGE', async (t) => {
  const tn = await startNode(t);
  const alice = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'));
  const bob = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'));

  // A request frame of exactly the maximum length, which the server must accept as a frame: the
  // delivery adds seq (twice) and so cannot fit.
  const sized = (length: number): ImMessage => ({
    type: HeadType.MESSAGE_REQUEST,
    sequence: 1,
    messageRequest: { msgId: 1, from: 'alice', to: 'bob', content: 'x'.repeat(length) },
  });
  let length = DEFAULT_MAX_FRAME_LENGTH - 100;
  length += DEFAULT_MAX_FRAME_LENGTH - encodeMessage(sized(length)).length;
  t.equal(encodeMessage(sized(length)).length, DEFAULT_MAX_FRAME_LENGTH, 'the request frame is exactly at the limit');

  alice.send(sized(length));
  const refused = await alice.response(1);
  t.equal(refused.messageResponse?.result, false);
  t.equal(refused.messageResponse?.code, ResultCode.BAD_REQUEST);
  t.equal(refused.messageResponse?.errorCode, 'SB_ERR_MESSAGE_TOO_LARGE');
  t.equal(alice.isClosed, false, 'refused, not closed');
  t.equal((await tn.node.inbox.range('bob', 0, 10)).head, 0, 'nothing was stored');
  await nothingMoreDelivered(t, bob, 'nothing was delivered');

  // Comfortably smaller goes through whole.
  const fits = { ...sized(length - 200), sequence: 2 };
  alice.send(fits);
  const accepted = await alice.response(2);
  t.equal(accepted.messageResponse?.result, true);
  t.equal(u64(accepted.messageResponse?.seq), '1');
  const delivered = await bob.next(isDelivery);
  t.equal(delivered.messageRequest?.content, fits.messageRequest?.content);
});

t.test('the stored-request limit of PROTOCOL.md §5 with own copies: 65 466 bytes from alice on device dev-1 to bob (msg_id 1, no session_id in the request) are stored with her copy, one byte more is refused', async (t) => {
  const tn = await startNode(t);
  const alice = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice', 'dev-1'), 'dev-1');
  const bob = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'));
  const message = (sequence: number, length: number): ImMessage => ({ type: HeadType.MESSAGE_REQUEST, sequence, messageRequest: { msgId: 1, to: 'bob', content: 'x'.repeat(length) } });
  // The own copy is 3 + len("dev-1") bytes longer and is forwarded under "alice", 2 bytes longer than "bob": 10 bytes below 65 476.
  alice.send(message(1, 65_467));
  const refused = await alice.response(1);
  t.equal(refused.messageResponse?.errorCode, 'SB_ERR_MESSAGE_TOO_LARGE', 'one byte over: refused');
  t.equal((await tn.node.inbox.range('bob', 0, 10)).head, 0, 'nothing was stored for bob');
  t.equal((await tn.node.inbox.range('alice', 0, 10)).head, 0, 'nor for alice');
  alice.send(message(2, 65_466));
  const accepted = await alice.response(2);
  t.equal(accepted.messageResponse?.result, true, 'at the limit: stored');
  t.equal(u64(accepted.messageResponse?.ownSeq), '1', 'with its own copy');
  t.equal((await bob.next(isDelivery)).messageRequest?.content?.length, 65_466, 'and delivered whole');
});

t.test('the stored-request limit of PROTOCOL.md §5 without own copies: 65 476 bytes from alice to bob (msg_id 1, no session_id in the request) are delivered, one byte more is refused', async (t) => {
  const tn = await startNode(t, { ownCopies: false });
  const alice = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'));
  const bob = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'));
  // The message of the worked example: msg_id 1, to "bob", content; no time, no other field.
  const message = (sequence: number, length: number): ImMessage => ({ type: HeadType.MESSAGE_REQUEST, sequence, messageRequest: { msgId: 1, to: 'bob', content: 'x'.repeat(length) } });

  alice.send(message(1, 65_477));
  const refused = await alice.response(1);
  t.equal(refused.messageResponse?.errorCode, 'SB_ERR_MESSAGE_TOO_LARGE', 'one byte over: refused');
  t.equal(refused.messageResponse?.code, ResultCode.BAD_REQUEST);
  t.equal((await tn.node.inbox.range('bob', 0, 10)).head, 0, 'nothing was stored');

  alice.send(message(2, 65_476));
  const accepted = await alice.response(2);
  t.equal(accepted.messageResponse?.result, true, 'at the limit: stored');
  const delivered = await bob.next(isDelivery);
  t.equal(delivered.messageRequest?.content?.length, 65_476, 'and delivered whole');
});

t.test('a MESSAGE_ACK before login closes with SB_ERR_NOT_LOGGED_IN', async (t) => {
  const tn = await startNode(t);
  const client = await connect(t, tn.port);
  client.send({ type: HeadType.MESSAGE_ACK, sequence: PRE_LOGIN_SEQUENCE, sessionId: '-1', ack: { seq: 1 } });
  t.equal((await client.nextClosing()).code, 'SB_ERR_NOT_LOGGED_IN');
  await client.waitClosed();
  t.equal(tn.node.server.sessions.size, 0);
});

t.test('a replay larger than maxOutboundBytes is paced by the socket, not dropped as a slow consumer', async (t) => {
  // Each batch of 100 stored 16 KiB messages is 1.6 MB: written in one go it would overrun the
  // 256 KiB output limit before the socket could take any of it.
  const tn = await startNode(t, { maxOutboundBytes: 256 * 1024 });
  const alice = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'));
  const count = 120;
  const content = 'z'.repeat(16 * 1024);
  for (let i = 0; i < count; i += 10) await sendAll(alice, 'bob', Array<string>(10).fill(content));

  const bob = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'phone');
  const got = await bob.deliveries(count, 10_000);
  t.same(seqs(got), range(1, count), 'the whole replay arrives');
  t.equal(bob.closing, undefined);
  t.equal(tn.node.server.sessions.byUser('bob').length, 1, 'still connected');
});

t.test('a legacy device dropped during a replay keeps the position of what was really written', async (t) => {
  // The very first replayed message overruns the (tiny) output limit: the device is dropped
  // before anything reached it, so none of the batch may count as sent.
  const tn = await startNode(t, { maxOutboundBytes: 1024 });
  const alice = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'));
  await sendAll(alice, 'bob', range(1, 10).map(() => 'w'.repeat(2048)));

  const bob = await connect(t, tn.port);
  bob.send(RawClient.loginMessage('bob', tn.token('bob'), 'phone'));
  await bob.waitClosed();
  await until('bob to be gone', () => tn.node.server.sessions.byUser('bob').length === 0, DEFAULT_TIMEOUT_MS);

  // A sweep that saves positions has run once carol's position shows up.
  const carol = await connectLoggedIn(t, tn.port, 'carol', tn.token('carol'), 'phone');
  await sendAll(alice, 'carol', ['tick']);
  await carol.next(isDelivery);
  await until('a sweep', async () => (await tn.node.inbox.cursor('carol', 'phone')) === 1, DEFAULT_TIMEOUT_MS);
  t.equal(await tn.node.inbox.cursor('bob', 'phone'), undefined, 'no message counts as delivered to bob');
});
