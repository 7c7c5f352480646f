// Redis InboxStore. One user's keys share the hash tag {uid}, so they live in one Redis Cluster
// slot and each Lua script but appendPair's (a message and its own copy: two users) touches one slot:
//
//   <prefix>{uid}:seq            string   last assigned sequence (never expires)
//   <prefix>{uid}:ep             string   the inbox's epoch (never expires)
//   <prefix>{uid}:log            zset     score = seq, member = "<seq>|<storedAt>|<body bytes>"
//   <prefix>{uid}:cur            hash     deviceId -> acknowledged / delivered position
//   <prefix>{uid}:dd:<sender>\0<msgId>   string   seq, expires after the dedupe window
//   <prefix>{uid}:cl             zset     the chat list: score = lastSeq, member = conversation id
//   <prefix>{uid}:cv             hash     conversation id -> "lastSeq|lastAt|readSeq|unread|received|total"
//   <prefix>{uid}:cx:<id>        zset     one conversation's index: score = seq, member = "<seq>:<2 × received + own>"
//
// Append (dedupe check, sequence, store, prune, and the conversation's entry and index) is one
// script: one round trip, atomic. The client auto-pipelines, so concurrent appends share round
// trips. The index's running count of received messages makes a read mark anywhere O(log n):
// unread = received - the count at the mark (PROTOCOL.md §14).
//
// The epoch is created by the first script that finds none (an append, or the read of a login):
// after Redis lost its data, the inbox that numbers from 1 again has a new one. The candidate
// comes from the caller (scripts stay deterministic); an inbox from before epochs existed (a
// seq key without an ep key) simply gets one, nothing else changes.

import type { RedisOptions } from 'ioredis';
import { createRedisClient, pingRedis, storeUnavailable, type RedisClient, type RedisTarget } from '../redis/redis-client.js';
import { DEFAULT_INBOX_LIMITS, hasDedupeId, EpochSource, type AppendRequest, type AppendResult, type ConversationEntry, type ConversationPage, type HistoryPage, type InboxLimits, type ReadResult, type RewriteResult, type InboxRange, type InboxStore, type StoredMessage } from './inbox-store.js';

