// Options several subcommands share, and what they turn into.

import { DEFAULT_LIMITS, type WorkerLimits } from '../config.js';
import { DEV_SECRET } from '../auth/token.js';
import { DEFAULT_INBOX_LIMITS, type InboxLimits } from '../inbox/inbox-store.js';
import { DEFAULT_MEMORY_INBOX_BYTES } from '../inbox/memory-inbox-store.js';
import { DEFAULT_CLUSTER_SETTINGS } from '../cluster/cluster.js';
import { DEFAULT_SESSION_TTL_MS } from '../session/session-store.js';
import { DEFAULT_GATE_LIMITS, type GateLimits } from '../gate/gate-server.js';
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
  'msg-rate': { type: 'number', description: 'chat messages per second one connection may send; 0: no limit', default: DEFAULT_LIMITS.messageRate },
  'msg-burst': { type: 'number', description: 'chat messages one connection may send at once above --msg-rate', default: DEFAULT_LIMITS.messageBurst },
  'user-msg-rate': { type: 'number', description: "chat messages per second one user's sessions on this worker may send together; 0: no limit", default: DEFAULT_LIMITS.userMessageRate },
  'user-msg-burst': { type: 'number', description: "chat messages one user's sessions on this worker may send at once", default: DEFAULT_LIMITS.userMessageBurst },
  'flood-refusals': { type: 'number', description: 'rate refusals within --flood-window-ms that close the connection (SB_ERR_FLOOD); 0: never', default: DEFAULT_LIMITS.floodRefusals },
  'flood-window-ms': { type: 'number', description: 'the window --flood-refusals are counted in', default: DEFAULT_LIMITS.floodWindowMs },
  'max-connections-per-ip': { type: 'number', description: 'connections one client address (IPv6: one /64) may hold; 0: no cap', default: DEFAULT_LIMITS.maxConnectionsPerIp },
  'max-unauthenticated': { type: 'number', description: 'connections not logged in yet; more are refused at accept; 0: no cap', default: DEFAULT_LIMITS.maxUnauthenticated },
  'recipient-cache-size': { type: 'number', description: 'recipients remembered as existing users', default: DEFAULT_LIMITS.recipientCacheSize },
} as const satisfies OptionSpecs;

export const RECIPIENT_OPTIONS = {
  'allow-unknown-recipients': {
    type: 'boolean',
    description: 'accept any recipient id, unchecked and as written (users live outside switchboard); default: recipients must have an account, names in lower case',
  },
} as const satisfies OptionSpecs;

export const INBOX_OPTIONS = {
  redis: { type: 'string', description: 'redis:// URL of the inbox store; unset: in memory (lost on exit)' },
  'inbox-max-messages': { type: 'number', description: 'messages kept per user inbox', default: DEFAULT_INBOX_LIMITS.maxMessages },
  'inbox-max-age-s': { type: 'number', description: 'messages older than this are pruned (seconds)', default: DEFAULT_INBOX_LIMITS.maxAgeMs / 1000 },
  'dedupe-window-s': { type: 'number', description: 'a resent msg_id within this window is stored once (seconds)', default: DEFAULT_INBOX_LIMITS.dedupeWindowMs / 1000 },
  'inbox-memory-mb': { type: 'number', description: 'in-memory inbox only: accounted MiB of all inboxes; appends past it are refused (SB_ERR_STORE_FULL)', default: DEFAULT_MEMORY_INBOX_BYTES / (1024 * 1024) },
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

export function inboxLimitsFrom(v: OptionValues<typeof INBOX_OPTIONS>): InboxLimits {
  return {
    maxMessages: v['inbox-max-messages'],
    maxAgeMs: v['inbox-max-age-s'] * 1000,
    dedupeWindowMs: v['dedupe-window-s'] * 1000,
  };
}

/** --inbox-memory-mb in bytes; at least one MiB (there is no unbounded memory inbox). */
export function memoryInboxBytesFrom(v: OptionValues<typeof INBOX_OPTIONS>): number {
  const mb = v['inbox-memory-mb'];
  if (mb < 1) throw new SwitchboardError('SB_ERR_CONFIG', `--inbox-memory-mb must be at least 1, got ${mb}`);
  return Math.floor(mb * 1024 * 1024);
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
    messageRate: v['msg-rate'],
    messageBurst: v['msg-burst'],
    userMessageRate: v['user-msg-rate'],
    userMessageBurst: v['user-msg-burst'],
    floodRefusals: v['flood-refusals'],
    floodWindowMs: v['flood-window-ms'],
    maxConnectionsPerIp: v['max-connections-per-ip'],
    maxUnauthenticated: v['max-unauthenticated'],
    recipientCacheSize: v['recipient-cache-size'],
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
