// A logged-in device on this worker: who it is and the channel its frames go out on.
// The session layer knows nothing about sockets; the server's Connection implements Outbound.

import type { Failure } from '../protocol/messages.js';

/** What a session needs of its connection. */
export interface Outbound {
  /** Queues one complete frame for writing. Never throws; a closed connection drops it. */
  sendFrame(frame: Buffer): void;
  /** Sends a CLOSING notification (when possible) and closes. */
  close(failure: Failure): void;
}

export class LocalSession {
  constructor(
    readonly sessionId: string,
    readonly uid: string,
    readonly deviceId: string,
    readonly platform: number,
    readonly outbound: Outbound,
    readonly loginAt = Date.now(),
  ) {}
}
