// The composition root: the one place a switchboard process is assembled. createSwitchboard()
// builds every store, registry, counter, server and gate of a process from one configuration,
// which the CLI's commands fill from their flags; createNode() assembles one worker node from
// instances, which is how createSwitchboard() builds its worker and how a test runs several
// nodes in one process. Each owns the lifetime of everything it built. Nothing else constructs
// them, and there are no singletons.

import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { DEFAULT_LIMITS, type WorkerLimits } from './config.js';
import { SwitchboardError } from './errors.js';
import { checkTokenSecret, TokenSigner, type TokenKeys } from './auth/token.js';
import { PasswordHasher } from './auth/password.js';
import { silentLogger, type Logger } from './log.js';
import { checkRedisTimeout, logRedis, type RedisTarget } from './redis/redis-client.js';
import type { Registry } from './registry/registry.js';
import type { ImNode } from './registry/im-node.js';
import { StaticRegistry } from './registry/static-registry.js';
import { ZooKeeperRegistry } from './registry/zk-registry.js';
import { checkZooKeeperRoot } from './registry/zk-connection.js';
import type { ZooKeeperDigestAuth } from './registry/zookeeper-client.js';
import { MemoryOnlineCounter, type LocalCounts, type OnlineCounter } from './registry/online-counter.js';
import { ZooKeeperOnlineCounter } from './registry/zk-online-counter.js';
import { MemorySessionStore } from './session/memory-session-store.js';
import { RedisSessionStore } from './session/redis-session-store.js';
import { LocalSessionMap } from './session/local-session-map.js';
import { SessionDistributed } from './session/session-distributed.js';
import type { SessionStore } from './session/session-store.js';
import type { InboxLimits, InboxStore } from './inbox/inbox-store.js';
import { MemoryInboxStore } from './inbox/memory-inbox-store.js';
import { RedisInboxStore } from './inbox/redis-inbox-store.js';
import type { UserStore } from './users/user-store.js';
import { DEFAULT_GROUP_LIMITS, groupLimits, type GroupLimits, type GroupStore } from './groups/group-store.js';
import { MemoryGroupStore } from './groups/memory-group-store.js';
import { RedisGroupStore } from './groups/redis-group-store.js';
import { MemoryGroupNotifier, type GroupNotifier } from './groups/group-notifier.js';
import { RedisGroupNotifier } from './groups/redis-group-notifier.js';
import { MemoryUserStore } from './users/memory-user-store.js';
import { RedisUserStore } from './users/redis-user-store.js';
import { WorkerServer } from './server/worker-server.js';
import { DEFAULT_REVOCATION_CHECK_MS } from './server/revocation-check.js';
import { MemoryRevocationNotifier, type RevocationNotifier } from './users/revocation-notifier.js';
import { RedisRevocationNotifier } from './users/redis-revocation-notifier.js';
import { checkHealthSettings, StoreHealth, type HealthSettings } from './server/store-health.js';
import { createCluster, type ClusterSettings } from './cluster/cluster.js';
import { WebGate, type GateLimits } from './gate/web-gate.js';
import { RedisRateLimitStore } from './gate/redis-rate-limit-store.js';
import { checkProbeSettings, DEFAULT_PROBE_SETTINGS, WorkerProbe, type ProbeSettings } from './gate/worker-probe.js';
import { TlsFiles, type TlsFilePaths } from './net/tls-files.js';
import type { PeerTlsMode } from './cluster/cluster.js';

export const VERSION: string = (createRequire(import.meta.url)('../package.json') as { version: string }).version;

// --- one worker node, from instances ------------------------------------------------------

