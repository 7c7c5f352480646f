// Options several subcommands share, and what they turn into.

import { DEFAULT_LIMITS, type WorkerLimits } from '../config.js';
import { DEV_SECRET, parseTokenKeys, type TokenKeys } from '../auth/token.js';
import { readFileSync } from 'node:fs';
import { DEFAULT_REVOCATION_CHECK_MS } from '../server/revocation-check.js';
import { DEFAULT_INBOX_LIMITS, type InboxLimits } from '../inbox/inbox-store.js';
import { DEFAULT_MEMORY_INBOX_BYTES } from '../inbox/memory-inbox-store.js';
import { DEFAULT_CLUSTER_SETTINGS } from '../cluster/cluster.js';
import { DEFAULT_SESSION_TTL_MS } from '../session/session-store.js';
import { DEFAULT_GATE_LIMITS, type GateLimits } from '../gate/web-gate.js';
import { DEFAULT_PROBE_SETTINGS, type ProbeSettings } from '../gate/worker-probe.js';
import { DEFAULT_HEALTH_SETTINGS, type HealthSettings } from '../server/store-health.js';
import { DEFAULT_REDIS_TIMEOUT_MS, type RedisTarget } from '../redis/redis-client.js';
import { DEFAULT_GROUP_LIMITS, type GroupLimits } from '../groups/group-store.js';
import { SwitchboardError } from '../errors.js';
import { isIP } from 'node:net';
import { networkInterfaces } from 'node:os';
import type { Logger } from '../log.js';
import { parseDigestAuth, parseDigestIds } from '../registry/cluster-acl.js';
import type { ZooKeeperDigestAuth } from '../registry/zookeeper-client.js';
import { MAX_TIMER_MS, NON_EMPTY, PORT, count, envOf, ms, type OptionSpecs, type OptionValues } from './options.js';
import { pino, type LevelWithSilent } from 'pino';
import type { WorkerConfig } from '../node.js';

/** Where an option binds or connects: an IP address or a host name, never `host:port`. */
const HOST_CHECK = {
  check: {
    test: (v: string) => isIP(v) !== 0 || /^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/.test(v),
    allowed: 'an IP address or a host name (no port)',
  },
} as const;

/** 365 days: the longest a login may last (--refresh-ttl-s, --refresh-idle-s). */
export const MAX_REFRESH_TTL_S = 365 * 86_400;

export const NETWORK_OPTIONS = {
  host: { type: 'string', group: 'network', ...HOST_CHECK, description: 'address to listen on; 0.0.0.0 or :: for every interface (then set --announce-host)', default: '127.0.0.1' },
  'announce-host': { type: 'string', group: 'network', ...HOST_CHECK, description: 'address clients and peers are told to reach this worker at (default: --host; 127.0.0.1 when --host is 0.0.0.0 or ::)' },
} as const satisfies OptionSpecs;

export const SECRET_OPTION = {
  secret: { type: 'string', group: 'secrets', secret: true, description: 'token signing secret shared by every node and the gate, at least 32 characters (the one token key, id "default"); unset: a built-in development secret' },
  'token-keys': { type: 'string', group: 'secrets', description: 'instead of --secret: a file of token keys, one "<key id> <secret>" per line; every key is accepted, --token-signing-key signs (OPERATIONS.md: rotating the token keys)' },
  'token-signing-key': { type: 'string', group: 'secrets', description: 'with --token-keys: the id of the key new tokens are signed with (default: the first in the file)' },
} as const satisfies OptionSpecs;

/** The workers' periodic revocation check: on `start` and `worker`. */
export const REVOCATION_OPTION = {
  'revocation-check-ms': { ...ms(100), group: 'limits', description: "how often every session is checked against the stored revocations: the bound on closing a revoked user's sessions when the announcement was lost", default: DEFAULT_REVOCATION_CHECK_MS },
} as const satisfies OptionSpecs;

export const DEV_OPTION = {
  dev: { type: 'boolean', group: 'secrets', description: 'development mode: allow the built-in development secret, shorter secrets and tokens valid up to 365 days' },
} as const satisfies OptionSpecs;

/** pino's levels, most severe first, and `silent`. */
export const LOG_LEVELS = [...Object.entries(pino.levels.values).sort(([, a], [, b]) => b - a).map(([name]) => name), 'silent'] as LevelWithSilent[];

export const LOG_OPTION = {
  'log-level': { type: 'string', group: 'logging', choices: LOG_LEVELS, description: 'least severe level logged (JSON lines on stdout)', default: 'info' },
} as const satisfies OptionSpecs;

