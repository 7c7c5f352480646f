// The batch's chunk arguments (a run's bodies as ceil(k / CHUNK) arguments of the call)
// and the count trim without a read (XTRIM MINID keep - CHUNK + 1), on real Redis servers:
// every path of the script must consume exactly the chunks its inbox owns (all new, with
// duplicates, ids of zero, an inbox failing midway, runs past CHUNK, calls split at their
// bounds, one call per inbox on a Cluster), and no trim may drop a message a read returns.

import t, { type Test } from 'tap';
import { Cluster, Redis } from 'ioredis';
import { RedisInboxStore } from '../../src/inbox/redis-inbox-store.js';
import { MAX_BATCH_BYTES, MAX_BATCH_MESSAGES } from '../../src/inbox/redis-append-batch.js';
import { CHUNK, trimEvery } from '../../src/inbox/redis-inbox-scripts.js';
import type { AppendRequest } from '../../src/inbox/inbox-store.js';
import { startRedis, startRedisCluster } from '../helpers/redis.js';
import { rng } from '../helpers/rng.js';

const redis = await startRedis(t);
const text = (b: Buffer) => b.toString('latin1');
const settle = <T>(p: Promise<T>) =>
  p.then(
    (value) => ({ ok: true as const, value }),
    (err: Error & { code?: string }) => ({ ok: false as const, code: err.code }),
  );

/** Script calls Redis ran so far (EVALSHA and EVAL, counted by INFO commandstats). */
async function scriptCalls(admin: Redis): Promise<number> {
  const info = await admin.info('commandstats');
  let calls = 0;
  for (const m of info.matchAll(/^cmdstat_(?:evalsha|eval):calls=(\d+)/gm)) calls += Number(m[1]);
  return calls;
}