export interface NodeOptions {
  host?: string;
  port?: number;
  /** False: no plaintext client port, only `tls` (registered as port 0). Default true. */
  plain?: boolean;
  /** A TLS client port and its certificate (TlsFiles: reloaded by its owner). */
  tls?: { port: number; files: TlsFiles };
  /** The TLS port a load balancer terminates for this worker, announced as its `tlsPort`. */
  announceTlsPort?: number;
  announceHost?: string;
  /** The token secret (the one key `default`), or several keys by id (TokenKeys): every one is accepted. */
  secret: string | TokenKeys;
  limits?: Partial<WorkerLimits>;
  log?: Logger;
  /** Defaults to an in-memory store (embedded mode). */
  store?: SessionStore;
  /** Defaults to a single-node static registry (embedded mode). */
  registry?: Registry;
  /** Defaults to an in-memory inbox (embedded mode). */
  inbox?: InboxStore;
  /**
   * Where the accounts live (the gate's store): messages to a user without one are refused,
   * recipient names are folded to lower case. Unset: any id is a recipient, as written.
   * Closed by stop().
   */
  users?: UserStore;
  /** How stale a session's copy of its user's receipts setting may get; default 30 s (tests shorten it). */
  receiptSettingTtlMs?: number;
  /** Defaults to in-memory groups (embedded mode). Closed by stop(). */
  groups?: GroupStore;
  /** How the gate's membership changes reach this worker; defaults to one in memory (embedded mode: the gate in this process). Closed by stop(). */
  groupNotifier?: GroupNotifier;
  /** The groups' maxGroupsPerUser (how many groups a login lists at most); default DEFAULT_GROUP_LIMITS'. */
  maxGroupsPerUser?: number;
  /**
   * Token revocations: where the gate records them (the accounts' store) and how it announces
   * them; `checkMs` (default 30 s) bounds how late a lost announcement closes its sessions.
   * Unset: nothing is revoked. The notifier is closed by stop().
   */
  revocations?: { users: Pick<UserStore, 'revocations'>; notifier: RevocationNotifier; checkMs?: number };
  /** Cluster mode: a peer port and links to the other workers of `registry`, routing through `store`. */
  cluster?: ClusterSettings;
  /**
   * Builds the OnlineCounter on this worker's counts: cluster mode, a ZooKeeperOnlineCounter on
   * the registry's connection. Default: a MemoryOnlineCounter (embedded mode). Closed by stop().
   */
  online?: (counts: LocalCounts) => OnlineCounter;
  /** The periodic store health check; defaults: DEFAULT_HEALTH_SETTINGS. */
  health?: Partial<HealthSettings>;
}

export interface SwitchboardNode {
  readonly server: WorkerServer;
  readonly registry: Registry;
  readonly store: SessionStore;
  readonly inbox: InboxStore;
  readonly users: UserStore | undefined;
  readonly groups: GroupStore;
  readonly groupNotifier: GroupNotifier;
  readonly signer: TokenSigner;
  readonly online: OnlineCounter;
  /**
   * Resolves the registered worker once its stores answered and it listens. On failure
   * everything started so far is stopped (stores and registry closed) before the rejection.
   */
  start(): Promise<ImNode>;
  stop(): Promise<void>;
}