export const LIMIT_OPTIONS = {
  'max-frame-length': { ...count(256, 16 * 1024 * 1024), group: 'limits', description: 'largest accepted frame body, bytes', default: DEFAULT_LIMITS.maxFrameLength },
  'login-timeout-ms': { ...ms(), group: 'limits', description: 'close connections not logged in after this long', default: DEFAULT_LIMITS.loginTimeoutMs },
  'heartbeat-interval-ms': { ...ms(), group: 'limits', description: 'expected client heartbeat interval', default: DEFAULT_LIMITS.heartbeatIntervalMs },
  'idle-intervals': { ...count(1, 1000), group: 'limits', description: 'close a connection silent for this many heartbeat intervals', default: DEFAULT_LIMITS.idleIntervals },
  'max-devices': { ...count(1, 1000), group: 'limits', description: 'sessions (devices) one user may hold at once', default: DEFAULT_LIMITS.maxDevicesPerUser },
  'max-outbound-bytes': { ...count(1), group: 'limits', description: 'unsent output that marks a slow consumer, bytes', default: DEFAULT_LIMITS.maxOutboundBytes },
  'drain-timeout-ms': { ...ms(), group: 'limits', description: 'close a connection whose output stays undrained this long', default: DEFAULT_LIMITS.drainTimeoutMs },
  'prelogin-queue': { ...count(0, 10_000), group: 'limits', description: 'frames accepted while a login is being processed', default: DEFAULT_LIMITS.preLoginQueueLimit },
  'inbound-queue': { ...count(1, 1_000_000), group: 'limits', description: 'frames queued behind a busy handler before reading pauses', default: DEFAULT_LIMITS.inboundQueueLimit },
  'close-grace-ms': { ...ms(0), group: 'limits', description: 'time a closing connection gets to flush its last frame', default: DEFAULT_LIMITS.closeGraceMs },
  'ack-timeout-ms': { ...ms(), group: 'limits', description: 'resend deliveries a device has not acknowledged after this long', default: DEFAULT_LIMITS.ackTimeoutMs },
  'recall-window-s': { ...count(0, 7 * 86_400), group: 'limits', description: 'a sender may recall a 1:1 message this long after it was stored (seconds); 0: recall is off', default: DEFAULT_LIMITS.recallWindowMs / 1000 },
  'edit-window-s': { ...count(0, 7 * 86_400), group: 'limits', description: 'a sender may edit a 1:1 message this long after it was stored (seconds); 0: edit is off', default: DEFAULT_LIMITS.editWindowMs / 1000 },
  'sync-batch': { ...count(1, 10_000), group: 'limits', description: 'messages per inbox read when replaying', default: DEFAULT_LIMITS.syncBatchSize },
  'session-refresh-ms': { ...ms(), group: 'limits', description: 'how often a worker refreshes its session records', default: DEFAULT_LIMITS.sessionRefreshMs },
  'msg-rate': { type: 'number', min: 0, group: 'limits', description: 'chat messages per second one connection may send; 0: no limit', default: DEFAULT_LIMITS.messageRate },
  'msg-burst': { ...count(1), group: 'limits', description: 'chat messages one connection may send at once above --msg-rate', default: DEFAULT_LIMITS.messageBurst },
  'user-msg-rate': { type: 'number', min: 0, group: 'limits', description: "chat messages per second one user's sessions on this worker may send together; 0: no limit", default: DEFAULT_LIMITS.userMessageRate },
  'user-msg-burst': { ...count(1), group: 'limits', description: "chat messages one user's sessions on this worker may send at once", default: DEFAULT_LIMITS.userMessageBurst },
  'flood-refusals': { ...count(0), group: 'limits', description: 'rate refusals within --flood-window-ms that close the connection (SB_ERR_FLOOD); 0: never', default: DEFAULT_LIMITS.floodRefusals },
  'flood-window-ms': { ...ms(), group: 'limits', description: 'the window --flood-refusals are counted in', default: DEFAULT_LIMITS.floodWindowMs },
  'max-connections-per-ip': { ...count(0), group: 'limits', description: 'connections one client address (IPv6: one /64) may hold; 0: no cap', default: DEFAULT_LIMITS.maxConnectionsPerIp },
  'max-unauthenticated': { ...count(0), group: 'limits', description: 'connections not logged in yet; at the cap the longest waiting is shed for a new one; 0: no cap', default: DEFAULT_LIMITS.maxUnauthenticated },
  'recipient-cache-size': { ...count(1), group: 'limits', description: 'recipients remembered as existing users', default: DEFAULT_LIMITS.recipientCacheSize },
  'group-sync-new': { ...count(0, 10_000), group: 'limits', description: "entries of each group a device with no saved position there gets at login (the group's latest)", default: DEFAULT_LIMITS.groupSyncNew },
  'group-fanout-slice': { ...count(1, 1_000_000), group: 'limits', description: 'group deliveries written per turn of the event loop; a larger fan-out continues on the next turn', default: DEFAULT_LIMITS.groupFanoutSlice },
  'group-fanout-queue': { ...count(1), group: 'limits', description: "group deliveries waiting to be written at most; beyond, devices read the entry from the group's log", default: DEFAULT_LIMITS.groupFanoutQueue },
  'no-own-copies': { type: 'boolean', group: 'limits', description: "keep no copy of a chat message in its sender's inbox: the sender's other devices never see it (halves the inbox writes per message)" },
} as const satisfies OptionSpecs;

/** The group store's limits: on `start`, `worker` and `gate` (every process that changes groups), the same on each. */
export const GROUP_OPTIONS = {
  'group-max-members': { ...count(2, 1_000_000), group: 'stores', description: 'members of one group, the owner included', default: DEFAULT_GROUP_LIMITS.maxMembers },
  'group-max-per-user': { ...count(1, 1_000_000), group: 'stores', description: 'groups one user may be a member of at once (SB_ERR_GROUP_TOO_MANY beyond)', default: DEFAULT_GROUP_LIMITS.maxGroupsPerUser },
  'group-max-entries': { ...count(1, 10_000_000), group: 'stores', description: 'entries (messages and events) kept per group; older ones are pruned', default: DEFAULT_GROUP_LIMITS.maxEntries },
  'group-max-age-s': { ...count(1, 10 * 365 * 86_400), group: 'stores', description: 'group entries older than this are pruned (seconds)', default: DEFAULT_GROUP_LIMITS.maxAgeMs / 1000 },
} as const satisfies OptionSpecs;

