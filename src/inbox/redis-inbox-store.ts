// Redis InboxStore. One user's keys share the hash tag {uid}, so they live in one Redis Cluster
// slot and each Lua script touches one slot:
//
//   <prefix>{uid}:seq            string   last assigned sequence (never expires)
//   <prefix>{uid}:log            zset     score = seq, member = "<seq>|<storedAt>|<body bytes>"
//   <prefix>{uid}:cur            hash     deviceId -> acknowledged / delivered position
//   <prefix>{uid}:dd:<sender>\0<msgId>   string   seq, expires after the dedupe window
//
// Append (dedupe check, sequence, store, prune) is one script: one round trip, atomic. The
// client auto-pipelines, so concurrent appends share round trips.

import type { Redis, RedisOptions } from 'ioredis';
import { createRedisClient, pingRedis, storeUnavailable } from '../redis/redis-client.js';
import { DEFAULT_INBOX_LIMITS, hasDedupeId, type AppendRequest, type AppendResult, type InboxLimits, type InboxRange, type InboxStore, type StoredMessage } from './inbox-store.js';

// The limits are written into the scripts (fewer arguments per call is measurably faster).
// Expired messages are pruned from the oldest end on every 16th append and on every read;
// between prunes, reads skip nothing because they prune first.
function scripts({ maxMessages, maxAgeMs, dedupeWindowMs }: InboxLimits) {
  const prune = `
local function prune(log, now)
  local n = redis.call('ZCARD', log)
  if n > ${maxMessages} then redis.call('ZREMRANGEBYRANK', log, 0, n - ${maxMessages} - 1) end
  local cutoff = now - ${maxAgeMs}
  for _ = 1, 1000 do
    local first = redis.call('ZRANGE', log, 0, 0)
    if #first == 0 then return end
    local storedAt = tonumber(string.match(first[1], '^%d+|(%d+)|'))
    if storedAt >= cutoff then return end
    redis.call('ZREMRANGEBYRANK', log, 0, 0)
  end
end
`;
  return {
    // KEYS: seq, log, dedupe   ARGV: body, now, dedupe (0|1)
    append: `${prune}
if ARGV[3] == '1' then
  local seen = redis.call('GET', KEYS[3])
  if seen then return {tonumber(seen), 1} end
end
local seq = redis.call('INCR', KEYS[1])
redis.call('ZADD', KEYS[2], seq, seq .. '|' .. ARGV[2] .. '|' .. ARGV[1])
if seq % 16 == 0 then prune(KEYS[2], tonumber(ARGV[2])) else
  local n = redis.call('ZCARD', KEYS[2])
  if n > ${maxMessages} then redis.call('ZREMRANGEBYRANK', KEYS[2], 0, n - ${maxMessages} - 1) end
end
redis.call('PEXPIRE', KEYS[2], ${maxAgeMs})
if ARGV[3] == '1' then redis.call('SET', KEYS[3], seq, 'PX', ${dedupeWindowMs}) end
return {seq, 0}
`,
    // KEYS: seq, log   ARGV: after, limit, now
    range: `${prune}
prune(KEYS[2], tonumber(ARGV[3]))
local head = tonumber(redis.call('GET', KEYS[1]) or '0')
local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
local oldest = head + 1
if #first > 0 then oldest = tonumber(first[2]) end
local messages = {}
if tonumber(ARGV[2]) > 0 then
  messages = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. ARGV[1], '+inf', 'LIMIT', 0, ARGV[2])
end
return {head, oldest, messages}
`,
    // KEYS: cur   ARGV: deviceId, seq
    saveCursor: `
local current = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '-1')
if tonumber(ARGV[2]) > current then redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) end
redis.call('PEXPIRE', KEYS[1], ${maxAgeMs})
return 0
`,
  };
}

type Scripts = {
  sbAppend(seq: string, log: string, dedupe: string, body: Buffer, now: number, dedupe01: string): Promise<[number, number]>;
  sbRangeBuffer(seq: string, log: string, after: number, limit: number, now: number): Promise<[number, number, Buffer[]]>;
  sbSaveCursor(cur: string, deviceId: string, seq: number): Promise<number>;
};