export function createNode(options: NodeOptions): SwitchboardNode {
  const log = options.log ?? silentLogger();
  const limits: WorkerLimits = { ...DEFAULT_LIMITS, ...options.limits };
  const store = options.store ?? new MemorySessionStore();
  const registry = options.registry ?? new StaticRegistry();
  const inbox = options.inbox ?? new MemoryInboxStore({}, Date.now, log.child({ component: 'inbox' }));
  const users = options.users;
  const groups = options.groups ?? new MemoryGroupStore();
  const groupNotifier = options.groupNotifier ?? new MemoryGroupNotifier();
  const signer = new TokenSigner(options.secret);
  const host = options.host ?? '127.0.0.1';
  const health = new StoreHealth({ ...options.health, stores: { session: store, inbox, groups, ...(users ? { users } : {}) }, log: log.child({ component: 'health' }) });
  const sessions = new LocalSessionMap();
  const directory = new SessionDistributed({ store, registry, sessions, refreshMs: limits.sessionRefreshMs, log });
  const server = new WorkerServer({
    host,
    port: options.port ?? 9000,
    plain: options.plain,
    tls: options.tls,
    announceTlsPort: options.announceTlsPort,
    announceHost: options.announceHost,
    limits,
    signer,
    sessions,
    directory,
    inbox,
    registry,
    users,
    receiptSettingTtlMs: options.receiptSettingTtlMs,
    revocations: options.revocations && { ...options.revocations, checkMs: options.revocations.checkMs ?? DEFAULT_REVOCATION_CHECK_MS },
    groups: {
      store: groups,
      notifier: groupNotifier,
      options: {
        batchSize: limits.syncBatchSize,
        syncNew: limits.groupSyncNew,
        fanoutSlice: limits.groupFanoutSlice,
        maxQueuedWrites: limits.groupFanoutQueue,
        ackTimeoutMs: limits.ackTimeoutMs,
        maxGroupsPerUser: options.maxGroupsPerUser ?? DEFAULT_GROUP_LIMITS.maxGroupsPerUser,
      },
    },
    health,
    log: log.child({ component: 'worker' }),
    version: VERSION,
    cluster: options.cluster && createCluster(options.cluster, { registry, store, directory, host, limits, log }),
  });
  const counts: LocalCounts = { selfId: () => server.info?.id ?? '', local: () => ({ users: sessions.users, sessions: sessions.size }) };
  const online = options.online ? options.online(counts) : new MemoryOnlineCounter(counts);
  const revocationNotifier = options.revocations?.notifier;
  return nodeLifetime({ server, registry, store, inbox, users, groups, groupNotifier, signer, online }, log, revocationNotifier);
}

/** start() and stop() of a node: what starts in which order, and what stops in which. */
function nodeLifetime(parts: Omit<SwitchboardNode, 'start' | 'stop'>, log: Logger, revocationNotifier?: RevocationNotifier): SwitchboardNode {
  const { server, registry, store, inbox, users, groups, groupNotifier, online } = parts;
  let stopping: Promise<void> | undefined;
  const node: SwitchboardNode = {
    ...parts,
    async start() {
      let info: ImNode;
      try {
        info = await server.start();
      } catch (err) {
        // A worker that cannot serve must not linger: its listener, Redis connections and
        // ZooKeeper session would keep the process alive after the error.
        await node.stop().catch((stopErr: unknown) => log.error({ err: stopErr }, 'stop after a failed start failed'));
        throw err;
      }
      online.start();
      return info;
    },
    stop() {
      // Once, however often called (a failed start stops the node itself).
      stopping ??= (async () => {
        // Leave the registry first: the gate stops handing this worker out while its clients
        // are still being closed.
        await online.close();
        await registry.close();
        await server.stop();
        await store.close();
        await inbox.close();
        await groups.close();
        await groupNotifier.close();
        await revocationNotifier?.close();
        await users?.close();
      })();
      return stopping;
    },
  };
  return node;
}

// --- a whole process, from its configuration ----------------------------------------------

/** Where the Redis stores connect. */
export interface RedisConfig {
  /** One Redis, or a Redis Cluster's seed nodes. */
  url: RedisTarget;
  /** What every key starts with (a Redis ACL user's key pattern). */
  keyPrefix: string;
  /** A command not answered within this fails with SB_ERR_STORE_UNAVAILABLE. */
  timeoutMs: number;
}

/** The cluster's ZooKeeper: the registry and the OnlineCounter, on one session. */
export interface ZooKeeperConfig {
  connect: string;
  root: string;
  /** Default 10 s. */
  sessionTimeoutMs?: number;
  /** The full re-read that repairs a missed watch; default 30 s. */
  reconcileIntervalMs?: number;
  /** This process's digest identity: the workers', or a gate's (a reader). */
  auth?: ZooKeeperDigestAuth;
  /** A worker: digest ids granted READ on what it creates (the gates'). */
  readers?: readonly string[];
}

