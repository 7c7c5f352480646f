// Redis InboxStore. One user's keys share the hash tag {uid}, so they live in one Redis Cluster
// slot and each Lua script but appendPair's (a message and its own copy: two users) touches one slot:
//
//   <prefix>{uid}:seq            string   last assigned sequence (never expires)
//   <prefix>{uid}:ep             string   the inbox's epoch (never expires)
//   <prefix>{uid}:log            zset     score = seq, member = "<seq>|<storedAt>|<body bytes>"
//   <prefix>{uid}:cur            hash     deviceId -> acknowledged / delivered position
//   <prefix>{uid}:dd:<sender>\0<msgId>   string   seq, expires after the dedupe window
//
// Append (dedupe check, sequence, store, prune) is one script: one round trip, atomic. The
// client auto-pipelines, so concurrent appends share round trips.
//
// The epoch is created by the first script that finds none (an append, or the read of a login):
// after Redis lost its data, the inbox that numbers from 1 again has a new one. The candidate
// comes from the caller (scripts stay deterministic); an inbox from before epochs existed (a
// seq key without an ep key) simply gets one, nothing else changes.

import type { Redis, RedisOptions } from 'ioredis';
import { createRedisClient, pingRedis, storeUnavailable } from '../redis/redis-client.js';
import { DEFAULT_INBOX_LIMITS, hasDedupeId, EpochSource, type AppendRequest, type AppendResult, type InboxLimits, type InboxRange, type InboxStore, type StoredMessage } from './inbox-store.js';

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
  // The epoch stays a string in Lua (a double would print as 1.2e+15) and travels as a bulk reply.
  const epoch = `
local function epoch(key, candidate)
  local current = redis.call('GET', key)
  if current then return current end
  redis.call('SET', key, candidate)
  return candidate
end
`;
  // One inbox's append: {seq, duplicate (0|1), epoch}.
  const append = `${prune}${epoch}
local function append(seqKey, epKey, logKey, ddKey, body, now, dedupe, candidate)
  local ep = epoch(epKey, candidate)
  if dedupe == '1' then
    local seen = redis.call('GET', ddKey)
    if seen then return {tonumber(seen), 1, ep} end
  end
  local seq = redis.call('INCR', seqKey)
  redis.call('ZADD', logKey, seq, seq .. '|' .. now .. '|' .. body)
  if seq % 16 == 0 then prune(logKey, tonumber(now)) else
    local n = redis.call('ZCARD', logKey)
    if n > ${maxMessages} then redis.call('ZREMRANGEBYRANK', logKey, 0, n - ${maxMessages} - 1) end
  end
  redis.call('PEXPIRE', logKey, ${maxAgeMs})
  if dedupe == '1' then redis.call('SET', ddKey, seq, 'PX', ${dedupeWindowMs}) end
  return {seq, 0, ep}
end
`;
  return {
    // KEYS: seq, ep, log, dedupe   ARGV: body, now, dedupe (0|1), candidate epoch
    append: `${append}
return append(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1], ARGV[2], ARGV[3], ARGV[4])
`,
    // KEYS: the four of each inbox   ARGV: body 1, body 2, now, dedupe (0|1), candidate epoch 1 and 2
    // Two inboxes in one script: one Redis, not a Redis Cluster (their keys are in two slots).
    appendPair: `${append}
local a = append(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1], ARGV[3], ARGV[4], ARGV[5])
local b = append(KEYS[5], KEYS[6], KEYS[7], KEYS[8], ARGV[2], ARGV[3], ARGV[4], ARGV[6])
return {a[1], a[2], a[3], b[1], b[2], b[3]}
`,
    // KEYS: seq, ep, log   ARGV: after, limit, now, candidate epoch
    range: `${prune}${epoch}
prune(KEYS[3], tonumber(ARGV[3]))
local ep = epoch(KEYS[2], ARGV[4])
local head = tonumber(redis.call('GET', KEYS[1]) or '0')
local first = redis.call('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')
local oldest = head + 1
if #first > 0 then oldest = tonumber(first[2]) end
local messages = {}
if tonumber(ARGV[2]) > 0 then
  messages = redis.call('ZRANGEBYSCORE', KEYS[3], '(' .. ARGV[1], '+inf', 'LIMIT', 0, ARGV[2])
end
return {head, oldest, messages, ep}
`,
    // KEYS: seq, ep, cur   ARGV: deviceId, seq, epoch
    // Clamped to the head in the same step: no position can point past what the inbox holds.
    saveCursor: `
if redis.call('GET', KEYS[2]) ~= ARGV[3] then return 0 end
local position = math.min(tonumber(ARGV[2]), tonumber(redis.call('GET', KEYS[1]) or '0'))
local current = tonumber(redis.call('HGET', KEYS[3], ARGV[1]) or '-1')
if position > current then redis.call('HSET', KEYS[3], ARGV[1], position) end
redis.call('PEXPIRE', KEYS[3], ${maxAgeMs})
return 1
`,
    // KEYS: ep, cur   ARGV: expected epoch, candidate epoch
    resetEpoch: `
local current = redis.call('GET', KEYS[1])
if current and current ~= ARGV[1] then return current end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('DEL', KEYS[2])
return ARGV[2]
`,
  };
}

