// Redis GroupStore. Everything of one group shares the hash tag {g:<id>}, so it lives in one
// Redis Cluster slot and every group script touches one slot; each user's index shares {u:<uid>}:
//
//   <prefix>{g:<id>}:info      hash    name, meta (JSON), owner, createdAt, head, count, dissolved (0|1)
//   <prefix>{g:<id>}:mem       hash    uid -> role (o|a|m) and the seq it joined at: "m17"
//   <prefix>{g:<id>}:ml        zset    score 0, member uid: the members in byte order, for paging
//   <prefix>{g:<id>}:former    hash    uid -> "<joined>|<left>|<l|r>" (left or removed)
//   <prefix>{g:<id>}:fq        zset    score left, member uid: who is forgotten first
//   <prefix>{g:<id>}:log       zset    score seq, member "<seq>|<storedAt>|<m|e><sender bytes>|<sender><body>"
//   <prefix>{g:<id>}:dd        hash    "<sender>\0<msgId>" -> "<seq>|<storedAt>"
//   <prefix>{g:<id>}:ddq       list    the dd fields, oldest first: forgotten from the front
//   <prefix>{g:<id>}:cur       hash    uid -> JSON {deviceId: "seq"} (at most maxDevicesPerMember)
//   <prefix>{u:<uid>}:groups   zset    score 0, member group id: the user's groups, for paging
//   <prefix>{u:<uid>}:departed zset    score when, member group id: the most recent maxDeparted
//   <prefix>{u:<uid>}:gs       hash    group id -> "<seq>|<m|l|r|d>": the last change the index applied
//
// Every group operation is one script: the authorisation, the change and the event that records
// it happen atomically, and cost O(uids named) (a prune, O(entries pruned), aside). The limits
// are written into the scripts, as in the inbox. A dissolved group's keys expire maxAgeMs after it.
//
// The user indexes live in other slots, so they cannot change in the group's script. Membership
// in the group is the truth; the index follows it, and is only ever *ahead* of it:
//   - a join is written to the index first (a reservation, which also enforces maxGroupsPerUser
//     atomically in the user's slot), then to the group, then confirmed in the index with its seq;
//     a refused change takes its reservations back;
//   - a departure (removed, left, dissolved) is written to the group first, then to the index.
// Each index write carries the seq of the group event it follows and is ignored when the index
// already applied a later one, so writes that arrive out of order (two gates) converge. A crash
// between the steps leaves the index listing a group the user is not (or no longer) a member of:
// groupsOf checks each group it lists against the group's slot and repairs such entries on the
// spot (a departure it missed is recorded, with the group's seq, so departedOf learns it too; a
// reservation nobody confirmed is dropped). A dissolve whose departures were not all written is
// repaired the same way, user by user.

import type { Redis, RedisOptions } from 'ioredis';
import { SwitchboardError, isErrorCode } from '../errors.js';
import { hasDedupeId } from '../inbox/inbox-store.js';
import { createRedisClient, pingRedis, storeUnavailable } from '../redis/redis-client.js';
import {
  checkBody,
  checkDeviceId,
  checkGroupId,
  checkLimit,
  checkMeta,
  checkName,
  checkSeq,
  checkUid,
  checkUids,
  eventJson,
  groupLimits,
  newGroupId,
  type AppendResult,
  type ChangeResult,
  type Departure,
  type DepartureReason,
  type Group,
  type GroupEntry,
  type GroupLimits,
  type GroupMeta,
  type GroupRole,
  type GroupsPage,
  type GroupStore,
  type GroupView,
  type MemberPage,
  type Page,
  type ReadResult,
} from './group-store.js';

/**
 * The commands the group store sends (in its scripts or directly) beyond those the other stores
 * do (test/helpers/redis.ts SWITCHBOARD_ACL): what an ACL user needs in addition.
 */
export const GROUP_REDIS_COMMANDS = ['hmget', 'hincrby', 'hexists', 'zrem', 'zscore', 'zrangebylex', 'lindex', 'lpop', 'rpush'] as const;

/** Departures written to user indexes at once while a dissolve walks its members. */
const DISSOLVE_SLICE = 500;

const ROLE_OF: Record<string, GroupRole> = { o: 'owner', a: 'admin', m: 'member' };
const REASON_OF: Record<string, DepartureReason> = { l: 'left', r: 'removed', d: 'dissolved' };