/** The group store's limits from their flags (the rest at DEFAULT_GROUP_LIMITS). */
export function groupLimitsFrom(v: OptionValues<typeof GROUP_OPTIONS>): Partial<GroupLimits> {
  return {
    maxMembers: v['group-max-members'],
    maxGroupsPerUser: v['group-max-per-user'],
    maxEntries: v['group-max-entries'],
    maxAgeMs: v['group-max-age-s'] * 1000,
  };
}

export const RECIPIENT_OPTIONS = {
  'allow-unknown-recipients': {
    type: 'boolean',
    group: 'stores',
    description: 'accept any user id as a message recipient or group member, unchecked and as written (users live outside switchboard); default: they must have an account, names in lower case',
  },
} as const satisfies OptionSpecs;

const isRedisUrl = (v: string) => URL.canParse(v) && ['redis:', 'rediss:'].includes(new URL(v).protocol);

const REDIS_URL = {
  check: {
    // Several, comma-separated, are a Redis Cluster's seed nodes (with --redis-cluster).
    test: (v: string) => v.split(',').every(isRedisUrl),
    allowed: 'a redis:// or rediss:// URL (with --redis-cluster: one or more, comma-separated)',
  },
} as const;

export const REDIS_OPTION = {
  redis: { type: 'string', group: 'stores', secret: true, ...REDIS_URL, description: 'redis://[user:password@]host:port[/db] of the inbox store and the accounts; unset: in memory (lost on exit)' },
  'redis-cluster': { type: 'boolean', group: 'stores', description: "--redis names a Redis Cluster: some of its nodes, comma-separated (redis://host:port,redis://host:port); the first one's user and password apply to every node" },
} as const satisfies OptionSpecs;

/** Where the Redis stores live: --redis, a Redis Cluster with --redis-cluster. */
export function redisTargetFrom(o: { redis?: string | undefined; 'redis-cluster'?: boolean | undefined }): RedisTarget | undefined {
  if (o.redis === undefined) {
    if (o['redis-cluster']) throw new SwitchboardError('SB_ERR_CONFIG', '--redis-cluster needs --redis: the cluster\'s seed nodes');
    return undefined;
  }
  const urls = o.redis.split(',');
  if (!o['redis-cluster']) {
    if (urls.length > 1) throw new SwitchboardError('SB_ERR_CONFIG', '--redis names one Redis; several comma-separated URLs are the seed nodes of a Redis Cluster: add --redis-cluster');
    return o.redis;
  }
  for (const url of urls) {
    const path = new URL(url).pathname;
    if (path !== '' && path !== '/' && path !== '/0') throw new SwitchboardError('SB_ERR_CONFIG', '--redis-cluster: a Redis Cluster has database 0 only, so its URLs take no /db');
  }
  return { cluster: urls };
}

export const REDIS_PREFIX_OPTION = {
  'redis-prefix': { type: 'string', group: 'stores', description: 'prefix of every Redis key switchboard uses (what a Redis ACL user is limited to)', default: 'sb:' },
} as const satisfies OptionSpecs;

export const INBOX_OPTIONS = {
  ...REDIS_OPTION,
  ...REDIS_PREFIX_OPTION,
  'inbox-max-messages': { ...count(1), group: 'stores', description: 'messages kept per user inbox', default: DEFAULT_INBOX_LIMITS.maxMessages },
  'inbox-max-age-s': { ...count(1, 10 * 365 * 86_400), group: 'stores', description: 'messages older than this are pruned (seconds)', default: DEFAULT_INBOX_LIMITS.maxAgeMs / 1000 },
  'dedupe-window-s': { ...count(1, 10 * 365 * 86_400), group: 'stores', description: 'a resent msg_id within this window is stored once (seconds)', default: DEFAULT_INBOX_LIMITS.dedupeWindowMs / 1000 },
  'inbox-memory-mb': { type: 'number', min: 1, max: 1024 * 1024, group: 'stores', description: 'in-memory inbox only: accounted MiB of all inboxes; appends past it are refused (SB_ERR_STORE_FULL)', default: DEFAULT_MEMORY_INBOX_BYTES / (1024 * 1024) },
} as const satisfies OptionSpecs;

/** A ZooKeeper connect string: host:port[,host:port...][/chroot]. */
const ZK_CONNECT = {
  check: {
    test: (v: string) => {
      const [hosts = '', ...chroot] = v.split('/');
      return (chroot.length === 0 || chroot.every((p) => p !== '')) && hosts.split(',').every((h) => /^[^\s,]+:(\d{1,5})$/.test(h) && Number(h.slice(h.lastIndexOf(':') + 1)) >= 1 && Number(h.slice(h.lastIndexOf(':') + 1)) <= 65_535);
    },
    allowed: 'host:port[,host:port...] (ZooKeeper servers, ports 1 to 65535)',
  },
} as const;

const ZK_ROOT = {
  check: { test: (v: string) => /^(\/[^/\s]+)+$/.test(v) && !v.split('/').some((p) => p === '.' || p === '..'), allowed: 'an absolute ZooKeeper path without a trailing / (e.g. /switchboard)' },
} as const;

export const ZK_OPTIONS = {
  zk: { type: 'string', group: 'cluster', ...ZK_CONNECT, description: 'ZooKeeper connect string (host:port,...): join a cluster; needs --redis and --cluster-secret' },
  'zk-root': { type: 'string', group: 'cluster', ...ZK_ROOT, description: 'ZooKeeper path under which workers register', default: '/switchboard' },
  'zk-auth': { type: 'string', group: 'cluster', secret: true, description: 'ZooKeeper digest identity user:password, the same on every worker: only it can change what the workers create; required with --zk unless --dev' },
} as const satisfies OptionSpecs;

