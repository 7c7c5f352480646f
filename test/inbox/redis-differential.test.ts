// The Redis inbox against the memory inbox, operation by operation (the conformance
// suites' contract is "the same answers"). Random turns of appends (bursts of runs across chunk
// boundaries, own copies, resends of recent ids, ids out of order and past 2^53, no id), read
// marks, rewrites and a clock that ages messages out; after each step every read of both stores
// is compared. Small limits so that the count bound (reads and the every-16-seqs trim), the
// index compaction (2 × maxMessages records) and age pruning all happen. Seeded: a failure
// prints its seed and step.

import t, { type Test } from 'tap';
import { RedisInboxStore } from '../../src/inbox/redis-inbox-store.js';
import { MemoryInboxStore } from '../../src/inbox/memory-inbox-store.js';
import type { AppendRequest, InboxStore } from '../../src/inbox/inbox-store.js';
import { startRedis } from '../helpers/redis.js';
import { rng } from '../helpers/rng.js';

const redis = await startRedis(t);

const USERS = ['bob', 'alice', 'carol'];
const strip = (m: { seq: number; storedAt: number; body: Buffer } | undefined) => (m ? `${m.seq}@${m.storedAt}:${m.body.toString()}` : null);

async function snapshot(inbox: InboxStore, random: () => number) {
  const out: Record<string, unknown> = {};
  for (const uid of USERS) {
    const all = await inbox.range(uid, 0, 1000);
    out[`${uid} range`] = { head: all.head, oldest: all.oldest, messages: all.messages.map(strip) };
    const after = Math.floor(random() * (all.head + 2));
    const limit = 1 + Math.floor(random() * 40);
    out[`${uid} range(${after},${limit})`] = (await inbox.range(uid, after, limit)).messages.map(strip);
    const list = [];
    let before = 0;
    for (let page = 0; page < 10; page++) {
      const p = await inbox.conversations(uid, before, 2);
      list.push(...p.conversations.map((c) => ({ conversation: c.conversation, lastSeq: c.lastSeq, lastAt: c.lastAt, readSeq: c.readSeq, unread: c.unread, last: strip(c.last) })));
      if (!p.more) break;
      before = p.conversations[p.conversations.length - 1]!.lastSeq;
    }
    out[`${uid} list`] = list;
    for (const peer of USERS) {
      const pages = [];
      let hb = 0;
      const hl = 1 + Math.floor(random() * 25);
      for (let page = 0; page < 20; page++) {
        const h = await inbox.history(uid, peer, hb, hl);
        pages.push({ oldest: h.oldest, more: h.more, pruned: h.pruned, messages: h.messages.map(strip) });
        if (!h.more || h.messages.length === 0) break;
        hb = h.messages[0]!.seq;
      }
      out[`${uid} history ${peer} by ${hl}`] = pages;
    }
  }
  return out;
}

