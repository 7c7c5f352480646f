// Redis InboxStore. One user's keys share the hash tag {uid} (src/redis/key-tag.ts), so they live
// in one Redis Cluster slot, and every script declares each key it touches (redis-inbox-scripts.ts):
//
//   <base>:seq            string   "<head>|<when the log's expiry was last pushed back>" (never expires)
//   <base>:ep             string   the inbox's epoch (never expires)
//   <base>:lg             stream   the log: an entry per chunk of up to 32 consecutive messages of one
//                                  run, id "<first seq>-<storedAt>", fields f, <count>, b, the bodies
//                                  framed (each: 4 bytes of length, then its bytes)
//   <base>:rw             hash     seq -> the body that replaced it (a tombstone, an edit)
//   <base>:cur            hash     deviceId -> acknowledged / delivered position
//   <base>:dr:<sender>    string   dedupe: the sender's last 1 000 to 1 250 msg_ids and their seqs
//   <base>:cl             zset     the chat list: score = lastSeq, member = conversation id
//   <base>:cv             hash     conversation id -> its entry (binary, 43 bytes)
//   <base>:ci:<id>        string   one conversation's index: 12 bytes per chunk of its messages
//
// (base: <prefix>{uid}.) A stream keeps a message in about its body plus 20 to 30 bytes (a zset
// member cost about 150 more); an index record is 12 bytes for up to 32 messages; a sender's
// dedupe state is 8 bytes an id and 26 a block of ids stored together, for its last 1 000 to
// 1 250: a pair that talks a lot costs a bounded amount however many messages it sends.
//
// Appends are batched (redis-append-batch.ts): one script call per turn of the event loop stores
// the messages of many inboxes (one Redis) or of one inbox (a Redis Cluster). Reads and read
// marks are one script each. The running count of received messages in the index makes a read
// mark anywhere O(log n): unread = received - the count at the mark (PROTOCOL.md §14).
//
// The epoch is created by the first script that finds none (an append, or the read of a login):
// after Redis lost its data, the inbox that numbers from 1 again has a new one. The candidate
// comes from the caller (scripts stay deterministic); an inbox from before epochs existed (a
// seq key without an ep key) simply gets one, nothing else changes.

import { Cluster, type ChainableCommander, type RedisOptions } from 'ioredis';
import calculateSlot from 'cluster-key-slot';
import { createRedisClient, isClusterTarget, pingRedis, storeUnavailable, type RedisClient, type RedisTarget } from '../redis/redis-client.js';
import { keyTag } from '../redis/key-tag.js';
import { AppendBatch, type BatchCall } from './redis-append-batch.js';
import { bufferOf } from '../protocol/wire.js';
import { inboxKeys, inboxScripts } from './redis-inbox-scripts.js';
import { DEFAULT_INBOX_LIMITS, EpochSource, type AppendRequest, type AppendResult, type ConversationEntry, type ConversationPage, type HistoryPage, type InboxLimits, type ReadResult, type RewriteResult, type InboxRange, type InboxStore, type StoredMessage } from './inbox-store.js';

/** Messages as the scripts answer them: seq, storedAt and body, one after the other. */
type Flat = (number | Buffer)[];

type Keys<N extends number, T extends string[] = []> = T['length'] extends N ? T : Keys<N, [...T, string]>;

type Scripts = {
  sbAppendBatch(numberOfKeys: number, ...args: (string | number | Buffer)[]): Promise<(number | string)[]>;
  sbRangeBuffer(...args: [...Keys<4>, after: number, limit: number, now: number, epoch: number]): Promise<[number, number, Flat, Buffer]>;
  sbConversationsBuffer(...args: [...Keys<5>, before: number, limit: number, now: number]): Promise<[Buffer[], Buffer[], Flat[], number]>;
  sbHistoryBuffer(...args: [...Keys<6>, conversation: string, before: number, limit: number, now: number]): Promise<[number, number, number, Flat]>;
  sbMarkRead(...args: [...Keys<6>, conversation: string, seq: number, event: Buffer, now: number, epoch: number]): Promise<[number, number, number, number, string]>;
  sbRewrite(...args: [...Keys<4>, seq: number, body: Buffer, event: Buffer | string, now: number, epoch: number, expected: Buffer | string]): Promise<[number, number, number, string, number]>;
  sbSaveCursor(...args: [...Keys<3>, deviceId: string, position: number, epoch: number]): Promise<number>;
  sbResetEpoch(...args: [...Keys<2>, expected: number, epoch: number]): Promise<string>;
};

export interface RedisInboxStoreOptions {
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
  readonly #batch: AppendBatch;

