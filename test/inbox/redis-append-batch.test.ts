// The batched Redis append at its edges (src/inbox/redis-append-batch.ts, appendBatch in
// redis-inbox-scripts.ts), on one real Redis: an inbox the script cannot write fails alone and
// never hands a seq out twice, the argument is exactly what the script reads, the bounds of a
// call and of a run, close() with appends pending, and what a pair's dedupe state costs.

import t from 'tap';
import { RedisInboxStore } from '../../src/inbox/redis-inbox-store.js';
import { AppendBatch, MAX_BATCH_MESSAGES, type BatchCall } from '../../src/inbox/redis-append-batch.js';
import { EpochSource } from '../../src/inbox/inbox-store.js';
import { CHUNK, trimEvery } from '../../src/inbox/redis-inbox-scripts.js';
import { startRedis } from '../helpers/redis.js';

const redis = await startRedis(t);
const body = (s: string) => Buffer.from(s);
const settle = <T>(p: Promise<T>) =>
  p.then(
    (value) => ({ ok: true as const, value }),
    (err: Error & { code?: string }) => ({ ok: false as const, code: err.code }),
  );

/**
 * Walks a call's arguments as the script does: the messages of each run of each inbox section.
 * Every run's bodies must be its next ceil(n / CHUNK) chunks, CHUNK bodies each (the last the
 * rest), and every chunk must be read to its last byte.
 */
function sections({ batch: b, chunks }: BatchCall): number[][] {
  const counts: number[][] = [];
  let at = 0;
  let c = 0;
  while (at < b.length) {
    at += 8;
    const runs = b.readUInt16BE(at);
    const bytes = b.readUInt32BE(at + 2);
    const inboxChunks = b.readUInt32BE(at + 6);
    at += 10;
    const end = at + bytes;
    const firstChunk = c;
    const messages: number[] = [];
    for (let r = 0; r < runs; r++) {
      at += 4 + b.readUInt32BE(at);
      at += 4 + b.readUInt32BE(at);
      at += 1;
      const n = b.readUInt16BE(at);
      at += 2 + 8 * n;
      for (let left = n; left > 0; left -= CHUNK) {
        const chunk = chunks[c++];
        if (chunk === undefined) throw new Error(`a run of ${n} messages without its chunk ${c - 1}`);
        let p = 0;
        for (let i = 0; i < Math.min(CHUNK, left); i++) p += 4 + chunk.readUInt32BE(p);
        if (p !== chunk.length) throw new Error(`a chunk of ${chunk.length} bytes, ${p} read`);
      }
      messages.push(n);
    }
    if (at !== end) throw new Error(`a section of ${bytes} bytes, ${at - end + bytes} read`);
    if (c - firstChunk !== inboxChunks) throw new Error(`a section says ${inboxChunks} chunks, its runs have ${c - firstChunk}`);
    counts.push(messages);
  }
  if (c !== chunks.length) throw new Error(`${chunks.length} chunks, ${c} read`);
  return counts;
}

/** An AppendBatch whose calls are recorded and answered "all new" (first seqs 1, 2, ...). */
function recording() {
  const calls: BatchCall[] = [];
  const batch = new AppendBatch(
    (sent) =>
      sent.map(async (call) => {
        calls.push(call);
        return sections(call).flatMap((runs) => [7, ...runs.map(() => 1)]);
      }),
    { perInbox: false, now: () => 1, epochs: new EpochSource(), baseOf: (uid) => `p:{${uid}}` },
  );
  return { batch, calls };
}

