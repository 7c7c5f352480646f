// GroupNotifier over Redis pub/sub, for a cluster (and any process with --redis): the gate
// PUBLISHes each GroupChange as JSON on `<prefix>groups`, every worker listens on a connection of
// its own (RedisChannel). Pub/sub is at most once: a change sent while a worker's subscription is
// down is lost, so when the subscription comes back the listeners are told `missed()` and re-read
// their groups (group-notifier.ts).

import type { RedisOptions } from 'ioredis';
import type { RedisClient, RedisTarget } from '../redis/redis-client.js';
import type { Logger } from '../log.js';
import { redactRedisError } from '../redis/redis-client.js';
import { RedisChannel } from '../redis/redis-channel.js';
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

export interface RedisGroupNotifierOptions {
  /** A redis:// URL. */
  /** One Redis (a redis:// URL) or a Redis Cluster's seed nodes. */
  url: RedisTarget;
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
  readonly #log: Logger;
  readonly #maxBytes: number;
  readonly #channel: RedisChannel;
  readonly #listeners = new Set<GroupNotifierListener>();
  #dropped = 0;
  #lastDropLog = -Infinity;

  constructor(options: RedisGroupNotifierOptions) {
    this.#log = options.log;
    this.#maxBytes = options.maxChangeBytes ?? DEFAULT_MAX_CHANGE_BYTES;
    const { url, timeoutMs, redisOptions, log } = options;
    this.#channel = new RedisChannel({ url, channel: `${options.keyPrefix ?? 'sb:'}groups`, timeoutMs, redisOptions, name: 'group notifier', log });
    this.channel = this.#channel.channel;
  }

  /** The publishing connection (health checks, tests). */
  get redis(): RedisClient {
    return this.#channel.redis;
  }

  /** The subscribed connection, once there is one. */
  get subscriber(): RedisClient | undefined {
    return this.#channel.subscriber;
  }

  publish(change: GroupChange): void {
    const message = JSON.stringify({ group: change.group, seq: change.seq, ...(change.added ? { added: change.added } : {}) });
    this.#channel.publish(message).catch((err: unknown) => {
      // At most once: the workers' sessions read the group at its next entry anyway.
      this.#log.warn({ err: redactRedisError(err), group: change.group, seq: change.seq }, 'group change not published');
    });
  }

  subscribe(listener: GroupNotifierListener): () => void {
    if (!this.#channel.closed) this.#listeners.add(listener);
    this.#channel.listen({
      message: (body) => this.#receive(body),
      resubscribed: () => {
        for (const l of [...this.#listeners]) l.missed();
      },
    });
    return () => this.#listeners.delete(listener);
  }

  async close(): Promise<void> {
    this.#listeners.clear();
    await this.#channel.close();
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
