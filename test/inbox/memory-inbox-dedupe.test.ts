// MemoryInboxStore's dedupe checked against a reference model: per inbox, the (sender, msgId)
// entries in insertion order, forgotten from the front when they expire or when more than
// maxMessages are held. Only append()'s results are compared, so the internals may change.

import t from 'tap';
import fc from 'fast-check';
import { MemoryInboxStore } from '../../src/inbox/memory-inbox-store.js';
import type { AppendResult, InboxLimits } from '../../src/inbox/inbox-store.js';

const body = Buffer.from('x');

/** What a run exercised, so that a test can check its generators still reach every rule. */
const noStats = () => ({ appends: 0, duplicates: 0, expired: 0, evicted: 0, storedAgain: 0, lookAlikes: 0 });
type Stats = ReturnType<typeof noStats>;

function addStats(into: Stats, from: Stats): void {
  for (const k of Object.keys(into) as (keyof Stats)[]) into[k] += from[k];
}

interface Entry {
  sender: string;
  msgId: string;
  seq: number;
  expires: number;
}

/** The dedupe rules the slow, obvious way: msgIds compared as exact strings, a list per inbox. */
class DedupeModel {
  readonly #heads = new Map<string, number>();
  readonly #entries = new Map<string, Entry[]>();
  /** Every (uid, sender, msgId) ever stored, to count ids stored again once forgotten. */
  readonly #stored = new Set<string>();
  readonly stats = noStats();

  constructor(readonly limits: InboxLimits) {}

