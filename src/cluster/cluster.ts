// Assembles the cluster parts of one worker around its LocalPort: the WorkerRouter (peer
// links), the RouteCache, the ClusterRouter and the PeerAcceptor. Passed to the WorkerServer as
// its `cluster` option by the composition root.

import type { Logger } from '../log.js';
import type { Registry } from '../registry/registry.js';
import type { SessionStore } from '../session/session-store.js';
import type { LocalPort, MessageRouter, ServerExtension } from '../server/router.js';
import { ClusterRouter } from './cluster-router.js';
import { PeerAcceptor } from './peer-acceptor.js';
import { RouteCache } from './route-cache.js';
import { WorkerRouter } from './worker-router.js';

export interface ClusterSettings {
  /** Shared by every worker; proves peers to each other. */
  secret: string;
  /** Delay between peer connection attempts. */
  peerReconnectMs: number;
  /** Frames kept per peer while its link is down. */
  peerQueueLimit: number;
  routeCacheTtlMs: number;
  routeCacheSize: number;
}

export const DEFAULT_CLUSTER_SETTINGS: Omit<ClusterSettings, 'secret'> = Object.freeze({
  peerReconnectMs: 10_000,
  peerQueueLimit: 10_000,
  routeCacheTtlMs: 5_000,
  routeCacheSize: 100_000,
});

export interface ClusterDeps {
  registry: Registry;
  store: SessionStore;
  heartbeatMs: number;
  maxFrameLength: number;
  log: Logger;
}

export function createCluster(settings: ClusterSettings, deps: ClusterDeps) {
  return (local: LocalPort): { router: MessageRouter; extension: ServerExtension } => {
    let selfId = '';
    const getSelf = () => selfId;
    const log = deps.log.child({ component: 'cluster' });
    const workers = new WorkerRouter({
      registry: deps.registry,
      store: deps.store,
      selfId: getSelf,
      log,
      links: {
        secret: settings.secret,
        reconnectMs: settings.peerReconnectMs,
        queueLimit: settings.peerQueueLimit,
        missedLimit: settings.peerQueueLimit,
        heartbeatMs: deps.heartbeatMs,
        maxFrameLength: deps.maxFrameLength,
      },
    });
    const routes = new RouteCache({ store: deps.store, selfId: getSelf, ttlMs: settings.routeCacheTtlMs, maxEntries: settings.routeCacheSize });
    const router = new ClusterRouter({ local, workers, routes, selfId: getSelf, routeCacheTtlMs: settings.routeCacheTtlMs, registry: deps.registry, log });
    const extension = new PeerAcceptor({ secret: settings.secret, local, selfId: getSelf, onSessionEvent: (uid) => routes.invalidate(uid), log });
    local.nodeId.then((id) => {
      selfId = id;
      workers.start();
    });
    return { router, extension };
  };
}
