// The seam between a worker and its cluster, as the server sees it. Where a stored message goes
// next: a single node delivers to its own sessions (LocalRouter); in a cluster, src/cluster's
// ClusterMessageRouter also forwards to the workers holding the recipient's other sessions. What the worker
// offers the cluster (LocalPort), and what cluster mode adds to a worker (WorkerCluster). The
// server only sees these interfaces, never peers.

import type { WorkerAnnouncement } from '../registry/im-node.js';
import type { LocalSession } from '../session/local-session.js';
import type { Receipt } from '../protocol/types.js';

export interface MessageRouter {
  /**
   * A message was stored in `uid`'s inbox as `seq` of `epoch`: get it to every online session of
   * `uid`. `id`: bodyIdentity(body) when the caller has it (a message and its own copy share one).
   */
  deliver(uid: string, seq: number, body: Uint8Array, epoch: number, id?: number): void;
  /**
   * Entry `seq` was stored in `group`'s log (`body`: its delivered MessageRequest): get it to the
   * sessions of the group's members, here and on every other worker. `sender`: the local
   * session that sent it (answered by its response, not sent a copy). Without `body` (a resend
   * found it stored: the worker that stored it may have died before forwarding it), sessions
   * that lack it read it from the log.
   */
  deliverGroup(group: string, seq: number, body: Uint8Array | undefined, sender?: LocalSession): void;
  /** A receipt for `uid`'s sessions that take receipts, here and on the workers that hold any (live only, at most once). */
  receipt(uid: string, receipt: Receipt): void;
  /**
   * `uid`'s inbox may hold messages its sessions were not sent (a resend found stored what a
   * send answered as failed had stored): its sessions read it, here and on every worker that
   * holds any, as often as nudges are served (delivery.ts).
   */
  nudge(uid: string): void;
  /** A session is ready on this worker (logged in, replay started). */
  sessionOpened(session: LocalSession): void;
  /** A session left this worker. */
  sessionClosed(session: LocalSession): void;
  close(): Promise<void>;
}

/** What this worker offers a router and the rest of a cluster. */
export interface LocalPort {
  /**
   * Delivers inbox message `seq` of `epoch` to this worker's sessions of `uid`. Written as is
   * only to a session of that epoch that is at `seq - 1`; any other session reads its inbox
   * instead, so a delivery can never move a position past what the inbox holds. `id`: as MessageRouter's.
   */
  deliver(uid: string, seq: number, body: Uint8Array, epoch: number, id?: number): void;
  /** Delivers group entry `seq` to this worker's sessions of the group's members (without `body`: they read it). */
  deliverGroup(group: string, seq: number, body: Uint8Array | undefined, sender?: LocalSession): void;
  /** Writes a RECEIPT to this worker's sessions of `uid` that take receipts. */
  receipt(uid: string, receipt: Receipt): void;
  /**
   * Makes this worker's sessions of these users read their inbox, and their groups too when
   * `groups`; undefined uids: every session, inbox and groups.
   */
  nudge(uids?: readonly string[], groups?: boolean): void;
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

  deliver(uid: string, seq: number, body: Uint8Array, epoch: number, id?: number): void {
    this.local.deliver(uid, seq, body, epoch, id);
  }

  deliverGroup(group: string, seq: number, body: Uint8Array | undefined, sender?: LocalSession): void {
    this.local.deliverGroup(group, seq, body, sender);
  }

  receipt(uid: string, receipt: Receipt): void {
    this.local.receipt(uid, receipt);
  }

  nudge(uid: string): void {
    this.local.nudge([uid]);
  }

  sessionOpened(): void {}

  sessionClosed(): void {}

  async close(): Promise<void> {}
}
