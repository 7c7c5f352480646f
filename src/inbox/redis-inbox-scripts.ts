// The Lua scripts of RedisInboxStore (the key layout is described there). Every script declares
// the inboxes it touches by their key base `<prefix>{uid}` and derives the keys from it, so that
// on a Redis Cluster each runs in its inbox's slot. The limits are written into the text (fewer
// arguments per call is measurably faster), so each store defines its own commands.

import type { InboxLimits } from './inbox-store.js';

/** Msg_ids remembered per (recipient, sender): a resend is recognised while fewer newer ones were stored. */
export const DEDUPE_RING = 1000;
/** Bytes of one remembered msg_id: the id (8, big-endian) and its seq (6). */
export const RING_ENTRY_BYTES = 14;
/** Bytes of one conversation index record: the seq (6) and 2 × received + own (4), big-endian. */
export const INDEX_RECORD_BYTES = 10;

export function inboxScripts({ maxMessages, maxAgeMs, dedupeWindowMs }: InboxLimits) {
  // The conversation keys' expiry, and how often it is pushed back (see converse).
  const refreshMs = Math.floor(maxAgeMs / 4);
  const ttlMs = maxAgeMs + refreshMs;
  const prelude = `
local MAX, AGE, WINDOW, REFRESH, TTL = ${maxMessages}, ${maxAgeMs}, ${dedupeWindowMs}, ${refreshMs}, ${ttlMs}
local RING, RING_ENTRY, REC = ${DEDUPE_RING}, ${RING_ENTRY_BYTES}, ${INDEX_RECORD_BYTES}
-- Numbers into key names and ids: exact up to 2^53 (Lua prints a double as 1.7e+12 otherwise).
local function d(n) return string.format('%d', n) end

-- The log: a stream whose entry ids are "<seq>-<storedAt>", one field b, the body.
local function seqOf(id) return tonumber(string.match(id, '^(%d+)')) end
local function storedAtOf(id) return tonumber(string.match(id, '%-(%d+)$')) end

local function headOf(base)
  return tonumber(redis.call('GET', base .. ':seq') or '0')
end

-- The lowest retained seq; head + 1 when none is.
local function oldestOf(lg, head)
  local first = redis.call('XRANGE', lg, '-', '+', 'COUNT', 1)
  if #first == 0 then return head + 1 end
  return seqOf(first[1][1])
end

-- Entries older than the retention age go, from the oldest end (their store times ascend with
-- their seqs, give or take the workers' clocks).
local function pruneAge(lg, now)
  local cutoff = now - AGE
  local count = 1
  for _ = 1, 64 do
    local first = redis.call('XRANGE', lg, '-', '+', 'COUNT', count)
    if #first == 0 then return end
    for _, entry in ipairs(first) do
      if storedAtOf(entry[1]) >= cutoff then
        if entry[1] ~= first[1][1] then redis.call('XTRIM', lg, 'MINID', entry[1]) end
        return
      end
    end
    redis.call('XTRIM', lg, 'MINID', d(seqOf(first[#first][1]) + 1))
    count = 32
  end
end

-- The epoch stays a string (a double would print as 1.2e+15); made by the first script that finds none.
local function epoch(key, candidate)
  local current = redis.call('GET', key)
  if current then return current end
  redis.call('SET', key, candidate)
  return candidate
end

-- Rewritten bodies (tombstones, edits) are kept beside the log, whose entries cannot change:
-- what reads return is the rewrite where there is one.
local function overlay(base, entries)
  if #entries == 0 or redis.call('EXISTS', base .. ':rw') == 0 then return end
  local seqs = {}
  for i, entry in ipairs(entries) do seqs[i] = seqOf(entry[1]) end
  local rewritten = redis.call('HMGET', base .. ':rw', unpack(seqs))
  for i, body in ipairs(rewritten) do
    if body then entries[i][2][2] = body end
  end
end

-- One message by seq ({id, {'b', body}}), or nil.
local function messageAt(base, seq)
  local found = redis.call('XRANGE', base .. ':lg', seq, seq)
  overlay(base, found)
  return found[1]
end

-- A conversation's entry in the chat list's hash, and forgetting one (entry, list slot, index).
local function parseEntry(entry)
  if not entry then return nil end
  local lastSeq, lastAt, readSeq, unread, received, total, cxAt = string.match(entry, '^(%d+)|(%d+)|(%d+)|(%d+)|(%d+)|(%d+)|(%d+)$')
  return {lastSeq = tonumber(lastSeq), lastAt = lastAt, readSeq = tonumber(readSeq), unread = tonumber(unread), received = tonumber(received), total = tonumber(total), cxAt = tonumber(cxAt)}
end
local function entryOf(base, id)
  return parseEntry(redis.call('HGET', base .. ':cv', id))
end
local function saveEntry(base, id, e)
  redis.call('HSET', base .. ':cv', id, d(e.lastSeq) .. '|' .. e.lastAt .. '|' .. d(e.readSeq) .. '|' .. d(e.unread) .. '|' .. d(e.received) .. '|' .. d(e.total) .. '|' .. d(e.cxAt))
end
local function forget(base, id)
  redis.call('ZREM', base .. ':cl', id)
  redis.call('HDEL', base .. ':cv', id)
  redis.call('DEL', base .. ':ci:' .. id)
end
-- Conversations whose last message is older than the retention age, least recent first.
local function expireConversations(base, now)
  local cutoff = now - AGE
  for _ = 1, 1000 do
    local first = redis.call('ZRANGE', base .. ':cl', 0, 0)
    if #first == 0 then return end
    local e = entryOf(base, first[1])
    if e and tonumber(e.lastAt) >= cutoff then return end
    forget(base, first[1])
  end
end

-- A conversation's index: a string of records, ascending by seq, each the message's inbox seq and
-- 2 × the messages received in the conversation up to it, + 1 for the owner's own. Records of
-- pruned messages stay at the front until the string is compacted.
local function recordAt(ci, i)
  return struct.unpack('>I6I4', redis.call('GETRANGE', ci, i * REC, i * REC + REC - 1))
end
-- The first record at or after 'from' whose seq is >= value; n if none.
local function lowerBound(ci, from, n, value)
  local lo, hi = from, n
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if recordAt(ci, mid) < value then lo = mid + 1 else hi = mid end
  end
  return lo
end
`;

  // One inbox's next messages: the seq, the log, the count bound. 'state' carries the inbox's
  // head between calls of one script.
  const store = `
local function store(base, state, body, now)
  local seq = state.head + 1
  state.head = seq
  redis.call('XADD', base .. ':lg', d(seq) .. '-' .. now, 'b', body)
  return seq
end
-- After an inbox's appends: its head, the bounds by count and (now and then) by age, its expiry.
local function settle(base, state, before, now)
  if state.head == before then return end
  local lg = base .. ':lg'
  redis.call('SET', base .. ':seq', d(state.head))
  redis.call('XTRIM', lg, 'MAXLEN', MAX)
  -- Every 16th seq (crossed by this call) checks the oldest end's age.
  if math.floor(state.head / 16) ~= math.floor(before / 16) then pruneAge(lg, tonumber(now)) end
  redis.call('PEXPIRE', lg, AGE)
end

-- Appends 'seqs' (ascending, all new) to conversation 'id': its entry, list slot and index, O(1).
local function converse(base, id, own, seqs, now)
  local cv, cl, ci = base .. ':cv', base .. ':cl', base .. ':ci:' .. id
  -- The entry, and when the list's keys last had their expiry pushed back (field '', no uid).
  local got = redis.call('HMGET', cv, id, '')
  local e = parseEntry(got[1])
  local at = tonumber(now)
  if not e then
    if redis.call('ZCARD', cl) >= MAX then forget(base, redis.call('ZRANGE', cl, 0, 0)[1]) end
    e = {lastSeq = 0, lastAt = now, readSeq = 0, unread = 0, received = 0, total = 0, cxAt = 0}
  end
  local records = {}
  for i, seq in ipairs(seqs) do
    if own then
      records[i] = struct.pack('>I6I4', seq, e.received * 2 + 1)
    else
      e.received = e.received + 1
      e.unread = e.unread + 1
      records[i] = struct.pack('>I6I4', seq, e.received * 2)
    end
  end
  local last = seqs[#seqs]
  e.lastSeq = last
  e.lastAt = now
  e.total = e.total + #seqs
  if own then
    e.readSeq = last
    e.unread = 0
  end
  local length = redis.call('APPEND', ci, table.concat(records))
  -- The inbox retains at most MAX seqs: past twice that, the records of pruned ones go.
  if length > 2 * MAX * REC then
    local n = length / REC
    local keep = math.max(lowerBound(ci, 0, n, oldestOf(base .. ':lg', last)), n - MAX)
    redis.call('SET', ci, redis.call('GETRANGE', ci, keep * REC, -1), 'KEEPTTL')
  end
  -- Expiries: TTL, pushed back once a quarter of the retention age has passed since the last
  -- time, so a key outlives its newest entry by at least the retention age.
  if at - e.cxAt > REFRESH then
    redis.call('PEXPIRE', ci, TTL)
    e.cxAt = at
  end
  saveEntry(base, id, e)
  redis.call('ZADD', cl, last, id)
  if at - tonumber(got[2] or '0') > REFRESH then
    redis.call('HSET', cv, '', now)
    redis.call('PEXPIRE', cv, TTL)
    redis.call('PEXPIRE', cl, TTL)
  end
end
`;

  // Dedupe: per (recipient, sender), a string: the highest msg_id stored (8 bytes), then the last
  // DEDUPE_RING..1.25 × DEDUPE_RING msg_ids with their seqs, oldest first. A msg_id above the
  // highest (ids that rise, the common case) is new without reading the rest. The key expires a
  // dedupe window after the sender's last stored message.
  const dedupe = `
-- a > b for two ids of 8 bytes (not by string comparison: Lua compares strings by the locale's collation).
local function above(a, b)
  local ah, al = struct.unpack('>I4I4', a)
  local bh, bl = struct.unpack('>I4I4', b)
  return ah > bh or (ah == bh and al > bl)
end
local function ringFind(ring, id)
  local at = 9
  while true do
    local p = string.find(ring, id, at, true)
    if not p then return nil end
    if (p - 9) % RING_ENTRY == 0 then return (struct.unpack('>I6', ring, p + 8)) end
    at = p + 1
  end
end
`;

  // The batch: KEYS are inbox bases; ARGV[1] is now; then, per inbox: a candidate epoch and its
  // number of runs; per run (consecutive messages of one sender and conversation): the sender,
  // the conversation ('' : none), own ('1' | '0') and its number of messages; per message: its
  // msg_id as 8 bytes ('' : not deduplicated) and its body. Reply, per inbox: its epoch, then per
  // message its seq, negated for a duplicate (the original's).
  const appendBatch = `${prelude}${store}${dedupe}
local now = ARGV[1]
local a = 2
local reply = {}
for k = 1, #KEYS do
  local base = KEYS[k]
  local ep = epoch(base .. ':ep', ARGV[a])
  local runs = tonumber(ARGV[a + 1])
  a = a + 2
  reply[#reply + 1] = tonumber(ep)
  local state = {head = headOf(base)}
  local before = state.head
  for _ = 1, runs do
    local sender, conversation, own, count = ARGV[a], ARGV[a + 1], ARGV[a + 2] == '1', tonumber(ARGV[a + 3])
    a = a + 4
    local dd = base .. ':dd:' .. sender
    local highest
    local ring
    local pending, added, seqs = {}, {}, {}
    local top
    for _ = 1, count do
      local id, body = ARGV[a], ARGV[a + 1]
      a = a + 2
      local seen
      if id ~= '' then
        seen = pending[id]
        if not seen then
          highest = highest or redis.call('GETRANGE', dd, 0, 7)
          if #highest == 8 and not above(id, highest) then
            ring = ring or redis.call('GET', dd)
            seen = ringFind(ring, id)
          end
        end
      end
      if seen then
        reply[#reply + 1] = -seen
      else
        local seq = store(base, state, body, now)
        reply[#reply + 1] = seq
        seqs[#seqs + 1] = seq
        if id ~= '' then
          pending[id] = seq
          added[#added + 1] = id .. struct.pack('>I6', seq)
          if not top or above(id, top) then top = id end
        end
      end
    end
    if #added > 0 then
      if #highest ~= 8 then
        redis.call('SET', dd, top .. table.concat(added), 'PX', WINDOW)
      else
        if above(top, highest) then redis.call('SETRANGE', dd, 0, top) end
        local length = redis.call('APPEND', dd, table.concat(added))
        if length > 8 + RING * RING_ENTRY * 1.25 then
          redis.call('SET', dd, redis.call('GETRANGE', dd, 0, 7) .. redis.call('GETRANGE', dd, length - RING * RING_ENTRY, -1))
        end
        redis.call('PEXPIRE', dd, WINDOW)
      end
    end
    if conversation ~= '' and #seqs > 0 then converse(base, conversation, own, seqs, now) end
  end
  settle(base, state, before, now)
end
return reply
`;

  // One entry of no conversation (a read or rewrite event), after the caller's change.
  const event = `
local function appendEvent(base, body, now)
  local state = {head = headOf(base)}
  local before = state.head
  local seq = store(base, state, body, now)
  settle(base, state, before, now)
  return seq
end
`;

  return {
    appendBatch,
    // KEYS: base   ARGV: after, limit, now, candidate epoch
    // {head, oldest, entries ({id, {'b', body}}), epoch}.
    range: `${prelude}
local base = KEYS[1]
local lg = base .. ':lg'
pruneAge(lg, tonumber(ARGV[3]))
local ep = epoch(base .. ':ep', ARGV[4])
local head = headOf(base)
local oldest = oldestOf(lg, head)
local entries = {}
if tonumber(ARGV[2]) > 0 then
  entries = redis.call('XRANGE', lg, d(tonumber(ARGV[1]) + 1), '+', 'COUNT', ARGV[2])
  overlay(base, entries)
end
return {head, oldest, entries, ep}
`,
    // KEYS: base   ARGV: before (0: the newest), limit, now
    // {ids, entries, last messages (false : pruned), more (0|1)}, most recent first.
    conversations: `${prelude}
local base = KEYS[1]
local now = tonumber(ARGV[3])
pruneAge(base .. ':lg', now)
expireConversations(base, now)
local limit = tonumber(ARGV[2])
if limit <= 0 then return {{}, {}, {}, 0} end
local max = '+inf'
if ARGV[1] ~= '0' then max = '(' .. ARGV[1] end
local ids = redis.call('ZREVRANGEBYSCORE', base .. ':cl', max, '-inf', 'LIMIT', 0, limit + 1)
local more = 0
if #ids > limit then
  more = 1
  ids[#ids] = nil
end
local entries, lasts = {}, {}
for i, id in ipairs(ids) do
  local entry = redis.call('HGET', base .. ':cv', id) or ''
  entries[i] = entry
  local last = messageAt(base, string.match(entry, '^(%d+)|') or '0')
  lasts[i] = last or ''
end
return {ids, entries, lasts, more}
`,
    // KEYS: base   ARGV: conversation, before (0: the newest), limit, now
    // {oldest, more (0|1), pruned (0|1), messages ascending ({id, {'b', body}})}.
    history: `${prelude}
local base = KEYS[1]
local id = ARGV[1]
local now = tonumber(ARGV[4])
local lg = base .. ':lg'
pruneAge(lg, now)
local oldest = oldestOf(lg, headOf(base))
local e = entryOf(base, id)
if not e then return {oldest, 0, 0, {}} end
if tonumber(e.lastAt) < now - AGE then
  forget(base, id)
  return {oldest, 0, 0, {}}
end
local ci = base .. ':ci:' .. id
local n = redis.call('STRLEN', ci) / REC
local first = lowerBound(ci, 0, n, oldest)
local before = tonumber(ARGV[2])
local stop = n
if before ~= 0 then stop = lowerBound(ci, first, n, before) end
local from = math.max(first, stop - tonumber(ARGV[3]))
local more = 0
if from > first then more = 1 end
local pruned = 0
if e.total > n - first then pruned = 1 end
local messages = {}
if stop > from then
  local records = redis.call('GETRANGE', ci, from * REC, stop * REC - 1)
  for i = 0, stop - from - 1 do
    local m = messageAt(base, d((struct.unpack('>I6', records, i * REC + 1))))
    if m then messages[#messages + 1] = m end
  end
end
return {oldest, more, pruned, messages}
`,
    // KEYS: base   ARGV: conversation, seq, event body, now, candidate epoch
    // {found (0|1), readSeq, unread, event seq (0: none), epoch}.
    markRead: `${prelude}${store}${event}
local base = KEYS[1]
local id = ARGV[1]
local now = tonumber(ARGV[4])
local lg = base .. ':lg'
pruneAge(lg, now)
local ep = epoch(base .. ':ep', ARGV[5])
local e = entryOf(base, id)
if e and tonumber(e.lastAt) < now - AGE then
  forget(base, id)
  e = nil
end
if not e then return {0, 0, 0, 0, ep} end
local target = math.min(tonumber(ARGV[2]), e.lastSeq)
if target <= e.readSeq then return {1, e.readSeq, e.unread, 0, ep} end
local ci = base .. ':ci:' .. id
local n = redis.call('STRLEN', ci) / REC
local first = lowerBound(ci, 0, n, oldestOf(lg, headOf(base)))
if target == e.lastSeq or first == n then
  e.unread = 0
else
  local receivedAt
  local at = lowerBound(ci, first, n, target + 1) - 1
  if at >= first then
    local _, count = recordAt(ci, at)
    receivedAt = math.floor(count / 2)
  else
    -- Below the first retained record: what was pruned counts as read.
    local _, count = recordAt(ci, first)
    receivedAt = math.floor(count / 2)
    if count % 2 == 0 then receivedAt = receivedAt - 1 end
  end
  e.unread = e.received - receivedAt
end
e.readSeq = target
saveEntry(base, id, e)
return {1, e.readSeq, e.unread, appendEvent(base, ARGV[3], ARGV[4]), ep}
`,
    // KEYS: base   ARGV: seq, body, event body ('' : none), now, candidate epoch, expected body ('' : any)
    // {found (0|1), rewritten (0|1), event seq (0: none), epoch, changed (0|1)}.
    rewrite: `${prelude}${store}${event}
local base = KEYS[1]
local now = tonumber(ARGV[4])
local lg = base .. ':lg'
pruneAge(lg, now)
local ep = epoch(base .. ':ep', ARGV[5])
local current = messageAt(base, ARGV[1])
if not current then return {0, 0, 0, ep, 0} end
local body = current[2][2]
if body == ARGV[2] then return {1, 0, 0, ep, 0} end
if ARGV[6] ~= '' and body ~= ARGV[6] then return {1, 0, 0, ep, 1} end
local rw = base .. ':rw'
redis.call('HSET', rw, ARGV[1], ARGV[2])
redis.call('PEXPIRE', rw, AGE)
-- Rewrites of pruned messages go once there are more than the log can hold.
if redis.call('HLEN', rw) > MAX then
  local oldest = oldestOf(lg, headOf(base))
  for _, seq in ipairs(redis.call('HKEYS', rw)) do
    if tonumber(seq) < oldest then redis.call('HDEL', rw, seq) end
  end
end
local eventSeq = 0
if ARGV[3] ~= '' then eventSeq = appendEvent(base, ARGV[3], ARGV[4]) end
return {1, 1, eventSeq, ep, 0}
`,
    // KEYS: base   ARGV: deviceId, seq, epoch
    // Clamped to the head in the same step: no position can point past what the inbox holds.
    saveCursor: `
local base = KEYS[1]
if redis.call('GET', base .. ':ep') ~= ARGV[3] then return 0 end
local position = math.min(tonumber(ARGV[2]), tonumber(redis.call('GET', base .. ':seq') or '0'))
local cur = base .. ':cur'
local current = tonumber(redis.call('HGET', cur, ARGV[1]) or '-1')
if position > current then redis.call('HSET', cur, ARGV[1], string.format('%d', position)) end
redis.call('PEXPIRE', cur, ${maxAgeMs})
return 1
`,
    // KEYS: base   ARGV: expected epoch, candidate epoch
    resetEpoch: `
local base = KEYS[1]
local current = redis.call('GET', base .. ':ep')
if current and current ~= ARGV[1] then return current end
redis.call('SET', base .. ':ep', ARGV[2])
redis.call('DEL', base .. ':cur')
return ARGV[2]
`,
  };
}