async function run(t: Test, seed: number, steps: number, limits: { maxMessages: number; maxAgeMs: number; dedupeWindowMs: number }) {
  const clock = { now: 1_700_000_000_000 };
  const memory = new MemoryInboxStore(limits, () => clock.now);
  const store = new RedisInboxStore({ url: redis.url, keyPrefix: `d${seed}:`, limits, now: () => clock.now });
  t.teardown(() => Promise.all([memory.close(), store.close()]));
  const random = rng(seed);
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(random() * xs.length)]!;
  // Per (sender, recipient): the next rising id, and ids below it never used (out of order).
  // Per inbox: its dedupe entries in order; a resend is of one of the last 10 (the memory
  // store remembers maxMessages entries per inbox, Redis 1 000 per sender: stay inside both).
  const next = new Map<string, number>();
  let low = 1_000_000;
  const entries = new Map<string, { sender: string; msgId: string; resendable: boolean }[]>();
  const note = (inbox: string, sender: string, msgId: string, resendable: boolean) => {
    if (msgId === '' || msgId === '0') return;
    const list = entries.get(inbox) ?? [];
    list.push({ sender, msgId, resendable });
    entries.set(inbox, list);
  };
  let text = 0;
  const idFor = (sender: string, to: string): { msgId: string; resend: boolean } => {
    const key = `${sender}>${to}`;
    const r = random();
    if (r < 0.12) {
      const list = (entries.get(to) ?? []).slice(-10).filter((e) => e.resendable && e.sender === sender);
      if (list.length > 0) return { msgId: pick(list).msgId, resend: true };
    }
    if (r < 0.17) return { msgId: random() < 0.5 ? '' : '0', resend: false };
    if (r < 0.25) return { msgId: String(low--), resend: false }; // below the highest: looked up, not found
    const n = (next.get(key) ?? 1_000_001 + Math.floor(random() * 3)) + 1 + (random() < 0.2 ? Math.floor(random() * 5) : 0);
    next.set(key, n);
    return { msgId: random() < 0.1 ? (2n ** 60n + BigInt(n)).toString() : String(n), resend: false };
  };
  for (let step = 0; step < steps; step++) {
    const what = random();
    const log: string[] = [];
    if (what < 0.6) {
      // One turn of appends.
      const n = 1 + Math.floor(random() * (random() < 0.2 ? 70 : 8));
      const memResults: unknown[] = [];
      const redisResults: Promise<unknown>[] = [];
      let from = pick(USERS);
      let to = pick(USERS.filter((u) => u !== from));
      for (let i = 0; i < n; i++) {
        if (random() < 0.3) {
          from = pick(USERS);
          to = pick(USERS);
        }
        const { msgId, resend } = idFor(from, to);
        const b = Buffer.from(`m${++text}`);
        const message: AppendRequest = { uid: to, sender: from, msgId, body: b, conversation: from, own: to === from };
        log.push(`${from}->${to} #${msgId}`);
        if (!resend) note(to, from, msgId, true);
        if (to !== from && !resend && random() < 0.7) {
          note(from, `${from}\0${to}`, msgId, false);
          const copy: AppendRequest = { uid: from, sender: `${from}\0${to}`, msgId, body: b, conversation: to, own: true };
          memResults.push(memory.appendPair(message, copy).map((r) => ({ seq: r.seq, duplicate: r.duplicate })));
          redisResults.push(store.appendPair(message, copy).then((rs) => rs.map((r) => ({ seq: r.seq, duplicate: r.duplicate }))));
        } else {
          const r = memory.append(message);
          memResults.push({ seq: r.seq, duplicate: r.duplicate });
          redisResults.push(store.append(message).then((r) => ({ seq: r.seq, duplicate: r.duplicate })));
        }
      }
      const got = await Promise.all(redisResults);
      if (JSON.stringify(got) !== JSON.stringify(memResults)) {
        const i = got.findIndex((g, k) => JSON.stringify(g) !== JSON.stringify(memResults[k]));
        t.comment(`first difference: append ${i} of the turn, ${log[i]}: Redis ${JSON.stringify(got[i])}, memory ${JSON.stringify(memResults[i])}`);
        t.same(got, memResults, `seed ${seed} step ${step}: append results (${log.join(', ')})`);
        return;
      }
    } else if (what < 0.72) {
      const uid = pick(USERS);
      const peer = pick(USERS);
      const head = (await memory.range(uid, 0, 0)).head;
      const seq = Math.floor(random() * (head + 3));
      const m = await memory.markRead(uid, peer, seq, Buffer.from(`read ${seq}`));
      const r = await store.markRead(uid, peer, seq, Buffer.from(`read ${seq}`));
      const shape = (x: typeof m) => ({ found: x.found, readSeq: x.readSeq, unread: x.unread, eventSeq: x.eventSeq });
      if (JSON.stringify(shape(r)) !== JSON.stringify(shape(m))) {
        t.same(shape(r), shape(m), `seed ${seed} step ${step}: markRead(${uid}, ${peer}, ${seq})`);
        return;
      }
    } else if (what < 0.8) {
      const uid = pick(USERS);
      const head = (await memory.range(uid, 0, 0)).head;
      const seq = 1 + Math.floor(random() * Math.max(1, head));
      const ev: AppendRequest = { uid, sender: uid, msgId: '', body: Buffer.from(`recall ${seq}`) };
      const m = await memory.rewrite(uid, seq, Buffer.from(`tomb ${seq}`), ev);
      const r = await store.rewrite(uid, seq, Buffer.from(`tomb ${seq}`), ev);
      const shape = (x: typeof m) => ({ found: x.found, rewritten: x.rewritten, changed: x.changed, eventSeq: x.eventSeq });
      if (JSON.stringify(shape(r)) !== JSON.stringify(shape(m))) {
        t.same(shape(r), shape(m), `seed ${seed} step ${step}: rewrite(${uid}, ${seq})`);
        return;
      }
    } else {
      clock.now += Math.floor(random() * limits.maxAgeMs * 0.4);
    }
    const probe = rng(seed * 1000 + step);
    const [a, b] = [await snapshot(memory, probe), await snapshot(store, rng(seed * 1000 + step))];
    for (const key of Object.keys(a)) {
      if (JSON.stringify(a[key]) !== JSON.stringify(b[key])) {
        t.same(b[key], a[key], `seed ${seed} step ${step}: ${key} (last step: ${log.join(', ') || 'not an append'})`);
        return;
      }
    }
  }
  t.pass(`seed ${seed}: ${steps} steps, every answer the same`);
}

