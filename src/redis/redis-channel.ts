// One Redis pub/sub channel, as the notifiers use it (the group changes, the revocations): a
// connection that publishes, and at the first listener a second one that subscribes (a
// subscribed connection can send nothing else). Pub/sub is at most once, so the one thing a
// listener must learn besides the messages is that its subscription came back after a gap
// (`resubscribed`): it then re-reads what it may have missed.
//
// The subscription is made by hand on every `ready` of the subscriber (ioredis' own
// autoResubscribe is off): that is the one place that knows a subscription came back, and an
// epoch counter makes a late answer of an older connection's SUBSCRIBE count for nothing. A
// SUBSCRIBE Redis refuses (an ACL without the channel) is tried again every RESUBSCRIBE_MS.

import type { RedisOptions } from 'ioredis';
import type { Logger } from '../log.js';
import { createRedisClient, logRedis, redactRedisError, type RedisClient, type RedisTarget } from './redis-client.js';

const RESUBSCRIBE_MS = 1_000;

export interface RedisChannelOptions {
  /** One Redis (a redis:// URL) or a Redis Cluster's seed nodes. */
  url: RedisTarget;
  channel: string;
  /** Bound on PUBLISH and SUBSCRIBE; default 2 s. */
  timeoutMs?: number;
  redisOptions?: RedisOptions;
  /** What the log lines call it: `<name> subscribed`, `<name> cannot subscribe; retrying`. */
  name: string;
  log: Logger;
}

export interface ChannelHandlers {
  /** A message on the channel, as Redis delivered it (unchecked). */
  message(body: Buffer): void;
  /** The subscription is back after it was down: messages may have been lost meanwhile. */
  resubscribed(): void;
}

export class RedisChannel {
  readonly channel: string;
  readonly #options: RedisChannelOptions;
  readonly #log: Logger;
  readonly #pub: RedisClient;
  #sub: RedisClient | undefined;
  #handlers: ChannelHandlers | undefined;
  /** Bumped at every `ready` of the subscriber: an answer to an older SUBSCRIBE is ignored. */
  #epoch = 0;
  /** The subscription was active once: the next one that comes back is a resubscription. */
  #subscribedOnce = false;
  #retry: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(options: RedisChannelOptions) {
    this.#options = options;
    this.#log = options.log;
    this.channel = options.channel;
    this.#pub = createRedisClient(options.url, { timeoutMs: options.timeoutMs, redisOptions: options.redisOptions });
    logRedis(this.#pub, this.#log.child({ connection: 'publish' }));
  }

  /** The publishing connection (health checks, tests). */
  get redis(): RedisClient {
    return this.#pub;
  }

  /** The subscribed connection, once there is one. */
  get subscriber(): RedisClient | undefined {
    return this.#sub;
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Publishes `message`; nothing once closed. The caller decides what a failure means. */
  async publish(message: string): Promise<void> {
    if (this.#closed) return;
    await this.#pub.publish(this.channel, message);
  }

  /** Subscribes (once: the first call's handlers serve every message). */
  listen(handlers: ChannelHandlers): void {
    if (this.#handlers || this.#closed) return;
    this.#handlers = handlers;
    const sub = createRedisClient(this.#options.url, {
      timeoutMs: this.#options.timeoutMs,
      redisOptions: { ...this.#options.redisOptions, autoResubscribe: false, enableAutoPipelining: false },
    });
    this.#sub = sub;
    logRedis(sub, this.#log.child({ connection: 'subscribe' }));
    sub.on('ready', () => this.#subscribe(sub, ++this.#epoch));
    sub.on('messageBuffer', (channel: Buffer, message: Buffer) => {
      if (!this.#closed && channel.toString() === this.channel) handlers.message(message);
    });
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    clearTimeout(this.#retry);
    this.#epoch++;
    await Promise.all([quit(this.#pub), this.#sub && quit(this.#sub)]);
  }

  #subscribe(sub: RedisClient, epoch: number): void {
    sub.subscribe(this.channel).then(
      () => {
        if (epoch !== this.#epoch || this.#closed) return;
        const back = this.#subscribedOnce;
        this.#subscribedOnce = true;
        this.#log.info({ channel: this.channel, resubscribed: back }, `${this.#options.name} subscribed`);
        if (back) this.#handlers?.resubscribed();
      },
      (err: unknown) => {
        if (epoch !== this.#epoch || this.#closed) return;
        this.#log.error({ err: redactRedisError(err), channel: this.channel }, `${this.#options.name} cannot subscribe; retrying`);
        clearTimeout(this.#retry);
        this.#retry = setTimeout(() => {
          if (epoch === this.#epoch && sub.status === 'ready') this.#subscribe(sub, epoch);
        }, RESUBSCRIBE_MS);
        this.#retry.unref();
      },
    );
  }
}

async function quit(redis: RedisClient): Promise<void> {
  // A connection that never came up has nothing to QUIT, and QUIT would wait for it.
  if (redis.status === 'ready') await redis.quit().catch(() => redis.disconnect());
  else redis.disconnect();
}
