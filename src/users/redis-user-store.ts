// Redis UserStore.
//
//   <prefix>user:{username}   hash    username, passwordHash, createdAt; receipts = "0" once turned off
//   <prefix>users:count       string  the number of accounts created
//
// create is one Lua script on the user's key (exists? else write all three fields), so two
// concurrent creates of a name cannot both win and no reader sees half a record. The counter is
// incremented by a second command after a successful create: the script touches only the
// user's key, so it stays within one Redis Cluster slot like every other script here. If the
// connection fails between the two commands, the account exists and count() stays one short;
// count() is a statistic, never used to decide anything.

import type { Redis, RedisOptions } from 'ioredis';
import { createRedisClient, pingRedis, storeUnavailable } from '../redis/redis-client.js';
import type { NewUser, UserRecord, UserStore } from './user-store.js';

// KEYS: user hash   ARGV: username, passwordHash, createdAt. Returns 1 if created, 0 if taken.
const CREATE = `
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'username', ARGV[1], 'passwordHash', ARGV[2], 'createdAt', ARGV[3])
return 1
`;

// KEYS: user hash   ARGV: "1" | "0". Returns 1 if set, 0 if there is no such account.
const SET_RECEIPTS = `
if redis.call('HEXISTS', KEYS[1], 'passwordHash') == 0 then return 0 end
redis.call('HSET', KEYS[1], 'receipts', ARGV[1])
return 1
`;

type Scripts = {
  sbCreateUser(userKey: string, username: string, passwordHash: string, createdAt: string): Promise<number>;
  sbSetReceipts(userKey: string, on: string): Promise<number>;
};

export interface RedisUserStoreOptions {
  url: string;
  keyPrefix?: string;
  /** Bound on every command (SB_ERR_STORE_UNAVAILABLE after it); default 2 s. */
  timeoutMs?: number;
  redisOptions?: RedisOptions;
}

export class RedisUserStore implements UserStore {
  readonly #redis: Redis & Scripts;
  readonly #prefix: string;

  constructor(options: RedisUserStoreOptions) {
    this.#prefix = options.keyPrefix ?? 'sb:';
    const redis = createRedisClient(options.url, options);
    redis.defineCommand('sbCreateUser', { numberOfKeys: 1, lua: CREATE });
    redis.defineCommand('sbSetReceipts', { numberOfKeys: 1, lua: SET_RECEIPTS });
    this.#redis = redis as Redis & Scripts;
  }

  get redis(): Redis {
    return this.#redis;
  }

  async create({ username, passwordHash, createdAt }: NewUser): Promise<boolean> {
    try {
      const created = await this.#redis.sbCreateUser(this.#userKey(username), username, passwordHash, String(createdAt));
      if (created !== 1) return false;
      await this.#redis.incr(this.#countKey());
      return true;
    } catch (err) {
      throw storeUnavailable('user', err);
    }
  }

  async get(username: string): Promise<UserRecord | undefined> {
    let fields: Record<string, string>;
    try {
      fields = await this.#redis.hgetall(this.#userKey(username));
    } catch (err) {
      throw storeUnavailable('user', err);
    }
    // The name is in the key, never a field name, so hgetall's plain object is safe for any name.
    if (fields.passwordHash === undefined || fields.createdAt === undefined) return undefined;
    return { uid: username, username, passwordHash: fields.passwordHash, createdAt: Number(fields.createdAt) };
  }

  async exists(username: string): Promise<boolean> {
    try {
      // The field get() requires: create() writes every field in one script, so this is the same test.
      return (await this.#redis.hexists(this.#userKey(username), 'passwordHash')) === 1;
    } catch (err) {
      throw storeUnavailable('user', err);
    }
  }

  async count(): Promise<number> {
    try {
      return Number((await this.#redis.get(this.#countKey())) ?? 0);
    } catch (err) {
      throw storeUnavailable('user', err);
    }
  }

  async receipts(username: string): Promise<boolean> {
    try {
      return (await this.#redis.hget(this.#userKey(username), 'receipts')) !== '0';
    } catch (err) {
      throw storeUnavailable('user', err);
    }
  }

  async setReceipts(username: string, on: boolean): Promise<boolean> {
    try {
      return (await this.#redis.sbSetReceipts(this.#userKey(username), on ? '1' : '0')) === 1;
    } catch (err) {
      throw storeUnavailable('user', err);
    }
  }

  ping(): Promise<void> {
    return pingRedis(this.#redis, 'user');
  }

  async close(): Promise<void> {
    await this.#redis.quit().catch(() => this.#redis.disconnect());
  }

  #userKey(username: string): string {
    return `${this.#prefix}user:{${username}}`;
  }

  #countKey(): string {
    return `${this.#prefix}users:count`;
  }
}
