// How every Redis-backed store (inbox, sessions, users) talks to Redis: one ioredis client each,
// with a bound on every command, and failures turned into SB_ERR_STORE_UNAVAILABLE. A frozen
// Redis (a stopped process, a stalled host) keeps its TCP connection open, so without the bound
// a command would wait for as long as the freeze lasts.
//
// ioredis arms `commandTimeout` when a command is issued, so it also covers the time a command
// waits in the offline queue while the client reconnects; `maxRetriesPerRequest` fails queued
// commands earlier when reconnecting keeps failing. A timed-out command stays in ioredis's
// queue, and its late reply is matched to it and dropped: replies never shift onto later
// commands. A command that timed out may still have been executed by Redis.
//
// The same stores run on one Redis or on a Redis Cluster (`--redis-cluster`): every key of one
// user, group or conversation carries a hash tag (`{uid}`), so each script touches one slot, and
// ioredis' Cluster client routes it to that slot's master.

import { Cluster, Redis, type Command, type RedisOptions } from 'ioredis';
import { SwitchboardError } from '../errors.js';
import type { Logger } from '../log.js';

/** Default bound on one Redis command (`--redis-timeout-ms`). */
export const DEFAULT_REDIS_TIMEOUT_MS = 2_000;

/** A Cluster client's wait before it retries a command after CLUSTERDOWN or a lost connection. */
const RETRY_DELAY_MS = 100;

/** One Redis server (a redis:// or rediss:// URL), or a Redis Cluster named by some of its nodes. */
export type RedisTarget = string | RedisClusterTarget;

export interface RedisClusterTarget {
  /**
   * Seed nodes (redis:// or rediss:// URLs): the client learns every other node from them. The
   * first one's user, password and scheme apply to every node.
   */
  readonly cluster: readonly string[];
}

/**
 * What a Cluster client sends besides the stores' own commands: what a Redis ACL user needs in
 * addition on a Redis Cluster (on every node: ACL rules are per node). CLUSTER SLOTS learns
 * which node serves which slots (when it connects, every 5 s, after a MOVED), CLUSTER INFO is its
 * ready check, ASKING follows a key whose slot is being migrated (an ASK redirection), and
 * CLIENT SETNAME names its slot-map connection (a refusal of it is ignored, but shows in ACL LOG).
 */
export const CLUSTER_REDIS_COMMANDS = ['cluster|slots', 'cluster|info', 'asking', 'client|setname'] as const;

/** What a store holds: a client of one server, or of a whole cluster (the same commands). */
export type RedisClient = Redis | Cluster;

export function isClusterTarget(target: RedisTarget): target is RedisClusterTarget {
  return typeof target !== 'string';
}

export interface RedisClientOptions {
  /** Every command fails with SB_ERR_STORE_UNAVAILABLE after this long; default 2 s. */
  timeoutMs?: number;
  redisOptions?: RedisOptions;
}

/** What createRedisClient refuses (SB_ERR_CONFIG), for a caller that checks before building anything. */
export function checkRedisTimeout(timeoutMs: number): void {
  // ioredis would time out every command at 0, and never with undefined.
  if (!(timeoutMs >= 1)) throw new SwitchboardError('SB_ERR_CONFIG', `the Redis command timeout must be at least 1 ms, got ${timeoutMs}`);
}

export function createRedisClient(target: string, options?: RedisClientOptions): Redis;
export function createRedisClient(target: RedisTarget, options?: RedisClientOptions): RedisClient;
export function createRedisClient(target: RedisTarget, { timeoutMs = DEFAULT_REDIS_TIMEOUT_MS, redisOptions }: RedisClientOptions = {}): RedisClient {
  const common = commonOptions(timeoutMs, redisOptions);
  if (!isClusterTarget(target)) return new Redis(target, { enableAutoPipelining: true, ...common });
  const seeds = parseSeeds(target);
  // Pipelining is the Cluster client's own (it groups commands by master), not its nodes'.
  const { enableAutoPipelining = true, autoPipeliningIgnoredCommands = [], ...nodeOptions } = common;
  return new BoundedCluster(
    seeds.map(({ host, port }) => ({ host, port })),
    {
      enableAutoPipelining,
      autoPipeliningIgnoredCommands,
      // A slot that moved (a failover, a resharding) is answered MOVED/ASK: the client follows it
      // and refreshes its slot map; a CLUSTERDOWN is retried within the command's timeout.
      retryDelayOnFailover: RETRY_DELAY_MS,
      retryDelayOnClusterDown: RETRY_DELAY_MS,
      // Every retry counts as a redirection: at ioredis's 16, a CLUSTERDOWN (the whole cluster,
      // with cluster-require-full-coverage, while a failed master's replica is elected) would fail
      // after 1.6 s whatever the timeout. As many as the timeout holds retries, and the hops.
      maxRedirections: Math.ceil(timeoutMs / RETRY_DELAY_MS) + 16,
      redisOptions: { ...nodeOptions, ...credentials(seeds[0]!) },
    },
  );
}

/**
 * A Cluster client whose commands are bound from when it first takes them. ioredis arms
 * `commandTimeout` when a node's connection takes a command, but a Cluster client that lost every
 * node keeps what it is sent in an offline queue of its own until one is back, unbounded; and a
 * retry (after MOVED, ASK, CLUSTERDOWN or a closed connection) would start the bound again. Here
 * each send arms what is left of the command's first deadline.
 */
