import t from 'tap';
import { RedisSessionStore } from '../../src/session/redis-session-store.js';
import { startRedis } from '../helpers/redis.js';
import { sessionStoreConformance } from './session-store.conformance.js';

const redis = await startRedis(t);
let n = 0;
// Each store gets its own key prefix on the one server.
sessionStoreConformance(t, async (options) => new RedisSessionStore({ url: redis.url, keyPrefix: `t${++n}:`, ...options }));