export interface WorkerConfig {
  host: string;
  port: number;
  /** False: the plaintext client port is off (`--no-plain-port`); needs `tls`. Default true. */
  plain?: boolean;
  /** The TLS client port and the files of its certificate and key. */
  tls?: { port: number } & TlsFilePaths;
  /** A TLS port a load balancer terminates in front of this worker: announced as `tlsPort`. */
  announceTlsPort?: number;
  /** Cluster mode: TLS on the peer links, with this worker's certificate and key and the cluster CA. */
  peerTls?: { mode: PeerTlsMode } & Required<TlsFilePaths>;
  announceHost?: string;
  limits: WorkerLimits;
  health: HealthSettings;
  inboxLimits: InboxLimits;
  /** The in-memory inbox's bound (without `redis`). */
  memoryInboxBytes: number;
  /** Messages to a user without an account are refused, where there are accounts (accountsFor). */
  checkRecipients: boolean;
  /** Cluster mode (with `zookeeper` and `redis`): peers, and how long an unrefreshed session record lives. */
  cluster?: { settings: ClusterSettings; sessionTtlMs: number };
  /** How often every session is checked against the stored revocations; default 30 s. */
  revocationCheckMs?: number;
}

export interface GateConfig {
  host: string;
  port: number;
  /** Serve HTTPS with this certificate and key; unset: HTTP. */
  tls?: TlsFilePaths;
  limits: GateLimits;
  registration: boolean;
  trustProxy: readonly string[];
  /** Members added to a group must have an account (default); false: any uid, as written (users live outside switchboard). */
  checkMembers?: boolean;
  /** A cluster's gate: how it probes the workers; default DEFAULT_PROBE_SETTINGS. */
  probe?: ProbeSettings;
  /** A cluster's gate: the workers' inbox limits (--inbox-max-messages, ...), which its conversation reads prune by; default DEFAULT_INBOX_LIMITS. */
  inboxLimits?: InboxLimits;
  /** The operator's credential for /api/admin/... (--admin-token-file); unset: no admin routes. */
  adminToken?: string;
}

/** One process: a worker, a gate, or both (`switchboard start`: the gate embedded, on the worker's stores). */
export interface SwitchboardConfig {
  /** The token secret, or the token keys: workers verify tokens with every one, the gate signs with the signing key. */
  secret: string | TokenKeys;
  log: Logger;
  /** Inboxes and accounts in Redis (and in a cluster the sessions, at its gate the rate limits); unset: memory. */
  redis?: RedisConfig;
  /** Cluster mode. */
  zookeeper?: ZooKeeperConfig;
  /** The group store's limits (the rest at DEFAULT_GROUP_LIMITS): the same on every worker and gate. */
  groupLimits?: Partial<GroupLimits>;
  worker?: WorkerConfig;
  /** Beside `worker`: its embedded gate. Alone: a cluster's gate (needs `zookeeper` and `redis`). */
  gate?: GateConfig;
}

export interface Switchboard {
  readonly node: SwitchboardNode | undefined;
  readonly gate: WebGate | undefined;
  /**
   * The process's one group store and notifier: the worker's (node.groups) and its embedded
   * gate's, or a cluster gate's. Redis with `redis` (the same key prefix), else memory.
   */
  readonly groups: GroupStore;
  readonly groupNotifier: GroupNotifier;
  /**
   * Starts the worker, then the gate. On a failure everything built is stopped, and the error
   * is thrown as `explain` makes it (the CLI names the flag that moves a busy port).
   */
  start(explain?: (err: unknown, part: 'worker' | 'gate') => unknown): Promise<{ worker?: ImNode; gate?: AddressInfo }>;
  /** The gate first (no more logins handed out), then the worker. Once, however often called. */
  stop(): Promise<void>;
  /**
   * Reads every TLS certificate, key and CA file of the process again (SIGHUP): new connections
   * get the new ones, open ones keep theirs. A set that does not load keeps its previous files,
   * and its SB_ERR_TLS_FILES is logged and returned; the others are reloaded all the same.
   */
  reloadTls(): SwitchboardError[];
}