  constructor(options: RedisInboxStoreOptions) {
    this.#limits = { ...DEFAULT_INBOX_LIMITS, ...options.limits };
    this.#prefix = options.keyPrefix ?? 'sb:';
    this.#now = options.now ?? Date.now;
    // A batch declares a number of keys of its own (its first argument), which the client's
    // own pipelining cannot route by: on a Cluster, #send pipelines the calls per master itself.
    const redis = createRedisClient(options.url, { ...options, redisOptions: { autoPipeliningIgnoredCommands: ['sbAppendBatch'], ...options.redisOptions } });
    const lua = inboxScripts(this.#limits);
    redis.defineCommand('sbAppendBatch', { lua: lua.appendBatch });
    redis.defineCommand('sbRange', { numberOfKeys: 4, lua: lua.range });
    redis.defineCommand('sbConversations', { numberOfKeys: 5, lua: lua.conversations });
    redis.defineCommand('sbHistory', { numberOfKeys: 6, lua: lua.history });
    redis.defineCommand('sbMarkRead', { numberOfKeys: 6, lua: lua.markRead });
    redis.defineCommand('sbRewrite', { numberOfKeys: 4, lua: lua.rewrite });
    redis.defineCommand('sbSaveCursor', { numberOfKeys: 3, lua: lua.saveCursor });
    redis.defineCommand('sbResetEpoch', { numberOfKeys: 2, lua: lua.resetEpoch });
    this.#redis = redis as RedisClient & Scripts;
    const cluster = isClusterTarget(options.url);
    this.#batch = new AppendBatch((calls, now) => this.#send(calls, now), {
      perInbox: cluster,
      now: this.#now,
      epochs: this.#epochs,
      baseOf: (uid) => this.#base(uid),
    });
  }

  /** The underlying connection, for health checks and logging of its events. */
  get redis(): RedisClient {
    return this.#redis;
  }

  append(request: AppendRequest): Promise<AppendResult> {
    return this.#batch.append(request);
  }

  /**
   * Both in the batch of this turn: on one Redis usually in the same script (a batch split
   * between calls may part them), on a Redis Cluster in one script per inbox. A resend after a
   * failure finds whichever was stored a duplicate, as the memory store's does.
   */
  appendPair(first: AppendRequest, second: AppendRequest): Promise<[AppendResult, AppendResult]> {
    return this.#batch.appendPair(first, second);
  }

  async conversations(uid: string, before: number, limit: number): Promise<ConversationPage> {
    let reply: [Buffer[], Buffer[], Flat[], number];
    try {
      const k = this.#keys(uid);
      reply = await this.#redis.sbConversationsBuffer(k.seq, k.lg, k.cl, k.cv, k.rw, before, limit, this.#now());
    } catch (err) {
      throw storeUnavailable('inbox', err);
    }
    const [ids, entries, lasts, more] = reply;
    return {
      more: more === 1,
      conversations: ids.map((id, i): ConversationEntry => {
        const { lastSeq, lastAt, readSeq, unread } = entryOf(entries[i]!);
        const last = lasts[i]!;
        return { conversation: id.toString('utf8'), lastSeq, lastAt, readSeq, unread, last: messagesOf(last)[0] };
      }),
    };
  }

  async history(uid: string, conversation: string, before: number, limit: number): Promise<HistoryPage> {
    let reply: [number, number, number, Flat];
    try {
      const k = this.#keys(uid);
      reply = await this.#redis.sbHistoryBuffer(k.seq, k.lg, k.cl, k.cv, k.rw, k.ci(conversation), conversation, before, limit, this.#now());
    } catch (err) {
      throw storeUnavailable('inbox', err);
    }
    const [oldest, more, pruned, messages] = reply;
    return { oldest: Number(oldest), more: more === 1, pruned: pruned === 1, messages: messagesOf(messages) };
  }

  async markRead(uid: string, conversation: string, seq: number, event: Uint8Array): Promise<ReadResult> {
    let reply: [number, number, number, number, string];
    try {
      const k = this.#keys(uid);
      reply = await this.#redis.sbMarkRead(k.seq, k.ep, k.lg, k.cl, k.cv, k.ci(conversation), conversation, seq, bufferOf(event), this.#now(), this.#epochs.next());
    } catch (err) {
      throw storeUnavailable('inbox', err);
    }
    const [found, readSeq, unread, eventSeq, epoch] = reply;
    return { found: found === 1, readSeq: Number(readSeq), unread: Number(unread), eventSeq: eventSeq === 0 ? undefined : Number(eventSeq), epoch: Number(epoch) };
  }

  async rewrite(uid: string, seq: number, body: Uint8Array, event: AppendRequest | undefined, expected?: Uint8Array): Promise<RewriteResult> {
    let reply: [number, number, number, string, number];
    try {
      const k = this.#keys(uid);
      reply = await this.#redis.sbRewrite(k.seq, k.ep, k.lg, k.rw, seq, bufferOf(body), event ? bufferOf(event.body) : '', this.#now(), this.#epochs.next(), expected ? bufferOf(expected) : '');
    } catch (err) {
      throw storeUnavailable('inbox', err);
    }
    const [found, rewritten, eventSeq, epoch, changed] = reply;
    return { found: found === 1, rewritten: rewritten === 1, changed: changed === 1, eventSeq: eventSeq === 0 ? undefined : Number(eventSeq), epoch: Number(epoch) };
  }

  async range(uid: string, after: number, limit: number): Promise<InboxRange> {
    let reply: [number, number, Flat, Buffer];
    try {
      const k = this.#keys(uid);
      reply = await this.#redis.sbRangeBuffer(k.seq, k.ep, k.lg, k.rw, after, limit, this.#now(), this.#epochs.next());
    } catch (err) {
      throw storeUnavailable('inbox', err);
    }
    const [head, oldest, messages, epoch] = reply;
    return { head: Number(head), oldest: Number(oldest), epoch: Number(epoch.toString('latin1')), messages: messagesOf(messages) };
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
    try {
      const k = this.#keys(uid);
      await this.#redis.sbSaveCursor(k.seq, k.ep, k.cur, deviceId, seq, epoch);
    } catch (err) {
      throw storeUnavailable('inbox', err);
    }
  }

  async resetEpoch(uid: string, from: number): Promise<number> {
    try {
      const k = this.#keys(uid);
      return Number(await this.#redis.sbResetEpoch(k.ep, k.cur, from, this.#epochs.next()));
    } catch (err) {
      throw storeUnavailable('inbox', err);
    }
  }

  ping(): Promise<void> {
    return pingRedis(this.#redis, 'inbox');
  }

  async close(): Promise<void> {
    // What this turn appended goes out, and is answered, before the connection closes.
    await this.#batch.drain();
    await this.#redis.quit().catch(() => this.#redis.disconnect());
  }

  /** The key base of `uid`'s inbox (every key of it starts so). */
  #base(uid: string): string {
    return `${this.#prefix}${keyTag(uid)}`;
  }

  #keys(uid: string) {
    const base = this.#base(uid);
    return { ...inboxKeys(base), ci: (conversation: string) => `${base}:ci:${conversation}` };
  }

  /**
   * The calls of one flush. On one Redis, each as it is (a flush is usually one). On a Cluster,
   * one pipeline per master: the calls of the inboxes it serves, in order.
   */
  #send(calls: BatchCall[], now: number): Promise<unknown>[] {
    const redis = this.#redis;
    const send = (target: { sbAppendBatch: Scripts['sbAppendBatch'] }, { keys, batch, chunks }: BatchCall) => target.sbAppendBatch(keys.length, ...keys, now, batch, ...chunks);
    if (!(redis instanceof Cluster) || calls.length === 1) return calls.map((call) => send(redis, call));
    // Grouped as the client groups slots (by the nodes serving them), which its pipeline checks.
    const byNodes = new Map<string, number[]>();
    calls.forEach((call, i) => {
      const nodes = redis.slots[calculateSlot(call.keys[0]!)]?.join(',') ?? `call ${i}`;
      const indexes = byNodes.get(nodes);
      if (indexes) indexes.push(i);
      else byNodes.set(nodes, [i]);
    });
    const replies: Promise<unknown>[] = [];
    for (const indexes of byNodes.values()) {
      if (indexes.length === 1) {
        replies[indexes[0]!] = send(redis, calls[indexes[0]!]!);
        continue;
      }
      const pipeline = redis.pipeline() as unknown as ChainableCommander & { sbAppendBatch: Scripts['sbAppendBatch'] };
      for (const i of indexes) void send(pipeline, calls[i]!);
      // A pipeline the client refuses before sending it (its slot map changed meanwhile): each
      // call alone then. Any other failure is the calls'.
      const results = pipeline.exec().then(
        (all) => all ?? [],
        (err: unknown) => {
          if (err instanceof Error && err.message.includes('same slots allocation group')) return undefined;
          throw err;
        },
      );
      indexes.forEach((i, n) => {
        replies[i] = results.then((all) => {
          if (all === undefined) return send(redis, calls[i]!);
          const [err, reply] = all[n] ?? [new Error('the pipeline was not executed'), undefined];
          if (err) throw err;
          return reply;
        });
      });
    }
    return replies;
  }
}

/** A conversation's entry as the scripts keep it (redis-inbox-scripts.ts, parseEntry): binary, or text from an earlier version. */
function entryOf(entry: Buffer): { lastSeq: number; lastAt: number; readSeq: number; unread: number } {
  if (entry[0] === 1) return { lastSeq: entry.readUIntBE(1, 6), lastAt: entry.readUIntBE(7, 6), readSeq: entry.readUIntBE(13, 6), unread: entry.readUInt32BE(19) };
  const [lastSeq = 0, lastAt = 0, readSeq = 0, unread = 0] = entry.toString('latin1').split('|').map(Number);
  return { lastSeq, lastAt, readSeq, unread };
}

/** Flattened {seq, storedAt, body} triples → StoredMessages. */
function messagesOf(flat: Flat): StoredMessage[] {
  const messages: StoredMessage[] = [];
  for (let i = 0; i < flat.length; i += 3) messages.push({ seq: flat[i] as number, storedAt: flat[i + 1] as number, body: flat[i + 2] as Buffer });
  return messages;
}