t.test('an inbox the script cannot write fails alone; what it stored keeps its seqs, none is handed out twice', async (t) => {
  const inbox = new RedisInboxStore({ url: redis.url, keyPrefix: 'mid:' });
  t.teardown(() => inbox.close());
  t.match(await inbox.append({ uid: 'x', sender: 'alice', msgId: '1', body: body('a1') }), { seq: 1 });
  // A key of the inbox that makes a later run's command fail (a foreign type), beside another inbox.
  await inbox.redis.hset('mid:{x}:dr:carol', 'f', 'v');
  const [a, c, other] = await Promise.all([
    settle(inbox.append({ uid: 'x', sender: 'alice', msgId: '2', body: body('a2') })),
    settle(inbox.append({ uid: 'x', sender: 'carol', msgId: '1', body: body('c1') })),
    settle(inbox.append({ uid: 'y', sender: 'alice', msgId: '1', body: body('to y') })),
  ]);
  t.match([a, c], [{ ok: false, code: 'SB_ERR_STORE_UNAVAILABLE' }, { ok: false, code: 'SB_ERR_STORE_UNAVAILABLE' }], "the broken inbox's appends are refused");
  t.match(other, { ok: true, value: { seq: 1 } }, 'another inbox of the same call is stored');
  await inbox.redis.del('mid:{x}:dr:carol');
  const d = await inbox.append({ uid: 'x', sender: 'dave', msgId: '1', body: body('d1') });
  const read = await inbox.range('x', 0, 10);
  t.same(
    read.messages.map((m) => [m.seq, m.body.toString()]),
    [
      [1, 'a1'],
      [2, 'a2'],
      [3, 'd1'],
    ],
    'a2, stored before the failure, keeps its seq; the next message follows it',
  );
  t.equal(d.seq, read.head);
  t.match(await inbox.append({ uid: 'x', sender: 'alice', msgId: '2', body: body('a2') }), { seq: 2, duplicate: true }, "the refused a2's resend finds it");
  t.match(await inbox.append({ uid: 'x', sender: 'carol', msgId: '1', body: body('c1') }), { seq: 4, duplicate: false }, "c1's resend stores it");
});

t.test('a pair refused half-stored: the resend stores the rest and finds the other', async (t) => {
  const inbox = new RedisInboxStore({ url: redis.url, keyPrefix: 'pair:' });
  t.teardown(() => inbox.close());
  await inbox.redis.hset('pair:{alice}:dr:alice\0bob', 'f', 'v');
  const message = { uid: 'bob', sender: 'alice', msgId: '7', body: body('hi'), conversation: 'alice' };
  const copy = { uid: 'alice', sender: 'alice\0bob', msgId: '7', body: body('hi'), conversation: 'bob', own: true };
  t.match(await settle(inbox.appendPair(message, copy)), { ok: false, code: 'SB_ERR_STORE_UNAVAILABLE' });
  await inbox.redis.del('pair:{alice}:dr:alice\0bob');
  t.match(await inbox.appendPair(message, copy), [{ seq: 1, duplicate: true }, { seq: 1, duplicate: false }]);
});

t.test("the argument is exactly what the script reads (no bytes of the process's memory after it)", async (t) => {
  const { batch, calls } = recording();
  await Promise.all([batch.append({ uid: 'bob', sender: 'alice', msgId: '1', body: body('x') }), batch.append({ uid: 'bob', sender: 'carol', msgId: '1', body: body('y') }), batch.append({ uid: 'eve', sender: 'carol', msgId: '0', body: body('z') })]);
  t.equal(calls.length, 1);
  t.same(sections(calls[0]!), [[1, 1], [1]], 'two inboxes, read to their last byte');
  t.same(calls[0]!.keys, ['p:{bob}:seq', 'p:{bob}:ep', 'p:{bob}:lg', 'p:{bob}:cv', 'p:{bob}:cl', 'p:{bob}:dr:alice', 'p:{bob}:ci:', 'p:{bob}:dr:carol', 'p:{bob}:ci:', 'p:{eve}:seq', 'p:{eve}:ep', 'p:{eve}:lg', 'p:{eve}:cv', 'p:{eve}:cl', 'p:{eve}:dr:carol', 'p:{eve}:ci:'], 'every key it touches declared');
});

