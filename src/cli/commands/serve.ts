// `switchboard start` (embedded single node) and `switchboard worker` (a worker node): both run
// a worker until SIGINT or SIGTERM, then shut down gracefully; SIGHUP re-reads the TLS files, when
// there are any. This file turns their flags into the composition root's configuration (node.ts)
// and prints what a person starting them needs.

import { createSwitchboard, type SwitchboardConfig } from '../../node.js';
import type { ImNode } from '../../registry/im-node.js';
import { createLogger, type Logger } from '../../log.js';
import { MISSING_ENV_MESSAGE, MISSING_FLAGS_MESSAGE, missingServerEnv, missingServerFlags } from '../node-flags.js';
import type { ClusterSettings } from '../../cluster/cluster.js';
import { SwitchboardError } from '../../errors.js';
import { PORT, envOf, parseOptions, usage, type OptionSpecs, type OptionValues, type ParsedOptions } from '../options.js';
import {
  CLUSTER_OPTIONS,
  GATE_OPTIONS,
  GATE_TLS_OPTIONS,
  PEER_TLS_OPTIONS,
  TLS_OPTIONS,
  gateTlsFrom,
  workerTlsFrom,
  reloadOnHangup,
  GROUP_OPTIONS,
  HEALTH_OPTIONS,
  INBOX_OPTIONS,
  LIMIT_OPTIONS,
  LOG_OPTION,
  NETWORK_OPTIONS,
  RECIPIENT_OPTIONS,
  REDIS_TIMEOUT_OPTION,
  SECRET_OPTION,
  REVOCATION_OPTION,
  DEV_OPTION,
  adminTokenFrom,
  checkSecret,
  tokenSecrets,
  tokenSecretFrom,
  trustProxyFrom,
  gateLimitsFrom,
  groupLimitsFrom,
  healthFrom,
  inboxLimitsFrom,
  limitsFrom,
  memoryInboxBytesFrom,
  redisPrefixFrom,
  redisTargetFrom,
  redisTimeoutFrom,
  zooKeeperAccessFrom,
  requireOptions,
  addressInUse,
  isWildcard,
  wildcardWarning,
} from '../common.js';
import { loadNativeZooKeeper } from '../../registry/zookeeper-client.js';
import type { AddressInfo } from 'node:net';

const START_OPTIONS = {
  ...NETWORK_OPTIONS,
  port: { ...PORT, group: 'network', description: 'TCP port for client connections', default: 9000 },
  'gate-port': { ...PORT, group: 'network', description: 'HTTP port of the embedded gate', default: 8080 },
  'no-gate': { type: 'boolean', group: 'network', description: 'run without the embedded gate' },
  ...TLS_OPTIONS,
  'gate-tls-cert': { ...GATE_TLS_OPTIONS['tls-cert'], description: "PEM file of the embedded gate's certificate chain: it serves HTTPS; re-read on SIGHUP" },
  'gate-tls-key': { ...GATE_TLS_OPTIONS['tls-key'], description: 'PEM file of the private key of --gate-tls-cert' },
  ...DEV_OPTION,
  ...SECRET_OPTION,
  ...INBOX_OPTIONS,
  ...RECIPIENT_OPTIONS,
  ...REDIS_TIMEOUT_OPTION,
  ...HEALTH_OPTIONS,
  ...GROUP_OPTIONS,
  ...GATE_OPTIONS,
  ...LIMIT_OPTIONS,
  ...REVOCATION_OPTION,
  ...LOG_OPTION,
} as const satisfies OptionSpecs;

const WORKER_OPTIONS = {
  ...NETWORK_OPTIONS,
  port: { ...PORT, group: 'network', description: 'TCP port for client connections', default: 9001 },
  ...TLS_OPTIONS,
  ...PEER_TLS_OPTIONS,
  ...DEV_OPTION,
  ...SECRET_OPTION,
  ...INBOX_OPTIONS,
  ...RECIPIENT_OPTIONS,
  ...REDIS_TIMEOUT_OPTION,
  ...HEALTH_OPTIONS,
  ...GROUP_OPTIONS,
  ...CLUSTER_OPTIONS,
  ...LIMIT_OPTIONS,
  ...REVOCATION_OPTION,
  ...LOG_OPTION,
} as const satisfies OptionSpecs;

/** The options of `start` and `worker` (for tests and docs). */
export const SERVE_COMMAND_OPTIONS = { start: START_OPTIONS, worker: WORKER_OPTIONS } as const;

const START_SUMMARY =
  'Runs a complete single node: a worker and its HTTP gate in one process, with in-memory stores,\nor with --redis inboxes and accounts in Redis. A cluster is `switchboard worker --zk` and `switchboard gate`.';