// More with INBOX_DIFF_SEEDS=1,2,3,... and INBOX_DIFF_STEPS=N.
const SEEDS = (process.env.INBOX_DIFF_SEEDS ?? '1,2,3').split(',').map(Number);
for (const seed of SEEDS) {
  t.test(`seed ${seed}: small count bound`, (t) => run(t, seed, 120, { maxMessages: 40, maxAgeMs: 60_000, dedupeWindowMs: 3_600_000 }));
  t.test(`seed ${seed}: tiny count bound, long run`, (t) => run(t, 100 + seed, Number(process.env.INBOX_DIFF_STEPS ?? 200), { maxMessages: 17, maxAgeMs: 30_000, dedupeWindowMs: 3_600_000 }));
}

t.test('index compaction (past 2 × maxMessages records): history and read marks as the memory store', async (t) => {
  const limits = { maxMessages: 20, maxAgeMs: 3_600_000, dedupeWindowMs: 3_600_000 };
  const clock = { now: 1_700_000_000_000 };
  const memory = new MemoryInboxStore(limits, () => clock.now);
  const store = new RedisInboxStore({ url: redis.url, keyPrefix: 'compact:', limits, now: () => clock.now });
  t.teardown(() => Promise.all([memory.close(), store.close()]));
  let id = 0;
  for (let round = 0; round < 5; round++) {
    // Alternating senders: every message a record of its own in bob's index of alice.
    const turn: Promise<unknown>[] = [];
    for (let i = 0; i < 30; i++) {
      const sender = i % 3 === 0 ? 'carol' : 'alice';
      const m: AppendRequest = { uid: 'bob', sender, msgId: String(++id), body: Buffer.from(`m${id}`), conversation: sender };
      memory.append(m);
      turn.push(store.append(m));
    }
    await Promise.all(turn);
    const indexBytes = await store.redis.strlen('compact:{bob}:ci:alice');
    t.ok(indexBytes <= 2 * limits.maxMessages * 12 + 30 * 12, `round ${round}: alice's index ${indexBytes} bytes`);
    for (const before of [0, 140, 120, 100]) {
      for (const limit of [1, 3, 7, 50]) {
        const [a, b] = [await memory.history('bob', 'alice', before, limit), await store.history('bob', 'alice', before, limit)];
        const shape = (h: typeof a) => ({ oldest: h.oldest, more: h.more, pruned: h.pruned, seqs: h.messages.map((m) => m.seq) });
        t.same(shape(b), shape(a), `round ${round}: history(before ${before}, limit ${limit})`);
      }
    }
    const head = (await memory.range('bob', 0, 0)).head;
    for (const seq of [head - 25, head - 19, head - 10, head - 1]) {
      const a = await memory.markRead('bob', 'alice', seq, Buffer.from('r'));
      const b = await store.markRead('bob', 'alice', seq, Buffer.from('r'));
      t.same({ readSeq: b.readSeq, unread: b.unread, eventSeq: b.eventSeq }, { readSeq: a.readSeq, unread: a.unread, eventSeq: a.eventSeq }, `round ${round}: markRead ${seq}`);
    }
  }
});
