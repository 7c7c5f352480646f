// The Redis UserStore against the shared UserStore conformance suite (a real redis-server),
// plus its key layout.

import t from 'tap';
import { RedisUserStore } from '../../src/users/redis-user-store.js';
import { startRedis } from '../helpers/redis.js';
import { userStoreConformance } from './user-store.conformance.js';

const redis = await startRedis(t);
let n = 0;
// Each store gets its own key prefix on the one server.
userStoreConformance(t, async () => new RedisUserStore({ url: redis.url, keyPrefix: `t${++n}:` }));

t.test('key layout: <prefix>user:{name} hash and <prefix>users:count', async (t) => {
  const store = new RedisUserStore({ url: redis.url, keyPrefix: 'layout:' });
  t.teardown(() => store.close());
  t.equal(await store.create({ username: '__proto__', passwordHash: 'scrypt$2$1$1$AAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAA', createdAt: 42 }), true);
  t.same(await store.redis.keys('layout:*').then((keys) => keys.sort()), ['layout:user:{__proto__}', 'layout:users:count']);
  t.same(await store.redis.hgetall('layout:user:{__proto__}'), { username: '__proto__', passwordHash: 'scrypt$2$1$1$AAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAA', createdAt: '42' });
  t.equal(await store.redis.get('layout:users:count'), '1');
});

t.test('the default prefix is sb:', async (t) => {
  const store = new RedisUserStore({ url: redis.url });
  t.teardown(() => store.close());
  await store.create({ username: 'alice', passwordHash: 'h', createdAt: 1 });
  t.equal(await store.redis.exists('sb:user:{alice}'), 1);
  t.equal(await store.count(), 1);
});

t.test('two clients racing for one name: exactly one wins', async (t) => {
  const stores = Array.from({ length: 4 }, () => new RedisUserStore({ url: redis.url, keyPrefix: 'race:' }));
  t.teardown(() => Promise.all(stores.map((s) => s.close())));
  const results = await Promise.all(stores.flatMap((s, i) => Array.from({ length: 5 }, (_, j) => s.create({ username: 'zed', passwordHash: `h${i}.${j}`, createdAt: i * 10 + j }))));
  t.equal(results.filter(Boolean).length, 1);
  t.equal(await stores[0]!.count(), 1);
});
