// The in-memory RateLimitStore against the shared conformance suite, plus what only it has: an
// injected clock (exact window arithmetic) and a bound on the windows it keeps (the oldest
// opened is dropped first).

import t from 'tap';
import { DEFAULT_MAX_KEYS, MemoryRateLimitStore } from '../../src/gate/memory-rate-limit-store.js';
import { rateLimitStoreConformance } from './rate-limit-store.conformance.js';

rateLimitStoreConformance(t, async () => new MemoryRateLimitStore());

function clock(start = 1_000_000) {
  const c = { now: start, read: () => c.now };
  return c;
}

t.test('window arithmetic: resetMs counts down from windowMs, the window ends exactly at windowMs', async (t) => {
  const c = clock();
  const store = new MemoryRateLimitStore(100, c.read);
  t.same(await store.add('k', 1, 1_000), { count: 1, resetMs: 1_000 });
  c.now += 300;
  t.same(await store.add('k', 1, 1_000), { count: 2, resetMs: 700 });
  c.now += 699;
  t.same(await store.get('k'), { count: 2, resetMs: 1 });
  c.now += 1;
  t.same(await store.get('k'), { count: 0, resetMs: 0 }, 'closed at windowMs');
  t.same(await store.add('k', 1, 1_000), { count: 1, resetMs: 1_000 }, 'a new window from this add on');
});

t.test('bounded: beyond maxKeys the oldest window is forgotten, the newest are kept', async (t) => {
  const c = clock();
  const store = new MemoryRateLimitStore(3, c.read);
  for (const key of ['a', 'b', 'c']) await store.add(key, 1, 60_000);
  await store.add('d', 1, 60_000);
  t.equal(store.size, 3, 'never more than maxKeys');
  t.equal((await store.get('a')).count, 0, 'a, the oldest, was dropped for d');
  for (const key of ['b', 'c', 'd']) t.equal((await store.get(key)).count, 1, `${key} is kept`);
  await store.add('b', 1, 60_000);
  await store.add('e', 1, 60_000);
  t.equal((await store.get('b')).count, 0, 'adding to a window does not make it newer: b was still the oldest');
  t.equal((await store.get('e')).count, 1);
});

t.test('bounded: a flood of distinct keys only keeps the last maxKeys of them', async (t) => {
  const c = clock();
  const maxKeys = 100;
  const store = new MemoryRateLimitStore(maxKeys, c.read);
  for (let i = 0; i < 10_000; i++) await store.add(`ip-${i}`, 1, 60_000);
  t.equal(store.size, maxKeys);
  let kept = 0;
  for (let i = 0; i < 10_000; i++) if ((await store.get(`ip-${i}`)).count > 0) kept++;
  t.equal(kept, maxKeys);
  t.equal((await store.get('ip-9999')).count, 1, 'the newest is among them');
});

t.test('an expired window is dropped when touched, without evicting another key', async (t) => {
  const c = clock();
  const store = new MemoryRateLimitStore(2, c.read);
  await store.add('a', 1, 100);
  c.now += 50;
  await store.add('b', 1, 100);
  c.now += 50;
  t.same(await store.add('a', 1, 100), { count: 1, resetMs: 100 }, "a's window was over: a new one");
  t.same(await store.get('b'), { count: 1, resetMs: 50 }, 'b is still there');
});

t.test('defaults: Date.now and 100 000 keys', async (t) => {
  const store = new MemoryRateLimitStore();
  t.equal(store.maxKeys, DEFAULT_MAX_KEYS);
  t.equal(DEFAULT_MAX_KEYS, 100_000);
  const w = await store.add('k', 1, 60_000);
  t.ok(w.resetMs > 0 && w.resetMs <= 60_000);
});
