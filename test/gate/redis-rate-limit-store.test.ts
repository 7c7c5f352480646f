// The Redis RateLimitStore against the shared conformance suite (a real redis-server), plus what
// only a shared store does: two stores (two gates) on one Redis count together, and every key
// expires with its window.

import t from 'tap';
import { RedisRateLimitStore } from '../../src/gate/redis-rate-limit-store.js';
import { startRedis } from '../helpers/redis.js';
import { rateLimitStoreConformance } from './rate-limit-store.conformance.js';

const redis = await startRedis(t);
let n = 0;
rateLimitStoreConformance(t, async () => new RedisRateLimitStore({ url: redis.url, keyPrefix: `t${++n}:` }));

t.test('two stores on one Redis share their counts, also when adding at once', async (t) => {
  const a = new RedisRateLimitStore({ url: redis.url, keyPrefix: 'shared:' });
  const b = new RedisRateLimitStore({ url: redis.url, keyPrefix: 'shared:' });
  t.teardown(() => Promise.all([a.close(), b.close()]));
  await a.add('k', 1, 60_000);
  t.equal((await b.add('k', 1, 60_000)).count, 2, 'b counts on from a');
  t.equal((await a.get('k')).count, 2);
  const counts = await Promise.all(Array.from({ length: 40 }, (_, i) => (i % 2 ? a : b).add('k', 1, 60_000)));
  t.same(counts.map((w) => w.count).sort((x, y) => x - y), Array.from({ length: 40 }, (_, i) => i + 3), 'no two adds saw the same count');
});

t.test('key layout: <prefix><key>, a string that expires with its window', async (t) => {
  const store = new RedisRateLimitStore({ url: redis.url, keyPrefix: 'layout:' });
  t.teardown(() => store.close());
  await store.add('fail:alice|10.0.0.1', 2, 60_000);
  t.same(await store.redis.keys('layout:*'), ['layout:fail:alice|10.0.0.1']);
  t.equal(await store.redis.get('layout:fail:alice|10.0.0.1'), '2');
  const ttl = await store.redis.pttl('layout:fail:alice|10.0.0.1');
  t.ok(ttl > 0 && ttl <= 60_000, `expires with the window (${ttl} ms)`);
  await store.add('fail:alice|10.0.0.1', -2, 60_000);
  t.same(await store.redis.keys('layout:*'), [], 'a count back at 0 deletes its key');
});

t.test('a key without an expiry (written by something else) is given the window', async (t) => {
  const store = new RedisRateLimitStore({ url: redis.url, keyPrefix: 'repair:' });
  t.teardown(() => store.close());
  await store.redis.set('repair:k', '4');
  t.equal((await store.add('k', 1, 60_000)).count, 5);
  const ttl = await store.redis.pttl('repair:k');
  t.ok(ttl > 0 && ttl <= 60_000, `it expires now (${ttl} ms)`);
});

t.test('the default prefix is sb:rl:', async (t) => {
  const store = new RedisRateLimitStore({ url: redis.url });
  t.teardown(() => store.close());
  await store.add('ip:10.0.0.9', 1, 60_000);
  t.equal(await store.redis.exists('sb:rl:ip:10.0.0.9'), 1);
});