t.test(`a run longer than CHUNK (${CHUNK}) goes as several chunks, and is stored in order, new or resent`, async (t) => {
  const n = 2 * CHUNK + 6;
  const { batch, calls } = recording();
  await Promise.all(Array.from({ length: n }, (_, i) => batch.append({ uid: 'bob', sender: 'alice', msgId: String(i + 1), body: body(`m${i + 1}`) })));
  t.same(sections(calls[0]!), [[n]], 'one run');
  t.same(
    calls[0]!.chunks.map((c) => c.length),
    [CHUNK, CHUNK, 6].map((k, c) => Array.from({ length: k }, (_, i) => 4 + `m${c * CHUNK + i + 1}`.length).reduce((a, b) => a + b, 0)),
    'chunks of CHUNK bodies, the last the rest',
  );

  const inbox = new RedisInboxStore({ url: redis.url, keyPrefix: 'chunks:' });
  t.teardown(() => inbox.close());
  const ids = Array.from({ length: n }, (_, i) => i + 1);
  const first = await Promise.all(ids.map((i) => inbox.append({ uid: 'bob', sender: 'alice', msgId: String(i), body: body(`m${i}`) })));
  t.same(
    first.map((r) => r.seq),
    ids,
    'all new: consecutive seqs',
  );
  // A run that resends every third message among new ones: the script cuts the bodies out of the chunks.
  const mixed = Array.from({ length: n }, (_, i) => (i % 3 === 0 ? i + 1 : n + i + 1));
  const second = await Promise.all(mixed.map((id) => inbox.append({ uid: 'bob', sender: 'alice', msgId: String(id), body: body(`m${id}`) })));
  t.same(
    second.filter((r) => r.duplicate).map((r) => r.seq),
    mixed.filter((id) => id <= n),
    'the resent ones found',
  );
  const read = await inbox.range('bob', 0, 10 * n);
  t.same(
    read.messages.map((m) => m.body.toString()),
    [...ids, ...mixed.filter((id) => id > n)].map((id) => `m${id}`),
    'every body in its seq, once',
  );
});

t.test('the log in Redis: trimmed to the count bound without reading it, and to the age bound', async (t) => {
  const maxMessages = 100;
  const every = trimEvery(maxMessages);
  let now = 1_000_000;
  const inbox = new RedisInboxStore({ url: redis.url, keyPrefix: 'trim:', limits: { maxMessages, maxAgeMs: 60_000 }, now: () => now });
  t.teardown(() => inbox.close());
  /** The messages the stream holds, and the first seq among them. */
  const held = async () => {
    const entries = (await inbox.redis.xrange('trim:{bob}:lg', '-', '+')) as [string, string[]][];
    return { count: entries.reduce((n, [, fields]) => n + Number(fields[1]), 0), first: Number(entries[0]?.[0].split('-')[0] ?? 0) };
  };
  let id = 0;
  let most = 0;
  // Runs of 1 to 40 (chunks of up to CHUNK), so that entries straddle every trim point.
  for (let round = 0; round < 60; round++) {
    const n = 1 + ((round * 7) % 40);
    await Promise.all(Array.from({ length: n }, () => inbox.append({ uid: 'bob', sender: 'alice', msgId: String(++id), body: body(`m${id}`) })));
    most = Math.max(most, (await held()).count);
    const { head, oldest, messages } = await inbox.range('bob', 0, 1000);
    t.equal(messages.length, Math.min(head, maxMessages), `round ${round}: reads return the bound`);
    t.equal(oldest, Math.max(1, head - maxMessages + 1));
  }
  t.ok(most <= maxMessages + every + 40 + CHUNK - 1, `the stream held at most ${most} messages (bound ${maxMessages}, trimmed every ${every} seqs)`);
  t.ok(most > maxMessages, 'and more than the bound at times (trimming waits for the next trim point)');
  const { first } = await held();
  t.ok(first >= id - maxMessages - every - 40 - CHUNK + 1, `the first entry kept starts at ${first}, head ${id}`);

  // Everything ages out; appends of 4 × `every` more seqs remove the aged entries from the stream.
  now += 61_000;
  const before = (await held()).count;
  for (let i = 0; i < 4 * every; i++) await inbox.append({ uid: 'bob', sender: 'alice', msgId: String(++id), body: body(`m${id}`) });
  const after = await held();
  t.ok(before > 4 * every && after.count <= 4 * every, `aged messages removed: ${before} held before, ${after.count} after`);
  t.ok(after.first > id - 4 * every, 'only the new ones are left');
});