/** What the process runs, each with its own start and stop. */
interface Part<T> {
  start(): Promise<T>;
  stop(): Promise<void>;
}

export function createSwitchboard(config: SwitchboardConfig): Switchboard {
  checkConfig(config);
  const built: Closable[] = [];
  const own: Own = (part) => (built.push(part), part);
  // Read before anything connects: a missing or bad file is refused like a bad flag.
  const tls = tlsFilesFor(config);
  let worker: WorkerPart | undefined;
  let gate: GatePart | undefined;
  let groups: Groups;
  try {
    groups = { store: own(groupStoreFor(config)), notifier: own(groupNotifierFor(config)), limits: config.groupLimits };
    worker = config.worker && buildWorker(config, config.worker, groups, own, tls);
    gate = config.gate && (worker ? embeddedGate(config, config.gate, worker, groups, tls.gate) : clusterGate(config, config.gate, groups, own, tls.gate));
  } catch (err) {
    // checkConfig refuses what the constructors are known to refuse; should one throw all the
    // same, the Redis clients built before it must not keep the process alive.
    void closeAll(built.reverse(), config.log);
    throw err;
  }
  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> =>
    (stopping ??= (async () => {
      await gate?.stop();
      await worker?.stop();
    })());
  return {
    node: worker?.node,
    gate: gate?.gate,
    groups: groups.store,
    groupNotifier: groups.notifier,
    async start(explain = (err) => err) {
      let info: ImNode | undefined;
      try {
        info = await worker?.start();
      } catch (err) {
        // Listening already, and connected to Redis: without this a worker that could not
        // register (e.g. SB_ERR_REGISTRY_ACL) would print its error and keep running.
        await stop().catch((stopErr: unknown) => config.log.error({ err: stopErr }, 'shutdown failed'));
        throw explain(err, 'worker');
      }
      let address: AddressInfo | undefined;
      try {
        address = await gate?.start();
      } catch (err) {
        // A busy gate port must not leave the worker running, nor the ZooKeeper session and the
        // Redis connections of a cluster's gate keep the process alive.
        await stop();
        throw explain(err, 'gate');
      }
      return { worker: info, gate: address };
    },
    stop,
    reloadTls() {
      const failed: SwitchboardError[] = [];
      for (const [role, files] of Object.entries(tls)) {
        if (!files) continue;
        try {
          files.reload();
          config.log.info({ role, ...files.paths }, 'tls files reloaded');
        } catch (err) {
          const e = err instanceof SwitchboardError ? err : new SwitchboardError('SB_ERR_TLS_FILES', String(err), { cause: err });
          config.log.error({ role, err: e }, 'tls files not reloaded: the previous ones stay in use');
          failed.push(e);
        }
      }
      return failed;
    },
  };
}

/** The TLS files of each role of the process, by role (what reloadTls() reloads). */
interface ProcessTls {
  client?: TlsFiles;
  peer?: TlsFiles;
  gate?: TlsFiles;
}

function tlsFilesFor(config: SwitchboardConfig): ProcessTls {
  const { worker, gate } = config;
  const paths = (p: TlsFilePaths): TlsFilePaths => ({ cert: p.cert, key: p.key, ...(p.ca !== undefined ? { ca: p.ca } : {}) });
  return {
    client: worker?.tls && new TlsFiles(paths(worker.tls)),
    peer: worker?.peerTls && new TlsFiles(paths(worker.peerTls)),
    gate: gate?.tls && new TlsFiles(paths(gate.tls)),
  };
}

/**
 * What the CLI cannot get wrong but a program can: a configuration that names nothing to run, or
 * half a cluster; and what a constructor would refuse (SB_ERR_CONFIG), checked here so that it
 * is refused before a Redis store has connected.
 */