export interface RedisInboxStoreOptions {
  /** A redis:// URL. */
  url: string;
  limits?: Partial<InboxLimits>;
  /** Prefix of every key, default "sb:". */
  keyPrefix?: string;
  /** Bound on every command (SB_ERR_STORE_UNAVAILABLE after it); default 2 s. */
  timeoutMs?: number;
  redisOptions?: RedisOptions;
}

export class RedisInboxStore implements InboxStore {
  readonly #redis: Redis & Scripts;
  readonly #limits: InboxLimits;
  readonly #prefix: string;

  constructor(options: RedisInboxStoreOptions) {
    this.#limits = { ...DEFAULT_INBOX_LIMITS, ...options.limits };
    this.#prefix = options.keyPrefix ?? 'sb:';
    const redis = createRedisClient(options.url, options);
    const lua = scripts(this.#limits);
    redis.defineCommand('sbAppend', { numberOfKeys: 3, lua: lua.append });
    redis.defineCommand('sbRange', { numberOfKeys: 2, lua: lua.range });
    redis.defineCommand('sbSaveCursor', { numberOfKeys: 1, lua: lua.saveCursor });
    this.#redis = redis as Redis & Scripts;
  }

  /** The underlying connection, for health checks and logging of its events. */
  get redis(): Redis {
    return this.#redis;
  }

  async append({ uid, sender, msgId, body }: AppendRequest): Promise<AppendResult> {
    const dedupe = hasDedupeId(msgId);
    const k = this.#keys(uid);
    let reply: [number, number];
    try {
      reply = await this.#redis.sbAppend(
        k.seq,
        k.log,
        dedupe ? `${k.base}:dd:${sender}\0${msgId}` : `${k.base}:dd`,
        Buffer.from(body.buffer, body.byteOffset, body.byteLength),
        Date.now(),
        dedupe ? '1' : '0',
      );
    } catch (err) {
      throw storeUnavailable('inbox', err);
    }
    return { seq: Number(reply[0]), duplicate: reply[1] === 1 };
  }

  async range(uid: string, after: number, limit: number): Promise<InboxRange> {
    const k = this.#keys(uid);
    let reply: [number, number, Buffer[]];
    try {
      reply = await this.#redis.sbRangeBuffer(k.seq, k.log, after, limit, Date.now());
    } catch (err) {
      throw storeUnavailable('inbox', err);
    }
    const [head, oldest, members] = reply;
    return { head: Number(head), oldest: Number(oldest), messages: members.map(parseMember) };
  }

  async cursor(uid: string, deviceId: string): Promise<number | undefined> {
    let value: string | null;
    try {
      value = await this.#redis.hget(this.#keys(uid).cur, deviceId);
    } catch (err) {
      throw storeUnavailable('inbox', err);
    }
    return value === null ? undefined : Number(value);
  }

  async saveCursor(uid: string, deviceId: string, seq: number): Promise<void> {
    try {
      await this.#redis.sbSaveCursor(this.#keys(uid).cur, deviceId, seq);
    } catch (err) {
      throw storeUnavailable('inbox', err);
    }
  }

  ping(): Promise<void> {
    return pingRedis(this.#redis, 'inbox');
  }

  async close(): Promise<void> {
    await this.#redis.quit().catch(() => this.#redis.disconnect());
  }

  #keys(uid: string) {
    const base = `${this.#prefix}{${uid}}`;
    return { base, seq: `${base}:seq`, log: `${base}:log`, cur: `${base}:cur` };
  }
}

const BAR = 0x7c;

/** "<seq>|<storedAt>|<body>" → StoredMessage; the body may contain '|' itself. */
function parseMember(member: Buffer): StoredMessage {
  const a = member.indexOf(BAR);
  const b = member.indexOf(BAR, a + 1);
  return {
    seq: Number(member.toString('latin1', 0, a)),
    storedAt: Number(member.toString('latin1', a + 1, b)),
    body: member.subarray(b + 1),
  };
}