const WORKER_SUMMARY = 'Runs one worker node: alone, or with --zk as a worker of a cluster (ZooKeeper + Redis).';

export function startCommand(argv: string[]): Promise<void> {
  const o = parseOptions(START_OPTIONS, argv);
  if (o.help) {
    process.stdout.write(usage('start', START_SUMMARY, START_OPTIONS));
    return Promise.resolve();
  }
  // A single node: no cluster option is read, from flags or from the environment.
  return serve('start', { ...parseOptions(CLUSTER_OPTIONS, [], {}), ...parseOptions(PEER_TLS_OPTIONS, [], {}), ...o });
}

export function workerCommand(argv: string[]): Promise<void> {
  const o = parseOptions(WORKER_OPTIONS, argv);
  if (o.help) {
    process.stdout.write(usage('worker', WORKER_SUMMARY, WORKER_OPTIONS));
    return Promise.resolve();
  }
  return serve('worker', { ...parseOptions(GATE_OPTIONS, [], {}), 'gate-port': 0, 'no-gate': true, 'gate-tls-cert': undefined, 'gate-tls-key': undefined, ...o });
}

/** What serve() reads: each command's own options, and the other's at their defaults. */
type ServeValues = OptionValues<typeof START_OPTIONS> & OptionValues<typeof WORKER_OPTIONS> & ParsedOptions;