function checkConfig(config: SwitchboardConfig): void {
  const { worker, gate, zookeeper, redis } = config;
  const fail = (message: string) => {
    throw new SwitchboardError('SB_ERR_CONFIG', message);
  };
  if (!worker && !gate) fail('a switchboard process runs a worker, a gate or both');
  if (worker?.cluster && (!zookeeper || !redis)) fail('cluster mode needs zookeeper and redis');
  if (worker && !worker.cluster && zookeeper) fail('a worker with zookeeper needs its cluster settings');
  if (worker && worker.plain === false && !worker.tls) fail('a worker without its plain client port needs a TLS port');
  if (worker?.peerTls && !worker.cluster) fail('peer TLS is for cluster mode');
  if (!worker && (!zookeeper || !redis)) fail("a cluster's gate needs zookeeper and redis");
  checkTokenSecret(config.secret);
  if (redis) checkRedisTimeout(redis.timeoutMs);
  groupLimits(config.groupLimits);
  if (zookeeper) checkZooKeeperRoot(zookeeper.root);
  if (worker) checkHealthSettings(worker.health);
  if (gate && !worker) checkProbeSettings(gate.probe ?? DEFAULT_PROBE_SETTINGS);
}

/** Something built that holds a connection or a timer until it is closed. */
interface Closable {
  close(): Promise<void>;
}

/** Records a part as built, for closeAll() if the assembly fails after it; returns it. */
type Own = <T extends Closable>(part: T) => T;

async function closeAll(parts: readonly Closable[], log: Logger): Promise<void> {
  for (const part of parts) await part.close().catch((err: unknown) => log.error({ err }, 'closing after a failed assembly failed'));
}

interface WorkerPart extends Part<ImNode> {
  readonly node: SwitchboardNode;
  /** The accounts, for the embedded gate too. */
  readonly users: UserStore | undefined;
  /** Where the embedded gate announces revocations to this worker. */
  readonly revocationNotifier: RevocationNotifier | undefined;
}

/** The process's groups: one store and one notifier, shared by its worker and its gate. */
interface Groups {
  store: GroupStore;
  notifier: GroupNotifier;
  /** The store's limits: the gate bounds its requests by them. */
  limits?: Partial<GroupLimits>;
}

/** Groups live where the inboxes do: in Redis with `redis` (under the same key prefix), else in memory. */
function groupStoreFor(config: SwitchboardConfig): GroupStore {
  const { redis, log, groupLimits: limits } = config;
  if (!redis) return new MemoryGroupStore(limits);
  const store = new RedisGroupStore({ url: redis.url, keyPrefix: redis.keyPrefix, limits, timeoutMs: redis.timeoutMs });
  logRedis(store.redis, log.child({ component: 'redis', store: 'groups' }));
  return store;
}

/** With `redis`, pub/sub on `<prefix>groups` (every worker hears every gate); else this process only. */
function groupNotifierFor(config: SwitchboardConfig): GroupNotifier {
  const { redis, log } = config;
  if (!redis) return new MemoryGroupNotifier();
  return new RedisGroupNotifier({ url: redis.url, keyPrefix: redis.keyPrefix, timeoutMs: redis.timeoutMs, log: log.child({ component: 'redis', store: 'group-notifier' }) });
}

