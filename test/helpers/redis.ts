// Starts a real redis-server for a test (free port, temp dir, no persistence unless asked)
// and stops it on teardown. `redis-server` must be installed (.ci/run installs it).

import type { Test } from 'tap';
import { startRedisServer, type RedisServer } from '../../src/bench/services.js';

export type TestRedis = RedisServer;

/** `password`: started with requirepass; `url` then carries `default:<password>@`. */
export async function startRedis(t: Test, extraArgs: string[] = [], { password }: { password?: string } = {}): Promise<TestRedis> {
  const redis = await startRedisServer({ extraArgs, password });
  t.teardown(redis.kill);
  // A test's stop() is a crash: nothing is flushed.
  return { ...redis, stop: redis.kill };
}

/**
 * What OPERATIONS.md tells operators to run, after `ACL SETUSER switchboard`: the key prefix
 * and the commands switchboard sends, nothing else. INFO is ioredis' ready check; EVAL and
 * EVALSHA run the stores' scripts (ACLs apply to the commands inside them too); the rest are
 * the stores' own commands and those their scripts call.
 */
export const SWITCHBOARD_ACL = (prefix: string, password: string): string[] => [
  'on',
  `>${password}`,
  'resetkeys',
  `~${prefix}*`,
  'resetchannels',
  '-@all',
  '+info',
  '+eval',
  '+evalsha',
  '+get',
  '+set',
  '+incr',
  '+incrby',
  '+exists',
  '+del',
  '+pexpire',
  '+pttl',
  '+hget',
  '+hset',
  '+hdel',
  '+hgetall',
  '+sadd',
  '+srem',
  '+smembers',
  '+zadd',
  '+zcard',
  '+zrange',
  '+zrangebyscore',
  '+zremrangebyrank',
];
