// Where a stored message goes next. A single node delivers to its own sessions (LocalRouter);
// in a cluster, src/cluster's router also forwards to the workers holding the recipient's other
// sessions. The server only sees these interfaces, never peers.

import type { WorkerAnnouncement } from '../registry/registry.js';
import type { LocalSession } from '../session/local-session.js';

export interface MessageRouter {
  /** A message was stored in `uid`'s inbox as `seq`: get it to every online session of `uid`. */
  deliver(uid: string, seq: number, body: Uint8Array): void;
  /** A session is ready on this worker (logged in, replay started). */
  sessionOpened(session: LocalSession): void;
  /** A session left this worker. */
  sessionClosed(session: LocalSession): void;
  close(): Promise<void>;
}

/** What this worker offers a router and the rest of a cluster. */
export interface LocalPort {
  /** Delivers an inbox message to this worker's sessions of `uid`. */
  deliver(uid: string, seq: number, body: Uint8Array): void;
  /** Makes this worker's sessions of these users (of everyone, when undefined) read their inbox. */
  nudge(uids?: readonly string[]): void;
  /** Resolves this worker's node id once registered. */
  readonly nodeId: Promise<string>;
}

/**
 * What cluster mode adds to a worker: its router, and whatever the cluster listens on itself.
 * The server starts it before registering, so that everything the registry entry announces is
 * reachable once the worker is listed, and stops it after the router.
 */
export interface WorkerCluster {
  readonly router: MessageRouter;
  /** Starts the cluster's own listeners; resolves the fields it adds to this worker's registry entry. */
  start(): Promise<Partial<WorkerAnnouncement>>;
  stop(): Promise<void>;
}

export class LocalRouter implements MessageRouter {
  constructor(private readonly local: LocalPort) {}

  deliver(uid: string, seq: number, body: Uint8Array): void {
    this.local.deliver(uid, seq, body);
  }

  sessionOpened(): void {}

  sessionClosed(): void {}

  async close(): Promise<void> {}
}
