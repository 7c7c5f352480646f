// Options several subcommands share, and what they turn into.

import { DEFAULT_LIMITS, type WorkerLimits } from '../config.js';
import { DEV_SECRET } from '../auth/token.js';
import { DEFAULT_INBOX_LIMITS, type InboxLimits } from '../inbox/inbox-store.js';
import { DEFAULT_CLUSTER_SETTINGS } from '../cluster/cluster.js';
import { DEFAULT_SESSION_TTL_MS } from '../session/session-store.js';
import { DEFAULT_GATE_LIMITS, type GateLimits } from '../gate/gate-server.js';
import { DEFAULT_PROBE_SETTINGS, type ProbeSettings } from '../gate/worker-probe.js';
import { DEFAULT_HEALTH_SETTINGS, type HealthSettings } from '../server/store-health.js';
import { DEFAULT_REDIS_TIMEOUT_MS } from '../redis/redis-client.js';
import { SwitchboardError } from '../errors.js';
import type { Logger } from '../log.js';
import type { OptionSpecs, OptionValues } from './options.js';

export const SECRET_OPTION = {
  secret: { type: 'string', description: 'token signing secret shared by every node and the gate; unset: a built-in development secret' },
} as const satisfies OptionSpecs;

export const LOG_OPTION = {
  'log-level': { type: 'string', description: 'fatal, error, warn, info, debug, trace or silent', default: 'info' },
} as const satisfies OptionSpecs;

export const LIMIT_OPTIONS = {
  'max-frame-length': { type: 'number', description: 'largest accepted frame body, bytes', default: DEFAULT_LIMITS.maxFrameLength },
  'login-timeout-ms': { type: 'number', description: 'close connections not logged in after this long', default: DEFAULT_LIMITS.loginTimeoutMs },
  'heartbeat-interval-ms': { type: 'number', description: 'expected client heartbeat interval', default: DEFAULT_LIMITS.heartbeatIntervalMs },
  'idle-intervals': { type: 'number', description: 'close a connection silent for this many heartbeat intervals', default: DEFAULT_LIMITS.idleIntervals },
  'max-devices': { type: 'number', description: 'sessions (devices) one user may hold at once', default: DEFAULT_LIMITS.maxDevicesPerUser },
  'max-outbound-bytes': { type: 'number', description: 'unsent output that marks a slow consumer, bytes', default: DEFAULT_LIMITS.maxOutboundBytes },
  'drain-timeout-ms': { type: 'number', description: 'close a connection whose output stays undrained this long', default: DEFAULT_LIMITS.drainTimeoutMs },
  'prelogin-queue': { type: 'number', description: 'frames accepted while a login is being processed', default: DEFAULT_LIMITS.preLoginQueueLimit },
  'inbound-queue': { type: 'number', description: 'frames queued behind a busy handler before reading pauses', default: DEFAULT_LIMITS.inboundQueueLimit },
  'close-grace-ms': { type: 'number', description: 'time a closing connection gets to flush its last frame', default: DEFAULT_LIMITS.closeGraceMs },
  'ack-timeout-ms': { type: 'number', description: 'resend deliveries a device has not acknowledged after this long', default: DEFAULT_LIMITS.ackTimeoutMs },
  'sync-batch': { type: 'number', description: 'messages per inbox read when replaying', default: DEFAULT_LIMITS.syncBatchSize },
  'session-refresh-ms': { type: 'number', description: 'how often a worker refreshes its session records', default: DEFAULT_LIMITS.sessionRefreshMs },
} as const satisfies OptionSpecs;

export const INBOX_OPTIONS = {
  redis: { type: 'string', description: 'redis:// URL of the inbox store; unset: in memory (lost on exit)' },
  'inbox-max-messages': { type: 'number', description: 'messages kept per user inbox', default: DEFAULT_INBOX_LIMITS.maxMessages },
  'inbox-max-age-s': { type: 'number', description: 'messages older than this are pruned (seconds)', default: DEFAULT_INBOX_LIMITS.maxAgeMs / 1000 },
  'dedupe-window-s': { type: 'number', description: 'a resent msg_id within this window is stored once (seconds)', default: DEFAULT_INBOX_LIMITS.dedupeWindowMs / 1000 },
} as const satisfies OptionSpecs;

export const CLUSTER_OPTIONS = {
  zk: { type: 'string', description: 'ZooKeeper connect string (host:port,...): join a cluster; needs --redis and --cluster-secret' },
  'zk-root': { type: 'string', description: 'ZooKeeper path under which workers register', default: '/switchboard' },
  'zk-session-timeout-ms': { type: 'number', description: 'ZooKeeper session timeout: a crashed worker leaves the registry after it', default: 10_000 },
  'cluster-secret': { type: 'string', description: 'secret every worker of the cluster shares: authenticates peer links' },
  'peer-reconnect-ms': { type: 'number', description: 'delay between connection attempts to a registered peer', default: DEFAULT_CLUSTER_SETTINGS.peerReconnectMs },
  'peer-queue': { type: 'number', description: 'frames kept per peer while its link is down', default: DEFAULT_CLUSTER_SETTINGS.peerQueueLimit },
  'route-cache-ttl-ms': { type: 'number', description: 'how long a user → workers route is cached', default: DEFAULT_CLUSTER_SETTINGS.routeCacheTtlMs },
  'route-cache-size': { type: 'number', description: 'users kept in the route cache', default: DEFAULT_CLUSTER_SETTINGS.routeCacheSize },
  'session-ttl-ms': { type: 'number', description: 'a session record not refreshed this long expires', default: DEFAULT_SESSION_TTL_MS },
  'reconcile-ms': { type: 'number', description: 'full registry re-read that repairs a missed watch', default: 30_000 },
} as const satisfies OptionSpecs;

