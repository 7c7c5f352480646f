// Where a stored message goes next. A single node delivers to its own sessions (LocalRouter);
// in a cluster, src/cluster's router also forwards to the workers holding the recipient's other
// sessions. The server only sees these interfaces, never peers.

import type { ImMessage } from '../protocol/types.js';
import type { LocalSession } from '../session/local-session.js';
import type { Connection } from './connection.js';

export interface MessageRouter {
  /** A message was stored in `uid`'s inbox as `seq` of `epoch`: get it to every online session of `uid`. */
  deliver(uid: string, seq: number, body: Uint8Array, epoch: number): void;
  /** A session is ready on this worker (logged in, replay started). */
  sessionOpened(session: LocalSession): void;
  /** A session left this worker. */
  sessionClosed(session: LocalSession): void;
  close(): Promise<void>;
}

/** What this worker offers a router and an extension. */
export interface LocalPort {
  /**
   * Delivers inbox message `seq` of `epoch` to this worker's sessions of `uid`. Written as is
   * only to a session of that epoch that is at `seq - 1`; any other session reads its inbox
   * instead, so a delivery can never move a position past what the inbox holds.
   */
  deliver(uid: string, seq: number, body: Uint8Array, epoch: number): void;
  /** Makes this worker's sessions of these users (of everyone, when undefined) read their inbox. */
  nudge(uids?: readonly string[]): void;
  /** Resolves this worker's node id once registered. */
  readonly nodeId: Promise<string>;
}

/** Frames of types the server does not handle itself (the cluster's peer protocol). */
export interface ServerExtension {
  /** True when every frame of this connection belongs to the extension (an authenticated peer). */
  owns(conn: Connection): boolean;
  /** Handles a message; false when the type is not the extension's either. May throw a SwitchboardError. */
  handle(conn: Connection, message: ImMessage): boolean;
}

export class LocalRouter implements MessageRouter {
  constructor(private readonly local: LocalPort) {}

  deliver(uid: string, seq: number, body: Uint8Array, epoch: number): void {
    this.local.deliver(uid, seq, body, epoch);
  }

  sessionOpened(): void {}

  sessionClosed(): void {}

  async close(): Promise<void> {}
}
