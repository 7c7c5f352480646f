// Inbox epochs at the wire, over real sockets with raw clients: what a login says and does with a
// position of another epoch or above the head, what a live session does when its inbox turns out
// to have another history, and deliveries that try to move a position past what the inbox holds
// (a forged PEER_DELIVER, played here through the worker's LocalPort as the peer acceptor would).

import t, { type Test } from 'tap';
import { startNode, type TestNode } from '../helpers/node.js';
import { contents, isDelivery, sendAll, seqs, u64, type RawClient, DEFAULT_TIMEOUT_MS } from '../../testkit/raw-client.js';
import { until } from '../../testkit/wait.js';
import { connectLoggedIn, nothingMoreDelivered } from '../helpers/raw-session.js';
import { MemoryInboxStore } from '../../src/inbox/memory-inbox-store.js';
import { SwitchboardError } from '../../src/errors.js';
import { decodeStoredRequest, encodeMessageRequest } from '../../src/protocol/codec.js';
import type { ImMessage } from '../../src/protocol/types.js';

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);
const epochOf = (client: RawClient) => Number(u64(client.loginResponse?.inboxEpoch));

/** Waits until the worker's sweep has run at least once more (a position it saves shows up). */
async function aSweep(tn: TestNode, alice: RawClient, probe: RawClient, uid: string): Promise<void> {
  const before = (await tn.node.inbox.range(uid, 0, 0)).head;
  await sendAll(alice, uid, ['tick']);
  await probe.next(isDelivery);
  probe.ack(before + 1);
  await until('a sweep', async () => (await tn.node.inbox.cursor(uid, 'probe')) === before + 1, DEFAULT_TIMEOUT_MS);
}

t.test('the login tells the epoch; the same epoch resumes after the position, another one is a reset', async (t) => {
  const tn = await startNode(t, {}, { inbox: new MemoryInboxStore({ maxMessages: 5 }) });
  const alice = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'));
  await sendAll(alice, 'bob', range(1, 8).map((i) => `m${i}`));
  const epoch = (await tn.node.inbox.range('bob', 0, 0)).epoch;

  const same = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'phone', { acks: true, lastSeq: 6, inboxEpoch: epoch });
  t.equal(epochOf(same), epoch, 'LoginResponse.inbox_epoch is the inbox epoch');
  t.match(same.loginResponse, { reset: false, gap: false });
  t.equal(u64(same.loginResponse?.syncFrom), '6');
  t.same(seqs(await same.deliveries(2)), [7, 8]);

  const other = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'tablet', { acks: true, lastSeq: 6, inboxEpoch: epoch + 1 });
  t.equal(other.loginResponse?.reset, true, 'a position of another epoch is void: reset');
  t.equal(other.loginResponse?.gap, false, 'not reported as a gap');
  t.equal(u64(other.loginResponse?.syncFrom), '3', 'the replay starts at the oldest retained message (4)');
  t.equal(epochOf(other), epoch, 'the inbox keeps its epoch: a stale device proves nothing about it');
  t.same(seqs(await other.deliveries(5)), range(4, 8));
  await nothingMoreDelivered(t, other, 'each once');

  const unknown = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'laptop', { acks: true, lastSeq: 6 });
  t.match(unknown.loginResponse, { reset: false }, 'no epoch given: a position within the head is taken as it is');
  t.equal(u64(unknown.loginResponse?.syncFrom), '6');
});

t.test('a position above the head without an epoch is a reset of that device only', async (t) => {
  const tn = await startNode(t);
  const alice = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'));
  await sendAll(alice, 'bob', ['a', 'b', 'c']);
  const phone = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'phone', { acks: true });
  await phone.deliveries(3);
  const epoch = epochOf(phone);

  const stale = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'tablet', { acks: true, lastSeq: 40 });
  t.equal(stale.loginResponse?.reset, true, 'above the head: reset');
  t.equal(u64(stale.loginResponse?.syncFrom), '0');
  t.equal(epochOf(stale), epoch, 'the epoch stays: the position may be from a history that ended');
  t.same(contents(await stale.deliveries(3)), ['a', 'b', 'c']);

  await sendAll(alice, 'bob', ['d']);
  t.same(seqs([await phone.next(isDelivery)]), [4], 'the other device goes on undisturbed');
});