function buildWorker(config: SwitchboardConfig, w: WorkerConfig, groups: Groups, own: Own, tls: ProcessTls): WorkerPart {
  const { log, redis } = config;
  // The ZooKeeper registry first: it connects only when started, the Redis stores at once.
  const registry = w.cluster && own(zooKeeperRegistry(config));
  const inbox = own(inboxFor(config, w));
  const users = accountsFor(config, w, own);
  // Where there are accounts, there are logins to revoke: the gate records them in the accounts' store.
  const revocationNotifier = users && own(revocationNotifierFor(config));
  const cluster = registry && { registry, store: own(sessionStore(redis!, w.cluster!.sessionTtlMs, log)) };
  const node = createNode({
    inbox,
    // The node closes it on stop.
    users: w.checkRecipients ? users : undefined,
    store: cluster?.store,
    registry: cluster?.registry,
    cluster: w.cluster && { ...w.cluster.settings, ...(tls.peer ? { peerTls: { mode: w.peerTls!.mode, files: tls.peer } } : {}) },
    // On the registry's ZooKeeper session: one per process.
    online: cluster && ((counts) => new ZooKeeperOnlineCounter({ zookeeper: cluster.registry.zookeeper, ...counts, log: log.child({ component: 'online' }) })),
    host: w.host,
    port: w.port,
    plain: w.plain,
    tls: tls.client && { port: w.tls!.port, files: tls.client },
    announceTlsPort: w.announceTlsPort,
    announceHost: w.announceHost,
    secret: config.secret,
    limits: w.limits,
    health: w.health,
    // The node closes them on stop, after the embedded gate has stopped.
    groups: groups.store,
    groupNotifier: groups.notifier,
    maxGroupsPerUser: groupLimits(config.groupLimits).maxGroupsPerUser,
    revocations: users && revocationNotifier && { users, notifier: revocationNotifier, checkMs: w.revocationCheckMs },
    log,
  });
  return {
    node,
    users,
    revocationNotifier,
    start: () => node.start(),
    async stop() {
      await node.stop();
      if (!w.checkRecipients) await users?.close();
    },
  };
}

function inboxFor(config: SwitchboardConfig, w: WorkerConfig): InboxStore {
  const { redis, log } = config;
  if (!redis) return new MemoryInboxStore({ ...w.inboxLimits, maxBytes: w.memoryInboxBytes }, Date.now, log.child({ component: 'inbox' }));
  const inbox = new RedisInboxStore({ url: redis.url, keyPrefix: redis.keyPrefix, limits: w.inboxLimits, timeoutMs: redis.timeoutMs });
  logRedis(inbox.redis, log.child({ component: 'redis', store: 'inbox' }));
  return inbox;
}

/**
 * Accounts live where the inboxes do, so no inbox outlives the account it belongs to (else
 * after a restart anyone could sign up with a stored user's name and read their messages): in
 * Redis with `redis` (where a cluster's gate keeps them too), else in the embedded gate's
 * memory; a worker without Redis and without a gate knows no accounts. Where there are
 * accounts, the worker refuses recipients without one (unless !checkRecipients).
 */
function accountsFor(config: SwitchboardConfig, w: WorkerConfig, own: Own): UserStore | undefined {
  const { redis, log } = config;
  const withGate = config.gate !== undefined;
  // With Redis always: besides the accounts it holds the revocations the workers enforce.
  if (redis) return own(redisUsers(redis, log));
  return withGate ? new MemoryUserStore() : undefined;
}

/** With `redis`, pub/sub on `<prefix>revocations` (every worker hears every gate); else this process only. */
function revocationNotifierFor(config: SwitchboardConfig): RevocationNotifier {
  const { redis, log } = config;
  if (!redis) return new MemoryRevocationNotifier();
  return new RedisRevocationNotifier({ url: redis.url, keyPrefix: redis.keyPrefix, timeoutMs: redis.timeoutMs, log: log.child({ component: 'redis', store: 'revocations' }) });
}

function redisUsers(redis: RedisConfig, log: Logger): RedisUserStore {
  const users = new RedisUserStore({ url: redis.url, keyPrefix: redis.keyPrefix, timeoutMs: redis.timeoutMs });
  logRedis(users.redis, log.child({ component: 'redis', store: 'users' }));
  return users;
}

/** Cluster mode: the sessions in Redis (the registry is in ZooKeeper). */
function sessionStore(redis: RedisConfig, sessionTtlMs: number, log: Logger): RedisSessionStore {
  const store = new RedisSessionStore({ url: redis.url, keyPrefix: redis.keyPrefix, ttlMs: sessionTtlMs, timeoutMs: redis.timeoutMs });
  logRedis(store.redis, log.child({ component: 'redis', store: 'sessions' }));
  return store;
}

