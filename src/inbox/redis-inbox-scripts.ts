// The Lua scripts of RedisInboxStore (the key layout is described there). Every script declares
// the inboxes it touches by their key base `<prefix>{uid}` and derives the keys from it, so that
// on a Redis Cluster each runs in its inbox's slot. The limits are written into the text (fewer
// arguments per call is measurably faster), so each store defines its own commands.
//
// Appends come in runs: consecutive messages to one inbox from one sender in one conversation
// (redis-append-batch.ts). The new messages of a run get consecutive seqs and are stored as one
// stream entry per CHUNK of them, with one conversation index record each, so that Redis does
// its per-command work once per chunk, not once per message.

import type { InboxLimits } from './inbox-store.js';

/** Msg_ids remembered per (recipient, sender): a resend is recognised while fewer newer ones were stored. */
export const DEDUPE_RING = 1000;
/** Messages per stream entry (and per conversation index record) at most. */
export const CHUNK = 32;
/** Bytes of one conversation index record. */
export const INDEX_RECORD_BYTES = 12;

export function inboxScripts({ maxMessages, maxAgeMs, dedupeWindowMs }: InboxLimits) {
  // The conversation keys' expiry, and how often it is pushed back (see converse).
  const refreshMs = Math.floor(maxAgeMs / 4);
  const ttlMs = maxAgeMs + refreshMs;
  // How often appends look at the oldest end (age, and count beyond MAX): every CHECK seqs.
  const check = Math.max(16, Math.floor(maxMessages / 64));
  const prelude = `
local MAX, AGE, WINDOW, REFRESH, TTL, CHECK = ${maxMessages}, ${maxAgeMs}, ${dedupeWindowMs}, ${refreshMs}, ${ttlMs}, ${check}
local RING, CHUNK, REC = ${DEDUPE_RING}, ${CHUNK}, ${INDEX_RECORD_BYTES}
-- Numbers into key names and ids: exact up to 2^53 (Lua prints a double as 1.7e+12 otherwise).
local function d(n) return string.format('%d', n) end

-- The seq key holds "<head>|<when the log's expiry was last pushed back>" (or, written by an
-- earlier version, "<head>").
local function parseSeq(value)
  if not value then return 0, 0 end
  local head, pushed = string.match(value, '^(%d+)|?(%d*)$')
  return tonumber(head), tonumber(pushed) or 0
end
local function headOf(base)
  return (parseSeq(redis.call('GET', base .. ':seq')))
end

-- The log: a stream. An entry holds the consecutive messages of one chunk: its id is
-- "<first seq>-<storedAt>", its fields n, <count>, then the bodies (and '' to make them pairs).
local function seqOf(id) return tonumber(string.match(id, '^(%d+)')) end
local function storedAtOf(id) return tonumber(string.match(id, '%-(%d+)$')) end
local function countOf(entry) return tonumber(entry[2][2]) end

-- Entries older than the retention age go, from the oldest end (their store times ascend with
-- their seqs, give or take the workers' clocks). Returns the first seq left, or nil.
local function pruneAge(lg, now)
  local cutoff = now - AGE
  for _ = 1, 1000 do
    local first = redis.call('XRANGE', lg, '-', '+', 'COUNT', 1)[1]
    if not first then return nil end
    if storedAtOf(first[1]) >= cutoff then return seqOf(first[1]) end
    redis.call('XDEL', lg, first[1])
  end
  return nil
end

-- The lowest retained seq (head + 1 when none is): the count bound hides the messages below
-- head - MAX + 1 even before appends trim them.
local function oldestOf(lg, head, now)
  local first = pruneAge(lg, now)
  return math.max(first or head + 1, head - MAX + 1, 1)
end

-- The epoch stays a string (a double would print as 1.2e+15); made by the first script that finds none.
local function epoch(key, candidate)
  local current = redis.call('GET', key)
  if current then return current end
  redis.call('SET', key, candidate)
  return candidate
end

-- Messages of 'entries' from seq 'from' on, at most 'limit', as {seq, storedAt, body} triples
-- appended to 'out'; a rewritten body (kept beside the log, whose entries cannot change) in
-- place of its original. Returns how many it appended.
local function expand(base, entries, from, limit, out)
  local rw = {}
  local rewrites = redis.call('EXISTS', base .. ':rw') == 1
  local added = 0
  for _, entry in ipairs(entries) do
    local first, at, n = seqOf(entry[1]), storedAtOf(entry[1]), countOf(entry)
    for i = math.max(0, from - first), n - 1 do
      if added == limit then return added end
      local seq = first + i
      local body = entry[2][3 + i]
      if rewrites then body = redis.call('HGET', base .. ':rw', d(seq)) or body end
      out[#out + 1] = seq
      out[#out + 1] = at
      out[#out + 1] = body
      added = added + 1
    end
  end
  return added
end

-- One message as {seq, storedAt, body}, or nil: the entry holding it is the last one starting at or before it.
local function messageAt(base, seq, oldest)
  if seq < oldest then return nil end
  local entry = redis.call('XREVRANGE', base .. ':lg', d(seq), '-', 'COUNT', 1)[1]
  if not entry or seqOf(entry[1]) + countOf(entry) <= seq then return nil end
  local out = {}
  expand(base, {entry}, seq, 1, out)
  return out
end

-- A conversation's entry in the chat list's hash, and forgetting one (entry, list slot, index).
-- An entry is binary: a version byte (1), then lastSeq (6), lastAt (6), readSeq (6), unread (4),
-- received (4), total (4), cxAt (6: when its index's expiry was last pushed back) and first (6:
-- its first seq), big-endian. An earlier version wrote "lastSeq|lastAt|readSeq|unread|received|
-- total|cxAt" (its messages are not in this log: first 0, as pruned).
local ENTRY = '>BI6I6I6I4I4I4I6I6'
local function parseEntry(entry)
  if not entry then return nil end
  if string.byte(entry, 1) == 1 then
    local _, lastSeq, lastAt, readSeq, unread, received, total, cxAt, first = struct.unpack(ENTRY, entry)
    return {lastSeq = lastSeq, lastAt = lastAt, readSeq = readSeq, unread = unread, received = received, total = total, cxAt = cxAt, first = first}
  end
  local lastSeq, lastAt, readSeq, unread, received, total, cxAt = string.match(entry, '^(%d+)|(%d+)|(%d+)|(%d+)|(%d+)|(%d+)|(%d+)$')
  if not lastSeq then return nil end
  return {lastSeq = tonumber(lastSeq), lastAt = tonumber(lastAt), readSeq = tonumber(readSeq), unread = tonumber(unread), received = tonumber(received), total = tonumber(total), cxAt = tonumber(cxAt), first = 0}
end
local function entryOf(base, id)
  return parseEntry(redis.call('HGET', base .. ':cv', id))
end
local function saveEntry(base, id, e)
  redis.call('HSET', base .. ':cv', id, struct.pack(ENTRY, 1, e.lastSeq, e.lastAt, e.readSeq, e.unread, e.received, e.total, e.cxAt, e.first))
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
    if e and e.lastAt >= cutoff then return end
    forget(base, first[1])
  end
end

-- A conversation's index: a string of records, one per chunk of its messages, ascending: the
-- chunk's first seq (6 bytes), 2 × its messages + 1 if they are the owner's own (2) and the
-- messages received in the conversation before it (4).
-- Records of pruned chunks stay at the front until the string is compacted.
local function recordAt(ci, i)
  local first, counted, received = struct.unpack('>I6I2I4', redis.call('GETRANGE', ci, i * REC, i * REC + REC - 1))
  return {first = first, n = math.floor(counted / 2), own = counted % 2 == 1, received = received}
end
-- The first record at or after 'from' whose first seq is > value; n if none.
local function upperBound(ci, from, n, value)
  local lo, hi = from, n
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if recordAt(ci, mid).first <= value then lo = mid + 1 else hi = mid end
  end
  return lo
end
-- The first record holding a seq >= oldest; n if none.
local function firstLive(ci, n, oldest)
  local r = upperBound(ci, 0, n, oldest) - 1
  if r >= 0 then
    local record = recordAt(ci, r)
    if record.first + record.n > oldest then return r end
  end
  return r + 1
end
`;

  // Storing: the next seqs of an inbox, one stream entry per CHUNK; 'state.head' carries its
  // head from run to run within one script.
  const store = `
local function storeBodies(base, state, bodies, now)
  local chunks = {}
  local lg = base .. ':lg'
  local i = 1
  while i <= #bodies do
    local n = math.min(CHUNK, #bodies - i + 1)
    local first = state.head + 1
    local fields = {'n', d(n)}
    for j = i, i + n - 1 do fields[#fields + 1] = bodies[j] end
    if n % 2 == 1 then fields[#fields + 1] = '' end
    redis.call('XADD', lg, d(first) .. '-' .. now, unpack(fields))
    state.head = first + n - 1
    chunks[#chunks + 1] = {first, n}
    i = i + n
  end
  return chunks
end

-- After an inbox's appends: its head; every CHECK seqs, the bounds by age and by count; the
-- log's expiry (AGE + a quarter, pushed back once a quarter of AGE has passed since the last
-- time, so it outlives its newest message by at least AGE).
local function settle(base, state, before, now)
  if state.head == before then return end
  local lg = base .. ':lg'
  local at = tonumber(now)
  if at - state.pushed > REFRESH then
    redis.call('PEXPIRE', lg, TTL)
    state.pushed = at
  end
  redis.call('SET', base .. ':seq', d(state.head) .. '|' .. d(state.pushed))
  if math.floor(state.head / CHECK) ~= math.floor(before / CHECK) then
    pruneAge(lg, at)
    local keep = state.head - MAX + 1
    if keep > 1 then
      -- The entry holding 'keep' stays whole; those before it go.
      local entry = redis.call('XREVRANGE', lg, d(keep), '-', 'COUNT', 1)[1]
      if entry then redis.call('XTRIM', lg, 'MINID', entry[1]) end
    end
  end
end
-- An inbox about to be appended to: its epoch (made from 'candidate' if it has none, and a
-- candidate is given) and its state.
local function open(base, candidate)
  local got = redis.call('MGET', base .. ':ep', base .. ':seq')
  local ep = got[1]
  if not ep and candidate then
    ep = candidate
    redis.call('SET', base .. ':ep', ep)
  end
  local head, pushed = parseSeq(got[2])
  return ep, {head = head, pushed = pushed}
end

-- Appends 'chunks' ({first seq, count}, ascending, new) to conversation 'id': its entry, list
-- slot and index, in O(chunks).
local function converse(base, id, own, chunks, now)
  local cv, cl, ci = base .. ':cv', base .. ':cl', base .. ':ci:' .. id
  -- The entry, and when the list's keys last had their expiry pushed back (field '', no uid).
  local got = redis.call('HMGET', cv, id, '')
  local e = parseEntry(got[1])
  local at = tonumber(now)
  if not e then
    if redis.call('ZCARD', cl) >= MAX then forget(base, redis.call('ZRANGE', cl, 0, 0)[1]) end
    e = {lastSeq = 0, lastAt = at, readSeq = 0, unread = 0, received = 0, total = 0, cxAt = 0, first = chunks[1][1]}
  end
  local records = {}
  local flag = 0
  if own then flag = 1 end
  for i, chunk in ipairs(chunks) do
    local first, n = chunk[1], chunk[2]
    records[i] = struct.pack('>I6I2I4', first, n * 2 + flag, e.received)
    e.total = e.total + n
    if not own then
      e.received = e.received + n
      e.unread = e.unread + n
    end
    e.lastSeq = first + n - 1
  end
  e.lastAt = at
  if own then
    e.readSeq = e.lastSeq
    e.unread = 0
  end
  local length = redis.call('APPEND', ci, table.concat(records))
  -- The inbox retains at most MAX seqs: past twice that many records, those of pruned ones go.
  if length > 2 * MAX * REC then
    local n = length / REC
    local keep = math.max(firstLive(ci, n, oldestOf(base .. ':lg', e.lastSeq, at)), n - MAX)
    redis.call('SET', ci, redis.call('GETRANGE', ci, keep * REC, -1), 'KEEPTTL')
  end
  -- Expiries: TTL, pushed back once a quarter of the retention age has passed since the last
  -- time, so a key outlives its newest entry by at least the retention age.
  if at - e.cxAt > REFRESH then
    redis.call('PEXPIRE', ci, TTL)
    e.cxAt = at
  end
  saveEntry(base, id, e)
  redis.call('ZADD', cl, e.lastSeq, id)
  if at - tonumber(got[2] or '0') > REFRESH then
    redis.call('HSET', cv, '', now)
    redis.call('PEXPIRE', cv, TTL)
    redis.call('PEXPIRE', cl, TTL)
  end
end
`;

  // Dedupe, per (recipient, sender): a string of blocks, each the ids of messages that got
  // consecutive seqs: the block's length n (2), its first seq (6), the ids (8 each, big-endian),
  // then the ring's header as of that block: the highest id stored (8), how many ids the ring
  // holds (4) and when its expiry was last pushed back (6). The last 18 bytes are the current
  // header, so a run reads them and writes one APPEND. An id above the highest (ids that rise,
  // the common case) is new without reading the rest. The oldest blocks go while 1 000 ids stay;
  // the key expires 1 to 1.25 dedupe windows after the sender's last stored message.
  const dedupe = `
local ZERO = string.rep(string.char(0), 8)
local HEADER = 18
-- a > b for two ids of 8 bytes (not by string comparison: Lua compares strings by the locale's collation).
local function above(a, b)
  local ah, al = struct.unpack('>I4I4', a)
  local bh, bl = struct.unpack('>I4I4', b)
  return ah > bh or (ah == bh and al > bl)
end
local function ringFind(ring, id)
  if not string.find(ring, id, 1, true) then return nil end
  local at = 1
  while at <= #ring do
    local n, first = struct.unpack('>I2I6', ring, at)
    local ids = at + 8
    local p = string.find(ring, id, ids, true)
    while p and p < ids + 8 * n do
      if (p - ids) % 8 == 0 then return first + (p - ids) / 8 end
      p = string.find(ring, id, p + 1, true)
    end
    at = ids + 8 * n + HEADER
  end
  return nil
end
-- Adds 'blocks' ({n, first seq, ids}; 'added' ids in all, the highest now 'top') to the ring
-- whose current header is 'header' ('' : none yet).
local function remember(dd, header, blocks, added, top, now)
  local total, pushed = added, 0
  if #header == HEADER then
    local before, at = struct.unpack('>I4I6', header, 9)
    total, pushed = before + added, at
  end
  local push = now - pushed > WINDOW / 4
  if push then pushed = now end
  local tail = top .. struct.pack('>I4I6', total, pushed)
  local parts = {}
  for i, block in ipairs(blocks) do parts[i] = struct.pack('>I2I6', block[1], block[2]) .. block[3] .. tail end
  local length = redis.call('APPEND', dd, table.concat(parts))
  if total > RING * 1.25 then
    -- The oldest blocks go while RING ids stay; the last header counts what is left.
    local ring = redis.call('GET', dd)
    local at = 1
    while at <= length do
      local n = struct.unpack('>I2', ring, at)
      if total - n < RING then break end
      total = total - n
      at = at + 8 + 8 * n + HEADER
    end
    redis.call('SET', dd, string.sub(ring, at, -HEADER - 1) .. top .. struct.pack('>I4I6', total, pushed), 'KEEPTTL')
  end
  if push then redis.call('PEXPIRE', dd, math.floor(WINDOW * 1.25)) end
end
`;

  // The batch: KEYS are inbox bases; ARGV[1] is now, ARGV[2] the appends, as bytes (big-endian):
  // per inbox, a candidate epoch (a double) and its number of runs (2); per run, its sender and
  // its conversation (4 and the bytes each; no conversation: length 0), flags (1: 1 own, 2
  // rising: the ids ascend and none is zero), its number of messages k (2), their msg_ids (8 each,
  // zero: not deduplicated), then each body (4 and the bytes). Reply, per inbox: its epoch; per
  // run: the first seq when every message of it is new (they have the seqs that follow), else 0
  // and, per message, its seq, negated for a duplicate (the original's).
  const appendBatch = `${prelude}${store}${dedupe}
local now, batch = ARGV[1], ARGV[2]
local at = tonumber(now)
local pos = 1
local reply = {}
for k = 1, #KEYS do
  local base = KEYS[k]
  local candidate, runs
  candidate, runs, pos = struct.unpack('>dI2', batch, pos)
  local ep, state = open(base, d(candidate))
  reply[#reply + 1] = tonumber(ep)
  local before = state.head
  for _ = 1, runs do
    local sender, conversation, flags, count
    sender, conversation, flags, count, pos = struct.unpack('>I4c0I4c0BI2', batch, pos)
    local own, rising = flags % 2 == 1, flags >= 2
    local ids = string.sub(batch, pos, pos + 8 * count - 1)
    pos = pos + 8 * count
    local bodies = {}
    for i = 1, count do bodies[i], pos = struct.unpack('>I4c0', batch, pos) end
    local dd = base .. ':dd:' .. sender
    local header = ''
    if rising or ids ~= string.rep(ZERO, count) then header = redis.call('GETRANGE', dd, -HEADER, -1) end
    local highest
    if #header == HEADER then highest = string.sub(header, 1, 8) end
    local chunks
    if rising and (not highest or above(string.sub(ids, 1, 8), highest)) then
      -- Every one is new: one block of ids for the ring.
      local first = state.head + 1
      chunks = storeBodies(base, state, bodies, now)
      reply[#reply + 1] = first
      remember(dd, header, {{count, first, ids}}, count, string.sub(ids, -8), at)
    else
      reply[#reply + 1] = 0
      local ring
      local pending, fresh = {}, {}
      local blocks, block, blockFirst, added = {}, {}, 0, 0
      local top = highest
      local seq = state.head
      for i = 1, count do
        local id = string.sub(ids, i * 8 - 7, i * 8)
        local seen
        if id ~= ZERO then
          seen = pending[id]
          if not seen and highest and not above(id, highest) then
            ring = ring or redis.call('GET', dd)
            seen = ringFind(ring, id)
          end
        end
        if seen then
          reply[#reply + 1] = -seen
        else
          seq = seq + 1
          fresh[#fresh + 1] = bodies[i]
          reply[#reply + 1] = seq
          if id == ZERO then
            -- Blocks hold ids of consecutive seqs: a message without one ends a block.
            if #block > 0 then
              blocks[#blocks + 1] = {#block, blockFirst, table.concat(block)}
              block = {}
            end
          else
            pending[id] = seq
            if #block == 0 then blockFirst = seq end
            block[#block + 1] = id
            added = added + 1
            if not top or above(id, top) then top = id end
          end
        end
      end
      if #block > 0 then blocks[#blocks + 1] = {#block, blockFirst, table.concat(block)} end
      chunks = storeBodies(base, state, fresh, now)
      if added > 0 then remember(dd, header, blocks, added, top, at) end
    end
    if conversation ~= '' and #chunks > 0 then converse(base, conversation, own, chunks, now) end
  end
  settle(base, state, before, now)
end
return reply
`;

  // One entry of no conversation (a read or rewrite event), after the caller's change.
  const event = `
local function appendEvent(base, body, now)
  local _, state = open(base, nil)
  local before = state.head
  storeBodies(base, state, {body}, now)
  settle(base, state, before, now)
  return state.head
end
`;

  return {
    appendBatch,
    // KEYS: base   ARGV: after, limit, now, candidate epoch
    // {head, oldest, messages ({seq, storedAt, body} flattened), epoch}.
    range: `${prelude}
local base = KEYS[1]
local lg = base .. ':lg'
local ep = epoch(base .. ':ep', ARGV[4])
local head = headOf(base)
local oldest = oldestOf(lg, head, tonumber(ARGV[3]))
local limit = tonumber(ARGV[2])
local out = {}
local from = math.max(tonumber(ARGV[1]) + 1, oldest)
if limit > 0 and from <= head then
  -- The entry holding 'from', then those after it, a few at a time.
  local got = 0
  local entry = redis.call('XREVRANGE', lg, d(from), '-', 'COUNT', 1)[1]
  local start = d(from)
  if entry and seqOf(entry[1]) + countOf(entry) > from then
    got = expand(base, {entry}, from, limit, out)
    start = '(' .. entry[1]
  end
  while got < limit do
    local entries = redis.call('XRANGE', lg, start, '+', 'COUNT', math.ceil((limit - got) / 8))
    if #entries == 0 then break end
    got = got + expand(base, entries, from, limit - got, out)
    start = '(' .. entries[#entries][1]
  end
end
return {head, oldest, out, ep}
`,
    // KEYS: base   ARGV: before (0: the newest), limit, now
    // {ids, entries, last messages ({seq, storedAt, body}, or {} : pruned), more (0|1)}, most recent first.
    conversations: `${prelude}
local base = KEYS[1]
local now = tonumber(ARGV[3])
local oldest = oldestOf(base .. ':lg', headOf(base), now)
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
  local entry = redis.call('HGET', base .. ':cv', id)
  entries[i] = entry or ''
  local e = parseEntry(entry)
  lasts[i] = (e and messageAt(base, e.lastSeq, oldest)) or {}
end
return {ids, entries, lasts, more}
`,
    // KEYS: base   ARGV: conversation, before (0: the newest), limit, now
    // {oldest, more (0|1), pruned (0|1), messages ascending ({seq, storedAt, body} flattened)}.
    history: `${prelude}
local base = KEYS[1]
local id = ARGV[1]
local now = tonumber(ARGV[4])
local lg = base .. ':lg'
local oldest = oldestOf(lg, headOf(base), now)
local e = entryOf(base, id)
if not e then return {oldest, 0, 0, {}} end
if e.lastAt < now - AGE then
  forget(base, id)
  return {oldest, 0, 0, {}}
end
local ci = base .. ':ci:' .. id
local n = redis.call('STRLEN', ci) / REC
local lo = firstLive(ci, n, oldest)
-- Pruned: messages of it went (its first is below the oldest retained).
local pruned = 0
if e.first < oldest then pruned = 1 end
-- Walks back from the last record before 'before', collecting the newest 'limit' messages.
local before = tonumber(ARGV[2])
if before == 0 then before = e.lastSeq + 1 end
local limit = tonumber(ARGV[3])
local r = upperBound(ci, lo, n, before - 1) - 1
local pages = {}
local got = 0
local more = 0
while r >= lo do
  local record = recordAt(ci, r)
  local top = math.min(record.first + record.n - 1, before - 1)
  local bottom = math.max(record.first, oldest)
  if got == limit then
    if top >= bottom then more = 1 end
    break
  end
  local take = math.min(top - bottom + 1, limit - got)
  if take > 0 then
    pages[#pages + 1] = {record.first, top - take + 1, take}
    got = got + take
    if top - take >= bottom then more = 1 break end
  end
  r = r - 1
end
local out = {}
for i = #pages, 1, -1 do
  local page = pages[i]
  local entry = redis.call('XRANGE', lg, d(page[1]), d(page[1]), 'COUNT', 1)
  expand(base, entry, page[2], page[3], out)
end
return {oldest, more, pruned, out}
`,
    // KEYS: base   ARGV: conversation, seq, event body, now, candidate epoch
    // {found (0|1), readSeq, unread, event seq (0: none), epoch}.
    markRead: `${prelude}${store}${event}
local base = KEYS[1]
local id = ARGV[1]
local now = tonumber(ARGV[4])
local lg = base .. ':lg'
local ep = epoch(base .. ':ep', ARGV[5])
local oldest = oldestOf(lg, headOf(base), now)
local e = entryOf(base, id)
if e and e.lastAt < now - AGE then
  forget(base, id)
  e = nil
end
if not e then return {0, 0, 0, 0, ep} end
local target = math.min(tonumber(ARGV[2]), e.lastSeq)
if target <= e.readSeq then return {1, e.readSeq, e.unread, 0, ep} end
local ci = base .. ':ci:' .. id
local n = redis.call('STRLEN', ci) / REC
local lo = firstLive(ci, n, oldest)
if target == e.lastSeq or lo == n then
  e.unread = 0
else
  local receivedAt
  local r = upperBound(ci, lo, n, target) - 1
  local first = recordAt(ci, lo)
  if r < lo or target < math.max(first.first, oldest) then
    -- Below the first retained message: what was pruned counts as read.
    receivedAt = first.received
    if not first.own then receivedAt = receivedAt + math.max(0, oldest - first.first) end
  else
    local record = recordAt(ci, r)
    receivedAt = record.received
    if not record.own then receivedAt = receivedAt + math.min(record.n, target - record.first + 1) end
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
local ep = epoch(base .. ':ep', ARGV[5])
local oldest = oldestOf(lg, headOf(base), now)
local current = messageAt(base, tonumber(ARGV[1]), oldest)
if not current then return {0, 0, 0, ep, 0} end
local body = current[3]
if body == ARGV[2] then return {1, 0, 0, ep, 0} end
if ARGV[6] ~= '' and body ~= ARGV[6] then return {1, 0, 0, ep, 1} end
local rw = base .. ':rw'
redis.call('HSET', rw, ARGV[1], ARGV[2])
redis.call('PEXPIRE', rw, AGE)
-- Rewrites of pruned messages go once there are more than the log can hold.
if redis.call('HLEN', rw) > MAX then
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
local position = math.min(tonumber(ARGV[2]), tonumber(string.match(redis.call('GET', base .. ':seq') or '0', '^%d+')))
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