t.test('a position above the head in the current epoch: the inbox gets a new epoch, and every device resyncs', async (t) => {
  const tn = await startNode(t, { ackTimeoutMs: 60_000 });
  const alice = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'));
  await sendAll(alice, 'bob', range(1, 5).map((i) => `m${i}`));
  const probe = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'probe', { acks: true });
  await probe.deliveries(5);
  probe.ack(5);
  const phone = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'phone', { acks: true });
  await phone.deliveries(5);
  const legacy = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'legacy');
  await legacy.deliveries(5);
  await aSweep(tn, alice, probe, 'bob');
  await phone.deliveries(1);
  await legacy.deliveries(1);
  t.equal(await tn.node.inbox.cursor('bob', 'legacy'), 6, 'the legacy device has a saved position');
  const epoch = epochOf(phone);

  // A device that was sent up to 9 in this epoch: the sequence went backwards under it.
  const ahead = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'ahead', { acks: true, lastSeq: 9, inboxEpoch: epoch });
  t.equal(ahead.loginResponse?.reset, true, 'reset');
  const next = epochOf(ahead);
  t.not(next, epoch, 'the inbox has a new epoch');
  t.equal((await tn.node.inbox.range('bob', 0, 0)).epoch, next);
  t.same(seqs(await ahead.deliveries(6)), range(1, 6), 'replayed from the oldest');
  t.equal(await tn.node.inbox.cursor('bob', 'legacy'), undefined, 'saved positions of the old epoch are forgotten');

  // The live sessions of the old epoch find out at their next delivery.
  await sendAll(alice, 'bob', ['m7']);
  t.equal((await phone.nextClosing()).code, 'SB_ERR_INBOX_RESET', 'the ack device is closed with SB_ERR_INBOX_RESET');
  t.equal((await legacy.nextClosing()).code, 'SB_ERR_INBOX_RESET', 'so is the legacy one');
  t.same(seqs(phone.takeDeliveries()), [], 'nothing of the new epoch was written to them');
  await phone.waitClosed();
  await legacy.waitClosed();
  t.same(seqs([await ahead.next(isDelivery)]), [7], 'the new-epoch session gets it');

  const phoneAgain = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'phone', { acks: true, lastSeq: 6, inboxEpoch: epoch });
  t.equal(phoneAgain.loginResponse?.reset, true, 'its next login reports the reset');
  t.same(seqs(await phoneAgain.deliveries(7)), range(1, 7));
  const legacyAgain = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'legacy');
  t.equal(u64(legacyAgain.loginResponse?.syncFrom), '0', 'a legacy device (no last_seq) starts over: its saved position was not kept');
  t.same(seqs(await legacyAgain.deliveries(7)), range(1, 7));
  t.equal(await tn.node.inbox.cursor('bob', 'phone'), undefined, 'the closed sessions saved nothing of the old epoch');
});

const forged = (content: string) => encodeMessageRequest({ from: 'mallory', to: 'bob', content });

