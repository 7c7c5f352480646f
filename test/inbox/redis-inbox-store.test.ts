import t from 'tap';
import { RedisInboxStore } from '../../src/inbox/redis-inbox-store.js';
import { startRedis } from '../helpers/redis.js';
import { inboxStoreConformance } from './inbox-store.conformance.js';

const redis = await startRedis(t);
let n = 0;
// Each test gets its own key prefix on the one server.
inboxStoreConformance(t, async (limits) => new RedisInboxStore({ url: redis.url, limits, keyPrefix: `t${++n}:` }));