function zooKeeperRegistry(config: SwitchboardConfig): ZooKeeperRegistry {
  const { connect, root, sessionTimeoutMs, reconcileIntervalMs, auth, readers } = config.zookeeper!;
  return new ZooKeeperRegistry({ connect, root, sessionTimeoutMs, reconcileIntervalMs, auth, readers, log: config.log.child({ component: 'zookeeper' }) });
}

interface GatePart extends Part<AddressInfo> {
  readonly gate: WebGate;
}

/** `switchboard start`'s gate: the worker's registry, accounts, signer and counts; limits in memory. */
function embeddedGate(config: SwitchboardConfig, g: GateConfig, worker: WorkerPart, groups: Groups, tls: TlsFiles | undefined): GatePart {
  const { node } = worker;
  const gate = new WebGate({
    host: g.host,
    port: g.port,
    tls,
    registry: node.registry,
    users: worker.users!,
    signer: node.signer,
    hasher: new PasswordHasher(),
    online: () => node.online.read(),
    registration: g.registration,
    limits: g.limits,
    trustProxy: g.trustProxy,
    groups: { ...groups, checkMembers: g.checkMembers },
    conversations: { inbox: node.inbox, normalizePeers: g.checkMembers !== false },
    revocations: worker.revocationNotifier,
    adminToken: g.adminToken,
    log: config.log.child({ component: 'gate' }),
  });
  return { gate, start: () => gate.listen(), stop: () => gate.close() };
}

/**
 * `switchboard gate`: follows the workers in ZooKeeper (without registering itself), reads the
 * OnlineCounter on the same session, keeps users and rate-limit counts in Redis, and probes the
 * workers it hands out.
 */
function clusterGate(config: SwitchboardConfig, g: GateConfig, groups: Groups, own: Own, tls: TlsFiles | undefined): GatePart {
  const { log } = config;
  const redis = config.redis!;
  // What connects only when started first, the Redis stores (which connect at once) last.
  const registry = own(zooKeeperRegistry(config));
  const online = new ZooKeeperOnlineCounter({ zookeeper: registry.zookeeper, selfId: () => '', local: () => ({ users: 0, sessions: 0 }), log: log.child({ component: 'online' }) });
  const probe = new WorkerProbe({ registry, ...(g.probe ?? DEFAULT_PROBE_SETTINGS), log: log.child({ component: 'probe' }) });
  const signer = new TokenSigner(config.secret);
  const users = own(redisUsers(redis, log));
  // Every gate on this Redis counts in the same windows: the limits hold for the whole fleet.
  const rateLimits = own(new RedisRateLimitStore({ url: redis.url, keyPrefix: `${redis.keyPrefix}rl:`, timeoutMs: redis.timeoutMs }));
  // The workers' inboxes, read for the conversation routes: with the workers' limits, since a read prunes by them.
  const inbox = own(new RedisInboxStore({ url: redis.url, keyPrefix: redis.keyPrefix, limits: g.inboxLimits, timeoutMs: redis.timeoutMs }));
  const revocations = own(revocationNotifierFor(config));
  const gate = new WebGate({
    host: g.host,
    port: g.port,
    tls,
    registry,
    users,
    signer,
    hasher: new PasswordHasher(),
    online: () => online.read(),
    registration: g.registration,
    limits: g.limits,
    rateLimits,
    trustProxy: g.trustProxy,
    probe,
    groups: { ...groups, checkMembers: g.checkMembers },
    conversations: { inbox, normalizePeers: g.checkMembers !== false },
    revocations,
    adminToken: g.adminToken,
    log: log.child({ component: 'gate' }),
  });
  return {
    gate,
    async start() {
      await registry.observe();
      probe.start();
      return gate.listen();
    },
    async stop() {
      probe.close();
      await gate.close();
      await online.close();
      await registry.close();
      await users.close();
      await rateLimits.close();
      await inbox.close();
      await revocations.close();
      await groups.notifier.close();
      await groups.store.close();
    },
  };
}