t.test('a delivery that is not of the session epoch (a forged PEER_DELIVER) is not written and moves no position', async (t) => {
  const tn = await startNode(t, { ackTimeoutMs: 60_000 });
  const alice = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'));
  await sendAll(alice, 'bob', range(1, 5).map((i) => `m${i}`));
  const legacy = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'legacy');
  const ack = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'phone', { acks: true });
  await legacy.deliveries(5);
  await ack.deliveries(5);
  const epoch = epochOf(ack);

  for (const [i, e] of [0, epoch + 1, 0, 12345, 0, epoch - 1, 0].entries()) tn.node.server.local.deliver('bob', 6 + i, forged(`forged ${i}`), e);
  await nothingMoreDelivered(t, legacy, 'none of the 7 forged deliveries reaches the legacy device');
  await nothingMoreDelivered(t, ack, 'nor the ack device');

  const real = await sendAll(alice, 'bob', range(6, 10).map((i) => `m${i}`));
  t.same(real, range(6, 10));
  t.same(contents(await legacy.deliveries(5)), range(6, 10).map((i) => `m${i}`), 'the next 5 real messages are delivered');
  t.same(contents(await ack.deliveries(5)), range(6, 10).map((i) => `m${i}`));
  ack.ack(10);
  await until('the positions saved', async () => (await tn.node.inbox.cursor('bob', 'phone')) === 10 && (await tn.node.inbox.cursor('bob', 'legacy')) === 10, DEFAULT_TIMEOUT_MS);
});

t.test('a delivery beyond the head in the session epoch: no position is saved above the head, and the real messages come', async (t) => {
  const tn = await startNode(t, { ackTimeoutMs: 60_000 });
  const alice = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'));
  await sendAll(alice, 'bob', range(1, 5).map((i) => `m${i}`));
  const probe = await connectLoggedIn(t, tn.port, 'carol', tn.token('carol'), 'probe', { acks: true });
  const legacy = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'legacy');
  const ack = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'phone', { acks: true });
  await legacy.deliveries(5);
  await ack.deliveries(5);
  const epoch = epochOf(ack);

  // What a peer that knows the epoch could send: 7 deliveries after the head, as the next ones.
  for (let i = 0; i < 7; i++) tn.node.server.local.deliver('bob', 6 + i, forged(`forged ${i}`), epoch);
  t.same(seqs(await legacy.deliveries(7)), range(6, 12), 'written: they claim to be the next ones of this epoch');
  t.same(seqs(await ack.deliveries(7)), range(6, 12));
  ack.ack(12);
  await aSweep(tn, alice, probe, 'carol');
  t.equal(await tn.node.inbox.cursor('bob', 'phone'), 5, 'the acknowledged position is saved clamped to the head');
  t.equal(await tn.node.inbox.cursor('bob', 'legacy'), 5, 'so is the legacy one');

  // The next real messages reuse 6..10: the sessions find the head below their position.
  const real = await sendAll(alice, 'bob', range(6, 10).map((i) => `m${i}`));
  t.same(real, range(6, 10));
  t.equal((await ack.nextClosing()).code, 'SB_ERR_INBOX_RESET', 'the ack session is reset');
  t.equal((await legacy.nextClosing()).code, 'SB_ERR_INBOX_RESET', 'and the legacy one');
  const next = (await tn.node.inbox.range('bob', 0, 0)).epoch;
  t.not(next, epoch, 'a new epoch: no device resumes from a number the forged frames took');

  const ackAgain = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'phone', { acks: true, lastSeq: 12, inboxEpoch: epoch });
  t.equal(ackAgain.loginResponse?.reset, true);
  t.same(contents(await ackAgain.deliveries(10)), range(1, 10).map((i) => `m${i}`), 'the ack device gets the 5 real messages after its reset');
  const legacyAgain = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'legacy');
  t.same(contents(await legacyAgain.deliveries(10)), range(1, 10).map((i) => `m${i}`), 'and so does the legacy device, at a fresh login');
});

/** A message of alice's to bob, as a worker stores it (`msgId` its own). */
/** A node (with `inbox`, if given) where alice sent bob m1 to m5 and bob's ack device `phone` has them. */
async function bobHasFive(t: Test, inbox?: MemoryInboxStore) {
  const tn = await startNode(t, { ackTimeoutMs: 60_000 }, inbox ? { inbox } : {});
  const alice = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'));
  await sendAll(alice, 'bob', range(1, 5).map((i) => `m${i}`));
  const ack = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'phone', { acks: true });
  await ack.deliveries(5);
  return { tn, alice, ack, epoch: epochOf(ack) };
}

