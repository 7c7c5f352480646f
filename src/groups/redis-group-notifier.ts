// GroupNotifier over Redis pub/sub, for a cluster (and any process with --redis): the gate
// PUBLISHes each GroupChange as JSON on `<prefix>groups`, every worker listens on a connection of
// its own (a subscribed connection can send nothing else). Pub/sub is at most once: a change sent
// while a worker's subscription is down is lost, so when the subscription comes back the
// listeners are told `missed()` and re-read their groups (group-notifier.ts).
//
// The subscription is made by hand on every `ready` of the subscriber (ioredis' own
// autoResubscribe is off): that is the one place that knows a subscription came back, and an
// epoch counter makes a late answer of an older connection's SUBSCRIBE count for nothing.

import type { Redis, RedisOptions } from 'ioredis';
import type { Logger } from '../log.js';
import { createRedisClient, logRedis, redactRedisError } from '../redis/redis-client.js';
import type { GroupChange, GroupNotifier, GroupNotifierListener } from './group-notifier.js';
import { DEFAULT_GROUP_LIMITS, isGroupId } from './group-store.js';

/**
 * The largest message accepted (bytes): a change adding the most uids one call may name (500
 * of 64 characters, DEFAULT_GROUP_LIMITS) is about 34 KiB of JSON. Larger ones are dropped.
 */
export const DEFAULT_MAX_CHANGE_BYTES = 64 * 1024;
/** uids one change may list in `added`: more than any one store call adds. */
const MAX_ADDED = 10 * DEFAULT_GROUP_LIMITS.maxUidsPerCall;
const MAX_UID_LENGTH = 4 * DEFAULT_GROUP_LIMITS.maxUidLength;
/** A dropped message is logged at most this often (the rest are counted into the next line). */
const DROP_LOG_MS = 10_000;
/** A SUBSCRIBE Redis refused (an ACL without the channel) is tried again after this. */
const RESUBSCRIBE_MS = 1_000;

export interface RedisGroupNotifierOptions {
  /** A redis:// URL. */
  url: string;
  /** The channel is `<keyPrefix>groups`; default "sb:". */
  keyPrefix?: string;
  /** Bound on PUBLISH and SUBSCRIBE; default 2 s. */
  timeoutMs?: number;
  redisOptions?: RedisOptions;
  /** Default DEFAULT_MAX_CHANGE_BYTES. */
  maxChangeBytes?: number;
  log: Logger;
}

export class RedisGroupNotifier implements GroupNotifier {
  readonly channel: string;
  readonly #options: RedisGroupNotifierOptions;
  readonly #log: Logger;
  readonly #maxBytes: number;
  readonly #pub: Redis;
  /** Made at the first subscribe(): a gate, which only publishes, holds one connection. */
  #sub: Redis | undefined;
  readonly #listeners = new Set<GroupNotifierListener>();
  /** Bumped at every `ready` of the subscriber: an answer to an older SUBSCRIBE is ignored. */
  #epoch = 0;
  /** The subscription was active once on this notifier: the next one that comes back reports missed(). */
  #subscribedOnce = false;
  #retry: NodeJS.Timeout | undefined;
  #dropped = 0;
  #lastDropLog = -Infinity;
  #closed = false;

  constructor(options: RedisGroupNotifierOptions) {
    this.#options = options;
    this.#log = options.log;
    this.#maxBytes = options.maxChangeBytes ?? DEFAULT_MAX_CHANGE_BYTES;
    this.channel = `${options.keyPrefix ?? 'sb:'}groups`;
    this.#pub = createRedisClient(options.url, { timeoutMs: options.timeoutMs, redisOptions: options.redisOptions });
    logRedis(this.#pub, this.#log.child({ connection: 'publish' }));
  }

  /** The publishing connection (health checks, tests). */
  get redis(): Redis {
    return this.#pub;
  }

  /** The subscribed connection, once there is one. */
  get subscriber(): Redis | undefined {
    return this.#sub;
  }

  publish(change: GroupChange): void {
    if (this.#closed) return;
    const message = JSON.stringify({ group: change.group, seq: change.seq, ...(change.added ? { added: change.added } : {}) });
    this.#pub.publish(this.channel, message).catch((err: unknown) => {
      // At most once: the workers' sessions read the group at its next entry anyway.
      this.#log.warn({ err: redactRedisError(err), group: change.group, seq: change.seq }, 'group change not published');
    });
  }

