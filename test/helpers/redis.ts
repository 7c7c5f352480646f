// Starts a real redis-server for a test (free port, temp dir, no persistence unless asked)
// and stops it on teardown. `redis-server` must be installed (.ci/run installs it).

import type { Test } from 'tap';
import { Redis } from 'ioredis';
import { startRedisServer, type RedisServer } from '../../testkit/services.js';
import { startRedisCluster as startCluster, type RedisCluster, type RedisClusterOptions } from '../../testkit/redis-cluster.js';

export interface TestRedis extends RedisServer {
  /** SIGSTOP: the server keeps its connections open and answers nothing, as a stalled host. */
  freeze(): void;
  /** SIGCONT: the server answers again, working through what it was sent meanwhile. */
  thaw(): void;
}

/** `password`: started with requirepass; `url` then carries `default:<password>@`. */
export async function startRedis(t: Test, extraArgs: string[] = [], { password }: { password?: string } = {}): Promise<TestRedis> {
  const redis = await startRedisServer({ extraArgs, password });
  // Teardown's SIGKILL ends a frozen server too.
  t.teardown(redis.kill);
  // A test's stop() is a crash: nothing is flushed.
  return { ...redis, stop: redis.kill, freeze: () => void redis.process.kill('SIGSTOP'), thaw: () => void redis.process.kill('SIGCONT') };
}

/** A replica that stopped replicating: what it holds of some keys, and its promotion. */
export interface LaggingReplica {
  /** Makes the keys what they were when the replica stopped: those written since are rolled back, those made since dropped. */
  failover(): Promise<void>;
}

/**
 * What a replica of `redis` whose link was cut now would hold of the keys matching `pattern`
 * (SCAN MATCH, with their TTLs): a failover to a lagging replica, played on one Redis for the
 * keys of one user, say, while the rest of the data (another master's) stays as it is.
 */
export async function laggingReplica(redis: TestRedis, pattern: string): Promise<LaggingReplica> {
  const keysNow = async (admin: Redis) => {
    const keys: string[] = [];
    for await (const batch of admin.scanStream({ match: pattern, count: 1000 }) as AsyncIterable<string[]>) keys.push(...batch);
    return keys;
  };
  const admin = new Redis(redis.url, { maxRetriesPerRequest: 1 });
  let snapshot: { key: string; ttl: number; value: Buffer }[];
  try {
    snapshot = await Promise.all((await keysNow(admin)).map(async (key) => ({ key, ttl: Math.max(0, await admin.pttl(key)), value: (await admin.dumpBuffer(key))! })));
  } finally {
    admin.disconnect();
  }
  return {
    async failover() {
      const admin = new Redis(redis.url, { maxRetriesPerRequest: 1 });
      try {
        const now = await keysNow(admin);
        const promote = admin.multi();
        if (now.length > 0) promote.del(...now);
        for (const { key, ttl, value } of snapshot) promote.restore(key, ttl, value);
        await promote.exec();
      } finally {
        admin.disconnect();
      }
    },
  };
}

/**
 * A real Redis Cluster (testkit/redis-cluster.ts: 3 masters by default), every node killed on
 * teardown. Start one per test file: it takes a second or two.
 */
export async function startRedisCluster(t: Test, options: RedisClusterOptions = {}): Promise<RedisCluster> {
  const cluster = await startCluster(options);
  t.teardown(cluster.kill);
  return cluster;
}

/**
 * Makes `redis` require `password` from now on (CONFIG SET requirepass: the harness's readiness
 * check is an unauthenticated PING); resolves the URL that carries it.
 */
export async function requirePassword(redis: TestRedis, password: string): Promise<string> {
  const client = new Redis(redis.url, { lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    await client.config('SET', 'requirepass', password);
  } finally {
    client.disconnect();
  }
  return redis.url.replace('redis://', `redis://:${encodeURIComponent(password)}@`);
}

/**
 * What OPERATIONS.md tells operators to run, after `ACL SETUSER switchboard`: the key prefix,
 * the channel prefix (`&<prefix>*`: the group notifier's `<prefix>groups`) and the commands
 * switchboard sends, nothing else. INFO is ioredis' ready check; EVAL and
 * EVALSHA run the stores' scripts (ACLs apply to the commands inside them too); the rest are
 * the stores' own commands and those their scripts call.
 */
export const SWITCHBOARD_ACL = (prefix: string, password: string): string[] => [
  'on',
  `>${password}`,
  'resetkeys',
  `~${prefix}*`,
  'resetchannels',
  `&${prefix}*`,
  '-@all',
  '+info',
  '+ping',
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
  // The inbox: its log is a stream, its conversation indexes and dedupe state strings.
  '+xadd',
  '+xrange',
  '+xrevrange',
  '+xtrim',
  '+xdel',
  '+append',
  '+getrange',
  '+strlen',
  '+mget',
  '+hlen',
  '+hkeys',
  '+zrevrangebyscore',
  // The group store (GROUP_REDIS_COMMANDS) and the group notifier (pub/sub on <prefix>groups).
  '+hmget',
  '+hincrby',
  '+hexists',
  '+zrem',
  '+zscore',
  '+zrangebylex',
  '+lindex',
  '+lpop',
  '+rpush',
  '+zcount',
  '+zmscore',
  '+zremrangebyscore',
  '+publish',
  '+subscribe',
];
