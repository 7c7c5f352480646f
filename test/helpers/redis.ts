// Starts a real redis-server for a test (free port, temp dir, no persistence unless asked)
// and stops it on teardown. `redis-server` must be installed (.ci/run installs it).

import type { Test } from 'tap';
import { startRedisServer, type RedisServer } from '../../src/bench/services.js';

export type TestRedis = RedisServer;

export async function startRedis(t: Test, extraArgs: string[] = []): Promise<TestRedis> {
  const redis = await startRedisServer({ extraArgs });
  t.teardown(redis.kill);
  // A test's stop() is a crash: nothing is flushed.
  return { ...redis, stop: redis.kill };
}
