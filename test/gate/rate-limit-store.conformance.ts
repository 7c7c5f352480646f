// The abstract conformance suite of RateLimitStore: every implementation (memory for one gate,
// Redis for gates that share their counts) runs exactly these tests, on real time with short
// windows. `makeStore` must return a fresh, empty, isolated store on each call.

import type { Test } from 'tap';
import type { RateLimitStore } from '../../src/gate/rate-limit-store.js';
import { until } from '../../testkit/wait.js';

const MINUTE = 60_000;

export function rateLimitStoreConformance(t: Test, makeStore: () => Promise<RateLimitStore>): void {
  async function fresh(tt: Test): Promise<RateLimitStore> {
    const store = await makeStore();
    tt.teardown(() => store.close());
    return store;
  }

  t.test('the first add opens a window; later adds count in it without extending it', async (t) => {
    const store = await fresh(t);
    const first = await store.add('k', 1, MINUTE);
    t.equal(first.count, 1);
    t.ok(first.resetMs > 0 && first.resetMs <= MINUTE, `the window closes within windowMs (${first.resetMs})`);
    const second = await store.add('k', 1, MINUTE);
    const third = await store.add('k', 1, 5 * MINUTE);
    t.same([second.count, third.count], [2, 3]);
    t.ok(third.resetMs <= first.resetMs, 'an add, even with another windowMs, does not move the close');
    const big = await store.add('k', 10, MINUTE);
    t.equal(big.count, 13, 'by is added as given');
  });

  t.test('get reads the open window without counting; no window is {0, 0}', async (t) => {
    const store = await fresh(t);
    t.same(await store.get('k'), { count: 0, resetMs: 0 });
    await store.add('k', 1, MINUTE);
    await store.add('k', 1, MINUTE);
    const read = await store.get('k');
    t.equal(read.count, 2);
    t.ok(read.resetMs > 0 && read.resetMs <= MINUTE);
    t.equal((await store.get('k')).count, 2, 'reading twice counts nothing');
  });

  t.test('a negative add opens nothing, never goes below 0, and a count back at 0 closes the window', async (t) => {
    const store = await fresh(t);
    t.same(await store.add('k', -1, MINUTE), { count: 0, resetMs: 0 }, 'a refund with no window opens none');
    t.same(await store.add('k', 0, MINUTE), { count: 0, resetMs: 0 }, 'nor does 0');
    t.same(await store.get('k'), { count: 0, resetMs: 0 });
    await store.add('k', 3, MINUTE);
    t.equal((await store.add('k', -1, MINUTE)).count, 2);
    t.same(await store.add('k', -5, MINUTE), { count: 0, resetMs: 0 }, 'clamped at 0, and closed');
    t.same(await store.get('k'), { count: 0, resetMs: 0 });
    const reopened = await store.add('k', 1, MINUTE);
    t.equal(reopened.count, 1, 'the next add opens a new window');
  });

  t.test('a window closes after windowMs, and the next add opens a new one', async (t) => {
    const store = await fresh(t);
    await store.add('k', 5, 150);
    await store.add('other', 1, MINUTE);
    await until('the 150 ms window closed', async () => (await store.get('k')).count === 0, 10_000);
    t.same(await store.get('k'), { count: 0, resetMs: 0 });
    t.equal((await store.add('k', 1, MINUTE)).count, 1, 'counting starts again');
    t.equal((await store.get('other')).count, 1, 'a key with a longer window is still open');
  });

  t.test('keys are independent, whatever their characters', async (t) => {
    const store = await fresh(t);
    const keys = ['a', 'b', '__proto__', 'constructor', 'fail:alice|2001:db8:1:2::/64', 'fail:alice|2001:db8:1:2::/6', 'known:bob|10.0.0.1', 'ünï cødé'];
    for (const [i, key] of keys.entries()) await store.add(key, i + 1, MINUTE);
    for (const [i, key] of keys.entries()) t.equal((await store.get(key)).count, i + 1, key);
  });

  t.test('concurrent adds each see a distinct count', async (t) => {
    const store = await fresh(t);
    const counts = await Promise.all(Array.from({ length: 50 }, () => store.add('k', 1, MINUTE)));
    t.same(counts.map((w) => w.count).sort((a, b) => a - b), Array.from({ length: 50 }, (_, i) => i + 1));
    const refunds = await Promise.all(Array.from({ length: 60 }, () => store.add('k', -1, MINUTE)));
    t.equal(Math.min(...refunds.map((w) => w.count)), 0, 'refunds stop at 0');
    t.same(await store.get('k'), { count: 0, resetMs: 0 });
  });
}
