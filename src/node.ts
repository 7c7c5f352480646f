// The composition root: builds one switchboard node from its options and owns the lifetime of
// everything it built. Nothing else constructs stores, registries or servers, so a test can run
// several nodes in one process.

import { createRequire } from 'node:module';
import { DEFAULT_LIMITS, type WorkerLimits } from './config.js';
import { TokenSigner } from './auth/token.js';
import { silentLogger, type Logger } from './log.js';
import type { Registry } from './registry/registry.js';
import type { ImNode } from './registry/im-node.js';
import { StaticRegistry } from './registry/static-registry.js';
import { MemorySessionStore } from './session/memory-session-store.js';
import { LocalSessionMap } from './session/local-session-map.js';
import { SessionDistributed } from './session/session-distributed.js';
import type { SessionStore } from './session/session-store.js';
import type { InboxStore } from './inbox/inbox-store.js';
import { MemoryInboxStore } from './inbox/memory-inbox-store.js';
import { WorkerServer } from './server/worker-server.js';
import { createCluster, type ClusterSettings } from './cluster/cluster.js';
import { MemoryOnlineCounter, type LocalCounts, type OnlineCounter } from './registry/online-counter.js';
import type { UserStore } from './users/user-store.js';
import { StoreHealth, type HealthSettings } from './server/store-health.js';

export const VERSION: string = (createRequire(import.meta.url)('../package.json') as { version: string }).version;

export interface NodeOptions {
  host?: string;
  port?: number;
  announceHost?: string;
  secret: string;
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
  const signer = new TokenSigner(options.secret);
  const host = options.host ?? '127.0.0.1';
  const health = new StoreHealth({ ...options.health, stores: { session: store, inbox, ...(users ? { users } : {}) }, log: log.child({ component: 'health' }) });
  const sessions = new LocalSessionMap();
  const directory = new SessionDistributed({ store, registry, sessions, refreshMs: limits.sessionRefreshMs, log });
  const server = new WorkerServer({
    host,
    port: options.port ?? 9000,
    announceHost: options.announceHost,
    limits,
    signer,
    sessions,
    directory,
    inbox,
    registry,
    users,
    health,
    log: log.child({ component: 'worker' }),
    version: VERSION,
    cluster: options.cluster && createCluster(options.cluster, { registry, store, directory, host, limits, log }),
  });
  const counts: LocalCounts = { selfId: () => server.info?.id ?? '', local: () => ({ users: server.sessions.users, sessions: server.sessions.size }) };
  const online = options.online ? options.online(counts) : new MemoryOnlineCounter(counts);
  let stopping: Promise<void> | undefined;
  const node: SwitchboardNode = {
    server,
    registry,
    store,
    inbox,
    users,
    signer,
    online,
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
        await users?.close();
      })();
      return stopping;
    },
  };
  return node;
}