t.test(`a call holds at most ${MAX_BATCH_MESSAGES} messages, an inbox's appends spread over calls in order`, async (t) => {
  const { batch, calls } = recording();
  await Promise.all(Array.from({ length: 3000 }, (_, i) => batch.append({ uid: i % 7 === 0 ? 'carol' : 'bob', sender: `s${i % 3}`, msgId: String(i + 1), body: Buffer.alloc(100) })));
  const sizes = calls.map((c) => sections(c).flat().reduce((a, b) => a + b, 0));
  t.ok(Math.max(...sizes) <= MAX_BATCH_MESSAGES, `messages per call: ${JSON.stringify(sizes)}`);
  t.equal(sizes.reduce((a, b) => a + b, 0), 3000, 'every message in one of them');
});

t.test('an inbox with more than 65 535 runs in one turn: every append settles, nothing is thrown', async (t) => {
  const inbox = new RedisInboxStore({ url: redis.url, keyPrefix: 'runs:' });
  t.teardown(() => inbox.close());
  await inbox.ping();
  // Own copies in one user's inbox, of messages to two peers in turn: every copy a run of its own.
  const outcomes = await Promise.all(Array.from({ length: 65_536 }, (_, i) => settle(inbox.append({ uid: 'mallory', sender: `mallory\0p${i % 2}`, msgId: String(i + 1), body: body('x'), conversation: `p${i % 2}`, own: true }))));
  t.equal(outcomes.filter((o) => o.ok).length, 65_536, 'every append stored');
  t.equal((await inbox.range('mallory', 0, 0)).head, 65_536);
});

t.test('close() with appends of this turn pending: they are sent and answered before the connection closes', async (t) => {
  const inbox = new RedisInboxStore({ url: redis.url, keyPrefix: 'close1:' });
  await inbox.ping();
  const pending = settle(inbox.append({ uid: 'carol', sender: 'dave', msgId: '1', body: body('last') }));
  await inbox.close();
  t.match(await pending, { ok: true, value: { seq: 1 } });
});

t.test("a pair's dedupe state: 8 bytes an id and 26 a block, bounded however it sends", async (t) => {
  const inbox = new RedisInboxStore({ url: redis.url, keyPrefix: 'ring:' });
  t.teardown(() => inbox.close());
  // A burst of 3 000 (a device back with a backlog), then one at a time.
  await Promise.all(Array.from({ length: 3000 }, (_, i) => inbox.append({ uid: 'bob', sender: 'alice', msgId: String(i + 1), body: body('m') })));
  const burst = await inbox.redis.strlen('ring:{bob}:dr:alice');
  t.ok(burst <= 1250 * 8 + 5 * 26, `after the burst: ${burst} bytes (blocks of at most 250 ids, 1 000 to 1 250 ids kept)`);
  for (let i = 3000; i < 4300; i++) await inbox.append({ uid: 'bob', sender: 'alice', msgId: String(i + 1), body: body('m') });
  const slow = await inbox.redis.strlen('ring:{bob}:dr:alice');
  t.ok(slow <= 1250 * (8 + 26), `one at a time: ${slow} bytes (a block per message)`);
  t.match(await inbox.append({ uid: 'bob', sender: 'alice', msgId: '3301', body: body('m') }), { seq: 3301, duplicate: true }, 'the last 1 000 found');
});
