// RevocationNotifier over Redis pub/sub: the gate PUBLISHes each revocation as JSON
// (`{"u":uid,"d"?:deviceId,"b":before}`) on `<prefix>revocations`; every worker listens on a
// connection of its own. As in redis-group-notifier.ts (the pattern this follows), the
// subscription is made by hand at every `ready`, an epoch makes an older connection's answer
// count for nothing, and a subscription that comes back reports `missed()`: the workers then
// check their sessions against the store at once rather than at their next periodic check.

import type { Redis, RedisOptions } from 'ioredis';
import type { Logger } from '../log.js';
import { createRedisClient, logRedis, redactRedisError } from '../redis/redis-client.js';
import type { RevocationListener, RevocationNotifier } from './revocation-notifier.js';
import type { Revocation } from './user-store.js';

/** Larger messages are not revocations (a uid is at most 64 characters, a device id 128). */
const MAX_MESSAGE_BYTES = 1024;
const RESUBSCRIBE_MS = 1_000;

export interface RedisRevocationNotifierOptions {
  url: string;
  /** The channel is `<keyPrefix>revocations`; default "sb:". */
  keyPrefix?: string;
  timeoutMs?: number;
  redisOptions?: RedisOptions;
  log: Logger;
}

export class RedisRevocationNotifier implements RevocationNotifier {
  readonly channel: string;
  readonly #options: RedisRevocationNotifierOptions;
  readonly #log: Logger;
  readonly #pub: Redis;
  #sub: Redis | undefined;
  readonly #listeners = new Set<RevocationListener>();
  #epoch = 0;
  #subscribedOnce = false;
  #retry: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(options: RedisRevocationNotifierOptions) {
    this.#options = options;
    this.#log = options.log;
    this.channel = `${options.keyPrefix ?? 'sb:'}revocations`;
    this.#pub = createRedisClient(options.url, { timeoutMs: options.timeoutMs, redisOptions: options.redisOptions });
    logRedis(this.#pub, this.#log.child({ connection: 'publish' }));
  }

  get redis(): Redis {
    return this.#pub;
  }

  get subscriber(): Redis | undefined {
    return this.#sub;
  }

  publish({ uid, deviceId, before }: Revocation): void {
    if (this.#closed) return;
    const message = JSON.stringify({ u: uid, ...(deviceId !== undefined ? { d: deviceId } : {}), b: before });
    this.#pub.publish(this.channel, message).catch((err: unknown) => {
      // The workers' periodic check of the store closes the sessions anyway, later.
      this.#log.warn({ err: redactRedisError(err), uid }, 'revocation not published');
    });
  }

  subscribe(listener: RevocationListener): () => void {
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
      if (channel.toString() !== this.channel) return;
      const revocation = message.byteLength <= MAX_MESSAGE_BYTES ? parseRevocation(message) : undefined;
      if (!revocation) {
        this.#log.warn({ channel: this.channel, bytes: message.byteLength }, 'malformed revocation ignored');
        return;
      }
      for (const listener of [...this.#listeners]) listener.revoked(revocation);
    });
  }

  #subscribe(sub: Redis, epoch: number): void {
    sub.subscribe(this.channel).then(
      () => {
        if (epoch !== this.#epoch || this.#closed) return;
        const back = this.#subscribedOnce;
        this.#subscribedOnce = true;
        this.#log.info({ channel: this.channel, resubscribed: back }, 'revocation notifier subscribed');
        if (back) for (const listener of [...this.#listeners]) listener.missed();
      },
      (err: unknown) => {
        if (epoch !== this.#epoch || this.#closed) return;
        this.#log.error({ err: redactRedisError(err), channel: this.channel }, 'revocation notifier cannot subscribe; retrying');
        clearTimeout(this.#retry);
        this.#retry = setTimeout(() => {
          if (epoch === this.#epoch && sub.status === 'ready') this.#subscribe(sub, epoch);
        }, RESUBSCRIBE_MS);
        this.#retry.unref();
      },
    );
  }
}

/** A revocation as published, or undefined if the message is not one. */
export function parseRevocation(message: Buffer): Revocation | undefined {
  let value: unknown;
  try {
    value = JSON.parse(message.toString('utf8'));
  } catch {
    return undefined;
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const { u, d, b } = value as Record<string, unknown>;
  if (typeof u !== 'string' || u.length === 0 || u.length > 256 || !Number.isSafeInteger(b) || (b as number) < 0) return undefined;
  if (d !== undefined && (typeof d !== 'string' || d.length > 512)) return undefined;
  return { uid: u, ...(d !== undefined ? { deviceId: d as string } : {}), before: b as number };
}

async function quit(redis: Redis): Promise<void> {
  if (redis.status === 'ready') await redis.quit().catch(() => redis.disconnect());
  else redis.disconnect();
}
