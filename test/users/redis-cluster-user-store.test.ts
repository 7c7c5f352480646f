// The Redis UserStore on a real 3-master Redis Cluster: the shared conformance suite (accounts,
// refresh families, revocations of many users read at once), with users on different masters.

import t from 'tap';
import { RedisUserStore } from '../../src/users/redis-user-store.js';
import { startRedisCluster } from '../helpers/redis.js';
import { userStoreConformance } from './user-store.conformance.js';

const cluster = await startRedisCluster(t);
let n = 0;
// Each store gets its own key prefix on the one cluster.
userStoreConformance(t, async () => new RedisUserStore({ url: { cluster: cluster.seeds }, keyPrefix: `t${++n}:` }));
