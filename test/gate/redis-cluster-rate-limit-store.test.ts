// The Redis RateLimitStore on a real 3-master Redis Cluster: the shared conformance suite, and
// two stores (two gates) counting together on keys that the cluster spreads over its masters.

import t from 'tap';
import { RedisRateLimitStore } from '../../src/gate/redis-rate-limit-store.js';
import { startRedisCluster } from '../helpers/redis.js';
import { rateLimitStoreConformance } from './rate-limit-store.conformance.js';

const cluster = await startRedisCluster(t);
const url = { cluster: cluster.seeds };
let n = 0;
rateLimitStoreConformance(t, async () => new RedisRateLimitStore({ url, keyPrefix: `t${++n}:` }));

t.test('two stores on one cluster share their counts, on keys of every master', async (t) => {
  const a = new RedisRateLimitStore({ url, keyPrefix: 'shared:' });
  const b = new RedisRateLimitStore({ url, keyPrefix: 'shared:' });
  t.teardown(() => Promise.all([a.close(), b.close()]));
  const keys = Array.from({ length: 12 }, (_, i) => `fail:user${i}|10.0.0.${i}`);
  const masters = new Set(await Promise.all(keys.map(async (k) => (await cluster.masterOf(`shared:${k}`)).port)));
  t.equal(masters.size, 3, 'the keys are on all three masters');
  const counts = await Promise.all(keys.flatMap((k) => Array.from({ length: 10 }, (_, i) => (i % 2 ? a : b).add(k, 1, 60_000))));
  for (const [i, k] of keys.entries()) {
    t.same(counts.slice(i * 10, i * 10 + 10).map((w) => w.count).sort((x, y) => x - y), Array.from({ length: 10 }, (_, j) => j + 1), `${k}: no two adds saw the same count`);
    t.equal((await a.get(k)).count, 10);
  }
});
