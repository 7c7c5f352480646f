// The Lua scripts of RedisGroupStore (the key layout is described there). Group scripts take the
// group's twelve keys and run in its slot; user scripts take the user's three keys. The limits are
// written into the text, so each store defines its own commands.

import type { GroupLimits } from './group-store.js';

// Shared by every group script. KEYS are always the group's twelve keys, in the order of the
// layout above. A refusal is raised before the script writes anything. Long because it is Lua
// text: the helpers every script needs, kept in one string so each script is sent as one.
function prelude(l: GroupLimits): string {
  return `
local INFO, MEM, ML, FORMER, FQ, LOG, DD, DDQ, CUR, RD, RV, EV = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10], KEYS[11], KEYS[12]
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

-- Forgets the former members whose last visible entry was pruned, and the seqs of pruned
-- events; returns the oldest retained seq.
local function pruneFormer(head)
  local oldest = oldestOf(head)
  redis.call('ZREMRANGEBYSCORE', EV, '-inf', '(' .. d(oldest))
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
  if kind == 'e' then
    redis.call('ZADD', EV, seq, d(seq))
    redis.call('PEXPIRE', EV, ${l.maxAgeMs})
  end
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

-- Messages after max(readSeq, joined - 1, the retention edge) up to last: entries minus events.
local function unreadOf(readSeq, joined, last, oldest)
  local from = math.max(readSeq, joined - 1, oldest - 1)
  if last <= from then return 0 end
  return last - from - redis.call('ZCOUNT', EV, from + 1, last)
end

local function readSeqOf(uid) return tonumber(redis.call('ZSCORE', RD, uid) or '0') end

-- The oldest seq that pruneAge would keep (head + 1 when none), without pruning: O(log n) calls
-- only when the first entry is past the age (a group nobody wrote to since).
local function retainedFrom(now, head)
  local n = redis.call('ZCARD', LOG)
  if n == 0 then return head + 1 end
  local cutoff = now - ${l.maxAgeMs}
  local first = redis.call('ZRANGE', LOG, 0, 0, 'WITHSCORES')
  if storedAtOf(first[1]) >= cutoff then return tonumber(first[2]) end
  if storedAtOf(redis.call('ZRANGE', LOG, n - 1, n - 1)[1]) < cutoff then return head + 1 end
  local lo, hi = 1, n - 1
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if storedAtOf(redis.call('ZRANGE', LOG, mid, mid)[1]) >= cutoff then hi = mid else lo = mid + 1 end
  end
  return tonumber(redis.call('ZRANGE', LOG, lo, lo, 'WITHSCORES')[2])
end

-- A page of the members after \`after\` (byte order), read by member \`uid\`: {next ('' for none),
-- then uid, value pairs}, valuesOf(uids) giving the values ('0' for none).
local function memberPage(uid, after, limit, now, valuesOf)
  load(now)
  if redis.call('HEXISTS', MEM, uid) == 0 then notMember(uid) end
  if limit == 0 then return {''} end
  local uids = redis.call('ZRANGEBYLEX', ML, after == '' and '-' or '(' .. after, '+', 'LIMIT', 0, limit + 1)
  local out = {''}
  if #uids > limit then
    uids[#uids] = nil
    out[1] = uids[#uids]
  end
  if #uids == 0 then return out end
  local values = valuesOf(uids)
  for i, member in ipairs(uids) do
    out[#out + 1] = member
    out[#out + 1] = values[i] or '0'
  end
  return out
end

local function depart(uid, joined, seq, reason)
  redis.call('ZREM', RD, uid)
  redis.call('ZREM', RV, uid)
  redis.call('HDEL', MEM, uid)
  redis.call('ZREM', ML, uid)
  redis.call('HSET', FORMER, uid, d(joined) .. '|' .. d(seq) .. '|' .. reason)
  redis.call('ZADD', FQ, seq, uid)
end
`;
}

