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
//
// On a Redis Cluster, Redis forwards every PUBLISH to every node, so the subscriber is a plain
// connection to one node, not a Cluster client: ioredis' Cluster moves its subscription to
// another node by itself and says nothing, and a gap would go unnoticed. When the node's
// connection ends, the next node is tried (the seeds, and the nodes the publisher's Cluster client
// learnt of); its `ready` is a resubscription like any other.
import type { RedisOptions } from 'ioredis';
import type { Logger } from '../log.js';
import { Cluster } from 'ioredis';
import { clusterSeeds, createNodeClient, createRedisClient, isClusterTarget, logRedis, redactRedisError, type RedisClient, type RedisNode, type RedisTarget } from './redis-client.js';

const RESUBSCRIBE_MS = 1_000;
/** On a cluster, the wait before the next node is tried grows by this per failed node, up to RESUBSCRIBE_MS. */
const NEXT_NODE_STEP_MS = 100;

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
  /**
   * On a cluster: the turn of the next node to subscribe on (starting at a random one, so that
   * the workers' subscriptions spread over the nodes), and how many in a row ended before their
   * `ready`.
   */
  #nodeTurn = Math.floor(Math.random() * 1024);
  #nodeFailures = 0;
  #nextNode: NodeJS.Timeout | undefined;
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
    this.#connect();
  }

  /** A subscriber connection: to the one Redis, or to the next node of the cluster. */
  #connect(): void {
    const url = this.#options.url;
    const redisOptions = { ...this.#options.redisOptions, autoResubscribe: false, enableAutoPipelining: false };
    const timeoutMs = this.#options.timeoutMs;
    // A node's connection is not retried: the next one is tried instead (see the top).
    const sub = isClusterTarget(url)
      ? createNodeClient(url, this.#pickNode(clusterSeeds(url)), { timeoutMs, redisOptions: { ...redisOptions, retryStrategy: () => null } })
      : createRedisClient(url, { timeoutMs, redisOptions });
    this.#sub = sub;
    const log = this.#log.child({ connection: 'subscribe' });
    logRedis(sub, log);
    sub.on('ready', () => {
      this.#nodeFailures = 0;
      this.#subscribe(sub, ++this.#epoch);
    });
    sub.on('messageBuffer', (channel: Buffer, message: Buffer) => {
      if (!this.#closed && sub === this.#sub && channel.toString() === this.channel) this.#handlers?.message(message);
    });
    if (!isClusterTarget(url)) return;
    let wasReady = false;
    sub.once('ready', () => (wasReady = true));
    sub.once('end', () => {
      if (this.#closed || sub !== this.#sub) return;
      this.#epoch++;
      if (!wasReady) this.#nodeFailures++;
      const delay = Math.min(this.#nodeFailures * NEXT_NODE_STEP_MS, RESUBSCRIBE_MS);
      log.warn({ node: `${sub.options.host}:${sub.options.port}`, retryInMs: delay }, `${this.#options.name} lost its node; subscribing on another`);
      this.#nextNode = setTimeout(() => this.#connect(), delay);
      this.#nextNode.unref();
    });
  }

  /** The next node in turn among the seeds and the nodes the publisher's Cluster client learnt of. */
  #pickNode(seeds: RedisNode[]): RedisNode {
    const known = this.#pub instanceof Cluster ? this.#pub.nodes('all').map((n) => ({ host: n.options.host!, port: n.options.port! })) : [];
    const nodes = [...seeds, ...known].filter((n, i, all) => all.findIndex((m) => m.host === n.host && m.port === n.port) === i);
    return nodes[this.#nodeTurn++ % nodes.length]!;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    clearTimeout(this.#retry);
    clearTimeout(this.#nextNode);
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