/** The worker's TLS client port (`start` and `worker`). */
export const TLS_OPTIONS = {
  'tls-port': { ...PORT, group: 'tls', description: 'TCP port for TLS client connections, beside --port (as MQTT brokers keep 8883 beside 1883); needs --tls-cert and --tls-key; unset: no TLS port' },
  'tls-cert': { type: 'string', group: 'tls', ...NON_EMPTY, description: "PEM file of the worker's certificate chain (the TLS port's; the peer links' too unless --peer-tls-cert); re-read on SIGHUP" },
  'tls-key': { type: 'string', group: 'tls', ...NON_EMPTY, description: 'PEM file of the private key of --tls-cert; re-read on SIGHUP' },
  'no-plain-port': { type: 'boolean', group: 'tls', description: 'no plaintext client port: clients connect over TLS only (needs --tls-port; the worker registers port 0)' },
  'announce-tls-port': { ...PORT, min: 1, group: 'tls', description: 'TLS port a load balancer terminates for this worker at --announce-host (forwarding to --port): announced as its TLS port; default --tls-port' },
} as const satisfies OptionSpecs;

/** The gate's HTTPS (`gate`; `start` has them as --gate-tls-cert and --gate-tls-key, the same variables). */
export const GATE_TLS_OPTIONS = {
  'tls-cert': { type: 'string', group: 'tls', ...NON_EMPTY, env: 'SWITCHBOARD_GATE_TLS_CERT', description: "PEM file of the gate's certificate chain: the gate serves HTTPS; re-read on SIGHUP" },
  'tls-key': { type: 'string', group: 'tls', ...NON_EMPTY, env: 'SWITCHBOARD_GATE_TLS_KEY', description: 'PEM file of the private key of --tls-cert' },
} as const satisfies OptionSpecs;

/** The gate's certificate and key, both or neither (`prefix`: the flags' names, for the error). */
export function gateTlsFrom(cert: string | undefined, key: string | undefined, prefix: string): { cert: string; key: string } | undefined {
  if ((cert === undefined) !== (key === undefined)) throw new SwitchboardError('SB_ERR_CONFIG', `--${prefix}-cert and --${prefix}-key go together`);
  return cert === undefined ? undefined : { cert, key: key! };
}

/**
 * SIGHUP re-reads the process's TLS files (Switchboard.reloadTls logs each outcome); returns
 * what stops listening. Only a process with TLS files listens: elsewhere SIGHUP keeps its
 * default, ending the process as when its terminal closes.
 */
export function reloadOnHangup(switchboard: { reloadTls(): unknown }, log: Logger): () => void {
  const reload = () => {
    log.info({ signal: 'SIGHUP' }, 'reloading the TLS files');
    switchboard.reloadTls();
  };
  process.on('SIGHUP', reload);
  return () => process.off('SIGHUP', reload);
}

/** TLS on the peer links (`worker` in cluster mode). */
export const PEER_TLS_OPTIONS = {
  'peer-tls': { type: 'string', group: 'tls', choices: ['off', 'ca', 'mutual'], description: "TLS on the peer links: ca (the acceptor shows a certificate of --peer-ca, the dialer is proven by the cluster secret), mutual (both show one), off", default: 'off' },
  'peer-ca': { type: 'string', group: 'tls', ...NON_EMPTY, description: "PEM file of the cluster's CA: peers' certificates must be issued by it; re-read on SIGHUP" },
  'peer-tls-cert': { type: 'string', group: 'tls', ...NON_EMPTY, description: "PEM file of this worker's certificate on the peer links (default --tls-cert): must name its --announce-host" },
  'peer-tls-key': { type: 'string', group: 'tls', ...NON_EMPTY, description: 'PEM file of the private key of --peer-tls-cert (default --tls-key)' },
} as const satisfies OptionSpecs;

/** The worker's TLS port and peer TLS from their flags, each pair checked complete. */
export function workerTlsFrom(v: OptionValues<typeof TLS_OPTIONS> & Partial<OptionValues<typeof PEER_TLS_OPTIONS>>, port: number): Pick<WorkerConfig, 'plain' | 'tls' | 'peerTls' | 'announceTlsPort'> {
  const fail = (message: string): never => {
    throw new SwitchboardError('SB_ERR_CONFIG', message);
  };
  const cert = v['tls-cert'];
  const key = v['tls-key'];
  if ((cert === undefined) !== (key === undefined)) fail('--tls-cert and --tls-key go together');
  const tlsPort = v['tls-port'];
  if (tlsPort !== undefined && cert === undefined) fail('--tls-port needs --tls-cert and --tls-key');
  if (tlsPort !== undefined && tlsPort !== 0 && tlsPort === port) fail(`--tls-port and --port must differ, both are ${port}`);
  if (v['no-plain-port'] && tlsPort === undefined) fail('--no-plain-port needs --tls-port: a worker needs a client port');
  const out: Pick<WorkerConfig, 'plain' | 'tls' | 'peerTls' | 'announceTlsPort'> = { plain: !v['no-plain-port'] };
  if (v['announce-tls-port'] !== undefined) out.announceTlsPort = v['announce-tls-port'];
  if (tlsPort !== undefined) out.tls = { port: tlsPort, cert: cert!, key: key! };
  const mode = v['peer-tls'] ?? 'off';
  if (mode === 'off') {
    if (v['peer-ca'] !== undefined || v['peer-tls-cert'] !== undefined || v['peer-tls-key'] !== undefined) fail('--peer-ca, --peer-tls-cert and --peer-tls-key need --peer-tls ca or mutual');
    return out;
  }
  const peerCert = v['peer-tls-cert'] ?? cert;
  const peerKey = v['peer-tls-key'] ?? key;
  if (v['peer-ca'] === undefined) fail(`--peer-tls ${mode} needs --peer-ca (the cluster's CA)`);
  if (peerCert === undefined || peerKey === undefined) fail(`--peer-tls ${mode} needs a certificate and key: --peer-tls-cert and --peer-tls-key, or --tls-cert and --tls-key`);
  out.peerTls = { mode: mode as 'ca' | 'mutual', cert: peerCert!, key: peerKey!, ca: v['peer-ca']! };
  return out;
}

