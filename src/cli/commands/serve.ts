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
  REDIS_TIMEOUT_OPTION,
  SECRET_OPTION,
  gateLimitsFrom,
  healthFrom,
  inboxLimitsFrom,
  limitsFrom,
  redisTimeoutFrom,
  requireProductionSecret,
  secretFrom,
} from '../common.js';
import { Gate } from '../../gate/gate-server.js';
import { MemoryUserStore } from '../../users/memory-user-store.js';
import { PasswordHasher } from '../../auth/password.js';
import { MemoryInboxStore } from '../../inbox/memory-inbox-store.js';
import { RedisInboxStore } from '../../inbox/redis-inbox-store.js';
import { RedisSessionStore } from '../../session/redis-session-store.js';
import { ZooKeeperRegistry } from '../../registry/zk-registry.js';
import { SwitchboardError } from '../../errors.js';
import { redactRedisError } from '../../redis/redis-client.js';
import type { Logger } from '../../log.js';
import type { Redis } from 'ioredis';
import type { AddressInfo } from 'node:net';

function serveOptions(port: number) {
  return {
    host: { type: 'string', description: 'address to listen on', default: '127.0.0.1' },
    port: { type: 'number', description: 'TCP port for client connections', default: port },
    'announce-host': { type: 'string', description: 'address clients and peers should use to reach this worker (default: --host)' },
    'gate-port': { type: 'number', description: 'start only: HTTP port of the embedded gate', default: 8080 },
    'no-gate': { type: 'boolean', description: 'start only: run without the embedded gate' },
    dev: { type: 'boolean', description: 'development run: allow the built-in development secret in cluster mode' },
    ...SECRET_OPTION,
    ...LOG_OPTION,
    ...INBOX_OPTIONS,
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

function logRedis(redis: Redis, log: Logger): void {
  // Redacted: ioredis attaches the failed command to its errors, and AUTH's argument is the password.
  redis.on('error', (err: Error) => log.warn({ err: redactRedisError(err) }, 'redis connection error'));
  redis.on('ready', () => log.info('redis ready'));
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
  const inboxLimits = inboxLimitsFrom(o);
  const timeoutMs = redisTimeoutFrom(o);
  const health = healthFrom(o);
  const inbox = o.redis ? new RedisInboxStore({ url: o.redis, limits: inboxLimits, timeoutMs }) : new MemoryInboxStore(inboxLimits);
  if (inbox instanceof RedisInboxStore) logRedis(inbox.redis, log.child({ component: 'redis', store: 'inbox' }));
  const cluster = o.zk
    ? {
        store: new RedisSessionStore({ url: o.redis!, ttlMs: o['session-ttl-ms'], timeoutMs }),
        registry: new ZooKeeperRegistry({
          connect: o.zk,
          root: o['zk-root'],
          sessionTimeoutMs: o['zk-session-timeout-ms'],
          reconcileIntervalMs: o['reconcile-ms'],
          log: log.child({ component: 'zookeeper' }),
        }),
        settings: {
          secret: o['cluster-secret']!,
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
    store: cluster?.store,
    registry: cluster?.registry,
    cluster: cluster?.settings,
    online: o.zk ? { connect: o.zk, root: o['zk-root'], sessionTimeoutMs: o['zk-session-timeout-ms'] } : undefined,
    host: o.host,
    port: o.port,
    announceHost: o['announce-host'],
    secret: o.zk ? requireProductionSecret(o.secret, o.dev, log) : secretFrom(o.secret, log),
    limits: limitsFrom(o),
    health,
    log,
  });
  const info = await node.start();
  // `start` is a complete system: the gate runs in the same process, on the same stores.
  const gate =
    command === 'start' && !o['no-gate']
      ? new Gate({
          host: o.host,
          port: o['gate-port'],
          registry: node.registry,
          users: new MemoryUserStore(),
          signer: node.signer,
          hasher: new PasswordHasher(),
          online: async () => ({ users: node.server.sessions.users, sessions: node.server.sessions.size }),
          registration: !o['no-registration'],
          limits: gateLimitsFrom(o),
          log: log.child({ component: 'gate' }),
        })
      : undefined;
  let gateAddress: AddressInfo | undefined;
  try {
    gateAddress = await gate?.listen();
  } catch (err) {
    // The worker is up already: without this, a busy gate port left it running after the error.
    await node.stop();
    throw err;
  }
  if (command === 'start') {
    const gateUrl = gateAddress ? `http://${o.host}:${gateAddress.port}` : undefined;
    process.stderr.write(
      `\nswitchboard is running on ${info.host}:${info.port} (node ${info.id})${gateUrl ? `, gate ${gateUrl}` : ''}.\n` +
        (gateUrl
          ? `Chat from two terminals (register a password on first use):\n  npx switchboard chat --gate ${gateUrl} --user alice --register\n  npx switchboard chat --gate ${gateUrl} --user bob --register\n`
          : `Chat from two terminals:\n  npx switchboard chat --user alice --port ${info.port}\n  npx switchboard chat --user bob --port ${info.port}\n`) +
        `Native clients log in through POST ${gateUrl ?? '(gate off)'}/api/login, or with a token from: npx switchboard token --user alice\n\n`,
    );
  }
  await new Promise<void>((resolve) => {
    const stop = (signal: string) => {
      log.info({ signal }, 'shutting down');
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      Promise.resolve(gate?.close())
        .then(() => node.stop())
        .then(resolve, (err: unknown) => {
        log.error({ err }, 'shutdown failed');
        resolve();
      });
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });
}
