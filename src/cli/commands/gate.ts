// `switchboard gate`: the HTTP gate of a cluster. Follows the workers in ZooKeeper (without
// registering itself), keeps users in Redis, and reads the OnlineCounter for /api/stats. This
// file turns its flags into the composition root's configuration (node.ts). With --tls-cert it
// serves HTTPS, and SIGHUP re-reads the certificate.

import { createLogger } from '../../log.js';
import { createSwitchboard } from '../../node.js';
import { loadNativeZooKeeper } from '../../registry/zookeeper-client.js';
import { PORT, envOf, parseOptions, usage, type OptionSpecs } from '../options.js';
import {
  DEV_OPTION,
  GATE_OPTIONS,
  GATE_TLS_OPTIONS,
  gateTlsFrom,
  reloadOnHangup,
  INBOX_OPTIONS,
  GROUP_OPTIONS,
  LOG_OPTION,
  NETWORK_OPTIONS,
  PROBE_OPTIONS,
  RECIPIENT_OPTIONS,
  REDIS_OPTION,
  REDIS_PREFIX_OPTION,
  REDIS_TIMEOUT_OPTION,
  SECRET_OPTION,
  ZK_OPTIONS,
  adminTokenFrom,
  addressInUse,
  requireOptions,
  gateLimitsFrom,
  groupLimitsFrom,
  inboxLimitsFrom,
  probeFrom,
  redisPrefixFrom,
  redisTargetFrom,
  redisTimeoutFrom,
  tokenSecretFrom,
  trustProxyFrom,
  zooKeeperAccessFrom,
} from '../common.js';

// The gate's own address and ZooKeeper identity have variables of their own: SWITCHBOARD_PORT,
// SWITCHBOARD_HOST and SWITCHBOARD_ZK_AUTH are the worker's, and one environment (a shared
// file, a terminal) can serve both. The old names still work, with a warning.
const OPTIONS = {
  host: { ...NETWORK_OPTIONS.host, description: 'address the HTTP gate listens on; 0.0.0.0 or :: for every interface', env: 'SWITCHBOARD_GATE_HOST', legacyEnv: 'SWITCHBOARD_HOST' },
  port: { ...PORT, group: 'network', description: 'HTTP port (HTTPS with --tls-cert)', default: 8080, env: 'SWITCHBOARD_GATE_PORT', legacyEnv: 'SWITCHBOARD_PORT' },
  ...GATE_TLS_OPTIONS,
  ...SECRET_OPTION,
  ...DEV_OPTION,
  redis: { ...REDIS_OPTION.redis, description: 'redis://[user:password@]host:port[/db] of the user store and the rate-limit counts, shared by every gate (required)' },
  'redis-cluster': REDIS_OPTION['redis-cluster'],
  ...REDIS_PREFIX_OPTION,
  ...REDIS_TIMEOUT_OPTION,
  zk: { ...ZK_OPTIONS.zk, description: 'ZooKeeper connect string of the cluster (required)' },
  'zk-root': ZK_OPTIONS['zk-root'],
  'zk-auth': {
    ...ZK_OPTIONS['zk-auth'],
    description: 'ZooKeeper digest identity user:password of the gate, one the workers grant read access (their --zk-readers); required unless --dev',
    env: 'SWITCHBOARD_GATE_ZK_AUTH',
    legacyEnv: 'SWITCHBOARD_ZK_AUTH',
  },
  ...GROUP_OPTIONS,
  // The workers' inbox limits: the conversation routes read (and so prune) the inboxes by them.
  'inbox-max-messages': INBOX_OPTIONS['inbox-max-messages'],
  'inbox-max-age-s': INBOX_OPTIONS['inbox-max-age-s'],
  'dedupe-window-s': INBOX_OPTIONS['dedupe-window-s'],
  ...RECIPIENT_OPTIONS,
  ...GATE_OPTIONS,
  ...PROBE_OPTIONS,
  ...LOG_OPTION,
} as const satisfies OptionSpecs;

/** The options of `gate` (for tests and docs). */
export const GATE_COMMAND_OPTIONS = OPTIONS;

const SUMMARY = 'Runs the HTTP gate: registration, login (token + least-loaded worker), stats.';

export async function gateCommand(argv: string[]): Promise<void> {
  const o = parseOptions(OPTIONS, argv);
  if (o.help) {
    process.stdout.write(usage('gate', SUMMARY, OPTIONS));
    return;
  }
  // The embedded gate runs inside `switchboard start`: this one serves a cluster.
  requireOptions('the gate', OPTIONS, o, ['zk', 'redis']);
  // Before anything connects: the native client is an optional dependency.
  loadNativeZooKeeper();
  const log = createLogger({ level: o['log-level'] });
  for (const warning of o.warnings) log.warn(warning);
  const { secret, dev } = tokenSecretFrom(o, false, (message) => log.warn(message));
  const limits = gateLimitsFrom(o, dev);
  const trustProxy = trustProxyFrom(o['trust-proxy']);
  const { auth } = zooKeeperAccessFrom(o, o.dev, log);
  const keyPrefix = redisPrefixFrom(o['redis-prefix']);
  const timeoutMs = redisTimeoutFrom(o);
  const probe = probeFrom(o);
  const tls = gateTlsFrom(o['tls-cert'], o['tls-key'], 'tls');
  const switchboard = createSwitchboard({
    secret,
    log,
    redis: { url: redisTargetFrom(o)!, keyPrefix, timeoutMs },
    groupLimits: groupLimitsFrom(o),
    zookeeper: { connect: o.zk!, root: o['zk-root'], auth },
    gate: { host: o.host, port: o.port, tls, limits, registration: !o['no-registration'], trustProxy, probe, checkMembers: !o['allow-unknown-recipients'], inboxLimits: inboxLimitsFrom(o), adminToken: adminTokenFrom(o['admin-token-file'], dev) },
  });
  await switchboard.start((err) => addressInUse(err, [{ port: o.port, what: 'gate port', flag: 'port', env: envOf('port', OPTIONS.port) }]));
  const stopReloading = tls ? reloadOnHangup(switchboard, log) : () => {};
  await new Promise<void>((resolve) => {
    const stop = () => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      stopReloading();
      void switchboard.stop().then(resolve);
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });
}