  subscribe(listener: GroupNotifierListener): () => void {
    this.#listeners.add(listener);
    if (!this.#sub && !this.#closed) this.#startSubscriber();
    return () => this.#listeners.delete(listener);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#listeners.clear();
    clearTimeout(this.#retry);
    this.#epoch++;
    await Promise.all([quit(this.#pub), this.#sub && quit(this.#sub)]);
  }

  #startSubscriber(): void {
    const sub = createRedisClient(this.#options.url, {
      timeoutMs: this.#options.timeoutMs,
      redisOptions: { ...this.#options.redisOptions, autoResubscribe: false, enableAutoPipelining: false },
    });
    this.#sub = sub;
    logRedis(sub, this.#log.child({ connection: 'subscribe' }));
    sub.on('ready', () => this.#subscribe(sub, ++this.#epoch));
    sub.on('messageBuffer', (channel: Buffer, message: Buffer) => {
      if (channel.toString() === this.channel) this.#receive(message);
    });
  }

  #subscribe(sub: Redis, epoch: number): void {
    sub.subscribe(this.channel).then(
      () => {
        if (epoch !== this.#epoch || this.#closed) return;
        const back = this.#subscribedOnce;
        this.#subscribedOnce = true;
        this.#log.info({ channel: this.channel, resubscribed: back }, 'group notifier subscribed');
        if (back) for (const listener of [...this.#listeners]) listener.missed();
      },
      (err: unknown) => {
        if (epoch !== this.#epoch || this.#closed) return;
        this.#log.error({ err: redactRedisError(err), channel: this.channel }, 'group notifier cannot subscribe; retrying');
        clearTimeout(this.#retry);
        this.#retry = setTimeout(() => {
          if (epoch === this.#epoch && sub.status === 'ready') this.#subscribe(sub, epoch);
        }, RESUBSCRIBE_MS);
        this.#retry.unref();
      },
    );
  }

  #receive(message: Buffer): void {
    const change = message.byteLength <= this.#maxBytes ? parseChange(message) : undefined;
    if (!change) {
      this.#drop(message.byteLength);
      return;
    }
    for (const listener of [...this.#listeners]) listener.change(change);
  }

  #drop(bytes: number): void {
    this.#dropped++;
    const now = Date.now();
    if (now - this.#lastDropLog < DROP_LOG_MS) return;
    this.#lastDropLog = now;
    this.#log.warn({ channel: this.channel, bytes, dropped: this.#dropped }, 'malformed group change ignored');
    this.#dropped = 0;
  }
}

/** A GroupChange as published, or undefined if the message is not one. */
export function parseChange(message: Buffer): GroupChange | undefined {
  let value: unknown;
  try {
    value = JSON.parse(message.toString('utf8'));
  } catch {
    return undefined;
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const { group, seq, added } = value as Record<string, unknown>;
  if (!isGroupId(group) || !Number.isSafeInteger(seq) || (seq as number) < 1) return undefined;
  if (added === undefined) return { group, seq: seq as number };
  if (!Array.isArray(added) || added.length > MAX_ADDED || !added.every((uid) => typeof uid === 'string' && uid.length > 0 && uid.length <= MAX_UID_LENGTH)) return undefined;
  return { group, seq: seq as number, added: added as string[] };
}

async function quit(redis: Redis): Promise<void> {
  // A connection that never came up has nothing to QUIT, and QUIT would wait for it.
  if (redis.status === 'ready') await redis.quit().catch(() => redis.disconnect());
  else redis.disconnect();
}
