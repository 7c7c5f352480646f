// Redis RateLimitStore: the counts several gate processes share.
//
//   <prefix><key>   string   the count of the key's open window; the key expires with the window
//
// add is one Lua script on one key (read the expiry, INCRBY, set the expiry on opening), so
// concurrent adds from any number of gates each see a distinct count and a window opens
// exactly once. Redis keeps the time: gates with skewed clocks still agree on when a window
// closes. The number of keys is bounded by what is counted per window (every key expires with
// its window, and a count that comes back to 0 deletes its key).

import { createRedisClient, storeUnavailable, type RedisClientOptions, type RedisClient, type RedisTarget } from '../redis/redis-client.js';
import type { RateLimitStore, RateWindow } from './rate-limit-store.js';

// KEYS: window key   ARGV: by, window ms. Returns {count, ms left}; {0, 0} when no window is open.
const ADD = `
local by = tonumber(ARGV[1])
local ttl = redis.call('PTTL', KEYS[1])
if ttl == -2 then
  if by <= 0 then return {0, 0} end
  redis.call('SET', KEYS[1], by, 'PX', ARGV[2])
  return {by, tonumber(ARGV[2])}
end
local n = redis.call('INCRBY', KEYS[1], by)
if n <= 0 then
  redis.call('DEL', KEYS[1])
  return {0, 0}
end
if ttl == -1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  ttl = tonumber(ARGV[2])
end
return {n, ttl}
`;

// KEYS: window key. Returns {count, ms left}; {0, 0} when no window is open.
const GET = `
local n = redis.call('GET', KEYS[1])
if not n then return {0, 0} end
return {tonumber(n), math.max(redis.call('PTTL', KEYS[1]), 0)}
`;

type Scripts = {
  sbRateAdd(key: string, by: string, windowMs: string): Promise<[number, number]>;
  sbRateGet(key: string): Promise<[number, number]>;
};

export interface RedisRateLimitStoreOptions extends RedisClientOptions {
  /** One Redis (a redis:// URL) or a Redis Cluster's seed nodes. */
  url: RedisTarget;
  keyPrefix?: string;
}

export class RedisRateLimitStore implements RateLimitStore {
  readonly #redis: RedisClient & Scripts;
  readonly #prefix: string;

  constructor(options: RedisRateLimitStoreOptions) {
    this.#prefix = options.keyPrefix ?? 'sb:rl:';
    const redis = createRedisClient(options.url, options);
    redis.defineCommand('sbRateAdd', { numberOfKeys: 1, lua: ADD });
    redis.defineCommand('sbRateGet', { numberOfKeys: 1, lua: GET });
    this.#redis = redis as RedisClient & Scripts;
  }

  get redis(): RedisClient {
    return this.#redis;
  }

  async add(key: string, by: number, windowMs: number): Promise<RateWindow> {
    try {
      const [count, resetMs] = await this.#redis.sbRateAdd(this.#prefix + key, String(Math.trunc(by)), String(Math.max(1, Math.ceil(windowMs))));
      return { count, resetMs };
    } catch (err) {
      throw storeUnavailable('rate-limit', err);
    }
  }

  async get(key: string): Promise<RateWindow> {
    try {
      const [count, resetMs] = await this.#redis.sbRateGet(this.#prefix + key);
      return { count, resetMs };
    } catch (err) {
      throw storeUnavailable('rate-limit', err);
    }
  }

  async close(): Promise<void> {
    await this.#redis.quit().catch(() => this.#redis.disconnect());
  }
}
