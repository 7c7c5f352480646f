// `switchboard start` (embedded single node) and `switchboard worker` (a worker node): both run
// a worker until SIGINT or SIGTERM, then shut down gracefully.

import { createNode } from '../../node.js';
import { createLogger } from '../../log.js';
import type { LevelWithSilent } from 'pino';
import { parseOptions, usage, type OptionSpecs } from '../options.js';
import {
  CLUSTER_OPTIONS,
  GATE_OPTIONS,
  HEALTH_OPTIONS,
  INBOX_OPTIONS,
  LIMIT_OPTIONS,
  LOG_OPTION,
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
} from '../common.js';
import { Gate } from '../../gate/gate-server.js';
import { MemoryUserStore } from '../../users/memory-user-store.js';
import { RedisUserStore } from '../../users/redis-user-store.js';
import type { UserStore } from '../../users/user-store.js';
import { PasswordHasher } from '../../auth/password.js';
import { MemoryInboxStore } from '../../inbox/memory-inbox-store.js';
import { RedisInboxStore } from '../../inbox/redis-inbox-store.js';
import { RedisSessionStore } from '../../session/redis-session-store.js';
import { ZooKeeperRegistry } from '../../registry/zk-registry.js';
import { SwitchboardError } from '../../errors.js';
import type { AddressInfo } from 'node:net';

function serveOptions(port: number) {
  return {
    host: { type: 'string', description: 'address to listen on', default: '127.0.0.1' },
    port: { type: 'number', description: 'TCP port for client connections', default: port },
    'announce-host': { type: 'string', description: 'address clients and peers should use to reach this worker (default: --host)' },
    'gate-port': { type: 'number', description: 'start only: HTTP port of the embedded gate', default: 8080 },
    'no-gate': { type: 'boolean', description: 'start only: run without the embedded gate' },
    ...DEV_OPTION,
    ...SECRET_OPTION,
    ...LOG_OPTION,
    ...INBOX_OPTIONS,
    ...RECIPIENT_OPTIONS,
    ...REDIS_TIMEOUT_OPTION,
    ...HEALTH_OPTIONS,
    ...CLUSTER_OPTIONS,
    ...GATE_OPTIONS,
    ...LIMIT_OPTIONS,
  } as const satisfies OptionSpecs;
}

const START_SUMMARY = 'Runs a complete single-node switchboard with in-memory stores.';
const WORKER_SUMMARY = 'Runs one worker node.';

export function startCommand(argv: string[]): Promise<void> {
  return serve('start', START_SUMMARY, 9000, argv);
}

export function workerCommand(argv: string[]): Promise<void> {
  return serve('worker', WORKER_SUMMARY, 9001, argv);
}

async function serve(command: string, summary: string, defaultPort: number, argv: string[]): Promise<void> {
  const specs = serveOptions(defaultPort);
  const o = parseOptions(specs, argv);
  if (o.help) {
    process.stdout.write(usage(command, summary, specs));
    return;
  }
  const log = createLogger({ level: (o['log-level'] ?? 'info') as LevelWithSilent });
  if (o.zk && (!o.redis || !o['cluster-secret'])) {
    throw new SwitchboardError('SB_ERR_CONFIG', '--zk (cluster mode) needs --redis (shared inboxes and sessions) and --cluster-secret');
  }
  // Without --zk a worker may run on the development secret (a development run); a cluster may not.
  const { secret, dev } = tokenSecretFrom(o, !o.zk, (message) => log.warn(message));
  const clusterSecret = o.zk ? checkSecret('cluster-secret', o['cluster-secret']!, dev) : undefined;
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
    online: o.zk ? { connect: o.zk, root: o['zk-root'], sessionTimeoutMs: o['zk-session-timeout-ms'], auth: zkAccess?.auth, readers: zkAccess?.readers } : undefined,
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
  let info;
  try {
    info = await node.start();
  } catch (err) {
    // Listening already, and connected to Redis: without this a worker that could not register
    // (e.g. SB_ERR_REGISTRY_ACL) would print its error and keep running.
    await stopNode().catch((stopErr: unknown) => log.error({ err: stopErr }, 'shutdown failed'));
    throw err;
  }
  // `start` is a complete system: the gate runs in the same process, on the same stores.
  const gate =
    gateLimits && users
      ? new Gate({
          host: o.host,
          port: o['gate-port'],
          registry: node.registry,
          users,
          signer: node.signer,
          hasher: new PasswordHasher(),
          online: async () => ({ users: node.server.sessions.users, sessions: node.server.sessions.size }),
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
    throw err;
  }
  if (command === 'start') {
    const gateUrl = gateAddress ? `http://${o.host}:${gateAddress.port}` : undefined;
    process.stderr.write(
      `\nswitchboard is running on ${info.host}:${info.port} (node ${info.id})${gateUrl ? `, gate ${gateUrl}` : ''}.\n` +
        (gateUrl
          ? `Chat from two terminals (register a password on first use):\n  npx switchboard chat --gate ${gateUrl} --user alice --register\n  npx switchboard chat --gate ${gateUrl} --user bob --register\n`
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
