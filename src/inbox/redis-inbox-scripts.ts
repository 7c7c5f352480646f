// The Lua scripts of RedisInboxStore (the key layout is described there). Every script declares
// every key it touches (KEYS, in the order inboxKeys() gives them), so that on a Redis Cluster it
// runs in its inbox's slot, and while that slot migrates Redis answers TRYAGAIN or ASK for the
// whole call instead of running it against half of the keys. The limits are written into the
// text (fewer arguments per call is measurably faster), so each store defines its own commands.
//
// Appends come in runs: consecutive messages to one inbox from one sender in one conversation
// (redis-append-batch.ts). The new messages of a run get consecutive seqs and are stored as one
// stream entry per CHUNK of them, with one conversation index record each, so that Redis does
// its per-command work once per chunk, not once per message.

import type { InboxLimits } from './inbox-store.js';

/** Msg_ids remembered per (recipient, sender): a resend is recognised while fewer newer ones were stored. */
export const DEDUPE_RING = 1000;
/**
 * Messages per stream entry (and per conversation index record) at most. Never lower it: the
 * count trim (settle) counts on no entry of any stream holding more.
 */
export const CHUNK = 32;
/** Bytes of one conversation index record. */
export const INDEX_RECORD_BYTES = 12;
/** Ids per dedupe block at most, so that trimming a ring can always go down to DEDUPE_RING. */
export const RING_BLOCK = DEDUPE_RING / 4;

/** How often appends trim the log to the count bound: every this many seqs (and to the age bound every 4 × as many). */
export function trimEvery(maxMessages: number): number {
  return Math.max(16, Math.floor(maxMessages / 64));
}

/** The keys every script of an inbox may touch, in KEYS order (the append batch adds two per run). */
export function inboxKeys(base: string) {
  return { seq: `${base}:seq`, ep: `${base}:ep`, lg: `${base}:lg`, rw: `${base}:rw`, cv: `${base}:cv`, cl: `${base}:cl`, cur: `${base}:cur` };
}