// Shared by every group script. KEYS are always the group's nine keys, in the order of the
// layout above. A refusal is raised before the script writes anything.
function prelude(l: GroupLimits): string {
  return `
local INFO, MEM, ML, FORMER, FQ, LOG, DD, DDQ, CUR = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9]
local RANK = {m = 0, a = 1, o = 2}
local function d(n) return string.format('%d', n) end
local function fail(code, message) error({err = code .. ' ' .. message}) end

local function storedAtOf(member) return tonumber(string.match(member, '^%d+|(%d+)|')) end

-- The oldest retained seq; head + 1 when none is.
local function oldestOf(head)
  local first = redis.call('ZRANGE', LOG, 0, 0, 'WITHSCORES')
  if #first == 0 then return head + 1 end
  return tonumber(first[2])
end

-- Entries older than maxAgeMs go: store times ascend with seqs, so a binary search over the
-- ranks finds the first one kept, in O(log n) calls.
local function pruneAge(now)
  local cutoff = now - ${l.maxAgeMs}
  local n = redis.call('ZCARD', LOG)
  if n == 0 or storedAtOf(redis.call('ZRANGE', LOG, 0, 0)[1]) >= cutoff then return end
  local lo, hi = 1, n
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if storedAtOf(redis.call('ZRANGE', LOG, mid, mid)[1]) >= cutoff then hi = mid else lo = mid + 1 end
  end
  redis.call('ZREMRANGEBYRANK', LOG, 0, lo - 1)
end

-- A former member, and its positions, once it can read nothing any more.
local function forget(uid)
  redis.call('HDEL', FORMER, uid)
  redis.call('ZREM', FQ, uid)
  redis.call('HDEL', CUR, uid)
end

-- Forgets the former members whose last visible entry was pruned; returns the oldest retained seq.
local function pruneFormer(head)
  local oldest = oldestOf(head)
  for _, uid in ipairs(redis.call('ZRANGEBYSCORE', FQ, '-inf', '(' .. d(oldest))) do forget(uid) end
  return oldest
end

local function formerBound()
  local n = redis.call('ZCARD', FQ)
  if n <= ${l.maxFormerMembers} then return end
  for _, uid in ipairs(redis.call('ZRANGE', FQ, 0, n - ${l.maxFormerMembers} - 1)) do forget(uid) end
end

-- The group's head and whether it is dissolved; NOT_FOUND if there is none, or if it was
-- dissolved and its whole log aged out.
local function load(now)
  local info = redis.call('HMGET', INFO, 'head', 'dissolved')
  if not info[1] then fail('SB_ERR_GROUP_NOT_FOUND', 'no such group') end
  local dissolved = info[2] == '1'
  if dissolved then
    pruneAge(now)
    if redis.call('ZCARD', LOG) == 0 then fail('SB_ERR_GROUP_NOT_FOUND', 'no such group') end
  end
  return tonumber(info[1]), dissolved
end

local function notMember(uid) fail('SB_ERR_GROUP_NOT_MEMBER', uid .. ' is not a member of the group') end

-- The head, if actor is a member with at least \`need\` (a RANK) and the group takes changes;
-- also the actor's role and joined seq. Refusals in the memory store's order.
local function writable(now, actor, need)
  local head, dissolved = load(now)
  local v = redis.call('HGET', MEM, actor)
  if not v then notMember(actor) end
  if dissolved then fail('SB_ERR_GROUP_DISSOLVED', 'the group was dissolved') end
  local role = string.sub(v, 1, 1)
  if RANK[role] < need then
    if need == 2 then fail('SB_ERR_GROUP_FORBIDDEN', 'only the owner may do this') end
    fail('SB_ERR_GROUP_FORBIDDEN', 'only an admin or the owner may do this')
  end
  return head, role, tonumber(string.sub(v, 2))
end

-- What uid may read: its first and last seq and its role char (false for a former member).
local function reader(uid, head)
  local v = redis.call('HGET', MEM, uid)
  if v then return tonumber(string.sub(v, 2)), head, string.sub(v, 1, 1) end
  local f = redis.call('HGET', FORMER, uid)
  if f then
    local joined, left = string.match(f, '^(%d+)|(%d+)|')
    return tonumber(joined), tonumber(left), false
  end
  notMember(uid)
end

-- Appends an entry, then prunes: by count, by age, and the former members who can read nothing.
local function appendEntry(kind, sender, body, now)
  local seq = redis.call('HINCRBY', INFO, 'head', 1)
  redis.call('ZADD', LOG, seq, d(seq) .. '|' .. d(now) .. '|' .. kind .. d(#sender) .. '|' .. sender .. body)
  local n = redis.call('ZCARD', LOG)
  if n > ${l.maxEntries} then redis.call('ZREMRANGEBYRANK', LOG, 0, n - ${l.maxEntries} - 1) end
  pruneAge(now)
  pruneFormer(seq)
  redis.call('PEXPIRE', LOG, ${l.maxAgeMs})
  return seq
end

local function join(uid, role, seq)
  redis.call('HSET', MEM, uid, role .. d(seq))
  redis.call('ZADD', ML, 0, uid)
  if redis.call('HDEL', FORMER, uid) == 1 then redis.call('ZREM', FQ, uid) end
end

local function depart(uid, joined, seq, reason)
  redis.call('HDEL', MEM, uid)
  redis.call('ZREM', ML, uid)
  redis.call('HSET', FORMER, uid, d(joined) .. '|' .. d(seq) .. '|' .. reason)
  redis.call('ZADD', FQ, seq, uid)
end
`;
}