t.test('one call, several inboxes: each run takes exactly its chunks on every path, an inbox failing midway too', async (t) => {
  const inbox = new RedisInboxStore({ url: redis.url, keyPrefix: 'one:' });
  const admin = new Redis(redis.url);
  t.teardown(async () => {
    await inbox.close();
    admin.disconnect();
  });
  // C already holds ids 1..20 of alice (its ring's highest is 20).
  const pre = Array.from({ length: 20 }, (_, i) => i + 1);
  await Promise.all(pre.map((i) => inbox.append({ uid: 'c', sender: 'alice', msgId: String(i), body: Buffer.from(`c pre ${i}`), conversation: 'alice' })));
  // B's dedupe key of dave and E's conversation hash are of a foreign type: B fails before its
  // second run stores anything, E after its first run stored both of its chunks.
  await admin.hset('one:{b}:dr:dave', 'f', 'v');
  await admin.set('one:{e}:cv', 'not a hash');

  const bodyOf = (uid: string, tag: string, i: number) => Buffer.from(i % 7 === 3 ? '' : `${uid} ${tag} ${i} ${'x'.repeat(i % 13)}`);
  const plan: { request: AppendRequest; tag: string }[] = [];
  const run = (uid: string, sender: string, tag: string, ids: string[], conversation?: string) =>
    ids.forEach((msgId, i) => plan.push({ tag, request: { uid, sender, msgId, body: bodyOf(uid, tag, i), conversation } }));
  const range = (from: number, n: number) => Array.from({ length: n }, (_, i) => String(from + i));
  run('a', 'alice', 'rising', range(1, 66), 'alice'); // 3 chunks (32, 32, 2), all new
  run('a', 'carol', 'zero', Array.from({ length: 33 }, () => '0'), 'carol'); // 2 chunks, no ids
  run('a', 'alice', 'strings', ['x1', 'x2', 'x3', 'x1', 'x5'], 'alice'); // 1 chunk, a duplicate inside it
  run('b', 'alice', 'rising', range(1, 40)); // 2 chunks, stored
  run('b', 'dave', 'broken', range(1, 33)); // 2 chunks, fails
  run('b', 'alice', 'after', range(41, 3)); // 1 chunk, never reached
  run('c', 'alice', 'overlap', range(10, 34), 'alice'); // 2 chunks, rising but not past the highest: 11 duplicates
  run('e', 'alice', 'stored then failed', range(1, 40), 'alice'); // 2 chunks stored, then converse fails
  run('d', 'zed', 'last', ['1'], 'zed'); // 1 chunk, after every failure
  t.ok(plan.length <= MAX_BATCH_MESSAGES, `${plan.length} messages: one call`);

  const before = await scriptCalls(admin);
  const results = await Promise.all(plan.map(({ request }) => settle(inbox.append(request))));
  t.equal((await scriptCalls(admin)) - before, 1, 'all of them went in one script call');

  const outcome = (uid: string, tag: string) => results.filter((_, i) => plan[i]!.request.uid === uid && plan[i]!.tag === tag);
  const bodies = async (uid: string) => (await inbox.range(uid, 0, 1000)).messages.map((m) => [m.seq, text(m.body)]);
  const expect = (uid: string, tag: string, from: number, indexes: number[]) => indexes.map((i, k) => [from + k, text(bodyOf(uid, tag, i))]);
  const upTo = (n: number) => Array.from({ length: n }, (_, i) => i);

  t.same(
    await bodies('a'),
    [...expect('a', 'rising', 1, upTo(66)), ...expect('a', 'zero', 67, upTo(33)), ...expect('a', 'strings', 100, [0, 1, 2, 4])],
    'a: every body in its seq',
  );
  t.same(
    outcome('a', 'strings').map((r) => r.ok && [r.value.seq, r.value.duplicate]),
    [
      [100, false],
      [101, false],
      [102, false],
      [100, true],
      [103, false],
    ],
  );
  t.ok(
    [...outcome('b', 'rising'), ...outcome('b', 'broken'), ...outcome('b', 'after')].every((r) => !r.ok && r.code === 'SB_ERR_STORE_UNAVAILABLE'),
    "b's appends refused",
  );
  t.same(await bodies('b'), expect('b', 'rising', 1, upTo(40)), 'b keeps what it stored before failing');
  t.same(
    await bodies('c'),
    [...pre.map((i) => [i, `c pre ${i}`]), ...expect('c', 'overlap', 21, upTo(34).slice(11))],
    'c: the new ones cut out of its chunks, each with its own body',
  );
  t.same(
    outcome('c', 'overlap').map((r) => r.ok && r.value.seq),
    range(10, 34).map(Number),
    'c: duplicates answered with their seqs',
  );
  t.ok(
    outcome('e', 'stored then failed').every((r) => !r.ok),
    "e's appends refused",
  );
  t.same(await bodies('e'), expect('e', 'stored then failed', 1, upTo(40)), 'e keeps both chunks it stored');
  t.match(outcome('d', 'last'), [{ ok: true, value: { seq: 1, duplicate: false } }]);
  t.same(await bodies('d'), [[1, text(bodyOf('d', 'last', 0))]], 'd, after two failed inboxes, stores its own body');

  await admin.del('one:{e}:cv');
  const resent = await Promise.all(range(1, 40).map((id, i) => inbox.append({ uid: 'e', sender: 'alice', msgId: id, body: bodyOf('e', 'stored then failed', i), conversation: 'alice' })));
  t.ok(
    resent.every((r, i) => r.duplicate && r.seq === i + 1),
    "e's resends find what it stored",
  );
});

/**
 * Random flushes of appends to many inboxes, checked against a model: runs of 1 to 100 (across
 * CHUNK), ids rising, out of order, resent, zero or strings, bodies of 0 bytes to 60 KiB (so calls
 * split at MAX_BATCH_MESSAGES and at MAX_BATCH_BYTES, an inbox across two calls).
 */