const fromAlice = (content: string, msgId: number) => encodeMessageRequest({ msgId, from: 'alice', to: 'bob', content, time: Date.now(), msgType: 1, storedAt: Date.now() });

t.test('a seq handed out again as another message, the head already past the position: every device is reset, none skips it', async (t) => {
  // `beyond`: the sessions were sent this many seqs the inbox then lost (a failover to a lagging
  // replica); `burst`: the new messages stored before the sessions hear of the first (appends of
  // one turn on another worker, in one script), their live copies coming after.
  for (const [name, beyond, burst] of [
    ['a rewind by one, the next message on this worker', 1, 0],
    ['a rewind by three, then a burst of five stored elsewhere', 3, 5],
  ] as const) {
    await t.test(name, async (t) => {
      const tn = await startNode(t, { ackTimeoutMs: 60_000 });
      const alice = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'));
      await sendAll(alice, 'bob', range(1, 5).map((i) => `m${i}`));
      const ack = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'phone', { acks: true });
      const legacy = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'legacy');
      await ack.deliveries(5);
      await legacy.deliveries(5);
      const epoch = epochOf(ack);

      // Written: they claim to be the next ones of the sessions' epoch.
      for (let i = 0; i < beyond; i++) tn.node.server.local.deliver('bob', 6 + i, fromAlice(`lost ${i}`, 1_000 + i), epoch);
      t.same(seqs(await ack.deliveries(beyond)), range(6, 5 + beyond), 'the ack device was sent them');
      await legacy.deliveries(beyond);

      // The next messages take those numbers again, and by the time a session reads, the head is not below its position.
      let last = 6;
      if (burst === 0) {
        t.same(await sendAll(alice, 'bob', ['m6']), [6]);
      } else {
        const bodies = range(6, 5 + burst).map((i) => fromAlice(`m${i}`, 2_000 + i));
        const stored = [];
        for (const [i, body] of bodies.entries()) stored.push(await tn.node.inbox.append({ uid: 'bob', sender: 'alice', msgId: String(2_006 + i), body, conversation: 'alice' }));
        t.same(stored.map((s) => s.seq), range(6, 5 + burst));
        for (const [i, body] of bodies.entries()) tn.node.server.local.deliver('bob', 6 + i, body, epoch);
        last = 5 + burst;
      }
      t.equal((await ack.nextClosing()).code, 'SB_ERR_INBOX_RESET', 'the ack session is closed with SB_ERR_INBOX_RESET');
      t.equal((await legacy.nextClosing()).code, 'SB_ERR_INBOX_RESET', 'so is the legacy one');
      t.not((await tn.node.inbox.range('bob', 0, 0)).epoch, epoch, 'the inbox has a new epoch');

      const again = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'phone', { acks: true, lastSeq: 5 + beyond, inboxEpoch: epoch });
      t.equal(again.loginResponse?.reset, true, 'its next login reports the reset');
      t.same(contents(await again.deliveries(last)), range(1, last).map((i) => `m${i}`), 'and replays every message the inbox holds');
      const legacyAgain = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'legacy');
      t.same(contents(await legacyAgain.deliveries(last)), range(1, last).map((i) => `m${i}`), 'the legacy device too');
    });
  }
});