// The limits are written into the scripts (fewer arguments per call is measurably faster).
// Expired messages are pruned from the oldest end on every 16th append and on every read;
// between prunes, reads skip nothing because they prune first.
function scripts({ maxMessages, maxAgeMs, dedupeWindowMs }: InboxLimits) {
  // The conversation keys' expiry and how often it is pushed back (see converse).
  const refreshMs = Math.floor(maxAgeMs / 4);
  const ttlMs = maxAgeMs + refreshMs;
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
  // A conversation's entry, and forgetting one (its entry, list slot and index).
  const conversation = `
local function parseEntry(entry)
  if not entry then return nil end
  local lastSeq, lastAt, readSeq, unread, received, total, cxAt = string.match(entry, '^(%d+)|(%d+)|(%d+)|(%d+)|(%d+)|(%d+)|(%d+)$')
  return {lastSeq = tonumber(lastSeq), lastAt = lastAt, readSeq = tonumber(readSeq), unread = tonumber(unread), received = tonumber(received), total = tonumber(total), cxAt = tonumber(cxAt)}
end
local function entryOf(cvKey, id)
  return parseEntry(redis.call('HGET', cvKey, id))
end
local function saveEntry(cvKey, id, e)
  redis.call('HSET', cvKey, id, e.lastSeq .. '|' .. e.lastAt .. '|' .. e.readSeq .. '|' .. e.unread .. '|' .. e.received .. '|' .. e.total .. '|' .. e.cxAt)
end
local function forget(clKey, cvKey, id)
  redis.call('ZREM', clKey, id)
  redis.call('HDEL', cvKey, id)
  redis.call('DEL', string.sub(cvKey, 1, -3) .. 'cx:' .. id)
end
-- Conversations whose last message is older than the retention age, least recent first.
local function expireConversations(clKey, cvKey, now)
  local cutoff = now - ${maxAgeMs}
  for _ = 1, 1000 do
    local first = redis.call('ZRANGE', clKey, 0, 0)
    if #first == 0 then return end
    local e = entryOf(cvKey, first[1])
    if e and tonumber(e.lastAt) >= cutoff then return end
    forget(clKey, cvKey, first[1])
  end
end
-- The lowest retained seq (head + 1 when none), after the caller pruned the log.
local function oldestOf(seqKey, logKey)
  local first = redis.call('ZRANGE', logKey, 0, 0, 'WITHSCORES')
  if #first > 0 then return tonumber(first[2]) end
  return tonumber(redis.call('GET', seqKey) or '0') + 1
end
`;
  // One inbox's append: {seq, duplicate (0|1), epoch}. conv '' : an entry of no conversation.
  const append = `${prune}${epoch}${conversation}
local function converse(clKey, cvKey, cxKey, id, own, seq, now)
  -- The entry, and when the list's keys last had their expiry pushed back (field '', no uid).
  local got = redis.call('HMGET', cvKey, id, '')
  local e = parseEntry(got[1])
  local at = tonumber(now)
  if not e then
    if redis.call('ZCARD', clKey) >= ${maxMessages} then
      local least = redis.call('ZRANGE', clKey, 0, 0)
      forget(clKey, cvKey, least[1])
    end
    e = {lastSeq = 0, lastAt = now, readSeq = 0, unread = 0, received = 0, total = 0, cxAt = 0}
  end
  e.lastSeq = seq
  e.lastAt = now
  e.total = e.total + 1
  local count
  if own == '1' then
    e.readSeq = seq
    e.unread = 0
    count = e.received * 2 + 1
  else
    e.received = e.received + 1
    e.unread = e.unread + 1
    count = e.received * 2
  end
  redis.call('ZADD', cxKey, seq, seq .. ':' .. count)
  -- The inbox retains at most maxMessages seqs: older index entries go now and then.
  if e.total % 16 == 0 then redis.call('ZREMRANGEBYSCORE', cxKey, '-inf', '(' .. (seq - ${maxMessages} + 1)) end
  -- Expiries: ${ttlMs} ms, pushed back once a quarter of the retention age has passed since the
  -- last time, so a key outlives its newest entry by at least the retention age.
  if at - e.cxAt > ${refreshMs} then
    redis.call('PEXPIRE', cxKey, ${ttlMs})
    e.cxAt = at
  end
  saveEntry(cvKey, id, e)
  redis.call('ZADD', clKey, seq, id)
  if at - tonumber(got[2] or '0') > ${refreshMs} then
    redis.call('HSET', cvKey, '', now)
    redis.call('PEXPIRE', cvKey, ${ttlMs})
    redis.call('PEXPIRE', clKey, ${ttlMs})
  end
end
local function append(seqKey, epKey, logKey, ddKey, clKey, cvKey, cxKey, body, now, dedupe, candidate, conv, own)
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
  if conv ~= '' then converse(clKey, cvKey, cxKey, conv, own, seq, now) end
  return {seq, 0, ep}
end
`;
  return {
    // KEYS: seq, ep, log, dedupe, cl, cv, cx   ARGV: body, now, dedupe (0|1), candidate epoch, conversation ('' : none), own (0|1)
    append: `${append}
return append(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6])
`,
    // KEYS: the seven of each inbox   ARGV: body 1, body 2, now, dedupe (0|1), candidate epoch 1 and 2, conversation 1 and 2, own 1 and 2
    // Two inboxes in one script: one Redis, not a Redis Cluster (their keys are in two slots).
    appendPair: `${append}
local a = append(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], ARGV[1], ARGV[3], ARGV[4], ARGV[5], ARGV[7], ARGV[9])
local b = append(KEYS[8], KEYS[9], KEYS[10], KEYS[11], KEYS[12], KEYS[13], KEYS[14], ARGV[2], ARGV[3], ARGV[4], ARGV[6], ARGV[8], ARGV[10])
return {a[1], a[2], a[3], b[1], b[2], b[3]}
`,
    // KEYS: log, cl, cv   ARGV: before (0: the newest), limit, now
    // {ids, entries, last messages ('' : pruned), more (0|1)}, most recent first.
    conversations: `${prune}${conversation}
local now = tonumber(ARGV[3])
prune(KEYS[1], now)
expireConversations(KEYS[2], KEYS[3], now)
local limit = tonumber(ARGV[2])
if limit <= 0 then return {{}, {}, {}, 0} end
local max = '+inf'
if ARGV[1] ~= '0' then max = '(' .. ARGV[1] end
local ids = redis.call('ZREVRANGEBYSCORE', KEYS[2], max, '-inf', 'LIMIT', 0, limit + 1)
local more = 0
if #ids > limit then
  more = 1
  ids[#ids] = nil
end
local entries, lasts = {}, {}
for i, id in ipairs(ids) do
  local entry = redis.call('HGET', KEYS[3], id) or ''
  entries[i] = entry
  local lastSeq = string.match(entry, '^(%d+)|') or '0'
  lasts[i] = redis.call('ZRANGEBYSCORE', KEYS[1], lastSeq, lastSeq)[1] or ''
end
return {ids, entries, lasts, more}
`,
    // KEYS: seq, log, cl, cv, cx   ARGV: conversation, before (0: the newest), limit, now
    // {oldest, more (0|1), pruned (0|1), messages ascending}.
    history: `${prune}${conversation}
local now = tonumber(ARGV[4])
prune(KEYS[2], now)
local oldest = oldestOf(KEYS[1], KEYS[2])
local e = entryOf(KEYS[4], ARGV[1])
if not e then return {oldest, 0, 0, {}} end
if tonumber(e.lastAt) < now - ${maxAgeMs} then
  forget(KEYS[3], KEYS[4], ARGV[1])
  return {oldest, 0, 0, {}}
end
redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', '(' .. oldest)
local limit = tonumber(ARGV[3])
local max = '+inf'
if ARGV[2] ~= '0' then max = '(' .. ARGV[2] end
local index = redis.call('ZREVRANGEBYSCORE', KEYS[5], max, '-inf', 'LIMIT', 0, limit + 1)
local more = 0
if #index > limit then
  more = 1
  index[#index] = nil
end
local pruned = 0
if e.total > redis.call('ZCARD', KEYS[5]) then pruned = 1 end
local messages = {}
for i = #index, 1, -1 do
  local seq = string.match(index[i], '^(%d+):')
  messages[#messages + 1] = redis.call('ZRANGEBYSCORE', KEYS[2], seq, seq)[1]
end
return {oldest, more, pruned, messages}
`,
    // KEYS: seq, ep, log, dd, cl, cv, cx   ARGV: conversation, seq, event body, now, candidate epoch
    // {found (0|1), readSeq, unread, event seq (0: none), epoch}.
    markRead: `${append}
local now = tonumber(ARGV[4])
prune(KEYS[3], now)
local ep = epoch(KEYS[2], ARGV[5])
local e = entryOf(KEYS[6], ARGV[1])
if e and tonumber(e.lastAt) < now - ${maxAgeMs} then
  forget(KEYS[5], KEYS[6], ARGV[1])
  e = nil
end
if not e then return {0, 0, 0, 0, ep} end
local target = math.min(tonumber(ARGV[2]), e.lastSeq)
if target <= e.readSeq then return {1, e.readSeq, e.unread, 0, ep} end
redis.call('ZREMRANGEBYSCORE', KEYS[7], '-inf', '(' .. oldestOf(KEYS[1], KEYS[3]))
if target == e.lastSeq or redis.call('ZCARD', KEYS[7]) == 0 then
  e.unread = 0
else
  local receivedAt
  local at = redis.call('ZREVRANGEBYSCORE', KEYS[7], target, '-inf', 'LIMIT', 0, 1)
  if #at > 0 then
    receivedAt = math.floor(tonumber(string.match(at[1], ':(%d+)$')) / 2)
  else
    -- Below the first retained entry: what was pruned counts as read.
    local count = tonumber(string.match(redis.call('ZRANGE', KEYS[7], 0, 0)[1], ':(%d+)$'))
    receivedAt = math.floor(count / 2)
    if count % 2 == 0 then receivedAt = receivedAt - 1 end
  end
  e.unread = e.received - receivedAt
end
e.readSeq = target
saveEntry(KEYS[6], ARGV[1], e)
local r = append(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], ARGV[3], ARGV[4], '0', ARGV[5], '', '0')
return {1, e.readSeq, e.unread, r[1], r[3]}
`,
    // KEYS: seq, ep, log, dd, cl, cv, cx   ARGV: seq, body, event body ('' : none), now, candidate epoch,
    // expected body ('' : any)
    // {found (0|1), rewritten (0|1), event seq (0: none), epoch, changed (0|1)}.
    rewrite: `${append}
local now = tonumber(ARGV[4])
prune(KEYS[3], now)
local ep = epoch(KEYS[2], ARGV[5])
local current = redis.call('ZRANGEBYSCORE', KEYS[3], ARGV[1], ARGV[1])[1]
if not current then return {0, 0, 0, ep, 0} end
local prefix = string.match(current, '^%d+|%d+|')
local replaced = prefix .. ARGV[2]
if current == replaced then return {1, 0, 0, ep, 0} end
if ARGV[6] ~= '' and current ~= prefix .. ARGV[6] then return {1, 0, 0, ep, 1} end
redis.call('ZREM', KEYS[3], current)
redis.call('ZADD', KEYS[3], ARGV[1], replaced)
local eventSeq = 0
if ARGV[3] ~= '' then eventSeq = append(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], ARGV[3], ARGV[4], '0', ARGV[5], '', '0')[1] end
return {1, 1, eventSeq, ep, 0}
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

type Keys7 = [seq: string, ep: string, log: string, dedupe: string, cl: string, cv: string, cx: string];

type Scripts = {
  sbAppend(...args: [...Keys7, body: Buffer, now: number, dedupe01: string, epoch: number, conversation: string, own01: string]): Promise<[number, number, string]>;
  sbAppendPair(...args: [...Keys7, ...Keys7, body1: Buffer, body2: Buffer, now: number, dedupe01: string, epoch1: number, epoch2: number, conversation1: string, conversation2: string, own1: string, own2: string]): Promise<[number, number, string, number, number, string]>;
  sbRangeBuffer(seq: string, ep: string, log: string, after: number, limit: number, now: number, epoch: number): Promise<[number, number, Buffer[], Buffer]>;
  sbConversationsBuffer(log: string, cl: string, cv: string, before: number, limit: number, now: number): Promise<[Buffer[], Buffer[], Buffer[], number]>;
  sbHistoryBuffer(seq: string, log: string, cl: string, cv: string, cx: string, conversation: string, before: number, limit: number, now: number): Promise<[number, number, number, Buffer[]]>;
  sbMarkRead(...args: [...Keys7, conversation: string, seq: number, event: Buffer, now: number, epoch: number]): Promise<[number, number, number, number, string]>;
  sbRewrite(...args: [...Keys7, seq: number, body: Buffer, event: Buffer | string, now: number, epoch: number, expected: Buffer | string]): Promise<[number, number, number, string, number]>;
  sbSaveCursor(seqKey: string, ep: string, cur: string, deviceId: string, position: number, epoch: number): Promise<number>;
  sbResetEpoch(ep: string, cur: string, expected: number, epoch: number): Promise<string>;
};

export interface RedisInboxStoreOptions {
  /** A redis:// URL. */
  /** One Redis (a redis:// URL) or a Redis Cluster's seed nodes. */
  url: RedisTarget;
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
  readonly #redis: RedisClient & Scripts;
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
    redis.defineCommand('sbAppend', { numberOfKeys: 7, lua: lua.append });
    redis.defineCommand('sbAppendPair', { numberOfKeys: 14, lua: lua.appendPair });
    redis.defineCommand('sbRange', { numberOfKeys: 3, lua: lua.range });
    redis.defineCommand('sbConversations', { numberOfKeys: 3, lua: lua.conversations });
    redis.defineCommand('sbHistory', { numberOfKeys: 5, lua: lua.history });
    redis.defineCommand('sbMarkRead', { numberOfKeys: 7, lua: lua.markRead });
    redis.defineCommand('sbRewrite', { numberOfKeys: 7, lua: lua.rewrite });
    redis.defineCommand('sbSaveCursor', { numberOfKeys: 3, lua: lua.saveCursor });
    redis.defineCommand('sbResetEpoch', { numberOfKeys: 2, lua: lua.resetEpoch });
    this.#redis = redis as RedisClient & Scripts;
  }

  /** The underlying connection, for health checks and logging of its events. */
  get redis(): RedisClient {
    return this.#redis;
  }

  async append(request: AppendRequest): Promise<AppendResult> {
    let reply: [number, number, string];
    try {
      reply = await this.#redis.sbAppend(...this.#appendKeys(request, hasDedupeId(request.msgId)), bufferOf(request.body), this.#now(), hasDedupeId(request.msgId) ? '1' : '0', this.#epochs.next(), request.conversation ?? '', request.own === true ? '1' : '0');
    } catch (err) {
      throw storeUnavailable('inbox', err);
    }
    const [seq, duplicate, epoch] = reply;
    return { seq: Number(seq), duplicate: duplicate === 1, epoch: Number(epoch) };
  }

  async appendPair(first: AppendRequest, second: AppendRequest): Promise<[AppendResult, AppendResult]> {
    // The two share the msgId (a message and its own copy); each keeps its own dedupe key.
    const dedupe = hasDedupeId(first.msgId) && hasDedupeId(second.msgId);
    let reply: [number, number, string, number, number, string];
    try {
      reply = await this.#redis.sbAppendPair(
        ...this.#appendKeys(first, dedupe),
        ...this.#appendKeys(second, dedupe),
        bufferOf(first.body),
        bufferOf(second.body),
        this.#now(),
        dedupe ? '1' : '0',
        this.#epochs.next(),
        this.#epochs.next(),
        first.conversation ?? '',
        second.conversation ?? '',
        first.own === true ? '1' : '0',
        second.own === true ? '1' : '0',
      );
    } catch (err) {
      throw storeUnavailable('inbox', err);
    }
    return [
      { seq: Number(reply[0]), duplicate: reply[1] === 1, epoch: Number(reply[2]) },
      { seq: Number(reply[3]), duplicate: reply[4] === 1, epoch: Number(reply[5]) },
    ];
  }

  async conversations(uid: string, before: number, limit: number): Promise<ConversationPage> {
    const k = this.#keys(uid);
    let reply: [Buffer[], Buffer[], Buffer[], number];
    try {
      reply = await this.#redis.sbConversationsBuffer(k.log, k.cl, k.cv, before, limit, this.#now());
    } catch (err) {
      throw storeUnavailable('inbox', err);
    }
    const [ids, entries, lasts, more] = reply;
    return {
      more: more === 1,
      conversations: ids.map((id, i): ConversationEntry => {
        const [lastSeq = 0, lastAt = 0, readSeq = 0, unread = 0] = entries[i]!.toString('latin1').split('|').map(Number);
        const last = lasts[i]!;
        return { conversation: id.toString('utf8'), lastSeq, lastAt, readSeq, unread, last: last.length === 0 ? undefined : parseMember(last) };
      }),
    };
  }

  async history(uid: string, conversation: string, before: number, limit: number): Promise<HistoryPage> {
    const k = this.#keys(uid);
    let reply: [number, number, number, Buffer[]];
    try {
      reply = await this.#redis.sbHistoryBuffer(k.seq, k.log, k.cl, k.cv, k.cx(conversation), conversation, before, limit, this.#now());
    } catch (err) {
      throw storeUnavailable('inbox', err);
    }
    const [oldest, more, pruned, messages] = reply;
    return { oldest: Number(oldest), more: more === 1, pruned: pruned === 1, messages: messages.map(parseMember) };
  }

  async markRead(uid: string, conversation: string, seq: number, event: Uint8Array): Promise<ReadResult> {
    const k = this.#keys(uid);
    let reply: [number, number, number, number, string];
    try {
      reply = await this.#redis.sbMarkRead(k.seq, k.ep, k.log, `${k.base}:dd`, k.cl, k.cv, k.cx(conversation), conversation, seq, bufferOf(event), this.#now(), this.#epochs.next());
    } catch (err) {
      throw storeUnavailable('inbox', err);
    }
    const [found, readSeq, unread, eventSeq, epoch] = reply;
    return { found: found === 1, readSeq: Number(readSeq), unread: Number(unread), eventSeq: eventSeq === 0 ? undefined : Number(eventSeq), epoch: Number(epoch) };
  }

  async rewrite(uid: string, seq: number, body: Uint8Array, event: AppendRequest | undefined, expected?: Uint8Array): Promise<RewriteResult> {
    const k = this.#keys(uid);
    let reply: [number, number, number, string, number];
    try {
      reply = await this.#redis.sbRewrite(k.seq, k.ep, k.log, `${k.base}:dd`, k.cl, k.cv, `${k.base}:cx`, seq, bufferOf(body), event ? bufferOf(event.body) : '', this.#now(), this.#epochs.next(), expected ? bufferOf(expected) : '');
    } catch (err) {
      throw storeUnavailable('inbox', err);
    }
    const [found, rewritten, eventSeq, epoch, changed] = reply;
    return { found: found === 1, rewritten: rewritten === 1, changed: changed === 1, eventSeq: eventSeq === 0 ? undefined : Number(eventSeq), epoch: Number(epoch) };
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
    return { base, seq: `${base}:seq`, ep: `${base}:ep`, log: `${base}:log`, cur: `${base}:cur`, cl: `${base}:cl`, cv: `${base}:cv`, cx: (conversation: string) => `${base}:cx:${conversation}` };
  }

  /** An append's seven keys; the dedupe and index keys are placeholders (unused) without a msgId or a conversation. */
  #appendKeys({ uid, sender, msgId, conversation }: AppendRequest, dedupe: boolean): Keys7 {
    const k = this.#keys(uid);
    return [k.seq, k.ep, k.log, dedupe ? `${k.base}:dd:${sender}\0${msgId}` : `${k.base}:dd`, k.cl, k.cv, conversation === undefined ? `${k.base}:cx` : k.cx(conversation)];
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