function groupScripts(l: GroupLimits) {
  const p = prelude(l);
  return {
    // ARGV: owner, now, body, meta JSON, name, n, uid1..uidn (the others). 0 if the id is taken.
    create: `${p}
if redis.call('EXISTS', INFO) == 1 then return 0 end
local owner, now, n = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[6])
redis.call('HSET', INFO, 'name', ARGV[5], 'meta', ARGV[4], 'owner', owner, 'createdAt', ARGV[2], 'head', 0, 'count', n + 1, 'dissolved', '0')
local seq = appendEntry('e', owner, ARGV[3], now)
join(owner, 'o', seq)
for i = 1, n do join(ARGV[6 + i], 'm', seq) end
return seq
`,
    // ARGV: actor, now, n, uid1..uidn. Returns the group's member count and, per uid, 1 if it is a member.
    precheck: `${p}
local _, _, _ = writable(tonumber(ARGV[2]), ARGV[1], 1)
local out = {tonumber(redis.call('HGET', INFO, 'count'))}
for i = 1, tonumber(ARGV[3]) do out[i + 1] = redis.call('HEXISTS', MEM, ARGV[3 + i]) end
return out
`,
    // ARGV: actor, actor JSON, now, n, then n pairs uid, uid JSON. Returns the event's seq (0 if
    // nobody was added) and, per uid, the seq it joined at: all are members afterwards.
    add: `${p}
local actor, now, n = ARGV[1], tonumber(ARGV[3]), tonumber(ARGV[4])
local _ = writable(now, actor, 1)
local fresh, fragments, joined = {}, {}, {}
for i = 1, n do
  local uid = ARGV[3 + 2 * i]
  local v = redis.call('HGET', MEM, uid)
  if v then joined[i] = tonumber(string.sub(v, 2)) else
    fresh[#fresh + 1] = i
    fragments[#fragments + 1] = ARGV[4 + 2 * i]
  end
end
if #fresh == 0 then return {0, joined} end
local count = tonumber(redis.call('HGET', INFO, 'count'))
if count + #fresh > ${l.maxMembers} then fail('SB_ERR_GROUP_FULL', 'a group has at most ${l.maxMembers} members') end
local seq = appendEntry('e', actor, '{"type":"added","actor":' .. ARGV[2] .. ',"uids":[' .. table.concat(fragments, ',') .. ']}', now)
for _, i in ipairs(fresh) do
  join(ARGV[3 + 2 * i], 'm', seq)
  joined[i] = seq
end
redis.call('HINCRBY', INFO, 'count', #fresh)
return {seq, joined}
`,
    // ARGV: actor, actor JSON, now, n, then n pairs uid, uid JSON. Returns the seq (0: nobody) and the uids removed.
    remove: `${p}
local actor, now, n = ARGV[1], tonumber(ARGV[3]), tonumber(ARGV[4])
local _, actorRole = writable(now, actor, 1)
local targets, fragments, joined = {}, {}, {}
for i = 1, n do
  local uid = ARGV[3 + 2 * i]
  local v = redis.call('HGET', MEM, uid)
  if v then
    local role = string.sub(v, 1, 1)
    if role == 'o' then fail('SB_ERR_GROUP_FORBIDDEN', 'nobody removes the owner: the owner transfers the group or dissolves it') end
    if role == 'a' and actorRole ~= 'o' then fail('SB_ERR_GROUP_FORBIDDEN', 'only the owner removes an admin (' .. uid .. ')') end
    targets[#targets + 1] = uid
    fragments[#fragments + 1] = ARGV[4 + 2 * i]
    joined[#joined + 1] = tonumber(string.sub(v, 2))
  end
end
if #targets == 0 then return {0, {}} end
local seq = appendEntry('e', actor, '{"type":"removed","actor":' .. ARGV[2] .. ',"uids":[' .. table.concat(fragments, ',') .. ']}', now)
for i, uid in ipairs(targets) do depart(uid, joined[i], seq, 'r') end
redis.call('HINCRBY', INFO, 'count', -#targets)
formerBound()
return {seq, targets}
`,
    // ARGV: uid, now, body
    leave: `${p}
local uid, now = ARGV[1], tonumber(ARGV[2])
local _, role, joined = writable(now, uid, 0)
if role == 'o' then fail('SB_ERR_GROUP_OWNER_CANNOT_LEAVE', 'the owner cannot leave the group: transfer the ownership or dissolve it first') end
local seq = appendEntry('e', uid, ARGV[3], now)
depart(uid, joined, seq, 'l')
redis.call('HINCRBY', INFO, 'count', -1)
formerBound()
return seq
`,
    // ARGV: actor, uid, role (a|m), now, body. 0 if the role was that already.
    setRole: `${p}
local actor, uid, role, now = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local _ = writable(now, actor, 2)
local v = redis.call('HGET', MEM, uid)
if not v then notMember(uid) end
if string.sub(v, 1, 1) == 'o' then fail('SB_ERR_GROUP_FORBIDDEN', "the owner's role changes only by a transfer") end
if string.sub(v, 1, 1) == role then return 0 end
local seq = appendEntry('e', actor, ARGV[5], now)
redis.call('HSET', MEM, uid, role .. string.sub(v, 2))
return seq
`,
    // ARGV: actor, new owner, now, body. 0 if the actor is the new owner.
    transfer: `${p}
local actor, owner, now = ARGV[1], ARGV[2], tonumber(ARGV[3])
local _, _, actorJoined = writable(now, actor, 2)
local v = redis.call('HGET', MEM, owner)
if not v then notMember(owner) end
if owner == actor then return 0 end
local seq = appendEntry('e', actor, ARGV[4], now)
redis.call('HSET', MEM, actor, 'a' .. d(actorJoined), owner, 'o' .. string.sub(v, 2))
redis.call('HSET', INFO, 'owner', owner)
return seq
`,
    // ARGV: actor, now, body, name ('' to keep), meta JSON ('' to keep)
    update: `${p}
local actor, now = ARGV[1], tonumber(ARGV[2])
local _ = writable(now, actor, 1)
local seq = appendEntry('e', actor, ARGV[3], now)
if ARGV[4] ~= '' then redis.call('HSET', INFO, 'name', ARGV[4]) end
if ARGV[5] ~= '' then redis.call('HSET', INFO, 'meta', ARGV[5]) end
return seq
`,
    // ARGV: actor, now, body. The members stay (they read up to the end); the caller writes their departures.
    dissolve: `${p}
local actor, now = ARGV[1], tonumber(ARGV[2])
local _ = writable(now, actor, 2)
local seq = appendEntry('e', actor, ARGV[3], now)
redis.call('HSET', INFO, 'dissolved', '1')
for _, key in ipairs(KEYS) do redis.call('PEXPIRE', key, ${l.maxAgeMs}) end
return seq
`,
    // ARGV: sender, now, body, dedupe field ('' for none). Returns seq, storedAt, duplicate (0|1).
    // Dedupe mirrors the memory store's DedupeWindow: forgotten oldest first, once expired or
    // past dedupeEntries.
    append: `${p}
local sender, now, field = ARGV[1], tonumber(ARGV[2]), ARGV[4]
local _ = writable(now, sender, 0)
if field ~= '' then
  for _ = 1, ${l.dedupeEntries} do
    local oldest = redis.call('LINDEX', DDQ, 0)
    if not oldest then break end
    local v = redis.call('HGET', DD, oldest)
    if v and tonumber(string.match(v, '|(%d+)$')) + ${l.dedupeWindowMs} > now then break end
    redis.call('LPOP', DDQ)
    redis.call('HDEL', DD, oldest)
  end
  local seen = redis.call('HGET', DD, field)
  if seen then
    local seq, storedAt = string.match(seen, '^(%d+)|(%d+)$')
    return {tonumber(seq), tonumber(storedAt), 1}
  end
end
local seq = appendEntry('m', sender, ARGV[3], now)
if field ~= '' then
  redis.call('HSET', DD, field, d(seq) .. '|' .. d(now))
  if redis.call('RPUSH', DDQ, field) > ${l.dedupeEntries} then redis.call('HDEL', DD, redis.call('LPOP', DDQ)) end
end
return {seq, now, 0}
`,
    // ARGV: uid, after, limit, now. Returns the reader's head, the oldest retained, joined, entries.
    read: `${p}
local uid, after, limit, now = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local head = load(now)
pruneAge(now)
local oldest = pruneFormer(head)
local joined, last = reader(uid, head)
local from = math.max(after + 1, joined, oldest)
local entries = {}
if limit > 0 and from <= last then entries = redis.call('ZRANGEBYSCORE', LOG, from, last, 'LIMIT', 0, limit) end
return {last, oldest, joined, entries}
`,
    // ARGV: uid, now
    get: `${p}
local uid, now = ARGV[1], tonumber(ARGV[2])
local head, dissolved = load(now)
pruneAge(now)
pruneFormer(head)
local joined, last, role = reader(uid, head)
local info = redis.call('HMGET', INFO, 'name', 'meta', 'owner', 'createdAt', 'count')
return {info[1], info[2], info[3], tonumber(info[4]), tonumber(info[5]), head, dissolved and 1 or 0, role or '', joined, last}
`,
    // ARGV: uid, after ('' from the start), limit, now. Returns next ('' for none), then uid, value pairs.
    members: `${p}
local uid, after, limit = ARGV[1], ARGV[2], tonumber(ARGV[3])
load(tonumber(ARGV[4]))
if redis.call('HEXISTS', MEM, uid) == 0 then notMember(uid) end
if limit == 0 then return {''} end
local uids = redis.call('ZRANGEBYLEX', ML, after == '' and '-' or '(' .. after, '+', 'LIMIT', 0, limit + 1)
local out = {''}
if #uids > limit then
  uids[#uids] = nil
  out[1] = uids[#uids]
end
if #uids == 0 then return out end
local values = redis.call('HMGET', MEM, unpack(uids))
for i, member in ipairs(uids) do
  out[#out + 1] = member
  out[#out + 1] = values[i]
end
return out
`,
    // ARGV: uid, deviceId, now
    cursor: `${p}
local uid, device, now = ARGV[1], ARGV[2], tonumber(ARGV[3])
local head = load(now)
pruneAge(now)
pruneFormer(head)
reader(uid, head)
local v = redis.call('HGET', CUR, uid)
if not v then return false end
return cjson.decode(v)[device] or false
`,
    // ARGV: uid, deviceId, seq, now. Clamped to what uid may read; a new device past the bound
    // replaces the least advanced one.
    saveCursor: `${p}
local uid, device, now = ARGV[1], ARGV[2], tonumber(ARGV[4])
local head, dissolved = load(now)
pruneAge(now)
pruneFormer(head)
local _, last = reader(uid, head)
local position = math.min(tonumber(ARGV[3]), last)
local v = redis.call('HGET', CUR, uid)
local devices = v and cjson.decode(v) or {}
if devices[device] then
  if position <= tonumber(devices[device]) then return 0 end
else
  local count, least = 0, nil
  for id, at in pairs(devices) do
    count = count + 1
    if least == nil or tonumber(at) < tonumber(devices[least]) then least = id end
  end
  if count >= ${l.maxDevicesPerMember} then devices[least] = nil end
end
devices[device] = d(position)
redis.call('HSET', CUR, uid, cjson.encode(devices))
-- Made after the dissolve: it expires with the group's other keys.
if dissolved then redis.call('PEXPIRE', CUR, math.max(1, redis.call('PTTL', INFO))) end
return 1
`,
    // ARGV: uid. What groupsOf checks an index entry against: gone | member <role> | dissolved <head> | former <left> <reason> | none <head>.
    membership: `${p}
local info = redis.call('HMGET', INFO, 'head', 'dissolved')
if not info[1] then return {'gone'} end
local v = redis.call('HGET', MEM, ARGV[1])
if v then
  if info[2] == '1' then return {'dissolved', info[1]} end
  return {'member', string.sub(v, 1, 1)}
end
local f = redis.call('HGET', FORMER, ARGV[1])
if f then
  local left, reason = string.match(f, '^%d+|(%d+)|(%a)')
  return {'former', left, reason}
end
return {'none', info[1]}
`,
  };
}