export const CLUSTER_OPTIONS = {
  ...ZK_OPTIONS,
  'zk-session-timeout-ms': { ...ms(), group: 'cluster', description: 'ZooKeeper session timeout: a crashed worker leaves the registry after it', default: 10_000 },
  'zk-readers': { type: 'string', group: 'cluster', description: 'ZooKeeper digest ids (user:base64(sha1(user:password)), comma-separated) granted read access: the gates\'' },
  'cluster-secret': { type: 'string', group: 'cluster', secret: true, description: 'secret every worker of the cluster shares, at least 32 characters: authenticates peer links' },
  'peer-port': { ...PORT, group: 'cluster', description: 'TCP port for links from other workers, announced in the registry; 0 picks a free one', default: DEFAULT_CLUSTER_SETTINGS.peerPort },
  'peer-host': { type: 'string', group: 'cluster', ...HOST_CHECK, description: 'address the peer port listens on (default: --host)' },
  'peer-handshake-timeout-ms': { ...ms(), group: 'cluster', description: 'close peer-port connections that have not completed the handshake after this long', default: DEFAULT_CLUSTER_SETTINGS.peerHandshakeTimeoutMs },
  'peer-max-pending': { ...count(1), group: 'cluster', description: 'peer-port connections still in the handshake at once; more are refused', default: DEFAULT_CLUSTER_SETTINGS.peerMaxPending },
  'peer-reconnect-ms': { ...ms(), group: 'cluster', description: 'delay between connection attempts to a registered peer', default: DEFAULT_CLUSTER_SETTINGS.peerReconnectMs },
  'peer-queue': { ...count(1), group: 'cluster', description: 'frames kept per peer while its link is down', default: DEFAULT_CLUSTER_SETTINGS.peerQueueLimit },
  'route-cache-ttl-ms': { ...ms(), group: 'cluster', description: 'how long a user → workers route is cached', default: DEFAULT_CLUSTER_SETTINGS.routeCacheTtlMs },
  'route-cache-size': { ...count(1), group: 'cluster', description: 'users kept in the route cache', default: DEFAULT_CLUSTER_SETTINGS.routeCacheSize },
  'session-ttl-ms': { ...ms(), group: 'cluster', description: 'a session record not refreshed this long expires', default: DEFAULT_SESSION_TTL_MS },
  'reconcile-ms': { ...ms(), group: 'cluster', description: 'full registry re-read that repairs a missed watch', default: 30_000 },
} as const satisfies OptionSpecs;

export const REDIS_TIMEOUT_OPTION = {
  'redis-timeout-ms': { ...ms(), group: 'stores', description: 'a Redis command not answered within this fails with SB_ERR_STORE_UNAVAILABLE', default: DEFAULT_REDIS_TIMEOUT_MS },
} as const satisfies OptionSpecs;

export const HEALTH_OPTIONS = {
  'health-interval-ms': { ...ms(), group: 'stores', description: 'how often a worker checks that its stores answer', default: DEFAULT_HEALTH_SETTINGS.intervalMs },
  'health-failures': { ...count(1, 1000), group: 'stores', description: 'failed store checks in a row that make a worker unready (no new logins)', default: DEFAULT_HEALTH_SETTINGS.failures },
} as const satisfies OptionSpecs;

export const PROBE_OPTIONS = {
  'probe-interval-ms': { ...ms(), group: 'gate', description: 'how often the gate probes each worker (connect, heartbeat, echo)', default: DEFAULT_PROBE_SETTINGS.intervalMs },
  'probe-timeout-ms': { ...ms(), group: 'gate', description: 'a worker whose probe is not answered within this is not handed out', default: DEFAULT_PROBE_SETTINGS.timeoutMs },
} as const satisfies OptionSpecs;

// The ranges are the parser's (options.ts): these only shape the values.
export function redisTimeoutFrom(v: OptionValues<typeof REDIS_TIMEOUT_OPTION>): number {
  return v['redis-timeout-ms'];
}

export function healthFrom(v: OptionValues<typeof HEALTH_OPTIONS>): HealthSettings {
  return { intervalMs: v['health-interval-ms'], failures: v['health-failures'] };
}

export function probeFrom(v: OptionValues<typeof PROBE_OPTIONS>): ProbeSettings {
  return { ...DEFAULT_PROBE_SETTINGS, intervalMs: v['probe-interval-ms'], timeoutMs: v['probe-timeout-ms'] };
}

export function inboxLimitsFrom(v: Pick<OptionValues<typeof INBOX_OPTIONS>, 'inbox-max-messages' | 'inbox-max-age-s' | 'dedupe-window-s'>): InboxLimits {
  return {
    maxMessages: v['inbox-max-messages'],
    maxAgeMs: v['inbox-max-age-s'] * 1000,
    dedupeWindowMs: v['dedupe-window-s'] * 1000,
  };
}

/** --inbox-memory-mb in bytes; at least one MiB (there is no unbounded memory inbox). */
export function memoryInboxBytesFrom(v: OptionValues<typeof INBOX_OPTIONS>): number {
  return Math.floor(v['inbox-memory-mb'] * 1024 * 1024);
}

