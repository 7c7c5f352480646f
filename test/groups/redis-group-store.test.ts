import t from 'tap';
import { RedisGroupStore, type RedisGroupStoreOptions } from '../../src/groups/redis-group-store.js';
import type { GroupStore } from '../../src/groups/group-store.js';
import { startRedis } from '../helpers/redis.js';
import { groupStoreConformance } from './group-store.conformance.js';

const redis = await startRedis(t);
let n = 0;
const options = new WeakMap<GroupStore, RedisGroupStoreOptions>();
// Each test gets its own key prefix on the one server; a twin is a second connection to it.
groupStoreConformance(
  t,
  async (limits, now) => {
    const o = { url: redis.url, limits, keyPrefix: `t${++n}:`, now };
    const store = new RedisGroupStore(o);
    options.set(store, o);
    return store;
  },
  async (store) => new RedisGroupStore(options.get(store)!),
);