// The user index's scripts. KEYS: groups, departed, gs. A write carries the seq of the group
// event it follows and is ignored if the index applied a later one (see the top of the file).
function userScripts(l: GroupLimits) {
  const prelude = `
local GROUPS, DEPARTED, GS = KEYS[1], KEYS[2], KEYS[3]
local function applied(gid)
  local v = redis.call('HGET', GS, gid)
  if not v then return 0, nil end
  local seq, state = string.match(v, '^(%d+)|(%a)')
  return tonumber(seq), state
end
`;
  return {
    // ARGV: gid. 2: listed already, 1: reserved, 0: the user is in maxGroupsPerUser groups.
    reserve: `${prelude}
if redis.call('ZSCORE', GROUPS, ARGV[1]) then return 2 end
if redis.call('ZCARD', GROUPS) >= ${l.maxGroupsPerUser} then return 0 end
redis.call('ZADD', GROUPS, 0, ARGV[1])
return 1
`,
    // ARGV: gid. Takes a reservation back unless the join was confirmed meanwhile.
    release: `${prelude}
local _, state = applied(ARGV[1])
if state == 'm' then return 0 end
redis.call('ZREM', GROUPS, ARGV[1])
return 1
`,
    // ARGV: gid, seq (the event that made the user a member)
    confirm: `${prelude}
local gid, seq = ARGV[1], tonumber(ARGV[2])
if applied(gid) > seq then return 0 end
redis.call('HSET', GS, gid, ARGV[2] .. '|m')
redis.call('ZADD', GROUPS, 0, gid)
redis.call('ZREM', DEPARTED, gid)
return 1
`,
    // ARGV: gid, seq, reason (l|r|d), when
    depart: `${prelude}
local gid, seq = ARGV[1], tonumber(ARGV[2])
if applied(gid) >= seq then return 0 end
redis.call('HSET', GS, gid, ARGV[2] .. '|' .. ARGV[3])
redis.call('ZREM', GROUPS, gid)
redis.call('ZADD', DEPARTED, ARGV[4], gid)
local n = redis.call('ZCARD', DEPARTED)
if n > ${l.maxDeparted} then
  for _, old in ipairs(redis.call('ZRANGE', DEPARTED, 0, n - ${l.maxDeparted} - 1)) do redis.call('HDEL', GS, old) end
  redis.call('ZREMRANGEBYRANK', DEPARTED, 0, n - ${l.maxDeparted} - 1)
end
return 1
`,
    // ARGV: gid, the group's head when it was found not to list the user. Drops an entry nobody confirmed.
    forget: `${prelude}
local gid = ARGV[1]
local seq, state = applied(gid)
if seq > tonumber(ARGV[2]) then return 0 end
redis.call('ZREM', GROUPS, gid)
if state == 'm' then redis.call('HDEL', GS, gid) end
return 1
`,
    // Returns gid, seq, reason, when for the most recent departures.
    departed: `${prelude}
local ids = redis.call('ZRANGE', DEPARTED, 0, ${l.maxDeparted - 1}, 'REV', 'WITHSCORES')
local out = {}
for i = 1, #ids, 2 do
  local seq, state = applied(ids[i])
  if state and state ~= 'm' then
    out[#out + 1] = ids[i]
    out[#out + 1] = seq
    out[#out + 1] = state
    out[#out + 1] = ids[i + 1]
  end
end
return out
`,
  };
}