export const REDIS_TIMEOUT_OPTION = {
  'redis-timeout-ms': { type: 'number', description: 'a Redis command not answered within this fails with SB_ERR_STORE_UNAVAILABLE', default: DEFAULT_REDIS_TIMEOUT_MS },
} as const satisfies OptionSpecs;

export const HEALTH_OPTIONS = {
  'health-interval-ms': { type: 'number', description: 'how often a worker checks that its stores answer', default: DEFAULT_HEALTH_SETTINGS.intervalMs },
  'health-failures': { type: 'number', description: 'failed store checks in a row that make a worker unready (no new logins)', default: DEFAULT_HEALTH_SETTINGS.failures },
} as const satisfies OptionSpecs;

export const PROBE_OPTIONS = {
  'probe-interval-ms': { type: 'number', description: 'how often the gate probes each worker (connect, heartbeat, echo)', default: DEFAULT_PROBE_SETTINGS.intervalMs },
  'probe-timeout-ms': { type: 'number', description: 'a worker whose probe is not answered within this is not handed out', default: DEFAULT_PROBE_SETTINGS.timeoutMs },
} as const satisfies OptionSpecs;

/** Checked before any connection is opened: a refused flag must not leave one behind. */
export function redisTimeoutFrom(v: OptionValues<typeof REDIS_TIMEOUT_OPTION>): number {
  return atLeastOne('redis-timeout-ms', v['redis-timeout-ms']);
}

export function healthFrom(v: OptionValues<typeof HEALTH_OPTIONS>): HealthSettings {
  return { intervalMs: atLeastOne('health-interval-ms', v['health-interval-ms']), failures: Math.floor(atLeastOne('health-failures', v['health-failures'])) };
}

export function probeFrom(v: OptionValues<typeof PROBE_OPTIONS>): ProbeSettings {
  return { ...DEFAULT_PROBE_SETTINGS, intervalMs: atLeastOne('probe-interval-ms', v['probe-interval-ms']), timeoutMs: atLeastOne('probe-timeout-ms', v['probe-timeout-ms']) };
}

function atLeastOne(flag: string, value: number): number {
  if (value < 1) throw new SwitchboardError('SB_ERR_CONFIG', `--${flag} must be at least 1, got ${value}`);
  return value;
}

export function inboxLimitsFrom(v: OptionValues<typeof INBOX_OPTIONS>): InboxLimits {
  return {
    maxMessages: v['inbox-max-messages'],
    maxAgeMs: v['inbox-max-age-s'] * 1000,
    dedupeWindowMs: v['dedupe-window-s'] * 1000,
  };
}

export function limitsFrom(v: OptionValues<typeof LIMIT_OPTIONS>): WorkerLimits {
  return {
    maxFrameLength: v['max-frame-length'],
    loginTimeoutMs: v['login-timeout-ms'],
    heartbeatIntervalMs: v['heartbeat-interval-ms'],
    idleIntervals: v['idle-intervals'],
    maxDevicesPerUser: v['max-devices'],
    maxOutboundBytes: v['max-outbound-bytes'],
    drainTimeoutMs: v['drain-timeout-ms'],
    preLoginQueueLimit: v['prelogin-queue'],
    inboundQueueLimit: v['inbound-queue'],
    closeGraceMs: v['close-grace-ms'],
    ackTimeoutMs: v['ack-timeout-ms'],
    syncBatchSize: v['sync-batch'],
    sessionRefreshMs: v['session-refresh-ms'],
  };
}

export const GATE_OPTIONS = {
  'token-ttl-s': { type: 'number', description: 'validity of the tokens the gate issues (seconds)', default: DEFAULT_GATE_LIMITS.tokenTtlMs / 1000 },
  'no-registration': { type: 'boolean', description: 'switch POST /api/users off' },
  'rate-ip': { type: 'number', description: 'login and registration requests per IP per minute', default: DEFAULT_GATE_LIMITS.perIp.max },
  'rate-user': { type: 'number', description: 'login attempts per user name per minute', default: DEFAULT_GATE_LIMITS.perUser.max },
} as const satisfies OptionSpecs;

export function gateLimitsFrom(v: OptionValues<typeof GATE_OPTIONS>): GateLimits {
  return {
    ...DEFAULT_GATE_LIMITS,
    tokenTtlMs: v['token-ttl-s'] * 1000,
    perIp: { max: v['rate-ip'], windowMs: 60_000 },
    perUser: { max: v['rate-user'], windowMs: 60_000 },
  };
}

/**
 * Cluster mode refuses the public development secret unless told this is a development run
 * (`--dev`): a token signed with it is a token anyone can make.
 */
export function requireProductionSecret(secret: string | undefined, dev: boolean, log: Logger): string {
  if (secret) return secret;
  if (!dev) throw new SwitchboardError('SB_ERR_CONFIG', 'cluster mode needs --secret (or SWITCHBOARD_SECRET); pass --dev to use the built-in development secret');
  return secretFrom(secret, log);
}

/** The configured secret, or the development one with a warning. */
export function secretFrom(secret: string | undefined, log: Logger): string {
  if (secret) return secret;
  log.warn('no --secret or SWITCHBOARD_SECRET given: using the built-in development secret, never do this in production');
  return DEV_SECRET;
}
