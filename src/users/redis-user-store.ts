// Redis UserStore.
//
//   <prefix>user:{username}   hash    username, passwordHash, createdAt; receipts = "0" once turned off
//   <prefix>users:count       string  the number of accounts created
//   <prefix>rt:{username}     hash    refresh families: familyId -> "gen|sha256|createdAt|usedAt|expiresAt|deviceId";
//                                     at most maxFamilies fields; expires with its last family
//   <prefix>revoked:{username} hash   revocations: "*" -> user-wide time, "d:<deviceId>" -> a device's
//
// Every family operation is one Lua script on the user's rt key, so a rotation and a reuse of
// one token cannot both see the same generation (useFamily's atomicity). Every key of a user
// carries {username}, the Redis Cluster hash tag: a user's keys share one slot.
//
// create is one Lua script on the user's key (exists? else write all three fields), so two
// concurrent creates of a name cannot both win and no reader sees half a record. The counter is
// incremented by a second command after a successful create: the script touches only the
// user's key, so it stays within one Redis Cluster slot like every other script here. If the
// connection fails between the two commands, the account exists and count() stays one short;
// count() is a statistic, never used to decide anything.

import type { RedisOptions } from 'ioredis';
import { createRedisClient, pingRedis, storeUnavailable, type RedisClient, type RedisTarget } from '../redis/redis-client.js';
import { familyEnded, MAX_DEVICE_REVOCATIONS, NO_REVOCATIONS, type FamilyOutcome, type FamilyUse, type NewFamily, type NewUser, type RefreshFamily, type Revocation, type Revocations, type UserRecord, type UserStore } from './user-store.js';

/** Users whose revocations are read at once. */
const REVOCATION_BATCH = 500;

function parseFamily(id: string, value: string): RefreshFamily | undefined {
  const m = /^(\d+)\|[0-9a-f]+\|(\d+)\|(\d+)\|(\d+)\|(.*)$/s.exec(value);
  if (!m) return undefined;
  return { id, deviceId: m[5]!, generation: Number(m[1]), createdAt: Number(m[2]), usedAt: Number(m[3]), expiresAt: Number(m[4]) };
}

function parseRevocations(fields: Record<string, string>): Revocations {
  const entries = Object.entries(fields ?? {});
  if (entries.length === 0) return NO_REVOCATIONS;
  const devices = new Map<string, number>();
  let before = 0;
  for (const [field, value] of entries) {
    if (field === '*') before = Number(value);
    else if (field.startsWith('d:')) devices.set(field.slice(2), Number(value));
  }
  return { before, devices };
}

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

// KEYS: user hash   ARGV: passwordHash. Returns 1 if set, 0 if there is no such account.
const SET_PASSWORD = `
if redis.call('HEXISTS', KEYS[1], 'passwordHash') == 0 then return 0 end
redis.call('HSET', KEYS[1], 'passwordHash', ARGV[1])
return 1
`;

// The fields of a family's value; the device id is last, as it may hold '|'.
const FAMILY_LUA = `
local function parse(v)
  local gen, hash, created, used, exp, device = string.match(v, '^(%d+)|(%x+)|(%d+)|(%d+)|(%d+)|(.*)$')
  return tonumber(gen), hash, created, tonumber(used), tonumber(exp), device
end
`;

// KEYS: rt hash   ARGV: familyId, value, now, maxFamilies. Returns the evicted ids.
const CREATE_FAMILY = `${FAMILY_LUA}
local now = tonumber(ARGV[3])
local all = redis.call('HGETALL', KEYS[1])
local live = {}
local last = tonumber(string.match(ARGV[2], '^%d+|%x+|%d+|%d+|(%d+)|'))
for i = 1, #all, 2 do
  local _, _, created, _, exp = parse(all[i + 1])
  if exp == nil or exp <= now then
    redis.call('HDEL', KEYS[1], all[i])
  else
    table.insert(live, { all[i], tonumber(created) })
    if exp > last then last = exp end
  end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
table.sort(live, function(a, b) if a[2] == b[2] then return a[1] < b[1] end return a[2] < b[2] end)
local evicted = {}
local over = #live + 1 - tonumber(ARGV[4])
for i = 1, over do
  redis.call('HDEL', KEYS[1], live[i][1])
  table.insert(evicted, live[i][1])
end
redis.call('PEXPIRE', KEYS[1], math.max(1, last - now))
return evicted
`;