type GroupKeys = [string, string, string, string, string, string, string, string, string];
type UserKeys = [string, string, string];
type Arg = string | number | Buffer;

type Scripts = {
  sbGroupCreate(...args: [...GroupKeys, ...Arg[]]): Promise<number>;
  sbGroupPrecheck(...args: [...GroupKeys, ...Arg[]]): Promise<number[]>;
  sbGroupAdd(...args: [...GroupKeys, ...Arg[]]): Promise<[number, (number | null)[]]>;
  sbGroupRemove(...args: [...GroupKeys, ...Arg[]]): Promise<[number, string[]]>;
  sbGroupLeave(...args: [...GroupKeys, ...Arg[]]): Promise<number>;
  sbGroupSetRole(...args: [...GroupKeys, ...Arg[]]): Promise<number>;
  sbGroupTransfer(...args: [...GroupKeys, ...Arg[]]): Promise<number>;
  sbGroupUpdate(...args: [...GroupKeys, ...Arg[]]): Promise<number>;
  sbGroupDissolve(...args: [...GroupKeys, ...Arg[]]): Promise<number>;
  sbGroupAppend(...args: [...GroupKeys, ...Arg[]]): Promise<[number, number, number]>;
  sbGroupReadBuffer(...args: [...GroupKeys, ...Arg[]]): Promise<[number, number, number, Buffer[]]>;
  sbGroupGet(...args: [...GroupKeys, ...Arg[]]): Promise<[string, string, string, number, number, number, number, string, number, number]>;
  sbGroupMembers(...args: [...GroupKeys, ...Arg[]]): Promise<string[]>;
  sbGroupCursor(...args: [...GroupKeys, ...Arg[]]): Promise<string | null>;
  sbGroupSaveCursor(...args: [...GroupKeys, ...Arg[]]): Promise<number>;
  sbGroupMembership(...args: [...GroupKeys, ...Arg[]]): Promise<string[]>;
  sbUserReserve(...args: [...UserKeys, ...Arg[]]): Promise<number>;
  sbUserRelease(...args: [...UserKeys, ...Arg[]]): Promise<number>;
  sbUserConfirm(...args: [...UserKeys, ...Arg[]]): Promise<number>;
  sbUserDepart(...args: [...UserKeys, ...Arg[]]): Promise<number>;
  sbUserForget(...args: [...UserKeys, ...Arg[]]): Promise<number>;
  sbUserDeparted(...args: [...UserKeys, ...Arg[]]): Promise<string[]>;
};

export interface RedisGroupStoreOptions {
  /** A redis:// URL. */
  url: string;
  limits?: Partial<GroupLimits>;
  /** Prefix of every key, default "sb:". */
  keyPrefix?: string;
  /** Bound on every command (SB_ERR_STORE_UNAVAILABLE after it); default 2 s. */
  timeoutMs?: number;
  redisOptions?: RedisOptions;
  /** The clock entries are stamped and aged by (tests inject one); default Date.now. */
  now?: () => number;
}

export class RedisGroupStore implements GroupStore {
  readonly #redis: Redis & Scripts;
  readonly #limits: GroupLimits;
  readonly #prefix: string;
  readonly #now: () => number;

