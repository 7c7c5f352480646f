// One device's position in one group's log: the group counterpart of the inbox fields of
// LocalSession, owned by the server's GroupDelivery (src/server/group-delivery.ts). Group
// devices always acknowledge (LoginRequest.groups needs acks), so there is no legacy hand-off.

import type { LocalSession } from './local-session.js';

export class GroupStream {
  /** The position is known (read at login, or the stream was created by the `added` event): deliveries may flow. */
  ready = false;
  /** A catch-up read of the group's log is in progress. */
  pumping = false;
  /** Read once more when the running read ends. */
  repump = false;
  /** Highest group seq written to the device (or skipped: its own message, answered by the response). */
  sent = 0;
  /** Highest group seq the device acknowledged. */
  acked = 0;
  /** Highest group seq known to exist (that this device may read). */
  known = 0;
  /** When the oldest unacknowledged delivery was written; 0 when all are acknowledged. */
  unackedSince = 0;
  /** Position last saved to the GroupStore. */
  saved = 0;
  /** The last run of the device's own entries that were skipped (sent by it, answered by their responses): ownFrom..ownTo. */
  ownFrom = 0;
  ownTo = 0;
  /** The last seq the device may read: its user's departure (left, removed, dissolved); Infinity while a member. */
  until = Infinity;

  constructor(
    readonly session: LocalSession,
    readonly group: string,
  ) {}
}