export function limitsFrom(v: OptionValues<typeof LIMIT_OPTIONS>): WorkerLimits {
  // The idle timeout is one timer: longer than a timer can wait, it would fire at once.
  if (v['heartbeat-interval-ms'] * v['idle-intervals'] > MAX_TIMER_MS) {
    throw new SwitchboardError('SB_ERR_CONFIG', `--heartbeat-interval-ms times --idle-intervals (the idle timeout) must be at most ${MAX_TIMER_MS} ms, got ${v['heartbeat-interval-ms'] * v['idle-intervals']}`);
  }
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
    recallWindowMs: v['recall-window-s'] * 1000,
    editWindowMs: v['edit-window-s'] * 1000,
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
    groupSyncNew: v['group-sync-new'],
    groupFanoutSlice: v['group-fanout-slice'],
    groupFanoutQueue: v['group-fanout-queue'],
    ownCopies: v['no-own-copies'] !== true,
  };
}

export const GATE_OPTIONS = {
  'token-ttl-s': { type: 'number', above: 0, group: 'gate', description: 'validity of the access tokens the gate issues (seconds; at most 30 days, 365 with --dev); clients refresh them with their refresh token', default: DEFAULT_GATE_LIMITS.tokenTtlMs / 1000 },
  'refresh-ttl-s': { ...count(1, MAX_REFRESH_TTL_S), group: 'gate', description: 'how long a login lasts at most, refreshed or not: its refresh family ends this long after the password login (seconds)', default: DEFAULT_GATE_LIMITS.refreshTtlMs / 1000 },
  'refresh-idle-s': { ...count(0, MAX_REFRESH_TTL_S), group: 'gate', description: 'a login not refreshed for this long ends (seconds); 0: only --refresh-ttl-s ends it', default: DEFAULT_GATE_LIMITS.refreshIdleMs / 1000 },
  'max-logins-per-user': { ...count(1, 1000), group: 'gate', description: "logins (refresh families, one per device login) a user may hold; a new one beyond it ends the user's oldest", default: DEFAULT_GATE_LIMITS.maxFamiliesPerUser },
  'rate-refresh': { ...count(1), group: 'gate', description: '/api/refresh and /api/logout requests per client address per minute (IPv6: per /64)', default: DEFAULT_GATE_LIMITS.refreshRequests.max },
  'admin-token-file': { type: 'string', group: 'secrets', description: 'a file holding the operator credential for /api/admin/... (at least 32 characters); unset: there are no admin routes' },
  'no-registration': { type: 'boolean', group: 'gate', description: 'switch POST /api/users off' },
  'rate-ip': { ...count(1), group: 'gate', description: 'login and registration requests per client address per minute (IPv6: per /64)', default: DEFAULT_GATE_LIMITS.perIp.max },
  'rate-user-ip': { ...count(1), group: 'gate', description: 'failed logins per user name and client address per 15 minutes', default: DEFAULT_GATE_LIMITS.perUserIp.max },
  'rate-user': { ...count(1), group: 'gate', description: 'failed logins per user name per hour, from addresses it has not logged in from within 30 days', default: DEFAULT_GATE_LIMITS.perUser.max },
  'rate-group-changes': { ...count(1), group: 'gate', description: 'group changes (create, update, dissolve, add, remove, leave, role, transfer) per user per minute', default: DEFAULT_GATE_LIMITS.groupChanges.max },
  'rate-group-reads': { ...count(1), group: 'gate', description: 'group reads (GET /api/groups...) per user per minute', default: DEFAULT_GATE_LIMITS.groupReads.max },
  'rate-conversation-reads': { ...count(1), group: 'gate', description: 'conversation reads (GET /api/conversations...) per user per minute', default: DEFAULT_GATE_LIMITS.conversationReads.max },
  'rate-settings': { ...count(1), group: 'gate', description: 'settings requests (/api/settings) per user per minute', default: DEFAULT_GATE_LIMITS.settingsRequests.max },
  'trust-proxy': { type: 'string', group: 'gate', description: 'proxies whose X-Forwarded-For names the client: comma-separated addresses, CIDRs, loopback, linklocal, uniquelocal; unset: none' },
} as const satisfies OptionSpecs;

/** The gate's limits from its flags; `dev` as decided by tokenSecretFrom. */
export function gateLimitsFrom(v: OptionValues<typeof GATE_OPTIONS>, dev: boolean): GateLimits {
  return {
    ...DEFAULT_GATE_LIMITS,
    tokenTtlMs: tokenTtlMsFrom('token-ttl-s', v['token-ttl-s'], dev),
    refreshTtlMs: v['refresh-ttl-s'] * 1000,
    refreshIdleMs: v['refresh-idle-s'] * 1000,
    maxFamiliesPerUser: v['max-logins-per-user'],
    refreshRequests: { ...DEFAULT_GATE_LIMITS.refreshRequests, max: v['rate-refresh'] },
    perIp: { ...DEFAULT_GATE_LIMITS.perIp, max: v['rate-ip'] },
    perUserIp: { ...DEFAULT_GATE_LIMITS.perUserIp, max: v['rate-user-ip'] },
    perUser: { ...DEFAULT_GATE_LIMITS.perUser, max: v['rate-user'] },
    groupChanges: { ...DEFAULT_GATE_LIMITS.groupChanges, max: v['rate-group-changes'] },
    groupReads: { ...DEFAULT_GATE_LIMITS.groupReads, max: v['rate-group-reads'] },
    conversationReads: { ...DEFAULT_GATE_LIMITS.conversationReads, max: v['rate-conversation-reads'] },
    settingsRequests: { ...DEFAULT_GATE_LIMITS.settingsRequests, max: v['rate-settings'] },
  };
}

