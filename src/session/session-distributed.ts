// SessionDistributed: the session directory, as this worker keeps it (the seed's name). The
// SessionStore (memory on one node, Redis in a cluster) records which worker holds which
// session, so that the others can route to it. Here is all this worker does to it: a session
// that logs in is published, every sessionRefreshMs all are refreshed (their TTL), one that
// leaves is withdrawn at once; after a re-registration (the others may have purged them while
// this worker was gone from the registry) all are published again and onRepublished listeners
// are told (the cluster announces them anew); and when a worker leaves the registry, the live
// worker with the lowest id purges its sessions at once (their TTL would remove them later).

import type { Logger } from '../log.js';
import type { LocalSession } from './local-session.js';
import type { SessionRecord, SessionStore } from './session-store.js';

/** What the directory needs of the Registry (registry/registry.ts), which it does not import. */
export interface Registration {
  /** Whether this worker's registration is known to be in place now. */
  registered(): boolean;
  /** Calls `listener` after the registration and every re-registration. */
  onRegistered(listener: () => void): () => void;
}

export interface SessionDistributedOptions {
  store: SessionStore;
  /** This worker's registration: whether it is in place now, and its re-registrations. */
  registry: Registration;
  /** This worker's sessions (its LocalSessionMap). */
  sessions: Iterable<LocalSession>;
  /** How often this worker rewrites its sessions' records. */
  refreshMs: number;
  /** The node's logger: lines come as the worker's (component `worker`), the purge as the cluster's. */
  log: Logger;
}

export class SessionDistributed {
  readonly #o: SessionDistributedOptions;
  readonly #log: Logger;
  readonly #clusterLog: Logger;
  readonly #republished = new Set<() => void>();
  /** This worker's id once registered (start()). */
  #nodeId = '';
  #timer: NodeJS.Timeout | undefined;
  #unsubscribe: (() => void) | undefined;

  constructor(options: SessionDistributedOptions) {
    this.#o = options;
    this.#log = options.log.child({ component: 'worker' });
    this.#clusterLog = options.log.child({ component: 'cluster' });
  }

  /** A session logged in on worker `nodeId`: its record, before the login is answered. */
  publish(session: LocalSession, nodeId: string): Promise<void> {
    return this.#o.store.add(recordOf(session, nodeId));
  }

  /**
   * A session left: its record goes at once, not when its socket finally closes (a message
   * routed to it meanwhile would be acknowledged and dropped). A failure is logged on `log`.
   */
  withdraw(session: LocalSession, log: Logger): void {
    this.#o.store.remove(session.uid, session.sessionId).catch((err: unknown) => {
      log.error({ err }, 'session store removal failed');
    });
  }

  /** Once this worker is registered as `nodeId`: the periodic refresh, and the re-publishing. */
  start(nodeId: string): void {
    this.#nodeId = nodeId;
    // After a re-registration other workers may have purged our sessions: publish them again.
    this.#unsubscribe = this.#o.registry.onRegistered(() => {
      this.#refresh();
      for (const listener of this.#republished) listener();
    });
    this.#timer = setInterval(() => this.#refresh(), this.#o.refreshMs);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#unsubscribe?.();
  }

  /** Calls `listener` after every re-registration's re-publishing; returns a function that unsubscribes. */
  onRepublished(listener: () => void): () => void {
    this.#republished.add(listener);
    return () => this.#republished.delete(listener);
  }

  /** Worker `nodeId` left the registry, whose view is now `workers`: purged here if this is the lowest live worker. */
  departed(nodeId: string, workers: readonly { id: string }[]): void {
    const self = this.#nodeId;
    // Only when we are listed ourselves: a worker whose own registration lapsed sees everyone
    // vanish and must not purge them.
    if (!self || !workers.some((w) => w.id === self)) return;
    const lowest = workers.map((w) => w.id).sort()[0];
    if (lowest !== self) return;
    this.#o.store.purgeNode(nodeId).then(
      (purged) => this.#clusterLog.info({ peer: nodeId, purged }, 'purged sessions of a departed worker'),
      (err: unknown) => this.#clusterLog.error({ err, peer: nodeId }, 'session purge failed'),
    );
  }

  #refresh(): void {
    // A worker cut off from the registry may have been declared gone and its sessions purged:
    // writing them back would route users to a worker the others have no link to. The records'
    // TTL outlasts a short disconnection; a re-registration publishes them again (start()).
    if (!this.#o.registry.registered()) return;
    const records = [...this.#o.sessions].filter((s) => s.ready).map((s) => recordOf(s, this.#nodeId));
    this.#o.store.refresh(records).catch((err: unknown) => this.#log.error({ err }, 'session refresh failed'));
  }
}

function recordOf(session: LocalSession, nodeId: string): SessionRecord {
  return { sessionId: session.sessionId, uid: session.uid, deviceId: session.deviceId, nodeId, platform: session.platform, loginAt: session.loginAt };
}
