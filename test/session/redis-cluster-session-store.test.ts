// The Redis SessionStore on a real 3-master Redis Cluster: the shared conformance suite, whose
// users and nodes land on different masters, so a call that touched keys of several slots at
// once (a script, a MULTI, a pipeline) would fail here with CROSSSLOT or be refused by the client.

import t from 'tap';
import { RedisSessionStore } from '../../src/session/redis-session-store.js';
import { startRedisCluster } from '../helpers/redis.js';
import { sessionStoreConformance } from './session-store.conformance.js';

const cluster = await startRedisCluster(t);
let n = 0;
// Each store gets its own key prefix on the one cluster.
sessionStoreConformance(t, async (options) => new RedisSessionStore({ url: { cluster: cluster.seeds }, keyPrefix: `t${++n}:`, ...options }));
