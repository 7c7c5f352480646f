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
import { GATE_OPTIONS, LOG_OPTION, PROBE_OPTIONS, REDIS_TIMEOUT_OPTION, SECRET_OPTION, gateLimitsFrom, probeFrom, redisTimeoutFrom, requireProductionSecret } from '../common.js';
import { WorkerProbe } from '../../gate/worker-probe.js';

const OPTIONS = {
  host: { type: 'string', description: 'address to listen on', default: '127.0.0.1' },
  port: { type: 'number', description: 'HTTP port', default: 8080 },
  zk: { type: 'string', description: 'ZooKeeper connect string of the cluster (required)' },
  'zk-root': { type: 'string', description: 'ZooKeeper path of the cluster', default: '/switchboard' },
  redis: { type: 'string', description: 'redis:// URL of the user store (required)' },
  dev: { type: 'boolean', description: 'development run: allow the built-in development secret' },
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
  const secret = requireProductionSecret(o.secret, o.dev, log);
  const timeoutMs = redisTimeoutFrom(o);
  const probeSettings = probeFrom(o);
  const registry = new ZooKeeperRegistry({ connect: o.zk, root: o['zk-root'], log: log.child({ component: 'zookeeper' }) });
  const online = new OnlineCounter({ connect: o.zk, root: o['zk-root'], sessionTimeoutMs: 10_000, selfId: () => '', local: () => ({ users: 0, sessions: 0 }), log: log.child({ component: 'online' }) });
  const users = new RedisUserStore({ url: o.redis, timeoutMs });
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
    limits: gateLimitsFrom(o),
    probe,
    log: log.child({ component: 'gate' }),
  });
  const shutdown = async () => {
    probe.close();
    await gate.close();
    await online.close();
    await registry.close();
    await users.close();
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