export function inboxScripts({ maxMessages, maxAgeMs, dedupeWindowMs }: InboxLimits) {
  // The conversation keys' expiry, and how often it is pushed back (see converse).
  const refreshMs = Math.floor(maxAgeMs / 4);
  const ttlMs = maxAgeMs + refreshMs;
  const check = trimEvery(maxMessages);
  const prelude = `
local MAX, AGE, WINDOW, REFRESH, TTL, CHECK = ${maxMessages}, ${maxAgeMs}, ${dedupeWindowMs}, ${refreshMs}, ${ttlMs}, ${check}
local RING, RING_BLOCK, CHUNK, REC = ${DEDUPE_RING}, ${RING_BLOCK}, ${CHUNK}, ${INDEX_RECORD_BYTES}
-- Numbers into key names and ids: exact up to 2^53 (Lua prints a double as 1.7e+12 otherwise).
local function d(n) return string.format('%d', n) end

-- The seq key holds "<head>|<when the log's expiry was last pushed back>" (or, written by an
-- earlier version, "<head>").
local function parseSeq(value)
  if not value then return 0, 0 end
  local head, pushed = string.match(value, '^(%d+)|?(%d*)$')
  return tonumber(head), tonumber(pushed) or 0
end
local function headOf(k)
  return (parseSeq(redis.call('GET', k.seq)))
end

-- The log: a stream. An entry holds the consecutive messages of one chunk: its id is
-- "<first seq>-<storedAt>", its fields f, <count>, b, the bodies framed (each: its length, 4
-- bytes big-endian, then its bytes). One field, not one per body: a command called from Lua costs
-- per argument, and Lua makes every string by hashing all of its bytes, so a chunk of new
-- messages comes as an argument of its own and goes to XADD as it came (one with duplicates is
-- framed again in Lua). Entries written by earlier versions start with field n
-- instead, and have the bodies as fields of their own (n, <count>, each body, '' to make pairs).
local function seqOf(id) return tonumber(string.match(id, '^(%d+)')) end
local function storedAtOf(id) return tonumber(string.match(id, '%-(%d+)$')) end
local function countOf(entry) return tonumber(entry[2][2]) end
-- The entry holding seq (the last one starting at or before it), or nil.
local function entryAt(k, seq)
  local entry = redis.call('XREVRANGE', k.lg, d(seq), '-', 'COUNT', 1)[1]
  if entry and seqOf(entry[1]) + countOf(entry) > seq then return entry end
  return nil
end

-- Entries older than the retention age go, from the oldest end. Store times ascend with seqs
-- (give or take the workers' clocks), so a binary search over seqs finds the first entry kept,
-- in O(log n) reads of one entry, and one XTRIM drops everything before it. Returns the first
-- seq left, or nil when nothing is.
local function pruneAge(k, head, now)
  local first = redis.call('XRANGE', k.lg, '-', '+', 'COUNT', 1)[1]
  if not first then return nil end
  local cutoff = now - AGE
  if storedAtOf(first[1]) >= cutoff then return seqOf(first[1]) end
  local lo, hi = seqOf(first[1]) + countOf(first), head + 1
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    local entry = redis.call('XREVRANGE', k.lg, d(mid), '-', 'COUNT', 1)[1]
    if storedAtOf(entry[1]) < cutoff then lo = seqOf(entry[1]) + countOf(entry) else hi = seqOf(entry[1]) end
  end
  redis.call('XTRIM', k.lg, 'MINID', d(lo))
  if lo > head then return nil end
  return lo
end

-- The lowest retained seq (head + 1 when none is): the count bound hides the messages below
-- head - MAX + 1 even before appends trim them.
local function oldestOf(k, head, now)
  local first = pruneAge(k, head, now)
  return math.max(first or head + 1, head - MAX + 1, 1)
end

-- The epoch stays a string (a double would print as 1.2e+15); made by the first script that finds none.
local function epoch(k, candidate)
  local current = redis.call('GET', k.ep)
  if current then return current end
  redis.call('SET', k.ep, candidate)
  return candidate
end

-- Messages of 'entries' from seq 'from' on, at most 'limit', as {seq, storedAt, body} triples
-- appended to 'out'; a rewritten body (kept beside the log, whose entries cannot change) in
-- place of its original. Returns how many it appended.
local function expand(k, entries, from, limit, out)
  local rewrites = redis.call('EXISTS', k.rw) == 1
  local added = 0
  for _, entry in ipairs(entries) do
    local first, at, n = seqOf(entry[1]), storedAtOf(entry[1]), countOf(entry)
    local fields = entry[2]
    local framed = fields[1] == 'f' and fields[4]
    local skip = math.min(math.max(0, from - first), n)
    local p = 1
    if framed then
      for _ = 1, skip do p = p + 4 + struct.unpack('>I4', framed, p) end
    end
    for i = skip, n - 1 do
      if added == limit then return added end
      local seq = first + i
      local body
      if framed then
        local length = struct.unpack('>I4', framed, p)
        body = string.sub(framed, p + 4, p + 3 + length)
        p = p + 4 + length
      else
        body = fields[3 + i]
      end
      if rewrites then body = redis.call('HGET', k.rw, d(seq)) or body end
      out[#out + 1] = seq
      out[#out + 1] = at
      out[#out + 1] = body
      added = added + 1
    end
  end
  return added
end

-- One message as {seq, storedAt, body}, or nil.
local function messageAt(k, seq, oldest)
  if seq < oldest then return nil end
  local entry = entryAt(k, seq)
  if not entry then return nil end
  local out = {}
  expand(k, {entry}, seq, 1, out)
  return out
end

-- A conversation's entry is binary: a version byte (1), then lastSeq (6), lastAt (6), readSeq
-- (6), unread (4), received (4), total (4), cxAt (6: when its index's expiry was last pushed
-- back) and first (6: its first seq), big-endian. An earlier version wrote "lastSeq|lastAt|
-- readSeq|unread|received|total|cxAt" (its messages are not in this log: first 0, as pruned).
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
local function entryOf(k, id)
  return parseEntry(redis.call('HGET', k.cv, id))
end
local function saveEntry(k, id, e)
  redis.call('HSET', k.cv, id, struct.pack(ENTRY, 1, e.lastSeq, e.lastAt, e.readSeq, e.unread, e.received, e.total, e.cxAt, e.first))
end
-- Forgets a conversation: its list slot and entry. Its index key is not this script's (it
-- declares the keys it touches): it expires by itself, and a conversation made again with the
-- same peer starts it anew (converse).
local function forget(k, id)
  redis.call('ZREM', k.cl, id)
  redis.call('HDEL', k.cv, id)
end
-- Conversations whose last message is older than the retention age, least recent first.
local function expireConversations(k, now)
  local cutoff = now - AGE
  for _ = 1, 1000 do
    local first = redis.call('ZRANGE', k.cl, 0, 0)
    if #first == 0 then return end
    local e = entryOf(k, first[1])
    if e and e.lastAt >= cutoff then return end
    forget(k, first[1])
  end
end

-- A conversation's index: a string of records, one per chunk of its messages, ascending: the
-- chunk's first seq (6 bytes), 2 × its messages + 1 if they are the owner's own (2) and the
-- messages received in the conversation before it (4). Records of pruned chunks stay at the
-- front until the string is compacted.
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

  // Storing: the next seqs of an inbox, one stream entry per CHUNK; 'state' carries the inbox's
  // head (and when the log's expiry was last pushed back) from run to run within one script.
  // Bodies come framed (each: its length, 4 bytes, then its bytes), a chunk of them as one string.
  const store = `
-- 'n' framed bodies: the inbox's next seqs, one stream entry.
local function storeChunk(k, state, n, framed, now)
  local first = state.head + 1
  redis.call('XADD', k.lg, d(first) .. '-' .. now, 'f', d(n), 'b', framed)
  state.head = first + n - 1
  return {first, n}
end
-- A run's 'count' bodies as the client sent them, CHUNK an argument from ARGV[arg] on: each
-- argument one entry, stored as it came (not cut or joined in Lua, which would hash it again).
local function storeChunks(k, state, count, arg, now)
  local chunks = {}
  for c = 0, math.ceil(count / CHUNK) - 1 do
    chunks[#chunks + 1] = storeChunk(k, state, math.min(CHUNK, count - c * CHUNK), ARGV[arg + c], now)
  end
  return chunks
end

-- An inbox about to be appended to: its epoch (made from 'candidate' if it has none, and a
-- candidate is given) and its state.
local function open(k, candidate)
  local got = redis.call('MGET', k.ep, k.seq)
  local ep = got[1]
  if not ep and candidate then
    ep = candidate
    redis.call('SET', k.ep, ep)
  end
  local head, pushed = parseSeq(got[2])
  return ep, {head = head, pushed = pushed, before = head}
end

-- After an inbox's appends: its head; every CHECK seqs the bound by count, every 4 × CHECK the
-- bound by age; the log's expiry (AGE + a quarter, pushed back once a quarter of AGE has passed
-- since the last time, so it outlives its newest message by at least AGE).
local function settle(k, state, now)
  local before = state.before
  if state.head == before then return end
  state.before = state.head
  local at = tonumber(now)
  if at - state.pushed > REFRESH then
    redis.call('PEXPIRE', k.lg, TTL)
    state.pushed = at
  end
  redis.call('SET', k.seq, d(state.head) .. '|' .. d(state.pushed))
  if math.floor(state.head / CHECK) ~= math.floor(before / CHECK) then
    -- The entry holding 'keep' stays whole: it starts at most CHUNK - 1 seqs before it, and
    -- trimming below that needs no read (a read of an entry brings its bodies into Lua, which
    -- hashes them). Up to CHUNK - 1 more messages stay than the bound lets reads return.
    local keep = state.head - MAX + 1
    if keep > CHUNK then redis.call('XTRIM', k.lg, 'MINID', d(keep - CHUNK + 1)) end
    -- Its first entry is read (bodies and all) to see its age: less often.
    if math.floor(state.head / (4 * CHECK)) ~= math.floor(before / (4 * CHECK)) then pruneAge(k, state.head, at) end
  end
end

-- Appends 'chunks' ({first seq, count}, ascending, new) to conversation 'id', whose index is
-- 'ci': its entry, list slot and index, in O(chunks).
local function converse(k, ci, id, own, chunks, now)
  -- The entry, and when the list's keys last had their expiry pushed back (field '', no uid).
  local got = redis.call('HMGET', k.cv, id, '')
  local e = parseEntry(got[1])
  local at = tonumber(now)
  if not e then
    if redis.call('ZCARD', k.cl) >= MAX then forget(k, redis.call('ZRANGE', k.cl, 0, 0)[1]) end
    -- What a forgotten conversation with this peer left.
    redis.call('DEL', ci)
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
    local keep = math.max(firstLive(ci, n, oldestOf(k, e.lastSeq, at)), n - MAX)
    redis.call('SET', ci, redis.call('GETRANGE', ci, keep * REC, -1), 'KEEPTTL')
  end
  -- Expiries: TTL, pushed back once a quarter of the retention age has passed since the last
  -- time, so a key outlives its newest entry by at least the retention age.
  if at - e.cxAt > REFRESH then
    redis.call('PEXPIRE', ci, TTL)
    e.cxAt = at
  end
  saveEntry(k, id, e)
  redis.call('ZADD', k.cl, e.lastSeq, id)
  if at - tonumber(got[2] or '0') > REFRESH then
    redis.call('HSET', k.cv, '', now)
    redis.call('PEXPIRE', k.cv, TTL)
    redis.call('PEXPIRE', k.cl, TTL)
  end
end
`;

  // Dedupe, per (recipient, sender): a string of blocks, each the ids of messages that got
  // consecutive seqs (at most RING_BLOCK): the block's length n (2), its first seq (6), the ids
  // (8 each, big-endian), then the ring's header as of that block: the highest id stored (8), how
  // many ids the ring holds (4) and when its expiry was last pushed back (6). The last 18 bytes
  // are the current header, so a run reads them and writes one APPEND. An id above the highest
  // (ids that rise, the common case) is new without reading the rest. The oldest blocks go while
  // 1 000 ids stay; the key expires 1 to 1.25 dedupe windows after the sender's last message.
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
  for _, block in ipairs(blocks) do
    -- At most RING_BLOCK ids a block, so that trimming can always leave RING.
    for from = 0, block[1] - 1, RING_BLOCK do
      local n = math.min(RING_BLOCK, block[1] - from)
      parts[#parts + 1] = struct.pack('>I2I6', n, block[2] + from) .. string.sub(block[3], 8 * from + 1, 8 * (from + n)) .. tail
    end
  end
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

-- One run: 'count' messages of one sender in one conversation, their ids, and their bodies in
-- ARGV from 'arg' on, CHUNK an argument (the last one the rest), each framed as storeChunk takes
-- them; appends its answer to 'reply' (the first seq when all are new, else 0 and each one's seq,
-- negated for a duplicate).
local function appendRun(k, state, dd, ci, conversation, own, rising, count, ids, arg, now, at, reply)
  local header = ''
  if rising or ids ~= string.rep(ZERO, count) then header = redis.call('GETRANGE', dd, -HEADER, -1) end
  local highest
  if #header == HEADER then highest = string.sub(header, 1, 8) end
  local chunks
  if rising and (not highest or above(string.sub(ids, 1, 8), highest)) then
    -- Every one is new: their ids are one block of the ring.
    local first = state.head + 1
    chunks = storeChunks(k, state, count, arg, now)
    reply[#reply + 1] = first
    remember(dd, header, {{count, first, ids}}, count, string.sub(ids, -8), at)
  else
    reply[#reply + 1] = 0
    -- Which ones are new (no body needed for that), and their seqs.
    local ring
    local pending, new, fresh = {}, {}, 0
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
        new[i] = true
        fresh = fresh + 1
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
    if fresh == count then
      -- None seen before (ids that are no rising numbers, say): stored as they came too.
      chunks = storeChunks(k, state, count, arg, now)
    else
      -- The new bodies (framed) cut out of their chunks and joined CHUNK an entry; stored once
      -- all the run's bodies were found.
      local entries, kept, i = {}, {}, 0
      for c = 0, math.ceil(count / CHUNK) - 1 do
        local framed, p = ARGV[arg + c], 1
        while p <= #framed do
          i = i + 1
          local length = struct.unpack('>I4', framed, p)
          if new[i] then
            kept[#kept + 1] = string.sub(framed, p, p + 3 + length)
            if #kept == CHUNK then
              entries[#entries + 1] = table.concat(kept)
              kept = {}
            end
          end
          p = p + 4 + length
        end
      end
      if i ~= count then error('a run of ' .. count .. ' messages came with ' .. i .. ' bodies') end
      if #kept > 0 then entries[#entries + 1] = table.concat(kept) end
      chunks = {}
      for e, framed in ipairs(entries) do chunks[e] = storeChunk(k, state, math.min(CHUNK, fresh - (e - 1) * CHUNK), framed, now) end
    end
    if added > 0 then remember(dd, header, blocks, added, top, at) end
  end
  if conversation ~= '' and #chunks > 0 then converse(k, ci, conversation, own, chunks, now) end
end
`;

  // The batch: KEYS are, per inbox, seq, ep, lg, cv and cl, then per run of it the sender's
  // dedupe key and the conversation's index key. ARGV[1] is now, ARGV[2] the appends, as bytes
  // (big-endian): per inbox, a candidate epoch (a double), its number of runs (2), the bytes of
  // its runs (4) and its number of chunks (4); per run, its sender and its conversation (4 and the
  // bytes each; no conversation: length 0), flags (1: 1 own, 2 rising: the ids ascend and none is
  // zero), its number of messages k (2) and their msg_ids (8 each, zero: not deduplicated).
  // ARGV[3] on are the bodies, in order: a run's k bodies in ceil(k / CHUNK) arguments, CHUNK
  // bodies each (the last the rest), each body its length (4) and its bytes. The bodies are not in
  // ARGV[2] because Redis's Lua hashes every byte of every string it makes: a chunk that comes as
  // an argument goes to XADD as it is, where one cut from a larger argument would be hashed twice.
  // Reply, per inbox: its epoch, then per run the first seq when every message of it is new (they
  // have the seqs that follow), else 0 and, per message, its seq, negated for a duplicate (the
  // original's); or, for an inbox that failed, -1 and the error. An inbox's failure leaves the
  // others alone, and what it stored before it failed keeps its seqs (the head moves past them):
  // no seq is ever handed out twice, and a resend finds or completes it.
  const appendBatch = `${prelude}${store}${dedupe}
local now, batch = ARGV[1], ARGV[2]
local at = tonumber(now)
local pos, kp, arg = 1, 1, 3
local reply = {}
while pos <= #batch do
  local candidate, runs, bytes, inboxChunks
  candidate, runs, bytes, inboxChunks, pos = struct.unpack('>dI2I4I4', batch, pos)
  local k = {seq = KEYS[kp], ep = KEYS[kp + 1], lg = KEYS[kp + 2], cv = KEYS[kp + 3], cl = KEYS[kp + 4]}
  local runKeys = kp + 5
  kp = runKeys + 2 * runs
  local stop = pos + bytes
  local mark = #reply
  local state
  local ok, err = pcall(function()
    local ep
    ep, state = open(k, d(candidate))
    reply[#reply + 1] = tonumber(ep)
    local p, a = pos, arg
    for r = 0, runs - 1 do
      local sender, conversation, flags, count
      sender, conversation, flags, count, p = struct.unpack('>I4c0I4c0BI2', batch, p)
      local ids = string.sub(batch, p, p + 8 * count - 1)
      p = p + 8 * count
      appendRun(k, state, KEYS[runKeys + 2 * r], KEYS[runKeys + 2 * r + 1], conversation, flags % 2 == 1, flags >= 2, count, ids, a, now, at, reply)
      a = a + math.ceil(count / CHUNK)
    end
    if a ~= arg + inboxChunks then error('an inbox of ' .. inboxChunks .. ' chunks whose runs took ' .. (a - arg)) end
    settle(k, state, now)
  end)
  if not ok then
    if state then pcall(settle, k, state, now) end
    for i = #reply, mark + 1, -1 do reply[i] = nil end
    reply[#reply + 1] = -1
    if type(err) == 'table' then err = err.err end
    reply[#reply + 1] = tostring(err)
  end
  pos = stop
  arg = arg + inboxChunks
end
return reply
`;

  // One entry of no conversation (a read or rewrite event), after the caller's change.
  const event = `
local function appendEvent(k, body, now)
  local _, state = open(k, nil)
  storeChunk(k, state, 1, struct.pack('>I4', #body) .. body, now)
  settle(k, state, now)
  return state.head
end
`;

  return {
    appendBatch,
    // KEYS: seq, ep, lg, rw   ARGV: after, limit, now, candidate epoch
    // {head, oldest, messages ({seq, storedAt, body} flattened), epoch}.
    range: `${prelude}
local k = {seq = KEYS[1], ep = KEYS[2], lg = KEYS[3], rw = KEYS[4]}
local ep = epoch(k, ARGV[4])
local head = headOf(k)
local oldest = oldestOf(k, head, tonumber(ARGV[3]))
local limit = tonumber(ARGV[2])
local out = {}
local from = math.max(tonumber(ARGV[1]) + 1, oldest)
if limit > 0 and from <= head then
  -- The entry holding 'from', then those after it, a few at a time.
  local got = 0
  local start = d(from)
  local entry = entryAt(k, from)
  if entry then
    got = expand(k, {entry}, from, limit, out)
    start = '(' .. entry[1]
  end
  while got < limit do
    local entries = redis.call('XRANGE', k.lg, start, '+', 'COUNT', math.ceil((limit - got) / 8))
    if #entries == 0 then break end
    got = got + expand(k, entries, from, limit - got, out)
    start = '(' .. entries[#entries][1]
  end
end
return {head, oldest, out, ep}
`,
    // KEYS: seq, lg, cl, cv, rw   ARGV: before (0: the newest), limit, now
    // {ids, entries, last messages ({seq, storedAt, body}, or {} : pruned), more (0|1)}, most recent first.
    conversations: `${prelude}
local k = {seq = KEYS[1], lg = KEYS[2], cl = KEYS[3], cv = KEYS[4], rw = KEYS[5]}
local now = tonumber(ARGV[3])
local oldest = oldestOf(k, headOf(k), now)
expireConversations(k, now)
local limit = tonumber(ARGV[2])
if limit <= 0 then return {{}, {}, {}, 0} end
local max = '+inf'
if ARGV[1] ~= '0' then max = '(' .. ARGV[1] end
local ids = redis.call('ZREVRANGEBYSCORE', k.cl, max, '-inf', 'LIMIT', 0, limit + 1)
local more = 0
if #ids > limit then
  more = 1
  ids[#ids] = nil
end
local entries, lasts = {}, {}
for i, id in ipairs(ids) do
  local entry = redis.call('HGET', k.cv, id)
  entries[i] = entry or ''
  local e = parseEntry(entry)
  lasts[i] = (e and messageAt(k, e.lastSeq, oldest)) or {}
end
return {ids, entries, lasts, more}
`,
    // KEYS: seq, lg, cl, cv, rw, ci (the conversation's index)   ARGV: conversation, before (0: the newest), limit, now
    // {oldest, more (0|1), pruned (0|1), messages ascending ({seq, storedAt, body} flattened)}.
    history: `${prelude}
local k = {seq = KEYS[1], lg = KEYS[2], cl = KEYS[3], cv = KEYS[4], rw = KEYS[5]}
local ci = KEYS[6]
local id = ARGV[1]
local now = tonumber(ARGV[4])
local oldest = oldestOf(k, headOf(k), now)
local e = entryOf(k, id)
if not e then return {oldest, 0, 0, {}} end
if e.lastAt < now - AGE then
  forget(k, id)
  return {oldest, 0, 0, {}}
end
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
  local entry = redis.call('XRANGE', k.lg, d(page[1]), d(page[1]), 'COUNT', 1)
  expand(k, entry, page[2], page[3], out)
end
return {oldest, more, pruned, out}
`,
    // KEYS: seq, ep, lg, cl, cv, ci (the conversation's index)   ARGV: conversation, seq, event body, now, candidate epoch
    // {found (0|1), readSeq, unread, event seq (0: none), epoch}.
    markRead: `${prelude}${store}${event}
local k = {seq = KEYS[1], ep = KEYS[2], lg = KEYS[3], cl = KEYS[4], cv = KEYS[5]}
local ci = KEYS[6]
local id = ARGV[1]
local now = tonumber(ARGV[4])
local ep = epoch(k, ARGV[5])
local oldest = oldestOf(k, headOf(k), now)
local e = entryOf(k, id)
if e and e.lastAt < now - AGE then
  forget(k, id)
  e = nil
end
if not e then return {0, 0, 0, 0, ep} end
local target = math.min(tonumber(ARGV[2]), e.lastSeq)
if target <= e.readSeq then return {1, e.readSeq, e.unread, 0, ep} end
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
saveEntry(k, id, e)
return {1, e.readSeq, e.unread, appendEvent(k, ARGV[3], ARGV[4]), ep}
`,
    // KEYS: seq, ep, lg, rw   ARGV: seq, body, event body ('' : none), now, candidate epoch, expected body ('' : any)
    // {found (0|1), rewritten (0|1), event seq (0: none), epoch, changed (0|1)}.
    rewrite: `${prelude}${store}${event}
local k = {seq = KEYS[1], ep = KEYS[2], lg = KEYS[3], rw = KEYS[4]}
local now = tonumber(ARGV[4])
local ep = epoch(k, ARGV[5])
local oldest = oldestOf(k, headOf(k), now)
local current = messageAt(k, tonumber(ARGV[1]), oldest)
if not current then return {0, 0, 0, ep, 0} end
local body = current[3]
if body == ARGV[2] then return {1, 0, 0, ep, 0} end
if ARGV[6] ~= '' and body ~= ARGV[6] then return {1, 0, 0, ep, 1} end
redis.call('HSET', k.rw, ARGV[1], ARGV[2])
redis.call('PEXPIRE', k.rw, AGE)
-- Rewrites of pruned messages go once there are more than the log can hold.
if redis.call('HLEN', k.rw) > MAX then
  for _, seq in ipairs(redis.call('HKEYS', k.rw)) do
    if tonumber(seq) < oldest then redis.call('HDEL', k.rw, seq) end
  end
end
local eventSeq = 0
if ARGV[3] ~= '' then eventSeq = appendEvent(k, ARGV[3], ARGV[4]) end
return {1, 1, eventSeq, ep, 0}
`,
    // KEYS: seq, ep, cur   ARGV: deviceId, seq, epoch
    // Clamped to the head in the same step: no position can point past what the inbox holds.
    saveCursor: `
if redis.call('GET', KEYS[2]) ~= ARGV[3] then return 0 end
local position = math.min(tonumber(ARGV[2]), tonumber(string.match(redis.call('GET', KEYS[1]) or '0', '^%d+')))
local current = tonumber(redis.call('HGET', KEYS[3], ARGV[1]) or '-1')
if position > current then redis.call('HSET', KEYS[3], ARGV[1], string.format('%d', position)) end
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
