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

import { Redis, type RedisOptions } from 'ioredis';
import { SwitchboardError } from '../errors.js';
import type { Logger } from '../log.js';

/** Default bound on one Redis command (`--redis-timeout-ms`). */
export const DEFAULT_REDIS_TIMEOUT_MS = 2_000;

export interface RedisClientOptions {
  /** Every command fails with SB_ERR_STORE_UNAVAILABLE after this long; default 2 s. */
  timeoutMs?: number;
  redisOptions?: RedisOptions;
}

export function createRedisClient(url: string, { timeoutMs = DEFAULT_REDIS_TIMEOUT_MS, redisOptions }: RedisClientOptions = {}): Redis {
  // ioredis would time out every command at 0, and never with undefined.
  if (!(timeoutMs >= 1)) throw new SwitchboardError('SB_ERR_CONFIG', `the Redis command timeout must be at least 1 ms, got ${timeoutMs}`);
  return new Redis(url, { enableAutoPipelining: true, maxRetriesPerRequest: 3, commandTimeout: timeoutMs, ...redisOptions });
}

/** Connection errors and recoveries of a store's Redis client (the logger drops secrets, see log.ts). */
export function logRedis(redis: Redis, log: Logger): void {
  redis.on('error', (err: Error) => log.warn({ err }, 'redis connection error'));
  redis.on('ready', () => log.info('redis ready'));
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
export async function pingRedis(redis: Redis, store: string): Promise<void> {
  try {
    await redis.ping();
  } catch (err) {
    throw storeUnavailable(store, err);
  }
}