async function randomFlushes(t: Test, store: RedisInboxStore, seed: number, flushes: number, users: string[]) {
  const random = rng(seed);
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(random() * xs.length)]!;
  const SENDERS = ['s1', 's2', 's3'];
  type Model = { head: number; bodies: string[]; ids: Map<string, number>; sent: Map<string, string[]>; next: Map<string, number>; conversations: Map<string, number[]> };
  const models = new Map<string, Model>(users.map((u) => [u, { head: 0, bodies: [''], ids: new Map(), sent: new Map(), next: new Map(), conversations: new Map() }]));
  let serial = 0;
  let splitByBytes = 0;
  let splitByCount = 0;
  for (let f = 0; f < flushes; f++) {
    const requests: AppendRequest[] = [];
    let bytes = 0;
    const big = random() < 0.3;
    const inboxes = 1 + Math.floor(random() * users.length);
    for (let k = 0; k < inboxes; k++) {
      const uid = pick(users);
      const m = models.get(uid)!;
      const runs = 1 + Math.floor(random() * 4);
      for (let r = 0; r < runs; r++) {
        const sender = pick(SENDERS);
        const conversation = random() < 0.8 ? sender : undefined;
        const length = pick([1, 2, CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK, 2 * CHUNK + 1, 1 + Math.floor(random() * 100)]);
        const mode = pick(['rising', 'rising', 'resends', 'zero', 'strings', 'low']);
        const sent = m.sent.get(sender) ?? [];
        for (let i = 0; i < length; i++) {
          let msgId: string;
          if (mode === 'zero') msgId = random() < 0.5 ? '' : '0';
          else if (mode === 'strings') msgId = `id-${++serial}`;
          else if (mode === 'low') msgId = String(1_000_000 - ++serial);
          else if (mode === 'resends' && sent.length > 0 && random() < 0.4) msgId = pick(sent.slice(-40));
          else {
            const n = (m.next.get(sender) ?? 1_000_000) + 1;
            m.next.set(sender, n);
            msgId = String(n);
          }
          const size = big && random() < 0.15 ? 30_000 + Math.floor(random() * 30_000) : random() < 0.1 ? 0 : Math.floor(random() * 40);
          const body = Buffer.alloc(size, `${uid}/${++serial}/`);
          bytes += size;
          requests.push({ uid, sender, msgId, body, conversation });
          if (msgId !== '' && msgId !== '0') sent.push(msgId);
        }
        m.sent.set(sender, sent);
      }
    }
    if (bytes > MAX_BATCH_BYTES) splitByBytes++;
    if (requests.length > MAX_BATCH_MESSAGES) splitByCount++;
    // The model: each inbox in the order of its appends.
    const expected = requests.map(({ uid, sender, msgId, body, conversation }) => {
      const m = models.get(uid)!;
      const key = `${sender}\0${msgId}`;
      const seen = msgId === '' || msgId === '0' ? undefined : m.ids.get(key);
      if (seen !== undefined) return { seq: seen, duplicate: true };
      const seq = ++m.head;
      m.bodies[seq] = text(Buffer.from(body));
      if (msgId !== '' && msgId !== '0') m.ids.set(key, seq);
      if (conversation !== undefined) m.conversations.set(conversation, [...(m.conversations.get(conversation) ?? []), seq]);
      return { seq, duplicate: false };
    });
    const got = await Promise.all(requests.map((r) => store.append(r)));
    const answers = got.map(({ seq, duplicate }) => ({ seq, duplicate }));
    if (JSON.stringify(answers) !== JSON.stringify(expected)) {
      const i = answers.findIndex((a, k) => JSON.stringify(a) !== JSON.stringify(expected[k]));
      t.same(answers[i], expected[i], `seed ${seed} flush ${f}: append ${i} of ${requests.length} (${requests[i]!.uid} ${requests[i]!.sender} #${requests[i]!.msgId})`);
      return;
    }
  }
  for (const uid of users) {
    const m = models.get(uid)!;
    const read = await store.range(uid, 0, 100_000);
    const want = m.bodies.slice(1).map((b, i) => [i + 1, b.length, b.slice(0, 24)]);
    t.same(
      read.messages.map((x) => [x.seq, x.body.length, text(x.body).slice(0, 24)]),
      want,
      `${uid}: every body stored in its seq`,
    );
    t.ok(
      read.messages.every((x) => text(x.body) === m.bodies[x.seq]),
      `${uid}: byte for byte`,
    );
    for (const [conversation, seqs] of m.conversations) {
      const h = await store.history(uid, conversation, 0, 100_000);
      t.same(
        h.messages.map((x) => x.seq),
        seqs,
        `${uid}: the history of ${conversation} (its index records match the entries)`,
      );
    }
  }
  t.ok(splitByBytes > 0 && splitByCount > 0, `flushes past ${MAX_BATCH_BYTES} bytes: ${splitByBytes}, past ${MAX_BATCH_MESSAGES} messages: ${splitByCount}`);
}

t.test('random flushes on one Redis: calls split at their bounds, several inboxes a call', async (t) => {
  const store = new RedisInboxStore({ url: redis.url, keyPrefix: 'rand:', limits: { maxMessages: 100_000 } });
  t.teardown(() => store.close());
  await randomFlushes(t, store, 7, 40, ['u1', 'u2', 'u3', 'u4', 'u5']);
});