  constructor(options: RedisGroupStoreOptions) {
    this.#limits = groupLimits(options.limits);
    this.#prefix = options.keyPrefix ?? 'sb:';
    this.#now = options.now ?? Date.now;
    const redis = createRedisClient(options.url, options);
    const group = groupScripts(this.#limits);
    const user = userScripts(this.#limits);
    const name = (s: string) => s[0]!.toUpperCase() + s.slice(1);
    for (const [script, lua] of Object.entries(group)) redis.defineCommand(`sbGroup${name(script)}`, { numberOfKeys: 9, lua });
    for (const [script, lua] of Object.entries(user)) redis.defineCommand(`sbUser${name(script)}`, { numberOfKeys: 3, lua });
    this.#redis = redis as Redis & Scripts;
  }

  /** The underlying connection, for health checks and logging of its events. */
  get redis(): Redis {
    return this.#redis;
  }

  async create(owner: string, name: string, members: readonly string[] = [], meta: GroupMeta = {}): Promise<Group> {
    const limits = this.#limits;
    checkUid(owner, limits);
    checkName(name, limits);
    const checkedMeta = checkMeta(meta, limits);
    const others = checkUids(members, limits, { allowEmpty: true }).filter((uid) => uid !== owner);
    if (others.length + 1 > limits.maxMembers) throw full(limits.maxMembers);
    const metaJson = JSON.stringify(checkedMeta);
    const body = eventJson('created', JSON.stringify(owner), { uids: others.map((uid) => JSON.stringify(uid)), name: JSON.stringify(name), ...(metaJson === '{}' ? {} : { meta: metaJson }) });
    const everyone = [owner, ...others];
    // A fresh id is taken with a chance of 2^-60 per group: another one is drawn then.
    for (;;) {
      const id = newGroupId();
      await this.#reserve(id, everyone);
      const now = this.#now();
      let seq: number;
      try {
        seq = await this.#run(() => this.#redis.sbGroupCreate(...this.#groupKeys(id), owner, now, body, metaJson, name, others.length, ...others));
      } catch (err) {
        await this.#release(id, everyone);
        throw err;
      }
      if (seq === 0) {
        await this.#release(id, everyone);
        continue;
      }
      await this.#confirm(id, everyone.map((uid) => [uid, seq]));
      return { id, name, meta: checkedMeta, owner, createdAt: now, memberCount: everyone.length, head: seq, dissolved: false };
    }
  }

  async get(group: string, uid: string): Promise<GroupView> {
    checkGroupId(group);
    checkUid(uid, this.#limits);
    const [name, meta, owner, createdAt, count, head, dissolved, role, joined, last] = await this.#run(() => this.#redis.sbGroupGet(...this.#groupKeys(group), uid, this.#now()));
    return {
      id: group,
      name,
      meta: Object.freeze(JSON.parse(meta) as Record<string, string>),
      owner,
      createdAt: Number(createdAt),
      memberCount: Number(count),
      head: Number(head),
      dissolved: dissolved === 1,
      role: role === '' ? undefined : ROLE_OF[role],
      joined: Number(joined),
      left: role === '' ? Number(last) : undefined,
    };
  }

  async addMembers(group: string, actor: string, uids: readonly string[]): Promise<ChangeResult> {
    const limits = this.#limits;
    const wanted = checkUids(uids, limits);
    checkGroupId(group);
    checkUid(actor, limits);
    const keys = this.#groupKeys(group);
    // Authorised (and the group's room checked) before any user index is touched: a stranger's
    // attempt writes nothing anywhere. The script checks all of it again, atomically.
    const [count, ...isMember] = await this.#run(() => this.#redis.sbGroupPrecheck(...keys, actor, this.#now(), wanted.length, ...wanted));
    const fresh = wanted.filter((_, i) => isMember[i] === 0);
    if (Number(count) + fresh.length > limits.maxMembers) throw full(limits.maxMembers);
    const reserved = await this.#reserve(group, fresh);
    let seq: number;
    let joined: (number | null)[];
    try {
      [seq, joined] = await this.#run(() => this.#redis.sbGroupAdd(...keys, actor, JSON.stringify(actor), this.#now(), wanted.length, ...wanted.flatMap((uid) => [uid, JSON.stringify(uid)])));
    } catch (err) {
      await this.#release(group, reserved);
      throw err;
    }
    // Every uid named is a member now: confirming those that were already repairs an index
    // entry a crash lost, so a retried add heals the index.
    await this.#confirm(group, wanted.map((uid, i) => [uid, Number(joined[i])]));
    const added = seq === 0 ? [] : wanted.filter((_, i) => Number(joined[i]) === seq);
    return { seq: seq === 0 ? undefined : Number(seq), uids: added };
  }

  async removeMembers(group: string, actor: string, uids: readonly string[]): Promise<ChangeResult> {
    const wanted = checkUids(uids, this.#limits);
    checkGroupId(group);
    checkUid(actor, this.#limits);
    const now = this.#now();
    const [seq, removed] = await this.#run(() => this.#redis.sbGroupRemove(...this.#groupKeys(group), actor, JSON.stringify(actor), now, wanted.length, ...wanted.flatMap((uid) => [uid, JSON.stringify(uid)])));
    if (seq === 0) return { seq: undefined, uids: [] };
    await this.#departAll(group, removed, Number(seq), 'r', now);
    return { seq: Number(seq), uids: removed };
  }

  async leave(group: string, uid: string): Promise<number> {
    checkGroupId(group);
    checkUid(uid, this.#limits);
    const now = this.#now();
    const seq = Number(await this.#run(() => this.#redis.sbGroupLeave(...this.#groupKeys(group), uid, now, eventJson('left', JSON.stringify(uid)))));
    await this.#departAll(group, [uid], seq, 'l', now);
    return seq;
  }

  async setRole(group: string, actor: string, uid: string, role: 'admin' | 'member'): Promise<ChangeResult> {
    if (role !== 'admin' && role !== 'member') throw new SwitchboardError('SB_ERR_BAD_GROUP', "a role set is 'admin' or 'member'");
    checkUid(uid, this.#limits);
    checkGroupId(group);
    checkUid(actor, this.#limits);
    const body = eventJson('role', JSON.stringify(actor), { uids: [JSON.stringify(uid)], role: JSON.stringify(role) });
    const seq = Number(await this.#run(() => this.#redis.sbGroupSetRole(...this.#groupKeys(group), actor, uid, role === 'admin' ? 'a' : 'm', this.#now(), body)));
    return seq === 0 ? { seq: undefined, uids: [] } : { seq, uids: [uid] };
  }

  async transfer(group: string, actor: string, newOwner: string): Promise<ChangeResult> {
    checkUid(newOwner, this.#limits);
    checkGroupId(group);
    checkUid(actor, this.#limits);
    const body = eventJson('transferred', JSON.stringify(actor), { uids: [JSON.stringify(newOwner)] });
    const seq = Number(await this.#run(() => this.#redis.sbGroupTransfer(...this.#groupKeys(group), actor, newOwner, this.#now(), body)));
    return seq === 0 ? { seq: undefined, uids: [] } : { seq, uids: [newOwner] };
  }

  async update(group: string, actor: string, change: { name?: string; meta?: GroupMeta }): Promise<number> {
    const limits = this.#limits;
    if (change.name === undefined && change.meta === undefined) throw new SwitchboardError('SB_ERR_BAD_GROUP', 'an update sets a name, a meta or both');
    const name = change.name === undefined ? undefined : checkName(change.name, limits);
    const metaJson = change.meta === undefined ? undefined : JSON.stringify(checkMeta(change.meta, limits));
    checkGroupId(group);
    checkUid(actor, limits);
    const body = eventJson('updated', JSON.stringify(actor), { ...(name === undefined ? {} : { name: JSON.stringify(name) }), ...(metaJson === undefined ? {} : { meta: metaJson }) });
    return Number(await this.#run(() => this.#redis.sbGroupUpdate(...this.#groupKeys(group), actor, this.#now(), body, name ?? '', metaJson ?? '')));
  }

  /**
   * The members' departures are written after the group's script, DISSOLVE_SLICE users at a
   * time; a crash part way is repaired by groupsOf, which finds the group dissolved.
   */
  async dissolve(group: string, actor: string): Promise<number> {
    checkGroupId(group);
    checkUid(actor, this.#limits);
    const now = this.#now();
    const keys = this.#groupKeys(group);
    const seq = Number(await this.#run(() => this.#redis.sbGroupDissolve(...keys, actor, now, eventJson('dissolved', JSON.stringify(actor)))));
    let after = '-';
    for (;;) {
      const uids = await this.#run(() => this.#redis.zrangebylex(keys[2], after, '+', 'LIMIT', 0, DISSOLVE_SLICE));
      await this.#departAll(group, uids, seq, 'd', now);
      if (uids.length < DISSOLVE_SLICE) return seq;
      after = `(${uids[uids.length - 1]}`;
    }
  }

  async append(group: string, sender: string, msgId: string, body: Uint8Array): Promise<AppendResult> {
    checkBody(body, this.#limits);
    checkGroupId(group);
    checkUid(sender, this.#limits);
    const field = hasDedupeId(msgId) ? `${sender}\0${msgId}` : '';
    const [seq, storedAt, duplicate] = await this.#run(() => this.#redis.sbGroupAppend(...this.#groupKeys(group), sender, this.#now(), Buffer.from(body.buffer, body.byteOffset, body.byteLength), field));
    return { seq: Number(seq), storedAt: Number(storedAt), duplicate: duplicate === 1 };
  }

  async read(group: string, uid: string, after: number, limit: number): Promise<ReadResult> {
    checkSeq(after, 'after');
    limit = checkLimit(limit, this.#limits.maxPageSize);
    checkGroupId(group);
    checkUid(uid, this.#limits);
    const [head, oldest, joined, members] = await this.#run(() => this.#redis.sbGroupReadBuffer(...this.#groupKeys(group), uid, after, limit, this.#now()));
    return { entries: members.map(parseEntry), head: Number(head), oldest: Number(oldest), joined: Number(joined) };
  }

  async members(group: string, uid: string, page: Page): Promise<MemberPage> {
    checkGroupId(group);
    checkUid(uid, this.#limits);
    const limit = checkLimit(page.limit, this.#limits.maxPageSize);
    const [next, ...pairs] = await this.#run(() => this.#redis.sbGroupMembers(...this.#groupKeys(group), uid, page.after ?? '', limit, this.#now()));
    const members = [];
    for (let i = 0; i < pairs.length; i += 2) {
      const value = pairs[i + 1]!;
      members.push({ uid: pairs[i]!, role: ROLE_OF[value[0]!]!, joined: Number(value.slice(1)) });
    }
    return { members, next: next === '' ? undefined : next };
  }

  /**
   * A page may hold fewer than `limit` groups and still have a `next`: index entries the group
   * does not confirm are repaired and left out (see the top of the file).
   */
  async groupsOf(uid: string, page: Page): Promise<GroupsPage> {
    checkUid(uid, this.#limits);
    const limit = checkLimit(page.limit, this.#limits.maxPageSize);
    if (limit === 0) return { groups: [], next: undefined };
    const keys = this.#userKeys(uid);
    const ids = await this.#run(() => this.#redis.zrangebylex(keys[0], page.after === undefined ? '-' : `(${page.after}`, '+', 'LIMIT', 0, limit + 1));
    const next = ids.length > limit ? ids[limit - 1] : undefined;
    const listed = ids.slice(0, limit);
    const states = await Promise.all(listed.map((id) => this.#run(() => this.#redis.sbGroupMembership(...this.#groupKeys(id), uid))));
    const groups = [];
    const now = this.#now();
    const repairs: Promise<unknown>[] = [];
    for (const [i, [state, a, b]] of states.entries()) {
      const id = listed[i]!;
      if (state === 'member') groups.push({ id, role: ROLE_OF[a!]! });
      else if (state === 'dissolved') repairs.push(this.#redis.sbUserDepart(...keys, id, a!, 'd', now));
      else if (state === 'former') repairs.push(this.#redis.sbUserDepart(...keys, id, a!, b!, now));
      else repairs.push(this.#redis.sbUserForget(...keys, id, state === 'gone' ? Number.MAX_SAFE_INTEGER : a!));
    }
    await this.#run(() => Promise.all(repairs));
    return { groups, next };
  }

  async departedOf(uid: string): Promise<Departure[]> {
    checkUid(uid, this.#limits);
    const flat = await this.#run(() => this.#redis.sbUserDeparted(...this.#userKeys(uid)));
    const out: Departure[] = [];
    for (let i = 0; i < flat.length; i += 4) out.push({ id: flat[i]!, seq: Number(flat[i + 1]), reason: REASON_OF[flat[i + 2]!]!, at: Number(flat[i + 3]) });
    return out;
  }

  async cursor(group: string, uid: string, deviceId: string): Promise<number | undefined> {
    checkDeviceId(deviceId);
    checkGroupId(group);
    checkUid(uid, this.#limits);
    const value = await this.#run(() => this.#redis.sbGroupCursor(...this.#groupKeys(group), uid, deviceId, this.#now()));
    return value === null ? undefined : Number(value);
  }

  async saveCursor(group: string, uid: string, deviceId: string, seq: number): Promise<void> {
    checkDeviceId(deviceId);
    checkSeq(seq, 'a position');
    checkGroupId(group);
    checkUid(uid, this.#limits);
    await this.#run(() => this.#redis.sbGroupSaveCursor(...this.#groupKeys(group), uid, deviceId, seq, this.#now()));
  }

  ping(): Promise<void> {
    return pingRedis(this.#redis, 'group');
  }

  async close(): Promise<void> {
    await this.#redis.quit().catch(() => this.#redis.disconnect());
  }

  /** Reserves `group` in each user's index; resolves the uids newly reserved. All or nothing: SB_ERR_GROUP_TOO_MANY. */
  async #reserve(group: string, uids: readonly string[]): Promise<string[]> {
    const answers = await Promise.allSettled(uids.map((uid) => this.#run(() => this.#redis.sbUserReserve(...this.#userKeys(uid), group))));
    const reserved = uids.filter((_, i) => answers[i]!.status === 'fulfilled' && (answers[i] as PromiseFulfilledResult<number>).value === 1);
    const failed = answers.find((a): a is PromiseRejectedResult => a.status === 'rejected');
    const refused = uids.filter((_, i) => answers[i]!.status === 'fulfilled' && (answers[i] as PromiseFulfilledResult<number>).value === 0);
    if (failed === undefined && refused.length === 0) return reserved;
    await this.#release(group, reserved);
    if (failed !== undefined) throw failed.reason;
    throw new SwitchboardError('SB_ERR_GROUP_TOO_MANY', `${refused.join(', ')} ${refused.length === 1 ? 'is a member' : 'are members'} of ${this.#limits.maxGroupsPerUser} groups, the most there may be`);
  }

  /** Takes reservations back; best effort: one left behind is repaired by groupsOf. */
  async #release(group: string, uids: readonly string[]): Promise<void> {
    await Promise.allSettled(uids.map((uid) => this.#redis.sbUserRelease(...this.#userKeys(uid), group)));
  }

  async #confirm(group: string, joins: readonly (readonly [string, number])[]): Promise<void> {
    await this.#run(() => Promise.all(joins.map(([uid, seq]) => this.#redis.sbUserConfirm(...this.#userKeys(uid), group, seq))));
  }

  async #departAll(group: string, uids: readonly string[], seq: number, reason: 'l' | 'r' | 'd', now: number): Promise<void> {
    await this.#run(() => Promise.all(uids.map((uid) => this.#redis.sbUserDepart(...this.#userKeys(uid), group, seq, reason, now))));
  }

  /** Runs a Redis call: a refusal a script raised becomes its SwitchboardError, anything else SB_ERR_STORE_UNAVAILABLE. */
  async #run<T>(call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (err) {
      throw fromRedis(err);
    }
  }

  #groupKeys(group: string): GroupKeys {
    const base = `${this.#prefix}{g:${group}}`;
    return [`${base}:info`, `${base}:mem`, `${base}:ml`, `${base}:former`, `${base}:fq`, `${base}:log`, `${base}:dd`, `${base}:ddq`, `${base}:cur`];
  }

  #userKeys(uid: string): UserKeys {
    const base = `${this.#prefix}{u:${uid}}`;
    return [`${base}:groups`, `${base}:departed`, `${base}:gs`];
  }
}

/** "SB_ERR_GROUP_X message script: <sha>, on @user_script:N." as a script raised it → its error. */
const REFUSAL = /\b(SB_ERR_[A-Z_]+) (.*?)(?: script: [0-9a-f]+, on @user_script:\d+\.)?$/s;

function fromRedis(err: unknown): SwitchboardError {
  if (err instanceof SwitchboardError) return err;
  const match = err instanceof Error ? REFUSAL.exec(err.message) : null;
  if (match && isErrorCode(match[1]!)) return new SwitchboardError(match[1], match[2]);
  return storeUnavailable('group', err);
}

const BAR = 0x7c;

/** "<seq>|<storedAt>|<m|e><sender bytes>|<sender><body>" → GroupEntry; the body may hold anything. */
function parseEntry(member: Buffer): GroupEntry {
  const a = member.indexOf(BAR);
  const b = member.indexOf(BAR, a + 1);
  const c = member.indexOf(BAR, b + 2);
  const senderEnd = c + 1 + Number(member.toString('latin1', b + 2, c));
  return {
    seq: Number(member.toString('latin1', 0, a)),
    storedAt: Number(member.toString('latin1', a + 1, b)),
    kind: member[b + 1] === 0x65 ? 'event' : 'message',
    sender: member.toString('utf8', c + 1, senderEnd),
    body: member.subarray(senderEnd),
  };
}

function full(max: number): SwitchboardError {
  return new SwitchboardError('SB_ERR_GROUP_FULL', `a group has at most ${max} members`);
}