  append(uid: string, sender: string, msgId: string, now: number): Omit<AppendResult, 'epoch'> {
    this.stats.appends++;
    let entries = this.#entries.get(uid);
    if (!entries) this.#entries.set(uid, (entries = []));
    const dedupe = msgId !== '' && msgId !== '0';
    if (dedupe) {
      while (entries.length > 0 && entries[0]!.expires <= now) {
        entries.shift();
        this.stats.expired++;
      }
      const seen = entries.find((e) => e.sender === sender && e.msgId === msgId);
      if (seen) {
        this.stats.duplicates++;
        return { seq: seen.seq, duplicate: true };
      }
    }
    const seq = (this.#heads.get(uid) ?? 0) + 1;
    this.#heads.set(uid, seq);
    if (dedupe) {
      const key = JSON.stringify([uid, sender, msgId]);
      if (this.#stored.has(key)) this.stats.storedAgain++;
      this.#stored.add(key);
      // Stored beside a held id that is a different string but the same Number ('16' and
      // '016', or two ids above 2^53): the case a numeric key gets wrong.
      if (entries.some((e) => e.sender === sender && e.msgId !== msgId && Number(e.msgId) === Number(msgId))) this.stats.lookAlikes++;
      entries.push({ sender, msgId, seq, expires: now + this.limits.dedupeWindowMs });
      if (entries.length > this.limits.maxMessages) {
        entries.shift();
        this.stats.evicted++;
      }
    }
    return { seq, duplicate: false };
  }
}

interface Append {
  uid: string;
  sender: string;
  msgId: string;
  /** Clock advance before this append. */
  advance: number;
}

/**
 * Runs the appends against a fresh store and a fresh model; throws at the first difference.
 * What the model saw is added to `totals` either way.
 */
function compare(limits: InboxLimits, appends: Append[], totals: Stats): void {
  const model = new DedupeModel(limits);
  let now = 1_000_000;
  const store = new MemoryInboxStore(limits, () => now);
  try {
    for (const [i, { uid, sender, msgId, advance }] of appends.entries()) {
      now += advance;
      const got = store.append({ uid, sender, msgId, body });
      const want = model.append(uid, sender, msgId, now);
      if (got.seq !== want.seq || got.duplicate !== want.duplicate) {
        throw new Error(`append #${i} (${uid} ← ${sender} ${JSON.stringify(msgId)} at ${now}): store ${JSON.stringify(got)}, model ${JSON.stringify(want)}`);
      }
    }
  } finally {
    addStats(totals, model.stats);
  }
}

const UIDS = ['bob', 'carol', 'dave'];
const SENDERS = ['alice', 'erin', 'frank'];

/** Where a sender's increasing ids start: small, around the 15/16-digit key boundary, around 2^53, beyond 2^64. */
const idBase = fc.constantFrom(1n, 999_999_999_999_990n, 1_796_000_000_000_001n, 9_007_199_254_740_985n, 18_446_744_073_709_551_600n);

/** Ids any sender may use: small canonical decimals, long ones either side of 2^53, look-alikes, and the two that disable dedupe. */
const fixedId = fc.oneof(
  { weight: 4, arbitrary: fc.integer({ min: 1, max: 50 }).map(String) },
  { weight: 3, arbitrary: fc.constantFrom('9007199254740990', '9007199254740991', '9007199254740992', '9007199254740993', '9007199254740994', '1796000000000001', '1796000000000002', '999999999999999', '1000000000000000') },
  { weight: 4, arbitrary: fc.constantFrom('16', '016', '0016', '0x10', ' 16', '16 ', '+16', '1.6e1', '1e3', '1000', '00', '-0') },
  { weight: 2, arbitrary: fc.constantFrom('0', '') },
);

/**
 * What a sender sends next: its next increasing id (stride > 1 leaves gaps); a retry of one of
 * its recent or old sends, to the same recipient; an id below its newest, to any recipient (out
 * of order, or a retry to the wrong inbox); or a fixed id.
 */
type IdChoice = { kind: 'next'; stride: number } | { kind: 'retry'; by: number } | { kind: 'below'; by: number } | { kind: 'fixed'; msgId: string };

const recentOrOld = fc.oneof({ weight: 3, arbitrary: fc.integer({ min: 0, max: 4 }) }, { weight: 1, arbitrary: fc.nat({ max: 10_000 }) });

const idChoice: fc.Arbitrary<IdChoice> = fc.oneof(
  { weight: 6, arbitrary: fc.oneof({ weight: 4, arbitrary: fc.constant(1) }, { weight: 1, arbitrary: fc.integer({ min: 2, max: 4 }) }).map((stride) => ({ kind: 'next' as const, stride })) },
  { weight: 3, arbitrary: recentOrOld.map((by) => ({ kind: 'retry' as const, by })) },
  { weight: 1, arbitrary: recentOrOld.map((by) => ({ kind: 'below' as const, by })) },
  { weight: 2, arbitrary: fixedId.map((msgId) => ({ kind: 'fixed' as const, msgId })) },
);

/** Clock advances: often none (a burst within one millisecond), anything up to two windows. */
const advance = (windowMs: number) =>
  fc.oneof({ weight: 5, arbitrary: fc.constant(0) }, { weight: 3, arbitrary: fc.integer({ min: 1, max: 3 }) }, { weight: 1, arbitrary: fc.integer({ min: 0, max: 2 * windowMs }) });

/** Turns choices into concrete appends, each sender counting up from its own base (across all its recipients). */
function resolveIds(bases: bigint[], steps: { uid: number; sender: number; id: IdChoice; advance: number }[]): Append[] {
  const newest = bases.map((base) => base - 1n);
  const sent: Append[][] = bases.map(() => []);
  return steps.map(({ uid, sender, id, advance }) => {
    const history = sent[sender]!;
    let append: Append;
    if (id.kind === 'retry' && history.length > 0) append = { ...history[Math.max(0, history.length - 1 - id.by)]!, advance };
    else {
      let msgId: string;
      if (id.kind === 'fixed') msgId = id.msgId;
      else if (id.kind === 'below') {
        const below = newest[sender]! - BigInt(id.by);
        msgId = String(below < bases[sender]! ? bases[sender]! : below);
      } else msgId = String((newest[sender]! += BigInt(id.kind === 'next' ? id.stride : 1))); // a retry with nothing sent yet sends the next id
      append = { uid: UIDS[uid]!, sender: SENDERS[sender]!, msgId, advance };
    }
    history.push(append);
    return append;
  });
}

t.test('append matches the model: several inboxes and senders, tight caps, expiring windows', async (t) => {
  const scenario = fc
    .record({
      maxMessages: fc.integer({ min: 1, max: 8 }),
      dedupeWindowMs: fc.integer({ min: 1, max: 50 }),
      // Message retention by age is independent of dedupe: vary it so pruning happens too.
      maxAgeMs: fc.integer({ min: 1, max: 200 }),
    })
    .chain((limits) =>
      fc.record({
        limits: fc.constant(limits),
        bases: fc.tuple(idBase, idBase, idBase),
        steps: fc.array(
          fc.record({
            uid: fc.oneof({ weight: 3, arbitrary: fc.constant(0) }, { weight: 2, arbitrary: fc.integer({ min: 1, max: UIDS.length - 1 }) }),
            sender: fc.integer({ min: 0, max: SENDERS.length - 1 }),
            id: idChoice,
            advance: advance(limits.dedupeWindowMs),
          }),
          // size 'max': lengths across the whole range, not fast-check's default short arrays.
          { minLength: 1, maxLength: 150, size: 'max' },
        ),
      }),
    );
  const totals = noStats();
  fc.assert(
    fc.property(scenario, ({ limits, bases, steps }) => {
      compare(limits, resolveIds(bases, steps), totals);
    }),
    { numRuns: 1500 },
  );
  // The generators must keep reaching every rule, or the property above proves little.
  t.ok(totals.duplicates > 1000, `${totals.duplicates} duplicates in ${totals.appends} appends`);
  t.ok(totals.expired > 1000, `${totals.expired} entries expired`);
  t.ok(totals.evicted > 1000, `${totals.evicted} entries evicted by the cap`);
  t.ok(totals.storedAgain > 1000, `${totals.storedAgain} forgotten ids stored again`);
  t.ok(totals.lookAlikes > 500, `${totals.lookAlikes} ids stored beside a numeric look-alike`);
});

t.test('append matches the model over a long run of increasing ids with retries, recent and old', async (t) => {
  const scenario = fc
    .record({
      maxMessages: fc.integer({ min: 1, max: 300 }),
      dedupeWindowMs: fc.integer({ min: 1, max: 2_000 }),
      base: idBase,
    })
    .chain(({ maxMessages, dedupeWindowMs, base }) =>
      fc.record({
        limits: fc.constant({ maxMessages, dedupeWindowMs, maxAgeMs: dedupeWindowMs }),
        base: fc.constant(base),
        steps: fc.array(
          fc.record({
            // null: the next id; otherwise how far back from the newest a retried id is.
            back: fc.oneof({ weight: 20, arbitrary: fc.constant(null) }, { weight: 2, arbitrary: fc.integer({ min: 0, max: 5 }) }, { weight: 1, arbitrary: fc.nat({ max: 5_000 }) }),
            // Mostly a steady trickle, so that windows hold more than the cap; now and then a jump.
            advance: fc.oneof({ weight: 100, arbitrary: fc.integer({ min: 0, max: 2 }) }, { weight: 1, arbitrary: fc.integer({ min: 0, max: 2 * dedupeWindowMs }) }),
          }),
          // Not minLength: a failure should shrink to a short run, not stop at thousands of steps.
          { minLength: 1, maxLength: 5_000, size: 'max' },
        ),
      }),
    );
  const totals = noStats();
  fc.assert(
    fc.property(scenario, ({ limits, base, steps }) => {
      let newest = base - 1n;
      const appends = steps.map(({ back, advance }): Append => {
        if (back === null) return { uid: 'bob', sender: 'alice', msgId: String(++newest), advance };
        const id = newest - BigInt(back);
        return { uid: 'bob', sender: 'alice', msgId: String(id < base ? base : id), advance };
      });
      compare(limits, appends, totals);
    }),
    { numRuns: 40 },
  );
  t.ok(totals.duplicates > 1000, `${totals.duplicates} duplicates in ${totals.appends} appends`);
  t.ok(totals.expired > 1000, `${totals.expired} entries expired`);
  t.ok(totals.evicted > 1000, `${totals.evicted} entries evicted by the cap`);
  t.ok(totals.storedAgain > 500, `${totals.storedAgain} forgotten ids stored again`);
});

t.test('once a sender\'s entries have expired, a smaller id than before is stored fresh', async (t) => {
  let now = 0;
  const inbox = new MemoryInboxStore({ dedupeWindowMs: 100 }, () => now);
  const send = (msgId: string) => inbox.append({ uid: 'bob', sender: 'alice', msgId, body });
  t.match(send('10'), { seq: 1, duplicate: false });
  t.match(send('11'), { seq: 2, duplicate: false });
  t.match(send('12'), { seq: 3, duplicate: false });
  now = 99;
  t.match(send('12'), { seq: 3, duplicate: true }, 'still within the window');
  now = 100; // stored at 0 with a 100 ms window: expired exactly now
  t.match(send('5'), { seq: 4, duplicate: false }, 'a lower id is not taken for an old one');
  t.match(send('10'), { seq: 5, duplicate: false }, 'the expired id itself is new again');
  t.match(send('5'), { seq: 4, duplicate: true }, 'and the fresh entries dedupe');
});

t.test('an id evicted by the cap is stored again under a new seq', async (t) => {
  const inbox = new MemoryInboxStore({ maxMessages: 2 }, () => 0);
  const send = (msgId: string) => inbox.append({ uid: 'bob', sender: 'alice', msgId, body });
  t.match(send('1'), { seq: 1, duplicate: false });
  t.match(send('2'), { seq: 2, duplicate: false });
  t.match(send('3'), { seq: 3, duplicate: false }, 'evicts 1');
  t.match(send('1'), { seq: 4, duplicate: false }, '1 forgotten: stored again, evicting 2');
  t.match(send('3'), { seq: 3, duplicate: true });
  t.match(send('1'), { seq: 4, duplicate: true }, 'the retry dedupes against its new seq');
  t.match(send('2'), { seq: 5, duplicate: false }, '2 forgotten');
});

t.test('ids above 2^53 that differ only in the last digit are distinct', async (t) => {
  // As numbers both are 9007199254740992: a key that went through Number would merge them.
  const inbox = new MemoryInboxStore({}, () => 0);
  const send = (msgId: string) => inbox.append({ uid: 'bob', sender: 'alice', msgId, body });
  t.match(send('9007199254740992'), { seq: 1, duplicate: false });
  t.match(send('9007199254740993'), { seq: 2, duplicate: false });
  t.match(send('9007199254740993'), { seq: 2, duplicate: true });
  t.match(send('9007199254740992'), { seq: 1, duplicate: true });
});