t.test('random flushes on a Redis Cluster: one call per inbox, pipelined per master', async (t) => {
  const cluster = await startRedisCluster(t);
  const store = new RedisInboxStore({ url: { cluster: cluster.seeds }, keyPrefix: 'rc:', limits: { maxMessages: 100_000 } });
  t.teardown(() => store.close());
  t.ok(store.redis instanceof Cluster);
  // Enough users that several share a master (so its calls go in one pipeline).
  const users = Array.from({ length: 9 }, (_, i) => `v${i}`);
  const masters = new Map<number, number>();
  for (const u of users) {
    const port = (await cluster.masterOf(`rc:{${u}}:seq`)).port;
    masters.set(port, (masters.get(port) ?? 0) + 1);
  }
  t.ok([...masters.values()].some((n) => n > 1), `users per master: ${JSON.stringify([...masters.values()])}`);
  await randomFlushes(t, store, 11, 30, users);

  // A broken inbox among others on the same masters: it fails alone, the others' chunks stay theirs.
  const admin = new Redis((await cluster.masterOf('rc:{v0}:dr:bad')).url);
  t.teardown(() => admin.disconnect());
  await admin.hset('rc:{v0}:dr:bad', 'f', 'v');
  const heads = await Promise.all(users.map(async (u) => (await store.range(u, 0, 0)).head));
  const requests = users.flatMap((uid) => [
    ...Array.from({ length: 40 }, (_, i) => ({ uid, sender: 'ok', msgId: '', body: Buffer.from(`${uid} ok ${i}`) })),
    ...Array.from({ length: 33 }, (_, i) => ({ uid, sender: 'bad', msgId: String(i + 1), body: Buffer.from(`${uid} bad ${i}`) })),
  ]);
  const results = await Promise.all(requests.map((r) => settle(store.append(r))));
  t.ok(
    results.every((r, i) => (requests[i]!.uid === 'v0' ? !r.ok : r.ok)),
    'v0 refused, every other inbox stored',
  );
  for (const [n, uid] of users.entries()) {
    const read = await store.range(uid, heads[n]!, 1000);
    const want = uid === 'v0' ? Array.from({ length: 40 }, (_, i) => `${uid} ok ${i}`) : [...Array.from({ length: 40 }, (_, i) => `${uid} ok ${i}`), ...Array.from({ length: 33 }, (_, i) => `${uid} bad ${i}`)];
    t.same(
      read.messages.map((m) => text(m.body)),
      want,
      `${uid}: its own bodies`,
    );
  }
});