// KEYS: rt hash   ARGV: familyId, generation, tokenHash, now, idleMs, "rotate" | "revoke", nextHash.
// Returns {0} invalid, {1, value} rotated (the new value; for a revoke the last), {2, value} reused.
const USE_FAMILY = `${FAMILY_LUA}
local v = redis.call('HGET', KEYS[1], ARGV[1])
if not v then return { 0 } end
local gen, hash, created, used, exp, device = parse(v)
local now = tonumber(ARGV[4])
local idle = tonumber(ARGV[5])
if gen == nil or now >= exp or (idle > 0 and now >= used + idle) then
  redis.call('HDEL', KEYS[1], ARGV[1])
  return { 0 }
end
local given = tonumber(ARGV[2])
if given < gen then
  redis.call('HDEL', KEYS[1], ARGV[1])
  return { 2, v }
end
if given ~= gen or ARGV[3] ~= hash then return { 0 } end
if ARGV[6] == 'revoke' then
  redis.call('HDEL', KEYS[1], ARGV[1])
  return { 1, v }
end
local nv = tostring(gen + 1) .. '|' .. ARGV[7] .. '|' .. created .. '|' .. ARGV[4] .. '|' .. tostring(exp) .. '|' .. device
redis.call('HSET', KEYS[1], ARGV[1], nv)
return { 1, nv }
`;

// KEYS: rt hash. Returns how many families there were.
const REVOKE_FAMILIES = `
local n = #redis.call('HGETALL', KEYS[1]) / 2
redis.call('DEL', KEYS[1])
return n
`;

// KEYS: revoked hash   ARGV: "user" | "device", deviceId, before, keepMs, maxDevices.
const REVOKE = `
local before = tonumber(ARGV[3])
local field = '*'
if ARGV[1] == 'device' then field = 'd:' .. ARGV[2] end
local current = tonumber(redis.call('HGET', KEYS[1], field) or '0')
if before > current then redis.call('HSET', KEYS[1], field, ARGV[3]) end
if ARGV[1] ~= 'device' then return 1 end
local all = redis.call('HGETALL', KEYS[1])
local devices = {}
local oldest = before - tonumber(ARGV[4])
for i = 1, #all, 2 do
  if string.sub(all[i], 1, 2) == 'd:' then
    local t = tonumber(all[i + 1])
    if t < oldest then redis.call('HDEL', KEYS[1], all[i]) else table.insert(devices, { all[i], t }) end
  end
end
table.sort(devices, function(a, b) return a[2] < b[2] end)
for i = 1, #devices - tonumber(ARGV[5]) do redis.call('HDEL', KEYS[1], devices[i][1]) end
return 1
`;

type Scripts = {
  sbSetPassword(userKey: string, passwordHash: string): Promise<number>;
  sbCreateFamily(rtKey: string, id: string, value: string, now: string, max: string): Promise<string[]>;
  sbUseFamily(rtKey: string, id: string, generation: string, hash: string, now: string, idleMs: string, action: string, nextHash: string): Promise<[number, string?]>;
  sbRevokeFamilies(rtKey: string): Promise<number>;
  sbRevoke(key: string, kind: string, deviceId: string, before: string, keepMs: string, max: string): Promise<number>;
  sbCreateUser(userKey: string, username: string, passwordHash: string, createdAt: string): Promise<number>;
  sbSetReceipts(userKey: string, on: string): Promise<number>;
};

export interface RedisUserStoreOptions {
  /** One Redis (a redis:// URL) or a Redis Cluster's seed nodes. */
  url: RedisTarget;
  keyPrefix?: string;
  /** Bound on every command (SB_ERR_STORE_UNAVAILABLE after it); default 2 s. */
  timeoutMs?: number;
  redisOptions?: RedisOptions;
}

export class RedisUserStore implements UserStore {
  readonly #redis: RedisClient & Scripts;
  readonly #prefix: string;