type Scripts = {
  sbAppend(seq: string, ep: string, log: string, dedupe: string, body: Buffer, now: number, dedupe01: string, epoch: number): Promise<[number, number, string]>;
  sbAppendPair(seq1: string, ep1: string, log1: string, dd1: string, seq2: string, ep2: string, log2: string, dd2: string, body1: Buffer, body2: Buffer, now: number, dedupe01: string, epoch1: number, epoch2: number): Promise<[number, number, string, number, number, string]>;
  sbRangeBuffer(seq: string, ep: string, log: string, after: number, limit: number, now: number, epoch: number): Promise<[number, number, Buffer[], Buffer]>;
  sbSaveCursor(seqKey: string, ep: string, cur: string, deviceId: string, position: number, epoch: number): Promise<number>;
  sbResetEpoch(ep: string, cur: string, expected: number, epoch: number): Promise<string>;
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
  /** The clock messages are stamped and aged by (tests inject one); default Date.now. */
  now?: () => number;
}

export class RedisInboxStore implements InboxStore {
  readonly #redis: Redis & Scripts;
  readonly #limits: InboxLimits;
  readonly #prefix: string;
  readonly #epochs = new EpochSource();
  readonly #now: () => number;

  constructor(options: RedisInboxStoreOptions) {
    this.#limits = { ...DEFAULT_INBOX_LIMITS, ...options.limits };
    this.#prefix = options.keyPrefix ?? 'sb:';
    this.#now = options.now ?? Date.now;
    const redis = createRedisClient(options.url, options);
    const lua = scripts(this.#limits);
    redis.defineCommand('sbAppend', { numberOfKeys: 4, lua: lua.append });
    redis.defineCommand('sbAppendPair', { numberOfKeys: 8, lua: lua.appendPair });
    redis.defineCommand('sbRange', { numberOfKeys: 3, lua: lua.range });
    redis.defineCommand('sbSaveCursor', { numberOfKeys: 3, lua: lua.saveCursor });
    redis.defineCommand('sbResetEpoch', { numberOfKeys: 2, lua: lua.resetEpoch });
    this.#redis = redis as Redis & Scripts;
  }

  /** The underlying connection, for health checks and logging of its events. */
  get redis(): Redis {
    return this.#redis;
  }

  async append({ uid, sender, msgId, body }: AppendRequest): Promise<AppendResult> {
    const dedupe = hasDedupeId(msgId);
    const k = this.#keys(uid);
    let reply: [number, number, string];
    try {
      reply = await this.#redis.sbAppend(
        k.seq,
        k.ep,
        k.log,
        dedupe ? `${k.base}:dd:${sender}\0${msgId}` : `${k.base}:dd`,
        bufferOf(body),
        this.#now(),
        dedupe ? '1' : '0',
        this.#epochs.next(),
      );
    } catch (err) {
      throw storeUnavailable('inbox', err);
    }
    const [seq, duplicate, epoch] = reply;
    return { seq: Number(seq), duplicate: duplicate === 1, epoch: Number(epoch) };
  }

  async appendPair(first: AppendRequest, second: AppendRequest): Promise<[AppendResult, AppendResult]> {
    // The two share the msgId (a message and its own copy); each keeps its own dedupe key.
    const a = this.#keys(first.uid);
    const b = this.#keys(second.uid);
    const dedupe = hasDedupeId(first.msgId) && hasDedupeId(second.msgId);
    let reply: [number, number, string, number, number, string];
    try {
      reply = await this.#redis.sbAppendPair(
        a.seq,
        a.ep,
        a.log,
        dedupe ? `${a.base}:dd:${first.sender}\0${first.msgId}` : `${a.base}:dd`,
        b.seq,
        b.ep,
        b.log,
        dedupe ? `${b.base}:dd:${second.sender}\0${second.msgId}` : `${b.base}:dd`,
        bufferOf(first.body),
        bufferOf(second.body),
        this.#now(),
        dedupe ? '1' : '0',
        this.#epochs.next(),
        this.#epochs.next(),
      );
    } catch (err) {
      throw storeUnavailable('inbox', err);
    }
    return [
      { seq: Number(reply[0]), duplicate: reply[1] === 1, epoch: Number(reply[2]) },
      { seq: Number(reply[3]), duplicate: reply[4] === 1, epoch: Number(reply[5]) },
    ];
  }

  async range(uid: string, after: number, limit: number): Promise<InboxRange> {
    const k = this.#keys(uid);
    let reply: [number, number, Buffer[], Buffer];
    try {
      reply = await this.#redis.sbRangeBuffer(k.seq, k.ep, k.log, after, limit, this.#now(), this.#epochs.next());
    } catch (err) {
      throw storeUnavailable('inbox', err);
    }
    const [head, oldest, members, epoch] = reply;
    return { head: Number(head), oldest: Number(oldest), epoch: Number(epoch.toString('latin1')), messages: members.map(parseMember) };
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

  async saveCursor(uid: string, deviceId: string, seq: number, epoch: number): Promise<void> {
    const k = this.#keys(uid);
    try {
      await this.#redis.sbSaveCursor(k.seq, k.ep, k.cur, deviceId, seq, epoch);
    } catch (err) {
      throw storeUnavailable('inbox', err);
    }
  }

  async resetEpoch(uid: string, from: number): Promise<number> {
    const k = this.#keys(uid);
    try {
      return Number(await this.#redis.sbResetEpoch(k.ep, k.cur, from, this.#epochs.next()));
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
    return { base, seq: `${base}:seq`, ep: `${base}:ep`, log: `${base}:log`, cur: `${base}:cur` };
  }
}

const BAR = 0x7c;

/** A view of a body as a Buffer, for the Redis client (no copy). */
function bufferOf(body: Uint8Array): Buffer {
  return Buffer.from(body.buffer, body.byteOffset, body.byteLength);
}

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