/**
 * Refuses a command that lacks options it needs, naming each missing one (flag and variable)
 * and nothing that was given.
 */
export function requireOptions<S extends OptionSpecs>(what: string, specs: S, values: Partial<Record<keyof S, unknown>>, names: readonly (keyof S & string)[]): void {
  const missing = names.filter((name) => values[name] === undefined || values[name] === '');
  if (missing.length === 0) return;
  const list = missing.map((name) => `--${name} (or ${envOf(name, specs[name]!)})`);
  const all = list.length === 1 ? list[0] : `${list.slice(0, -1).join(', ')} and ${list.at(-1)}`;
  throw new SwitchboardError('SB_ERR_CONFIG', `${what} needs ${all}`);
}

/**
 * A listen error in words an operator can act on: which port of the command it was and the
 * flag (and variable) that moves it. Keeps Node's code, EADDRINUSE, which scripts match on.
 */
export function addressInUse(err: unknown, ports: readonly { port: number; what: string; flag: string; env: string }[]): unknown {
  const e = err as NodeJS.ErrnoException & { address?: string; port?: number };
  if (e?.code !== 'EADDRINUSE') return err;
  const hit = ports.find((p) => p.port !== 0 && p.port === e.port);
  if (!hit) return err;
  const address = e.address?.includes(':') ? `[${e.address}]` : e.address;
  return Object.assign(
    new Error(`${address ?? ''}:${hit.port} (the ${hit.what}) is in use by another process: stop it, or choose another port with --${hit.flag} (or ${hit.env})`, { cause: err }),
    { code: 'EADDRINUSE' },
  );
}

/** Wildcard addresses: listening on every interface says nothing about where to be reached. */
export function isWildcard(host: string): boolean {
  return host === '0.0.0.0' || host === '::' || host === '[::]';
}

/**
 * The warning for a server listening on every interface without --announce-host: it tells
 * clients (and peers) 127.0.0.1, which reaches it from this host only. Names this host's
 * addresses a remote client could use.
 */
export function wildcardWarning(host: string, announced: string, forPeers: boolean): { message: string; addresses: string[] } {
  const addresses = Object.values(networkInterfaces())
    .flat()
    .filter((a) => a !== undefined && !a.internal && (a.family === 'IPv4' || !a.address.startsWith('fe80:')))
    .map((a) => a!.address);
  const who = forPeers ? 'clients and the other workers' : 'clients';
  return {
    message: `--host ${host} without --announce-host: ${who} are told ${announced}, which reaches this worker from this host only; set --announce-host (or SWITCHBOARD_ANNOUNCE_HOST) to the address they reach it at`,
    addresses,
  };
}

/** What the Redis stores prefix their keys with: letters, digits and `_ . : -`, so that the
 * prefix followed by `*` is a Redis ACL key pattern matching exactly switchboard's keys. */
export function redisPrefixFrom(prefix: string): string {
  if (!/^[A-Za-z0-9_.:-]{1,64}$/.test(prefix)) {
    throw new SwitchboardError('SB_ERR_CONFIG', `--redis-prefix must be 1 to 64 characters of letters, digits, '_', '.', ':' and '-', got ${JSON.stringify(prefix)}`);
  }
  return prefix;
}

export interface ZooKeeperAccess {
  auth?: ZooKeeperDigestAuth;
  readers: string[];
}

/**
 * Cluster mode refuses to run without a ZooKeeper identity unless told this is a development
 * run (`--dev`): without one every znode is open, and anyone who reaches ZooKeeper can list a
 * worker of their own and be sent users' logins.
 */
export function zooKeeperAccessFrom(v: { 'zk-auth'?: string; 'zk-readers'?: string }, dev: boolean, log: Logger): ZooKeeperAccess {
  const readers = v['zk-readers'] ? parseDigestIds(v['zk-readers']) : [];
  if (v['zk-auth']) return { auth: parseDigestAuth(v['zk-auth']), readers };
  if (readers.length > 0) throw new SwitchboardError('SB_ERR_CONFIG', '--zk-readers needs --zk-auth: without an identity nothing is protected, and there is nothing to grant');
  if (!dev) {
    throw new SwitchboardError(
      'SB_ERR_CONFIG',
      'cluster mode needs --zk-auth user:password (or SWITCHBOARD_ZK_AUTH): without it anyone who reaches ZooKeeper can add or change workers; pass --dev to run without',
    );
  }
  log.warn('no --zk-auth or SWITCHBOARD_ZK_AUTH given: the ZooKeeper registry is writable by anyone who reaches ZooKeeper, never do this in production');
  return { readers };
}

const PROXY_RANGES = new Set(['loopback', 'linklocal', 'uniquelocal']);

/** --trust-proxy as a list, each entry checked: an address, address/prefix, or a range name. */
export function trustProxyFrom(value: string | undefined): string[] {
  if (value === undefined || value.trim() === '') return [];
  return value.split(',').map((raw) => {
    const entry = raw.trim();
    const [address = '', prefix, extra] = entry.split('/');
    const family = isIP(address);
    const bits = family === 4 ? 32 : 128;
    const prefixOk = prefix === undefined || (/^\d{1,3}$/.test(prefix) && Number(prefix) <= bits);
    if (!PROXY_RANGES.has(entry) && (family === 0 || !prefixOk || extra !== undefined)) {
      throw new SwitchboardError('SB_ERR_CONFIG', `--trust-proxy: ${JSON.stringify(entry)} is not an IP address, a CIDR, loopback, linklocal or uniquelocal`);
    }
    return entry;
  });
}

