// `switchboard start` (embedded single node) and `switchboard worker` (a worker node): both run
// a worker until SIGINT or SIGTERM, then shut down gracefully.

import { createNode } from '../../node.js';
import { createLogger } from '../../log.js';
import { SwitchboardError } from '../../errors.js';
import { PORT, envOf, parseOptions, usage, type OptionSpecs, type OptionValues, type ParsedOptions } from '../options.js';
import {
  CLUSTER_OPTIONS,
  GATE_OPTIONS,
  HEALTH_OPTIONS,
  INBOX_OPTIONS,
  LIMIT_OPTIONS,
  LOG_OPTION,
  NETWORK_OPTIONS,
  RECIPIENT_OPTIONS,
  REDIS_TIMEOUT_OPTION,
  SECRET_OPTION,
  DEV_OPTION,
  checkSecret,
  tokenSecretFrom,
  trustProxyFrom,
  gateLimitsFrom,
  healthFrom,
  inboxLimitsFrom,
  limitsFrom,
  memoryInboxBytesFrom,
  logRedis,
  redisPrefixFrom,
  redisTimeoutFrom,
  zooKeeperAccessFrom,
  requireOptions,
  addressInUse,
  isWildcard,
  wildcardWarning,
} from '../common.js';
import { WebGate } from '../../gate/web-gate.js';
import { MemoryUserStore } from '../../users/memory-user-store.js';
import { RedisUserStore } from '../../users/redis-user-store.js';
import type { UserStore } from '../../users/user-store.js';
import { PasswordHasher } from '../../auth/password.js';
import { MemoryInboxStore } from '../../inbox/memory-inbox-store.js';
import { RedisInboxStore } from '../../inbox/redis-inbox-store.js';
import { RedisSessionStore } from '../../session/redis-session-store.js';
import { ZooKeeperRegistry } from '../../registry/zk-registry.js';
import { loadNativeZooKeeper } from '../../registry/zookeeper-client.js';
import { ZooKeeperOnlineCounter } from '../../registry/zk-online-counter.js';
import type { AddressInfo } from 'node:net';

const START_OPTIONS = {
  ...NETWORK_OPTIONS,
  port: { ...PORT, group: 'network', description: 'TCP port for client connections', default: 9000 },
  'gate-port': { ...PORT, group: 'network', description: 'HTTP port of the embedded gate', default: 8080 },
  'no-gate': { type: 'boolean', group: 'network', description: 'run without the embedded gate' },
  ...DEV_OPTION,
  ...SECRET_OPTION,
  ...INBOX_OPTIONS,
  ...RECIPIENT_OPTIONS,
  ...REDIS_TIMEOUT_OPTION,
  ...HEALTH_OPTIONS,
  ...GATE_OPTIONS,
  ...LIMIT_OPTIONS,
  ...LOG_OPTION,
} as const satisfies OptionSpecs;

const WORKER_OPTIONS = {
  ...NETWORK_OPTIONS,
  port: { ...PORT, group: 'network', description: 'TCP port for client connections', default: 9001 },
  ...DEV_OPTION,
  ...SECRET_OPTION,
  ...INBOX_OPTIONS,
  ...RECIPIENT_OPTIONS,
  ...REDIS_TIMEOUT_OPTION,
  ...HEALTH_OPTIONS,
  ...CLUSTER_OPTIONS,
  ...LIMIT_OPTIONS,
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
  return serve('start', { ...parseOptions(CLUSTER_OPTIONS, [], {}), ...o });
}

export function workerCommand(argv: string[]): Promise<void> {
  const o = parseOptions(WORKER_OPTIONS, argv);
  if (o.help) {
    process.stdout.write(usage('worker', WORKER_SUMMARY, WORKER_OPTIONS));
    return Promise.resolve();
  }
  return serve('worker', { ...parseOptions(GATE_OPTIONS, [], {}), 'gate-port': 0, 'no-gate': true, ...o });
}

/** What serve() reads: each command's own options, and the other's at their defaults. */
type ServeValues = OptionValues<typeof START_OPTIONS> & OptionValues<typeof WORKER_OPTIONS> & ParsedOptions;