async function serve(command: 'start' | 'worker', o: ServeValues): Promise<void> {
  const log = createLogger({ level: o['log-level'] });
  for (const warning of o.warnings) log.warn(warning);
  const missing = missingServerFlags();
  if (missing.length > 0) log.info({ missing }, MISSING_FLAGS_MESSAGE);
  const missingEnv = missingServerEnv();
  if (missingEnv.length > 0) log.info({ missing: missingEnv }, MISSING_ENV_MESSAGE);
  const config = serveConfig(command, o, log);
  const switchboard = createSwitchboard(config);
  // What the worker tells clients (and peers) to connect to: the server's own rule.
  const wildcard = !o['announce-host'] && isWildcard(o.host) ? wildcardWarning(o.host, '127.0.0.1', Boolean(o.zk)) : undefined;
  if (wildcard) log.warn({ host: o.host, announceHost: '127.0.0.1', addresses: wildcard.addresses }, wildcard.message);
  const workerPorts = [
    { port: o.port, what: 'client port', flag: 'port', env: envOf('port', WORKER_OPTIONS.port) },
    { port: o['peer-port'], what: 'peer port', flag: 'peer-port', env: envOf('peer-port', WORKER_OPTIONS['peer-port']) },
    ...(o['tls-port'] !== undefined ? [{ port: o['tls-port'], what: 'TLS client port', flag: 'tls-port', env: envOf('tls-port', WORKER_OPTIONS['tls-port']) }] : []),
  ];
  const gatePorts = [{ port: o['gate-port'], what: 'gate port', flag: 'gate-port', env: envOf('gate-port', START_OPTIONS['gate-port']) }];
  const started = await switchboard.start((err, part) => addressInUse(err, part === 'gate' ? gatePorts : workerPorts));
  if (command === 'start') {
    process.stderr.write(banner(o.host, started.worker!, started.gate, wildcard, switchboard.node!.users !== undefined, config.gate?.tls !== undefined));
  }
  const tls = config.worker?.tls ?? config.worker?.peerTls ?? config.gate?.tls;
  const stopReloading = tls ? reloadOnHangup(switchboard, log) : () => {};
  await new Promise<void>((resolve) => {
    const stop = (signal: string) => {
      log.info({ signal }, 'shutting down');
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      stopReloading();
      switchboard.stop().then(resolve, (err: unknown) => {
        log.error({ err }, 'shutdown failed');
        resolve();
      });
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });
}

/** The flags as the composition root's configuration, every value checked first. */
function serveConfig(command: 'start' | 'worker', o: ServeValues, log: Logger): SwitchboardConfig {
  if (o.zk) {
    requireOptions('cluster mode (--zk)', WORKER_OPTIONS, o, ['redis', 'cluster-secret']);
    // Before anything connects: the native client is an optional dependency.
    loadNativeZooKeeper();
  }
  // Without --zk a worker may run on the development secret (a development run); a cluster may not.
  const { secret, dev } = tokenSecretFrom(o, !o.zk, (message) => log.warn(message));
  const clusterSecret = o.zk ? checkSecret('cluster-secret', o['cluster-secret']!, dev) : undefined;
  // Gates hold the token secret; with the same value as the cluster secret they could pass the
  // peer handshake and deliver as any worker.
  if (clusterSecret !== undefined && tokenSecrets(secret).includes(clusterSecret)) {
    throw new SwitchboardError('SB_ERR_CONFIG', '--cluster-secret must differ from --secret: whoever holds the token secret (every gate) could otherwise join the cluster as a worker');
  }
  const gateLimits = command === 'start' && !o['no-gate'] ? gateLimitsFrom(o, dev) : undefined;
  const trustProxy = trustProxyFrom(o['trust-proxy']);
  const zkAccess = o.zk ? zooKeeperAccessFrom(o, o.dev, log) : undefined;
  const keyPrefix = redisPrefixFrom(o['redis-prefix']);
  const redisTarget = redisTargetFrom(o);
  const inboxLimits = inboxLimitsFrom(o);
  const timeoutMs = redisTimeoutFrom(o);
  const health = healthFrom(o);
  const limits = limitsFrom(o);
  const workerTls = workerTlsFrom(o, o.port);
  const gateTls = gateTlsFrom(o['gate-tls-cert'], o['gate-tls-key'], 'gate-tls');
  return {
    secret,
    log,
    groupLimits: groupLimitsFrom(o),
    redis: redisTarget ? { url: redisTarget, keyPrefix, timeoutMs } : undefined,
    zookeeper: o.zk ? { connect: o.zk, root: o['zk-root'], sessionTimeoutMs: o['zk-session-timeout-ms'], reconcileIntervalMs: o['reconcile-ms'], auth: zkAccess?.auth, readers: zkAccess?.readers } : undefined,
    worker: {
      host: o.host,
      port: o.port,
      announceHost: o['announce-host'],
      ...workerTls,
      limits,
      health,
      inboxLimits,
      memoryInboxBytes: memoryInboxBytesFrom(o),
      checkRecipients: !o['allow-unknown-recipients'],
      cluster: o.zk ? { settings: clusterSettingsFrom(o, clusterSecret!), sessionTtlMs: o['session-ttl-ms'] } : undefined,
      revocationCheckMs: o['revocation-check-ms'],
    },
    // `start` is a complete system: the gate runs in the same process, on the same stores.
    gate: gateLimits && { host: o.host, port: o['gate-port'], tls: gateTls, limits: gateLimits, registration: !o['no-registration'], trustProxy, checkMembers: !o['allow-unknown-recipients'], adminToken: adminTokenFrom(o['admin-token-file'], dev) },
  };
}

function clusterSettingsFrom(o: ServeValues, secret: string): ClusterSettings {
  return {
    secret,
    peerHost: o['peer-host'],
    peerPort: o['peer-port'],
    peerHandshakeTimeoutMs: o['peer-handshake-timeout-ms'],
    peerMaxPending: o['peer-max-pending'],
    peerReconnectMs: o['peer-reconnect-ms'],
    peerQueueLimit: o['peer-queue'],
    routeCacheTtlMs: o['route-cache-ttl-ms'],
    routeCacheSize: o['route-cache-size'],
  };
}

/** What `start` prints on stderr once it runs: where to reach it, and how to try it. */
function banner(host: string, info: ImNode, gateAddress: AddressInfo | undefined, wildcard: { message: string; addresses: string[] } | undefined, accounts: boolean, https: boolean): string {
  const hostPort = (h: string, port: number) => `${h.includes(':') ? `[${h}]` : h}:${port}`;
  const gateUrl = gateAddress ? `${https ? 'https' : 'http'}://${hostPort(info.host, gateAddress.port)}` : undefined;
  const listening = host === info.host ? '' : `  listening on ${hostPort(host, info.port)}${gateAddress ? ` and ${hostPort(host, gateAddress.port)}` : ''}\n`;
  return (
    `\nswitchboard is running (node ${info.id}): clients are told ${info.port === 0 ? '' : hostPort(info.host, info.port)}${info.tlsPort !== undefined ? `${info.port === 0 ? '' : ', '}TLS ${hostPort(info.host, info.tlsPort)}` : ''}${gateUrl ? `, gate ${gateUrl}` : ''}.\n` +
    listening +
    (wildcard ? `warning: ${wildcard.message}${wildcard.addresses.length > 0 ? ` (this host's addresses: ${wildcard.addresses.join(', ')})` : ''}\n` : '') +
    (gateUrl
      ? `Chat from two terminals (register a password on first use; messages go to registered names):\n  npx switchboard chat --gate ${gateUrl} --user bob --register\n  npx switchboard chat --gate ${gateUrl} --user alice --register   # then type: @bob hello\n`
      : `Chat from two terminals:\n  npx switchboard chat --user alice --port ${info.port}\n  npx switchboard chat --user bob --port ${info.port}\n` +
        (accounts ? 'Recipients need an account in the Redis user store (made by a gate on it), unless the node runs with --allow-unknown-recipients.\n' : '')) +
    `Native clients log in through POST ${gateUrl ?? '(gate off)'}/api/login, or with a token from: npx switchboard token --user alice\n\n`
  );
}
