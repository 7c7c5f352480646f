// A resend found stored (a duplicate) nudges its recipient's sessions (handlers/chat.ts). Any
// client can send duplicates to any user it has sent one message to, at its message rate; and a
// live message that finds a nudge waiting is read, not written (delivery.ts). Unpaced, duplicates
// interleaved with the victim's live traffic turned each of those deliveries into an inbox read,
// one per duplicate per session. ResendNudges paces them per sending session: one nudge at once,
// then at most one per nudge interval. In process, on a (counting) memory inbox.

import t, { type Test } from 'tap';
import { MemoryInboxStore } from '../../src/inbox/memory-inbox-store.js';
import type { InboxRange } from '../../src/inbox/inbox-store.js';
import { contents, u64, type RawClient } from '../../testkit/raw-client.js';
import { startNode } from '../helpers/node.js';
import { connectLoggedIn } from '../helpers/raw-session.js';
import { until } from '../../testkit/wait.js';

/** Counts the reads of each user's inbox. */
class CountingInbox extends MemoryInboxStore {
  readonly reads = new Map<string, number>();

  override async range(uid: string, after: number, limit: number): Promise<InboxRange> {
    this.reads.set(uid, (this.reads.get(uid) ?? 0) + 1);
    return super.range(uid, after, limit);
  }
}

/** The worker's sweep interval (and nudge interval) with the default limits: 1 s. */
const SWEEP_MS = 1000;
const ROUNDS = 100;
const DEVICES = ['phone', 'tablet', 'desk'];

async function victimOnThreeDevices(t: Test, limits = {}) {
  const inbox = new CountingInbox();
  const tn = await startNode(t, limits, { inbox });
  const mallory = await connectLoggedIn(t, tn.port, 'mallory', tn.token('mallory'), 'm', { acks: true });
  const carol = await connectLoggedIn(t, tn.port, 'carol', tn.token('carol'));
  const bob: RawClient[] = [];
  for (const d of DEVICES) bob.push(await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), d, { acks: true }));
  // The one message whose msg_id mallory resends from now on.
  t.equal((await mallory.chatAndWait('bob', 'hello', { msgId: 1 })).messageResponse?.result, true);
  for (const device of bob) {
    t.same(contents(await device.deliveries(1)), ['hello']);
    device.ack(1);
    await device.roundTrip();
  }
  return { inbox, tn, mallory, carol, bob };
}

t.test("duplicates interleaved with a user's live traffic: an inbox read per duplicate per session, past the documented bound", async (t) => {
  const { inbox, mallory, carol, bob } = await victimOnThreeDevices(t);
  const before = inbox.reads.get('bob') ?? 0;
  const started = Date.now();
  for (let i = 1; i <= ROUNDS; i++) {
    const dup = (await mallory.chatAndWait('bob', 'hello', { msgId: 1 })).messageResponse!;
    if (!dup.duplicate || Number(u64(dup.seq)) !== 1) t.fail(`round ${i}: not answered as the duplicate of seq 1`);
    await carol.chatAndWait('bob', `live ${i}`);
  }
  for (const device of bob) {
    const got = await device.deliveries(ROUNDS, 5_000);
    t.same(contents(got), Array.from({ length: ROUNDS }, (_, i) => `live ${i + 1}`), 'every live message reaches every device, in order');
  }
  const elapsed = Date.now() - started;
  const reads = (inbox.reads.get('bob') ?? 0) - before;
  // Per session: one nudge read at once, then one per sweep (and one still pending).
  const bound = DEVICES.length * (2 + Math.ceil(elapsed / SWEEP_MS));
  t.ok(
    reads <= bound,
    `${ROUNDS} duplicates from one client (${ROUNDS} rate tokens) cost ${reads} reads of bob's inbox in ${elapsed} ms for ${DEVICES.length} sessions (documented: at most ${bound}); without the duplicates, live messages in order cost none`,
  );
});

t.test('control: the same live traffic without duplicates costs no read of the inbox', async (t) => {
  const { inbox, carol, bob } = await victimOnThreeDevices(t);
  const before = inbox.reads.get('bob') ?? 0;
  for (let i = 1; i <= ROUNDS; i++) await carol.chatAndWait('bob', `live ${i}`);
  for (const device of bob) t.equal((await device.deliveries(ROUNDS, 5_000)).length, ROUNDS);
  t.equal((inbox.reads.get('bob') ?? 0) - before, 0, 'written live, in order: no read');
});

t.test('a run of duplicates to one user: one nudge at once, the rest deferred to one after the nudge interval (in a cluster, one PEER_NUDGE per worker holding the user each)', async (t) => {
  const { tn, mallory } = await victimOnThreeDevices(t);
  // LocalRouter.nudge calls the worker's LocalPort once; ClusterMessageRouter.nudge does too, and
  // sends one PEER_NUDGE to each node holding the user's sessions: counting these counts both.
  const local = tn.node.server.local;
  const nudge = local.nudge.bind(local);
  let nudges = 0;
  local.nudge = (uids, groups) => {
    if (uids?.includes('bob')) nudges++;
    nudge(uids, groups);
  };
  const sequences = Array.from({ length: ROUNDS }, () => mallory.chat('bob', 'hello', { msgId: 1 }));
  let duplicates = 0;
  for (const sequence of sequences) if ((await mallory.response(sequence)).messageResponse?.duplicate) duplicates++;
  t.equal(duplicates, ROUNDS, 'all within the burst');
  t.equal(nudges, 1, `${ROUNDS} duplicates, ${nudges} nudge at once`);
  await until('the deferred nudge', () => nudges === 2, 5_000);
  await new Promise((resolve) => setTimeout(resolve, 2_500));
  t.equal(nudges, 2, 'and one more after the interval, however many were deferred');
});

t.test('duplicates count against the message rate: refused beyond it, and a refused one nudges nobody', async (t) => {
  const { inbox, mallory } = await victimOnThreeDevices(t, { messageRate: 5, messageBurst: 5 });
  await new Promise((resolve) => setTimeout(resolve, 1_100));
  const before = inbox.reads.get('bob') ?? 0;
  const sequences = Array.from({ length: 50 }, () => mallory.chat('bob', 'hello', { msgId: 1 }));
  const answers = await Promise.all(sequences.map((s) => mallory.response(s)));
  const codes = answers.map((a) => a.messageResponse?.errorCode || (a.messageResponse?.duplicate ? 'duplicate' : 'other'));
  const accepted = codes.filter((c) => c === 'duplicate').length;
  t.ok(accepted <= 6, `${accepted} of 50 duplicates accepted at 5/s, burst 5`);
  t.equal(codes.filter((c) => c === 'SB_ERR_RATE_LIMITED').length, 50 - accepted, 'the rest refused with SB_ERR_RATE_LIMITED');
  await mallory.roundTrip();
  await new Promise((resolve) => setImmediate(resolve));
  t.ok((inbox.reads.get('bob') ?? 0) - before <= DEVICES.length, 'the refused ones caused no read');
});
