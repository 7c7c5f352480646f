// Redis SessionStore: which worker holds which session, for routing across the cluster.
//
//   <prefix>{uid}:sess          hash  sessionId -> "nodeId|deviceId|platform|loginAt|expiresAt|"
//   <prefix>node:{nodeId}:sess  set   "sessionId|uid" of the node's sessions (for purgeNode)
//
// Every change is an atomic single-field hash operation (no JSON read-modify-write). Each
// record carries its own expiry, which byUser() honours; the keys also expire after the TTL,
// so a crashed worker's records vanish even if nobody purges them. Workers refresh theirs.

import type { RedisOptions } from 'ioredis';
import { keyTag } from '../redis/key-tag.js';
import { createRedisClient, pingRedis, storeUnavailable, type RedisClient, type RedisTarget } from '../redis/redis-client.js';
import { DEFAULT_SESSION_TTL_MS, type SessionRecord, type SessionStore } from './session-store.js';

// KEYS: user hash   ARGV: sessionId. Returns the removed value or false.
const TAKE = `
local value = redis.call('HGET', KEYS[1], ARGV[1])
if value then redis.call('HDEL', KEYS[1], ARGV[1]) end
return value
`;

// KEYS: user hash   ARGV: sessionId, required value prefix. Removes only a record held by that node.
const TAKE_OF = `
local value = redis.call('HGET', KEYS[1], ARGV[1])
if value and string.sub(value, 1, #ARGV[2]) == ARGV[2] then
  redis.call('HDEL', KEYS[1], ARGV[1])
  return value
end
return false
`;

type Scripts = {
  sbTakeSession(userKey: string, sessionId: string): Promise<string | null>;
  sbTakeSessionOf(userKey: string, sessionId: string, prefix: string): Promise<string | null>;
};

export interface RedisSessionStoreOptions {
  /** One Redis (a redis:// URL) or a Redis Cluster's seed nodes. */
  url: RedisTarget;
  ttlMs?: number;
  keyPrefix?: string;
  /** Bound on every command (SB_ERR_STORE_UNAVAILABLE after it); default 2 s. */
  timeoutMs?: number;
  redisOptions?: RedisOptions;
}

export class RedisSessionStore implements SessionStore {
  readonly #redis: RedisClient & Scripts;
  readonly #ttlMs: number;
  readonly #prefix: string;

  constructor(options: RedisSessionStoreOptions) {
    this.#ttlMs = options.ttlMs ?? DEFAULT_SESSION_TTL_MS;
    this.#prefix = options.keyPrefix ?? 'sb:';
    const redis = createRedisClient(options.url, options);
    redis.defineCommand('sbTakeSession', { numberOfKeys: 1, lua: TAKE });
    redis.defineCommand('sbTakeSessionOf', { numberOfKeys: 1, lua: TAKE_OF });
    this.#redis = redis as RedisClient & Scripts;
  }

  get redis(): RedisClient {
    return this.#redis;
  }

  async add(record: SessionRecord): Promise<void> {
    await this.refresh([record]);
  }

  async refresh(records: readonly SessionRecord[]): Promise<void> {
    if (records.length === 0) return;
    const expiresAt = Date.now() + this.#ttlMs;
    // One command per key rather than one pipeline: on a Redis Cluster the users' and the nodes'
    // keys are in many slots, which one pipeline may not span. The client pipelines what is sent
    // in one tick anyway (per node, on a cluster): still one round trip per node.
    const writes: Promise<unknown>[] = [];
    const nodes = new Set<string>();
    for (const r of records) {
      const userKey = this.#userKey(r.uid);
      writes.push(
        this.#redis.hset(userKey, r.sessionId, `${r.nodeId}|${r.deviceId}|${r.platform}|${r.loginAt}|${expiresAt}|`),
        this.#redis.pexpire(userKey, this.#ttlMs),
        this.#redis.sadd(this.#nodeKey(r.nodeId), `${r.sessionId}|${r.uid}`),
      );
      nodes.add(r.nodeId);
    }
    for (const nodeId of nodes) writes.push(this.#redis.pexpire(this.#nodeKey(nodeId), this.#ttlMs));
    try {
      await Promise.all(writes);
    } catch (err) {
      throw storeUnavailable('session', err);
    }
  }

  async remove(uid: string, sessionId: string): Promise<boolean> {
    try {
      const value = await this.#redis.sbTakeSession(this.#userKey(uid), sessionId);
      if (!value) return false;
      await this.#redis.srem(this.#nodeKey(value.slice(0, value.indexOf('|'))), `${sessionId}|${uid}`);
      return true;
    } catch (err) {
      throw storeUnavailable('session', err);
    }
  }

  async byUser(uid: string): Promise<SessionRecord[]> {
    let all: Record<string, string>;
    try {
      all = await this.#redis.hgetall(this.#userKey(uid));
    } catch (err) {
      throw storeUnavailable('session', err);
    }
    const now = Date.now();
    const out: SessionRecord[] = [];
    for (const [sessionId, value] of Object.entries(all)) {
      const [nodeId, deviceId, platform, loginAt, expiresAt] = splitRecord(value);
      if (Number(expiresAt) <= now) continue;
      out.push({ sessionId, uid, nodeId, deviceId, platform: Number(platform), loginAt: Number(loginAt) });
    }
    return out;
  }

  async purgeNode(nodeId: string): Promise<number> {
    const nodeKey = this.#nodeKey(nodeId);
    try {
      const members = await this.#redis.smembers(nodeKey);
      const removed = await Promise.all(
        members.map(async (member) => {
          const bar = member.indexOf('|');
          const sessionId = member.slice(0, bar);
          const uid = member.slice(bar + 1);
          // Only records still held by that node (the record may have been removed already).
          const value = await this.#redis.sbTakeSessionOf(this.#userKey(uid), sessionId, `${nodeId}|`);
          return value ? 1 : 0;
        }),
      );
      await this.#redis.del(nodeKey);
      return removed.reduce<number>((a, b) => a + b, 0);
    } catch (err) {
      throw storeUnavailable('session', err);
    }
  }

  ping(): Promise<void> {
    return pingRedis(this.#redis, 'session');
  }

  async close(): Promise<void> {
    await this.#redis.quit().catch(() => this.#redis.disconnect());
  }

  #userKey(uid: string): string {
    return `${this.#prefix}${keyTag(uid)}:sess`;
  }

  #nodeKey(nodeId: string): string {
    return `${this.#prefix}node:{${nodeId}}:sess`;
  }
}

/** "nodeId|deviceId|platform|loginAt|expiresAt|": deviceId may contain '|', so split from both ends. */
function splitRecord(value: string): [string, string, string, string, string] {
  const parts = value.split('|');
  const nodeId = parts[0]!;
  const expiresAt = parts[parts.length - 2]!;
  const loginAt = parts[parts.length - 3]!;
  const platform = parts[parts.length - 4]!;
  const deviceId = parts.slice(1, parts.length - 4).join('|');
  return [nodeId, deviceId, platform, loginAt, expiresAt];
}