  constructor(options: RedisUserStoreOptions) {
    this.#prefix = options.keyPrefix ?? 'sb:';
    const redis = createRedisClient(options.url, options);
    redis.defineCommand('sbCreateUser', { numberOfKeys: 1, lua: CREATE });
    redis.defineCommand('sbSetReceipts', { numberOfKeys: 1, lua: SET_RECEIPTS });
    redis.defineCommand('sbSetPassword', { numberOfKeys: 1, lua: SET_PASSWORD });
    redis.defineCommand('sbCreateFamily', { numberOfKeys: 1, lua: CREATE_FAMILY });
    redis.defineCommand('sbUseFamily', { numberOfKeys: 1, lua: USE_FAMILY });
    redis.defineCommand('sbRevokeFamilies', { numberOfKeys: 1, lua: REVOKE_FAMILIES });
    redis.defineCommand('sbRevoke', { numberOfKeys: 1, lua: REVOKE });
    this.#redis = redis as RedisClient & Scripts;
  }

  get redis(): RedisClient {
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

  async setPasswordHash(username: string, passwordHash: string): Promise<boolean> {
    try {
      return (await this.#redis.sbSetPassword(this.#userKey(username), passwordHash)) === 1;
    } catch (err) {
      throw storeUnavailable('user', err);
    }
  }

  async createFamily(uid: string, family: NewFamily): Promise<string[]> {
    const { id, deviceId, tokenHash, now, expiresAt, maxFamilies } = family;
    const value = `1|${tokenHash}|${now}|${now}|${expiresAt}|${deviceId}`;
    try {
      return await this.#redis.sbCreateFamily(this.#key('rt', uid), id, value, String(now), String(maxFamilies));
    } catch (err) {
      throw storeUnavailable('user', err);
    }
  }

  async useFamily(uid: string, familyId: string, use: FamilyUse): Promise<FamilyOutcome> {
    const { generation, tokenHash, now, idleMs, action } = use;
    let answer: [number, string?];
    try {
      answer = await this.#redis.sbUseFamily(this.#key('rt', uid), familyId, String(generation), tokenHash, String(now), String(idleMs), action === 'revoke' ? 'revoke' : 'rotate', action === 'revoke' ? '' : action.rotate);
    } catch (err) {
      throw storeUnavailable('user', err);
    }
    const family = answer[1] === undefined ? undefined : parseFamily(familyId, answer[1]);
    if (!family || answer[0] === 0) return { outcome: 'invalid' };
    return { outcome: answer[0] === 2 ? 'reused' : 'rotated', family };
  }

  async families(uid: string, now: number, idleMs: number): Promise<RefreshFamily[]> {
    let all: Record<string, string>;
    try {
      all = await this.#redis.hgetall(this.#key('rt', uid));
    } catch (err) {
      throw storeUnavailable('user', err);
    }
    return Object.entries(all)
      .map(([id, value]) => parseFamily(id, value))
      .filter((f): f is RefreshFamily => f !== undefined && !familyEnded(f, now, idleMs))
      .sort((a, b) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : 1));
  }

  async revokeFamilies(uid: string): Promise<number> {
    try {
      return await this.#redis.sbRevokeFamilies(this.#key('rt', uid));
    } catch (err) {
      throw storeUnavailable('user', err);
    }
  }

  async revoke({ uid, deviceId, before }: Revocation, keepMs: number): Promise<void> {
    try {
      await this.#redis.sbRevoke(this.#key('revoked', uid), deviceId === undefined ? 'user' : 'device', deviceId ?? '', String(before), String(keepMs), String(MAX_DEVICE_REVOCATIONS));
    } catch (err) {
      throw storeUnavailable('user', err);
    }
  }

  async revocations(uids: readonly string[]): Promise<Map<string, Revocations>> {
    const out = new Map<string, Revocations>();
    // A bounded number of reads at a time: a worker asks for every user it holds a session of.
    // One command per user rather than one pipeline: on a Redis Cluster the users' keys are in
    // many slots, which one pipeline may not span; the client pipelines each batch anyway.
    for (let i = 0; i < uids.length; i += REVOCATION_BATCH) {
      const batch = uids.slice(i, i + REVOCATION_BATCH);
      let answers: Record<string, string>[];
      try {
        answers = await Promise.all(batch.map((uid) => this.#redis.hgetall(this.#key('revoked', uid))));
      } catch (err) {
        throw storeUnavailable('user', err);
      }
      batch.forEach((uid, j) => out.set(uid, parseRevocations(answers[j]!)));
    }
    return out;
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

  /** A per-user key beside the account's, in its slot: `<prefix><kind>:{username}`. */
  #key(kind: 'rt' | 'revoked', username: string): string {
    return `${this.#prefix}${kind}:{${username}}`;
  }

  #countKey(): string {
    return `${this.#prefix}users:count`;
  }
}