t.test('the count trim at every offset of an entry: reads return exactly the bound, each body (rewritten or not) as stored', async (t) => {
  for (const maxMessages of [33, 40, 64, 100]) {
    const every = trimEvery(maxMessages);
    const store = new RedisInboxStore({ url: redis.url, keyPrefix: `trim${maxMessages}:`, limits: { maxMessages } });
    const admin = new Redis(redis.url);
    const lg = `trim${maxMessages}:{bob}:lg`;
    const bodies: string[] = [''];
    let id = 0;
    let failures = 0;
    const random = rng(maxMessages);
    for (let round = 0; round < 120 && failures < 3; round++) {
      const r = random();
      const head = bodies.length - 1;
      if (r < 0.1 && head > 0) {
        // A read mark: an event of one message (stored with storeChunk, as a run's chunks are).
        const res = await store.markRead('bob', 'alice', head, Buffer.from(`read ${head}`));
        if (res.eventSeq !== undefined) bodies[res.eventSeq] = `read ${head}`;
      } else if (r < 0.2 && head > 0) {
        const seq = Math.max(1, head - Math.floor(random() * maxMessages));
        const res = await store.rewrite('bob', seq, Buffer.from(`tomb ${seq}`), { uid: 'bob', sender: 'bob', msgId: '', body: Buffer.from(`recall ${seq}`) });
        if (res.rewritten) bodies[seq] = `tomb ${seq}`;
        if (res.eventSeq !== undefined) bodies[res.eventSeq] = `recall ${seq}`;
      } else {
        const n = 1 + Math.floor(random() * 45);
        const resend = random() < 0.3 && id > 0;
        const requests = Array.from({ length: n }, (_, i) => {
          const msgId = resend && i === 0 ? String(id) : random() < 0.15 ? '0' : String(++id);
          return { uid: 'bob', sender: 'alice', msgId, body: Buffer.from(`m${round}.${i}`), conversation: 'alice' };
        });
        const results = await Promise.all(requests.map((q) => store.append(q)));
        results.forEach((res, i) => {
          if (!res.duplicate) bodies[res.seq] = `m${round}.${i}`;
        });
      }
      const top = bodies.length - 1;
      const keep = Math.max(1, top - maxMessages + 1);
      const read = await store.range('bob', 0, 10_000);
      const want = bodies.slice(keep).map((b, i) => [keep + i, b]);
      const ok = read.oldest === keep && JSON.stringify(read.messages.map((m) => [m.seq, text(m.body)])) === JSON.stringify(want);
      if (!ok) {
        failures++;
        t.same(read.messages.map((m) => [m.seq, text(m.body)]), want, `max ${maxMessages}, round ${round}: range returns the bound`);
      }
      const entries = (await admin.xrange(lg, '-', '+')) as [string, string[]][];
      const first = Number(entries[0]?.[0].split('-')[0] ?? 0);
      const held = entries.reduce((s, [, f]) => s + Number(f[1]), 0);
      if (first > keep || held > maxMessages + CHUNK - 1 + every + 45) {
        failures++;
        t.fail(`max ${maxMessages}, round ${round}: the stream starts at ${first} and holds ${held} (keep ${keep}, head ${top})`);
      }
      // A read at the very edge, and history down to it.
      const edge = await store.range('bob', keep - 1, 1);
      if (edge.messages[0]?.seq !== keep) {
        failures++;
        t.fail(`max ${maxMessages}, round ${round}: the read after ${keep - 1} starts at ${edge.messages[0]?.seq}`);
      }
      const history = await store.history('bob', 'alice', 0, 10_000);
      if (history.messages.some((m) => m.seq < keep || text(m.body) !== bodies[m.seq])) {
        failures++;
        t.fail(`max ${maxMessages}, round ${round}: history returns a message below ${keep} or a wrong body`);
      }
    }
    t.equal(failures, 0, `max ${maxMessages}: every round held`);
    await store.close();
    admin.disconnect();
  }
});

t.test("entries of an earlier version (field n, a field per body, up to 32 a message) are trimmed as safely", async (t) => {
  const maxMessages = 40;
  const store = new RedisInboxStore({ url: redis.url, keyPrefix: 'legacy:', limits: { maxMessages } });
  const admin = new Redis(redis.url);
  t.teardown(async () => {
    await store.close();
    admin.disconnect();
  });
  const now = Date.now();
  // 1..5, 6..37 (32 in one entry), 38..40, written as an earlier version did, and its seq key.
  const bodies = [''];
  let seq = 0;
  for (const n of [5, 32, 3]) {
    const fields = ['n', String(n)];
    const first = seq + 1;
    for (let i = 0; i < n; i++) {
      bodies[++seq] = `old ${seq}`;
      fields.push(`old ${seq}`);
    }
    if (fields.length % 2 === 1) fields.push('');
    await admin.xadd('legacy:{bob}:lg', `${first}-${now}`, ...fields);
  }
  await admin.set('legacy:{bob}:seq', String(seq));
  // One message at a time, so that every trim point is crossed with the legacy entry of 32 straddling keep.
  for (let i = 1; i <= 60; i++) {
    const r = await store.append({ uid: 'bob', sender: 'alice', msgId: String(i), body: Buffer.from(`new ${i}`) });
    bodies[r.seq] = `new ${i}`;
    const keep = Math.max(1, r.seq - maxMessages + 1);
    const read = await store.range('bob', 0, 1000);
    const want = bodies.slice(keep).map((b, k) => [keep + k, b]);
    if (JSON.stringify(read.messages.map((m) => [m.seq, text(m.body)])) !== JSON.stringify(want)) {
      t.same(read.messages.map((m) => [m.seq, text(m.body)]), want, `head ${r.seq}`);
      return;
    }
  }
  const first = Number(((await admin.xrange('legacy:{bob}:lg', '-', '+', 'COUNT', 1)) as [string, string[]][])[0]![0].split('-')[0]);
  t.ok(first > 37, `the legacy entries are gone once past the bound (the first entry starts at ${first})`);
});