// One Lua text per operation, each atomic in the group's slot; long only because it is the
// list of those scripts (each entry is a few dozen lines of Lua, read on its own).
export function groupScripts(l: GroupLimits) {
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
    // ARGV: sender, now, body, dedupe field ('' for none), share (0|1). Returns seq, storedAt, duplicate (0|1).
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
redis.call('ZADD', RD, seq, sender)
if ARGV[5] == '1' then redis.call('ZADD', RV, seq, sender) else redis.call('ZREM', RV, sender) end
return {seq, now, 0}
`,
    // ARGV: uid, seq, share (0|1), now. Returns readSeq, unread, moved (0|1).
    markRead: `${p}
local uid, seq, now = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[4])
-- Not in a dissolved group: nothing is left to read (and no key made now would expire).
local head, _, joined = writable(now, uid, 0)
pruneAge(now)
local oldest = pruneFormer(head)
local position = math.min(seq, head)
local at, moved = readSeqOf(uid), 0
if position > at then
  redis.call('ZADD', RD, position, uid)
  at, moved = position, 1
end
-- Receipts off: the member shares no position, not even one it shared before.
if ARGV[3] == '1' then redis.call('ZADD', RV, 'GT', position, uid) else redis.call('ZREM', RV, uid) end
return {at, unreadOf(at, joined, head, oldest), moved}
`,
    // ARGV: uid, now. Returns name, count, dissolved (0|1), last, readSeq, unread, the entry at last (false once pruned).
    summary: `${p}
local uid, now = ARGV[1], tonumber(ARGV[2])
local head, dissolved = load(now)
pruneAge(now)
local oldest = pruneFormer(head)
local joined, last = reader(uid, head)
local at = readSeqOf(uid)
local info = redis.call('HMGET', INFO, 'name', 'count')
local entry = redis.call('ZRANGEBYSCORE', LOG, last, last)
return {info[1], tonumber(info[2]), dissolved and 1 or 0, last, at, unreadOf(at, joined, last, oldest), entry[1] or false}
`,
    // ARGV: uid, now. Read-only: {0} unless uid is a member of the (not dissolved) group; else 1, name,
    // count, head, readSeq, unread, the entry at head (false once pruned).
    chatSummary: `${p}
local uid, now = ARGV[1], tonumber(ARGV[2])
local info = redis.call('HMGET', INFO, 'head', 'dissolved', 'name', 'count')
if not info[1] or info[2] == '1' then return {0} end
local v = redis.call('HGET', MEM, uid)
if not v then return {0} end
local head = tonumber(info[1])
local oldest = retainedFrom(now, head)
local at = readSeqOf(uid)
local entry = false
if head >= oldest then entry = redis.call('ZRANGEBYSCORE', LOG, head, head)[1] or false end
return {1, info[3], tonumber(info[4]), head, at, unreadOf(at, tonumber(string.sub(v, 2)), head, oldest), entry}
`,
    // ARGV: uid, after ('' from the start), limit, now. Returns next ('' for none), then uid, shared position pairs.
    readers: `${p}
return memberPage(ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), function(uids) return redis.call('ZMSCORE', RV, unpack(uids)) end)
`,
    // ARGV: uid, seq, now. Returns read, of: O(log n).
    readCount: `${p}
local uid, seq = ARGV[1], tonumber(ARGV[2])
load(tonumber(ARGV[3]))
if redis.call('HEXISTS', MEM, uid) == 0 then notMember(uid) end
local read = redis.call('ZCOUNT', RV, seq, '+inf')
local own = redis.call('ZSCORE', RV, uid)
if own and tonumber(own) >= seq then read = read - 1 end
return {read, tonumber(redis.call('HGET', INFO, 'count')) - 1}
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
return memberPage(ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), function(uids) return redis.call('HMGET', MEM, unpack(uids)) end)
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
export function userScripts(l: GroupLimits) {
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