// ---------------------------------------------------------------------------------------------
// Secrets and token lifetimes.
//
// Development mode is `--dev`, or a command running on the built-in development secret where it
// may without --dev: `start`, `worker` without --zk, and `token`, when neither --secret nor
// SWITCHBOARD_SECRET is set. The development secret is public, so such a run has no secret to
// protect. Outside development mode:
//   - --secret and --cluster-secret have at least MIN_SECRET_LENGTH characters;
//   - tokens (`token --ttl-s`, the gate's --token-ttl-s) live at most MAX_TOKEN_TTL_S.
// In development mode any non-empty secret is accepted and tokens live up to
// MAX_DEV_TOKEN_TTL_S; that bound holds everywhere (an expiry must stay a valid Date).

/**
 * 32 characters: the hex form of a 128-bit random key (`openssl rand -hex 16`), the least an
 * HMAC-SHA256 key should carry. A length is what can be checked; entropy cannot: use a random
 * value (`openssl rand -hex 32`), never a word.
 */
export const MIN_SECRET_LENGTH = 32;
/**
 * 30 days. A token cannot be revoked short of changing the secret (which revokes them all), so
 * its lifetime is how long a stolen one stays good; the gate's default is a day.
 */
export const MAX_TOKEN_TTL_S = 30 * 86_400;
/** 365 days, in development mode too. */
export const MAX_DEV_TOKEN_TTL_S = 365 * 86_400;

export interface TokenSecret {
  /** --secret, or the keys of --token-keys. */
  secret: string | TokenKeys;
  /** Development mode, as defined above. */
  dev: boolean;
}

/**
 * The token secret under the rules above. `fallback`: the command may run on the development
 * secret without --dev (that makes the run a development run); otherwise an unset secret needs
 * --dev. `warn` is told when the development secret is used.
 */
export function tokenSecretFrom(o: { secret?: string | undefined; 'token-keys'?: string | undefined; 'token-signing-key'?: string | undefined; dev: boolean }, fallback: boolean, warn: (message: string) => void): TokenSecret {
  const file = o['token-keys'];
  if (file !== undefined) {
    if (o.secret !== undefined && o.secret !== '') throw new SwitchboardError('SB_ERR_CONFIG', '--secret and --token-keys both given: --secret is one key, list it in the file (as "default <secret>") instead');
    const keys = parseTokenKeys(readSecretFile('token-keys', file), o['token-signing-key']);
    for (const [id, secret] of Object.entries(keys.keys)) checkSecret(`token-keys (key ${id})`, secret, o.dev);
    return { secret: keys, dev: o.dev };
  }
  if (o['token-signing-key'] !== undefined) throw new SwitchboardError('SB_ERR_CONFIG', '--token-signing-key needs --token-keys');
  if (o.secret === undefined || o.secret === '') {
    if (!o.dev && !fallback) {
      throw new SwitchboardError('SB_ERR_CONFIG', 'cluster mode needs --secret (or SWITCHBOARD_SECRET); pass --dev to use the built-in development secret');
    }
    warn('no --secret or SWITCHBOARD_SECRET given: using the built-in development secret, never do this in production');
    return { secret: DEV_SECRET, dev: true };
  }
  checkSecret('secret', o.secret, o.dev);
  return { secret: o.secret, dev: o.dev };
}

/** A file's text for a flag, or SB_ERR_CONFIG naming the flag and the file (never its contents). */
export function readSecretFile(flag: string, path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    throw new SwitchboardError('SB_ERR_CONFIG', `--${flag}: cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`, { cause: err });
  }
}

/** --admin-token-file's credential (trimmed), at least MIN_SECRET_LENGTH characters outside development mode; unset: undefined. */
export function adminTokenFrom(path: string | undefined, dev: boolean): string | undefined {
  if (path === undefined) return undefined;
  const token = readSecretFile('admin-token-file', path).trim();
  if (token.length === 0) throw new SwitchboardError('SB_ERR_CONFIG', `--admin-token-file ${path} is empty`);
  // It travels as `Authorization: Bearer <token>`: one word.
  if (/\s/.test(token)) throw new SwitchboardError('SB_ERR_CONFIG', `--admin-token-file ${path} holds whitespace inside the credential: use one word (e.g. openssl rand -hex 32)`);
  return checkSecret('admin-token-file', token, dev);
}

/** The secrets of a token key ring (or the one secret). */
export function tokenSecrets(secret: string | TokenKeys): string[] {
  return typeof secret === 'string' ? [secret] : Object.values(secret.keys);
}

/** Refuses a secret shorter than MIN_SECRET_LENGTH outside development mode; never shows it. */
export function checkSecret(flag: string, secret: string, dev: boolean): string {
  const length = [...secret].length;
  if (!dev && length < MIN_SECRET_LENGTH) {
    throw new SwitchboardError(
      'SB_ERR_CONFIG',
      `--${flag} has ${length} characters; at least ${MIN_SECRET_LENGTH} are needed (e.g. openssl rand -hex 32), or pass --dev for a development run`,
    );
  }
  return secret;
}

/** A token lifetime flag in ms, within the bound of the mode. */
export function tokenTtlMsFrom(flag: string, seconds: number, dev: boolean): number {
  const max = dev ? MAX_DEV_TOKEN_TTL_S : MAX_TOKEN_TTL_S;
  if (!(seconds > 0) || seconds > max) {
    const hint = dev ? '' : ` (${MAX_DEV_TOKEN_TTL_S} with --dev)`;
    throw new SwitchboardError('SB_ERR_CONFIG', `--${flag} must be more than 0 and at most ${max} seconds${hint}, got ${seconds}`);
  }
  return Math.round(seconds * 1000);
}
