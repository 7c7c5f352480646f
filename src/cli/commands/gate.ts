// `switchboard gate`: the HTTP gate of a cluster. Follows the workers in ZooKeeper (without
// registering itself), keeps users in Redis, and reads the OnlineCounter for /api/stats.

import type { LevelWithSilent } from 'pino';
import { createLogger } from '../../log.js';
import { TokenSigner } from '../../auth/token.js';
import { PasswordHasher } from '../../auth/password.js';
import { ZooKeeperRegistry } from '../../registry/zk-registry.js';
import { RedisUserStore } from '../../users/redis-user-store.js';
import { OnlineCounter } from '../../cluster/online-counter.js';
import { Gate } from '../../gate/gate-server.js';
import { SwitchboardError } from '../../errors.js';
import { parseOptions, usage, type OptionSpecs } from '../options.js';
import { CLUSTER_OPTIONS, DEV_OPTION, GATE_OPTIONS, INBOX_OPTIONS, LOG_OPTION, PROBE_OPTIONS, REDIS_TIMEOUT_OPTION, SECRET_OPTION, gateLimitsFrom, logRedis, probeFrom, redisPrefixFrom, redisTimeoutFrom, tokenSecretFrom, trustProxyFrom, zooKeeperAccessFrom } from '../common.js';
import { RedisRateLimitStore } from '../../gate/redis-rate-limit-store.js';
import { WorkerProbe } from '../../gate/worker-probe.js';

const OPTIONS = {
  host: { type: 'string', description: 'address to listen on', default: '127.0.0.1' },
  port: { type: 'number', description: 'HTTP port', default: 8080 },
  zk: { type: 'string', description: 'ZooKeeper connect string of the cluster (required)' },
  'zk-root': { type: 'string', description: 'ZooKeeper path of the cluster', default: '/switchboard' },
  'zk-auth': { ...CLUSTER_OPTIONS['zk-auth'], description: 'ZooKeeper digest identity user:password of the gate, one the workers grant read access (their --zk-readers); required unless --dev' },
  redis: { type: 'string', secret: true, description: 'redis://[user:password@]host:port[/db] of the user store and the rate-limit counts, shared by every gate (required)' },
  'redis-prefix': INBOX_OPTIONS['redis-prefix'],
  ...DEV_OPTION,
  ...SECRET_OPTION,
  ...LOG_OPTION,
  ...GATE_OPTIONS,
  ...REDIS_TIMEOUT_OPTION,
  ...PROBE_OPTIONS,
} as const satisfies OptionSpecs;

const SUMMARY = 'Runs the HTTP gate: registration, login (token + least-loaded worker), stats.';

export async function gateCommand(argv: string[]): Promise<void> {
  const o = parseOptions(OPTIONS, argv);
  if (o.help) {
    process.stdout.write(usage('gate', SUMMARY, OPTIONS));
    return;
  }
  if (!o.zk || !o.redis) throw new SwitchboardError('SB_ERR_CONFIG', '--zk and --redis are required (the embedded gate runs inside `switchboard start`)');
  const log = createLogger({ level: (o['log-level'] ?? 'info') as LevelWithSilent });
  const { secret, dev } = tokenSecretFrom(o, false, (message) => log.warn(message));
  const limits = gateLimitsFrom(o, dev);
  const trustProxy = trustProxyFrom(o['trust-proxy']);
  const { auth } = zooKeeperAccessFrom(o, o.dev, log);
  const keyPrefix = redisPrefixFrom(o['redis-prefix']);
  const timeoutMs = redisTimeoutFrom(o);
  const probeSettings = probeFrom(o);
  const registry = new ZooKeeperRegistry({ connect: o.zk, root: o['zk-root'], auth, log: log.child({ component: 'zookeeper' }) });
  const online = new OnlineCounter({
    connect: o.zk,
    root: o['zk-root'],
    sessionTimeoutMs: 10_000,
    selfId: () => '',
    local: () => ({ users: 0, sessions: 0 }),
    auth,
    log: log.child({ component: 'online' }),
  });
  const users = new RedisUserStore({ url: o.redis, keyPrefix, timeoutMs });
  logRedis(users.redis, log.child({ component: 'redis', store: 'users' }));
  // Every gate on this Redis counts in the same windows: the limits hold for the whole fleet.
  const rateLimits = new RedisRateLimitStore({ url: o.redis, keyPrefix: `${keyPrefix}rl:`, timeoutMs });
  const probe = new WorkerProbe({ registry, ...probeSettings, log: log.child({ component: 'probe' }) });
  const gate = new Gate({
    host: o.host,
    port: o.port,
    registry,
    users,
    signer: new TokenSigner(secret),
    hasher: new PasswordHasher(),
    online: () => online.read(),
    registration: !o['no-registration'],
    limits,
    rateLimits,
    trustProxy,
    probe,
    log: log.child({ component: 'gate' }),
  });
  const shutdown = async () => {
    probe.close();
    await gate.close();
    await online.close();
    await registry.close();
    await users.close();
    await rateLimits.close();
  };
  try {
    await registry.observe();
    probe.start();
    await gate.listen();
  } catch (err) {
    // The ZooKeeper session and the Redis connection would keep the process alive forever.
    await shutdown();
    throw err;
  }
  await new Promise<void>((resolve) => {
    const stop = () => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      void shutdown().then(resolve);
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });
}
