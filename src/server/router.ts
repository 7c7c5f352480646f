// Where a stored message goes next. A single node delivers to its own sessions (LocalRouter);
// in a cluster, src/cluster's router also forwards to the workers holding the recipient's other
// sessions. The server only sees these interfaces, never peers.

import type { ImMessage } from '../protocol/types.js';
import type { LocalSession } from '../session/local-session.js';
import type { Connection } from './connection.js';

export interface MessageRouter {
  /** A message was stored in `uid`'s inbox as `seq`: get it to every online session of `uid`. */
  deliver(uid: string, seq: number, body: Uint8Array): void;
  /** A session is ready on this worker (logged in, replay started). */
  sessionOpened(session: LocalSession): void;
  /** A session left this worker. */
  sessionClosed(session: LocalSession): void;
  close(): Promise<void>;
}

/** What this worker offers a router and an extension. */
export interface LocalPort {
  /** Delivers an inbox message to this worker's sessions of `uid`. */
  deliver(uid: string, seq: number, body: Uint8Array): void;
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

  deliver(uid: string, seq: number, body: Uint8Array): void {
    this.local.deliver(uid, seq, body);
  }

  sessionOpened(): void {}

  sessionClosed(): void {}

  async close(): Promise<void> {}
}