async function serve(command: 'start' | 'worker', o: ServeValues): Promise<void> {
  const log = createLogger({ level: o['log-level'] });
  for (const warning of o.warnings) log.warn(warning);
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
  if (clusterSecret !== undefined && clusterSecret === secret) {
    throw new SwitchboardError('SB_ERR_CONFIG', '--cluster-secret must differ from --secret: whoever holds the token secret (every gate) could otherwise join the cluster as a worker');
  }
  const gateLimits = command === 'start' && !o['no-gate'] ? gateLimitsFrom(o, dev) : undefined;
  const trustProxy = trustProxyFrom(o['trust-proxy']);
  const zkAccess = o.zk ? zooKeeperAccessFrom(o, o.dev, log) : undefined;
  const keyPrefix = redisPrefixFrom(o['redis-prefix']);
  const inboxLimits = inboxLimitsFrom(o);
  const timeoutMs = redisTimeoutFrom(o);
  const health = healthFrom(o);
  const inbox = o.redis
    ? new RedisInboxStore({ url: o.redis, keyPrefix, limits: inboxLimits, timeoutMs })
    : new MemoryInboxStore({ ...inboxLimits, maxBytes: memoryInboxBytesFrom(o) }, Date.now, log.child({ component: 'inbox' }));
  if (inbox instanceof RedisInboxStore) logRedis(inbox.redis, log.child({ component: 'redis', store: 'inbox' }));
  // Accounts live where the inboxes do, so no inbox outlives the account it belongs to (else
  // after a restart anyone could sign up with a stored user's name and read their messages):
  // in Redis with --redis (where `switchboard gate` keeps them too), else in the embedded
  // gate's memory; a worker without --redis and `start --no-gate` know no accounts. Where
  // there are accounts, the worker refuses recipients without one.
  const withGate = command === 'start' && !o['no-gate'];
  const checkRecipients = !o['allow-unknown-recipients'];
  const users: UserStore | undefined = o.redis && (withGate || checkRecipients) ? new RedisUserStore({ url: o.redis, keyPrefix, timeoutMs }) : withGate ? new MemoryUserStore() : undefined;
  if (users instanceof RedisUserStore) logRedis(users.redis, log.child({ component: 'redis', store: 'users' }));
  const cluster = o.zk
    ? {
        store: new RedisSessionStore({ url: o.redis!, keyPrefix, ttlMs: o['session-ttl-ms'], timeoutMs }),
        registry: new ZooKeeperRegistry({
          connect: o.zk,
          root: o['zk-root'],
          sessionTimeoutMs: o['zk-session-timeout-ms'],
          reconcileIntervalMs: o['reconcile-ms'],
          auth: zkAccess?.auth,
          readers: zkAccess?.readers,
          log: log.child({ component: 'zookeeper' }),
        }),
        settings: {
          secret: clusterSecret!,
          peerHost: o['peer-host'],
          peerPort: o['peer-port'],
          peerHandshakeTimeoutMs: o['peer-handshake-timeout-ms'],
          peerMaxPending: o['peer-max-pending'],
          peerReconnectMs: o['peer-reconnect-ms'],
          peerQueueLimit: o['peer-queue'],
          routeCacheTtlMs: o['route-cache-ttl-ms'],
          routeCacheSize: o['route-cache-size'],
        },
      }
    : undefined;
  if (cluster) logRedis(cluster.store.redis, log.child({ component: 'redis', store: 'sessions' }));
  const node = createNode({
    inbox,
    // The node closes it on stop.
    users: checkRecipients ? users : undefined,
    store: cluster?.store,
    registry: cluster?.registry,
    cluster: cluster?.settings,
    // On the registry's ZooKeeper session: one per process.
    online: cluster ? (counts) => new ZooKeeperOnlineCounter({ zookeeper: cluster.registry.zookeeper, ...counts, log: log.child({ component: 'online' }) }) : undefined,
    host: o.host,
    port: o.port,
    announceHost: o['announce-host'],
    secret,
    limits: limitsFrom(o),
    health,
    log,
  });
  const stopNode = async () => {
    await node.stop();
    if (!checkRecipients) await users?.close();
  };
  // What the worker tells clients (and peers) to connect to: the server's own rule.
  const wildcard = !o['announce-host'] && isWildcard(o.host) ? wildcardWarning(o.host, '127.0.0.1', Boolean(o.zk)) : undefined;
  if (wildcard) log.warn({ host: o.host, announceHost: '127.0.0.1', addresses: wildcard.addresses }, wildcard.message);
  const ports = [
    { port: o.port, what: 'client port', flag: 'port', env: envOf('port', WORKER_OPTIONS.port) },
    { port: o['peer-port'], what: 'peer port', flag: 'peer-port', env: envOf('peer-port', WORKER_OPTIONS['peer-port']) },
  ];
  let info;
  try {
    info = await node.start();
  } catch (err) {
    // Listening already, and connected to Redis: without this a worker that could not register
    // (e.g. SB_ERR_REGISTRY_ACL) would print its error and keep running.
    await stopNode().catch((stopErr: unknown) => log.error({ err: stopErr }, 'shutdown failed'));
    throw addressInUse(err, ports);
  }
  // `start` is a complete system: the gate runs in the same process, on the same stores.
  const gate =
    gateLimits && users
      ? new WebGate({
          host: o.host,
          port: o['gate-port'],
          registry: node.registry,
          users,
          signer: node.signer,
          hasher: new PasswordHasher(),
          online: () => node.online.read(),
          registration: !o['no-registration'],
          limits: gateLimits,
          trustProxy,
          log: log.child({ component: 'gate' }),
        })
      : undefined;
  let gateAddress: AddressInfo | undefined;
  try {
    gateAddress = await gate?.listen();
  } catch (err) {
    // The worker is up already: without this, a busy gate port left it running after the error.
    await stopNode();
    throw addressInUse(err, [{ port: o['gate-port'], what: 'gate port', flag: 'gate-port', env: envOf('gate-port', START_OPTIONS['gate-port']) }]);
  }
  if (command === 'start') {
    const hostPort = (host: string, port: number) => `${host.includes(':') ? `[${host}]` : host}:${port}`;
    const gateUrl = gateAddress ? `http://${hostPort(info.host, gateAddress.port)}` : undefined;
    const listening = o.host === info.host ? '' : `  listening on ${hostPort(o.host, info.port)}${gateAddress ? ` and ${hostPort(o.host, gateAddress.port)}` : ''}\n`;
    process.stderr.write(
      `\nswitchboard is running (node ${info.id}): clients are told ${hostPort(info.host, info.port)}${gateUrl ? `, gate ${gateUrl}` : ''}.\n` +
        listening +
        (wildcard ? `warning: ${wildcard.message}${wildcard.addresses.length > 0 ? ` (this host's addresses: ${wildcard.addresses.join(', ')})` : ''}\n` : '') +
        (gateUrl
          ? `Chat from two terminals (register a password on first use; messages go to registered names):\n  npx switchboard chat --gate ${gateUrl} --user bob --register\n  npx switchboard chat --gate ${gateUrl} --user alice --register   # then type: @bob hello\n`
          : `Chat from two terminals:\n  npx switchboard chat --user alice --port ${info.port}\n  npx switchboard chat --user bob --port ${info.port}\n` +
            (node.users ? 'Recipients need an account in the Redis user store (made by a gate on it), unless the node runs with --allow-unknown-recipients.\n' : '')) +
        `Native clients log in through POST ${gateUrl ?? '(gate off)'}/api/login, or with a token from: npx switchboard token --user alice\n\n`,
    );
  }
  await new Promise<void>((resolve) => {
    const stop = (signal: string) => {
      log.info({ signal }, 'shutting down');
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      Promise.resolve(gate?.close())
        .then(stopNode)
        .then(resolve, (err: unknown) => {
        log.error({ err }, 'shutdown failed');
        resolve();
      });
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });
}
