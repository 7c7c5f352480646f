// PEER_NUDGE coalescing, through the worker's LocalPort as the peer acceptor calls it, counting
// the reads of a real (memory) inbox store: a flood of nudges costs a read per session per sweep
// interval at most, and a nudge that arrives while a read is under way is not lost.

import t, { type Test } from 'tap';
import { startNode } from '../helpers/node.js';
import { isDelivery, seqOf, type RawClient, DEFAULT_TIMEOUT_MS } from '../../testkit/raw-client.js';
import { until } from '../../testkit/wait.js';
import { connectLoggedIn } from '../helpers/raw-client.js';
import { MemoryInboxStore } from '../../src/inbox/memory-inbox-store.js';
import type { InboxRange } from '../../src/inbox/inbox-store.js';
import { encodeMessageRequest } from '../../src/protocol/codec.js';

/** Counts the reads of each user's inbox; can hold the next read of a user until released. */
class CountingInbox extends MemoryInboxStore {
  readonly reads = new Map<string, number>();
  #hold: { uid: string; reached: () => void; released: Promise<void> } | undefined;

  hold(uid: string): { reached: Promise<void>; release: () => void } {
    let reached!: () => void;
    let release!: () => void;
    const reachedPromise = new Promise<void>((resolve) => (reached = resolve));
    this.#hold = { uid, reached, released: new Promise<void>((resolve) => (release = resolve)) };
    return { reached: reachedPromise, release };
  }

  override async range(uid: string, after: number, limit: number): Promise<InboxRange> {
    this.reads.set(uid, (this.reads.get(uid) ?? 0) + 1);
    const read = await super.range(uid, after, limit);
    const hold = this.#hold;
    if (hold && hold.uid === uid && limit > 0) {
      this.#hold = undefined;
      hold.reached();
      await hold.released;
    }
    return read;
  }
}

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));
/** The worker's sweep interval with these limits (every timeout ≥ 4 s): 1 s. */
const SWEEP_MS = 1000;

async function bobOnTwoDevices(t: Test) {
  const inbox = new CountingInbox();
  const tn = await startNode(t, {}, { inbox });
  const alice = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'));
  const r = await alice.chatAndWait('bob', 'one');
  t.equal(r.messageResponse?.result, true);
  const phone = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'phone', { acks: true });
  const legacy = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'legacy');
  await phone.deliveries(1);
  await legacy.deliveries(1);
  // Let the logins' own reads settle before counting.
  await phone.roundTrip();
  await legacy.roundTrip();
  return { inbox, tn, alice, phone, legacy };
}

t.test('200 nudges in one tick: one inbox read per session', async (t) => {
  const { inbox, tn, phone } = await bobOnTwoDevices(t);
  const before = inbox.reads.get('bob') ?? 0;
  for (let i = 0; i < 200; i++) tn.node.server.local.nudge(['bob']);
  for (let i = 0; i < 200; i++) tn.node.server.local.nudge();
  await nextTurn();
  await phone.roundTrip();
  t.equal((inbox.reads.get('bob') ?? 0) - before, 2, '400 nudges, 2 sessions: 2 reads');
});

t.test('200 nudges one per turn of the event loop: at most one read per session per sweep interval', async (t) => {
  const { inbox, tn, phone } = await bobOnTwoDevices(t);
  const before = inbox.reads.get('bob') ?? 0;
  const started = Date.now();
  for (let i = 0; i < 200; i++) {
    tn.node.server.local.nudge(['bob']);
    await nextTurn();
  }
  const elapsed = Date.now() - started;
  await phone.roundTrip();
  const reads = (inbox.reads.get('bob') ?? 0) - before;
  // Per session: one read at once, then one per sweep that ran meanwhile (plus one still pending).
  const bound = 2 * (2 + Math.ceil(elapsed / SWEEP_MS));
  t.ok(reads <= bound, `${reads} reads for 200 nudges over ${elapsed} ms (at most ${bound})`);
  await until('the last nudge served by a sweep', () => tn.node.server.sessions.byUser('bob').every((s) => !s.nudgePending), 5_000);
});

t.test('a nudge during a read makes the session read once more, and what it announced is delivered', async (t) => {
  const { inbox, tn, phone, legacy } = await bobOnTwoDevices(t);
  const held = inbox.hold('bob');
  tn.node.server.local.nudge(['bob']);
  await held.reached;
  // Meanwhile another worker stored a message and its delivery was lost: only nudges announce it.
  const stored = inbox.append({ uid: 'bob', sender: 'carol', msgId: '0', body: encodeMessageRequest({ from: 'carol', to: 'bob', content: 'while reading' }) });
  const before = inbox.reads.get('bob') ?? 0;
  for (let i = 0; i < 50; i++) {
    tn.node.server.local.nudge(['bob']);
    await nextTurn();
  }
  held.release();
  const got = (client: RawClient) => client.next(isDelivery, 5_000);
  t.equal(seqOf(await got(phone)), stored.seq, 'the ack device gets the message the nudges announced');
  t.equal(seqOf(await got(legacy)), stored.seq, 'so does the legacy one');
  await phone.roundTrip();
  t.ok((inbox.reads.get('bob') ?? 0) - before <= 4, `50 nudges during a read: ${(inbox.reads.get('bob') ?? 0) - before} more reads (one per session, one more at most while the sweep catches up)`);
});
