// Assembles the cluster parts of one worker around its LocalPort: the WorkerRouter (outgoing
// peer links), the RouteCache, the ClusterMessageRouter, and the peer port (PeerListener with
// its PeerAcceptor). Passed to the WorkerServer as its `cluster` option by the composition
// root; the server starts the peer port before it registers and announces it as `peerPort`.

import type { WorkerLimits } from '../config.js';
import type { Logger } from '../log.js';
import type { Registry } from '../registry/registry.js';
import type { SessionStore } from '../session/session-store.js';
import type { SessionDistributed } from '../session/session-distributed.js';
import type { LocalPort, WorkerCluster } from '../server/cluster-seam.js';
import { ClusterMessageRouter } from './cluster-message-router.js';
import { PeerAcceptor } from './peer-acceptor.js';
import { PeerListener } from './peer-listener.js';
import { RouteCache } from './route-cache.js';
import { WorkerRouter } from './worker-router.js';
import type { TlsFiles } from '../net/tls-files.js';

/**
 * TLS on the peer links. `ca`: the acceptor shows a certificate of the cluster CA, which the
 * dialer verifies (with the acceptor's registered host); `mutual`: the dialer shows one too,
 * which the acceptor verifies. In both the peer handshake proves the cluster secret as ever.
 */
export type PeerTlsMode = 'ca' | 'mutual';

export interface ClusterSettings {
  /** Shared by every worker; proves peers to each other. */
  secret: string;
  /** Address of the peer listener; default: the worker's own (client) host. */
  peerHost?: string;
  /** Port of the peer listener; 0 picks a free one (announced in the registry). */
  peerPort: number;
  /** A peer-port connection that has not completed the handshake within this long is closed. */
  peerHandshakeTimeoutMs: number;
  /** Peer-port connections that have not completed the handshake, at once; more are refused. */
  peerMaxPending: number;
  /** Delay between peer connection attempts. */
  peerReconnectMs: number;
  /** Frames kept per peer while its link is down. */
  peerQueueLimit: number;
  routeCacheTtlMs: number;
  routeCacheSize: number;
  /** TLS on the peer port and links: this worker's certificate and key, and the cluster CA (`files.paths.ca`). Unset: plaintext. */
  peerTls?: { mode: PeerTlsMode; files: TlsFiles };
}

export const DEFAULT_CLUSTER_SETTINGS: Omit<ClusterSettings, 'secret'> = Object.freeze({
  peerPort: 0,
  peerHandshakeTimeoutMs: 5_000,
  peerMaxPending: 64,
  peerReconnectMs: 10_000,
  peerQueueLimit: 10_000,
  routeCacheTtlMs: 5_000,
  routeCacheSize: 100_000,
});

/**
 * The longest a HELLO waits for its id to show in the registry's view (which follows a new
 * registration within milliseconds); at most half the handshake timeout, so the refusal, not
 * the timeout, tells the dialer why.
 */
const REGISTRY_WAIT_MS = 3_000;

export interface ClusterDeps {
  registry: Registry;
  /** Where routes are read. */
  store: SessionStore;
  /** The session directory: told of departed workers, and followed for re-publishing. */
  directory: SessionDistributed;
  /** The worker's own host: the peer listener's default address. */
  host: string;
  limits: WorkerLimits;
  log: Logger;
}

export function createCluster(settings: ClusterSettings, deps: ClusterDeps) {
  return (local: LocalPort): WorkerCluster => {
    let selfId = '';
    const getSelf = () => selfId;
    const log = deps.log.child({ component: 'cluster' });
    const workers = new WorkerRouter({
      registry: deps.registry,
      directory: deps.directory,
      selfId: getSelf,
      log,
      links: {
        secret: settings.secret,
        reconnectMs: settings.peerReconnectMs,
        queueLimit: settings.peerQueueLimit,
        missedLimit: settings.peerQueueLimit,
        heartbeatMs: deps.limits.heartbeatIntervalMs,
        maxFrameLength: deps.limits.maxFrameLength,
        tls: settings.peerTls?.files,
      },
    });
    const routes = new RouteCache({ store: deps.store, selfId: getSelf, ttlMs: settings.routeCacheTtlMs, maxEntries: settings.routeCacheSize });
    const router = new ClusterMessageRouter({ local, workers, routes, selfId: getSelf, routeCacheTtlMs: settings.routeCacheTtlMs, directory: deps.directory, log });
    const acceptor = new PeerAcceptor({
      secret: settings.secret,
      local,
      registry: deps.registry,
      registryWaitMs: Math.min(REGISTRY_WAIT_MS, Math.floor(settings.peerHandshakeTimeoutMs / 2)),
      onSessionEvent: (uid) => routes.invalidate(uid),
      log,
    });
    const listener = new PeerListener({
      host: settings.peerHost ?? deps.host,
      port: settings.peerPort,
      limits: deps.limits,
      handshakeTimeoutMs: settings.peerHandshakeTimeoutMs,
      maxPending: settings.peerMaxPending,
      acceptor,
      tls: settings.peerTls && { files: settings.peerTls.files, mutual: settings.peerTls.mode === 'mutual' },
      log: log.child({ listener: 'peer' }),
    });
    local.nodeId.then((id) => {
      selfId = id;
      workers.start();
    });
    return {
      router,
      async start() {
        const address = await listener.start();
        return { peerPort: address.port };
      },
      stop: () => listener.stop(),
    };
  };
}