class BoundedCluster extends Cluster {
  readonly #deadlines = new WeakMap<Command, number>();

  override sendCommand(...args: Parameters<Cluster['sendCommand']>): unknown {
    const [command] = args;
    const timeoutMs = this.options.redisOptions?.commandTimeout;
    if (timeoutMs !== undefined) {
      const now = Date.now();
      const deadline = this.#deadlines.get(command) ?? now + timeoutMs;
      this.#deadlines.set(command, deadline);
      // A no-op while a timer is armed; after a retry cleared it, what is left of the bound.
      command.setTimeout(Math.max(1, deadline - now));
    }
    return super.sendCommand(...args);
  }
}

/** Where a Redis Cluster's seed nodes are; SB_ERR_CONFIG if there are none or one is not a redis:// URL. */
export function clusterSeeds(target: RedisClusterTarget): RedisNode[] {
  return parseSeeds(target).map(({ host, port }) => ({ host, port }));
}

/** One node of a Redis Cluster. */
export interface RedisNode {
  host: string;
  port: number;
}

/**
 * A client of one node of a Redis Cluster, with the cluster's user, password and TLS (the first
 * seed's) and the same command bound: for what no key routes, a pub/sub subscription (Redis
 * forwards every PUBLISH to every node of the cluster).
 */
export function createNodeClient(target: RedisClusterTarget, node: RedisNode, { timeoutMs = DEFAULT_REDIS_TIMEOUT_MS, redisOptions }: RedisClientOptions = {}): Redis {
  const [first] = parseSeeds(target);
  return new Redis({ enableAutoPipelining: true, ...commonOptions(timeoutMs, redisOptions), host: node.host, port: node.port, ...credentials(first!) });
}

function commonOptions(timeoutMs: number, redisOptions: RedisOptions | undefined): RedisOptions {
  checkRedisTimeout(timeoutMs);
  return { maxRetriesPerRequest: 3, commandTimeout: timeoutMs, ...redisOptions };
}

function credentials({ username, password, tls }: Seed): RedisOptions {
  return { ...(username ? { username } : {}), ...(password ? { password } : {}), ...(tls ? { tls: {} } : {}) };
}

function parseSeeds(target: RedisClusterTarget): Seed[] {
  const seeds = target.cluster.map(parseSeed);
  if (seeds.length === 0) throw new SwitchboardError('SB_ERR_CONFIG', 'a Redis Cluster needs at least one seed node');
  return seeds;
}

interface Seed extends RedisNode {
  username: string;
  password: string;
  tls: boolean;
}

function parseSeed(url: string): Seed {
  if (!URL.canParse(url)) throw new SwitchboardError('SB_ERR_CONFIG', 'a Redis Cluster seed must be a redis:// or rediss:// URL');
  const u = new URL(url);
  if (u.protocol !== 'redis:' && u.protocol !== 'rediss:') throw new SwitchboardError('SB_ERR_CONFIG', 'a Redis Cluster seed must be a redis:// or rediss:// URL');
  // Redis Cluster has database 0 only.
  if (u.pathname !== '' && u.pathname !== '/' && u.pathname !== '/0') throw new SwitchboardError('SB_ERR_CONFIG', 'a Redis Cluster has database 0 only: no /db in its URLs');
  return { host: u.hostname.replace(/^\[|\]$/g, ''), port: Number(u.port || 6379), username: decodeURIComponent(u.username), password: decodeURIComponent(u.password), tls: u.protocol === 'rediss:' };
}

/** Connection errors and recoveries of a store's Redis client (the logger drops secrets, see log.ts). */
export function logRedis(redis: RedisClient, log: Logger): void {
  redis.on('error', (err: Error) => log.warn({ err }, 'redis connection error'));
  redis.on('ready', () => log.info('redis ready'));
  // A Cluster's own node connections: a failover shows here first.
  if (redis instanceof Cluster) {
    redis.on('+node', (node: Redis) => log.info({ node: `${node.options.host}:${node.options.port}` }, 'redis cluster node added'));
    redis.on('-node', (node: Redis) => log.warn({ node: `${node.options.host}:${node.options.port}` }, 'redis cluster node removed'));
  }
}

/**
 * The error a store rejects with when Redis failed it: SB_ERR_STORE_UNAVAILABLE naming the store
 * and Redis's reason. ioredis attaches the failed command to its errors (`command.args`), which
 * for AUTH is the password: the cause keeps the message only.
 */
export function storeUnavailable(store: string, err: unknown): SwitchboardError {
  if (err instanceof SwitchboardError) return err;
  const cause = redactRedisError(err);
  return new SwitchboardError('SB_ERR_STORE_UNAVAILABLE', `${store} store unavailable: ${cause.message}`, { cause });
}

/** A copy of a Redis error without the command (and its arguments) ioredis attached to it. */
export function redactRedisError(err: unknown): Error {
  if (!(err instanceof Error)) return new Error(String(err));
  const copy = new Error(err.message);
  copy.name = err.name;
  copy.stack = err.stack;
  const code = (err as NodeJS.ErrnoException).code;
  if (typeof code === 'string') (copy as NodeJS.ErrnoException).code = code;
  return copy;
}

/** Resolves once Redis answered a PING within the command timeout. */
export async function pingRedis(redis: RedisClient, store: string): Promise<void> {
  try {
    await redis.ping();
  } catch (err) {
    throw storeUnavailable(store, err);
  }
}
