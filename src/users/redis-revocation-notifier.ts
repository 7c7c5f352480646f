// RevocationNotifier over Redis pub/sub: the gate PUBLISHes each revocation as JSON
// (`{"u":uid,"d"?:deviceId,"b":before}`) on `<prefix>revocations`; every worker listens on a
// connection of its own (RedisChannel, as the group notifier does). A subscription that comes
// back reports `missed()`: the workers then check their sessions against the store at once
// rather than at their next periodic check.

import type { RedisOptions } from 'ioredis';
import type { RedisClient, RedisTarget } from '../redis/redis-client.js';
import type { Logger } from '../log.js';
import { redactRedisError } from '../redis/redis-client.js';
import { RedisChannel } from '../redis/redis-channel.js';
import type { RevocationListener, RevocationNotifier } from './revocation-notifier.js';
import type { Revocation } from './user-store.js';

/** Larger messages are not revocations (a uid is at most 64 characters, a device id 128). */
const MAX_MESSAGE_BYTES = 1024;

export interface RedisRevocationNotifierOptions {
  /** One Redis (a redis:// URL) or a Redis Cluster's seed nodes. */
  url: RedisTarget;
  /** The channel is `<keyPrefix>revocations`; default "sb:". */
  keyPrefix?: string;
  timeoutMs?: number;
  redisOptions?: RedisOptions;
  log: Logger;
}

export class RedisRevocationNotifier implements RevocationNotifier {
  readonly channel: string;
  readonly #log: Logger;
  readonly #channel: RedisChannel;
  readonly #listeners = new Set<RevocationListener>();

  constructor(options: RedisRevocationNotifierOptions) {
    this.#log = options.log;
    const { url, timeoutMs, redisOptions, log } = options;
    this.#channel = new RedisChannel({ url, channel: `${options.keyPrefix ?? 'sb:'}revocations`, timeoutMs, redisOptions, name: 'revocation notifier', log });
    this.channel = this.#channel.channel;
  }

  get redis(): RedisClient {
    return this.#channel.redis;
  }

  get subscriber(): RedisClient | undefined {
    return this.#channel.subscriber;
  }

  publish({ uid, deviceId, before }: Revocation): void {
    const message = JSON.stringify({ u: uid, ...(deviceId !== undefined ? { d: deviceId } : {}), b: before });
    this.#channel.publish(message).catch((err: unknown) => {
      // The workers' periodic check of the store closes the sessions anyway, later.
      this.#log.warn({ err: redactRedisError(err), uid }, 'revocation not published');
    });
  }

  subscribe(listener: RevocationListener): () => void {
    if (!this.#channel.closed) this.#listeners.add(listener);
    this.#channel.listen({
      message: (body) => {
        const revocation = body.byteLength <= MAX_MESSAGE_BYTES ? parseRevocation(body) : undefined;
        if (!revocation) {
          this.#log.warn({ channel: this.channel, bytes: body.byteLength }, 'malformed revocation ignored');
          return;
        }
        for (const l of [...this.#listeners]) l.revoked(revocation);
      },
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