t.test('the copies of the reused seqs dropped, a nudge, then the next number: the read finds the other message at the last seq sent, and resets', async (t) => {
  const { tn, ack, epoch } = await bobHasFive(t);
  for (let i = 0; i < 2; i++) tn.node.server.local.deliver('bob', 6 + i, fromAlice(`lost ${i}`, 1_000 + i), epoch);
  await ack.deliveries(2);

  // 6 and 7 again, and 8, stored on a worker whose lookup of bob's sessions failed for 6 and 7
  // (their copies dropped, the other workers nudged); then 8's copy comes, the number after 7.
  const bodies = range(6, 8).map((i) => fromAlice(`m${i}`, 2_000 + i));
  for (const [i, body] of bodies.entries()) await tn.node.inbox.append({ uid: 'bob', sender: 'alice', msgId: String(2_006 + i), body, conversation: 'alice' });
  tn.node.server.local.nudge(['bob']);
  tn.node.server.local.deliver('bob', 8, bodies[2]!, epoch);
  t.equal((await ack.nextClosing()).code, 'SB_ERR_INBOX_RESET', 'closed with SB_ERR_INBOX_RESET, not sent 8 as the next one');
  t.same(seqs(ack.takeDeliveries()), [], 'nothing more was written to it');
  t.not((await tn.node.inbox.range('bob', 0, 0)).epoch, epoch, 'the inbox has a new epoch');
  const again = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'phone', { acks: true, lastSeq: 7, inboxEpoch: epoch });
  t.same(contents(await again.deliveries(8)), range(1, 8).map((i) => `m${i}`), 'its next login replays every message');
});

/** A memory inbox whose next `failures` resetEpoch calls fail, as a Redis client that has not yet followed a failover. */
class FlakyReset extends MemoryInboxStore {
  failures = 0;
  override async resetEpoch(uid: string, from: number): Promise<number> {
    if (this.failures > 0) {
      this.failures--;
      throw new SwitchboardError('SB_ERR_STORE_UNAVAILABLE', 'inbox store unavailable: MOVED 4495 127.0.0.1:7001');
    }
    return super.resetEpoch(uid, from);
  }
}

t.test('the new epoch fails at first: tried again before the session is closed, so its next login is a reset', async (t) => {
  const inbox = new FlakyReset();
  const { tn, alice, ack, epoch } = await bobHasFive(t, inbox);
  tn.node.server.local.deliver('bob', 6, fromAlice('lost', 1_000), epoch);
  await ack.deliveries(1);

  inbox.failures = 2;
  t.same(await sendAll(alice, 'bob', ['m6']), [6]);
  t.equal((await ack.nextClosing()).code, 'SB_ERR_INBOX_RESET', 'closed with SB_ERR_INBOX_RESET');
  t.equal(inbox.failures, 0, 'after two failed attempts');
  t.not((await inbox.range('bob', 0, 0)).epoch, epoch, 'the third made the new epoch');
  // Without it the login would take position 6 as valid (the head is 6 again) and skip m6.
  const again = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'phone', { acks: true, lastSeq: 6, inboxEpoch: epoch });
  t.equal(again.loginResponse?.reset, true, 'its next login reports the reset');
  t.same(contents(await again.deliveries(6)), range(1, 6).map((i) => `m${i}`), 'and replays m6 with the rest');
});

t.test('a seq delivered again as the same message (a late copy, or a resend that found it stored) changes nothing', async (t) => {
  const { tn, alice, ack, epoch } = await bobHasFive(t);
  const stored = (await tn.node.inbox.range('bob', 3, 2)).messages;
  // What a late PEER_DELIVER carries: the stored body; what a resend that found the message stored
  // delivers: the same message (msg_id, from, to) with another stored_at and time.
  tn.node.server.local.deliver('bob', 4, stored[0]!.body, epoch);
  const resent = { ...decodeStoredRequest(stored[1]!.body), storedAt: Date.now() + 1_000, time: Date.now() + 1_000 };
  tn.node.server.local.deliver('bob', 5, encodeMessageRequest(resent), epoch);
  await nothingMoreDelivered(t, ack, 'nothing is written again');
  t.same(await sendAll(alice, 'bob', ['m6']), [6]);
  t.same(contents(await ack.deliveries(1)), ['m6'], 'the session goes on: no reset');
  t.equal((await tn.node.inbox.range('bob', 0, 0)).epoch, epoch, 'the epoch is the same');
});
