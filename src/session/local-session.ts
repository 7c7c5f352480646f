// A logged-in device on this worker: who it is and the channel its frames go out on.
// The session layer knows nothing about sockets; the server's Connection implements Outbound.

import type { Failure } from '../protocol/messages.js';
import type { HandoffRing } from './handoff-ring.js';
import type { ReceiptMarks } from './receipt-marks.js';

/** A token bucket's state: `tokens` as of `at` (ms); the owner knows the rate and size. */
export interface RateState {
  tokens: number;
  at: number;
}

/** What a session needs of its connection. */
export interface Outbound {
  /** Queues one complete frame for writing. Never throws; a closed connection drops it. */
  sendFrame(frame: Buffer): void;
  /** Sends a CLOSING notification (when possible) and closes. */
  close(failure: Failure): void;
  /** True while written output waits for the socket to drain. */
  readonly congested: boolean;
  /** Resolves when the output has drained or the connection has closed. */
  drained(): Promise<void>;
  /** Bytes of all frames queued so far: where the last one ends in the connection's output. */
  readonly queuedBytes: number;
  /**
   * How many of those bytes the kernel has taken (never more; once the socket is gone, the last
   * figure known while it was there, or all of them if its output had finished).
   */
  readonly handedOffBytes: number;
}

export class LocalSession {
  // Delivery state, owned by the server's Delivery (see src/server/delivery.ts).
  /** The device acknowledges deliveries with MESSAGE_ACK. */
  acks = false;
  /** The device takes the copies of what its user sends from other devices (LoginRequest.own_copies). */
  ownCopies = false;
  /** The device takes inbox events, recalls and edits (LoginRequest.inbox_events); without, it is passed over them. */
  inboxEvents = false;

  // Receipts state, owned by the server's Receipts (see src/server/receipts.ts).
  /** The device takes RECEIPTs for what its user sends (LoginRequest.receipts). */
  receipts = false;
  /** Its user's privacy setting: receipts are sent for and to this user. */
  receiptsOn = true;
  /** When receiptsOn was last read from the UserStore. */
  receiptsCheckedAt = 0;
  /** Deliveries written and not yet acknowledged: what the next ack's receipts are about. */
  receiptMarks: ReceiptMarks | undefined;

  /**
   * When the login's token was issued (0: unknown, an sb1 token): a revocation of the user or
   * device at or after it closes the session (src/server/revocation-check.ts).
   */
  tokenIssuedAt = 0;

  /** Replay position is known and the LoginResponse is out: deliveries may flow. */
  ready = false;
  /** Gone from the server: nothing more is sent and its position is saved. */
  released = false;
  /** A catch-up read from the inbox is in progress. */
  pumping = false;
  /** Read the inbox once more when the running catch-up read ends (a nudge or check came meanwhile). */
  repump = false;
  /** A nudge is waiting for the sweep (nudges are served at most once per sweep interval). */
  nudgePending = false;
  /** When a nudge last made this session read its inbox. */
  nudgedAt = 0;
  /**
   * The inbox epoch the positions below belong to; 0 once the session is known to hold a
   * position of a past epoch (it is being closed, and its position is never saved).
   */
  epoch = 0;
  /** Highest inbox sequence written to this device, or passed over as not for it (another device's own copy). */
  sentSeq = 0;
  /** Highest inbox sequence actually written (sentSeq without what was passed over): its ack covers up to sentSeq. */
  writtenSeq = 0;
  /** Highest inbox sequence the device acknowledged (ack devices). */
  ackedSeq = 0;
  /** Legacy devices: what was written, by output offset; the delivered position is what the kernel took. */
  handoff: HandoffRing | undefined;
  /**
   * Which message each of the last seqs written or passed over was (codec.ts bodyIdentity), as
   * (seq, identity) pairs at seq % SENT_IDS (Delivery's): a delivery of one of those seqs that is
   * another message shows that the inbox handed the seq out again. Allocated at the first.
   */
  sentIds: Float64Array | undefined;
  /** Highest inbox sequence known to exist. */
  knownHead = 0;
  /** When the oldest unacknowledged delivery was written; 0 when all are acknowledged. */
  unackedSince = 0;
  /** Position last written to the InboxStore. */
  savedPosition = 0;
  /**
   * Devices that logged in with `groups`: their position in each group they can read, by group
   * id (owned by the server's GroupDelivery). Undefined for every other device.
   */
  groups: Map<string, GroupStream> | undefined;

  // Message rate state, owned by the server's MessageRate (see src/server/message-rate.ts).
  /** This device's token bucket, as of `rateAt` (ms); 0 means never used: the first check fills it. */
  rateTokens = 0;
  rateAt = 0;
  /** The bucket this user's sessions on this worker share; found on the first message. */
  userRate: RateState | undefined;
  /** Rate refusals in the current flood window, and when that window started. */
  refusals = 0;
  refusalsSince = 0;
  /** Recipients this session's resends nudged lately (ResendNudges). */
  resendNudges: Map<string, { at: number; deferred: boolean }> | undefined;

  #deviceIdBytes: Buffer | undefined;

  constructor(
    readonly sessionId: string,
    readonly uid: string,
    readonly deviceId: string,
    readonly platform: number,
    readonly outbound: Outbound,
    readonly loginAt = Date.now(),
  ) {}

  /** deviceId as UTF-8, to compare with an own copy's origin_device without decoding it. */
  get deviceIdBytes(): Buffer {
    return (this.#deviceIdBytes ??= Buffer.from(this.deviceId, 'utf8'));
  }
}

/**
 * One device's position in one group's log: the group counterpart of the inbox fields of
 * LocalSession, owned by the server's GroupDelivery (src/server/group-delivery.ts). Group devices
 * always acknowledge (LoginRequest.groups needs acks), so there is no legacy hand-off.
 */
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
  /** The last seq the device may read: its user's departure (left, removed, dissolved); Infinity while a member. */
  until = Infinity;
  /**
   * The device's appends to this group not answered yet, by issue number (GroupDelivery's, at
   * most the connection's tasks). An entry of its user read from the log may be one of them: it
   * is not written before their responses tell (the device gets no copy of its own message).
   */
  readonly appending = new Set<number>();
  /**
   * Seqs of the device's own entries (its responses carried them) above `acked`: skipped by every
   * read, a resend's too, and counted as acknowledged with the entries before them. At most
   * GroupDelivery's OWN_KEPT, the lowest forgotten first.
   */
  readonly own = new Set<number>();
  /** The read stopped at an entry that may be one of the appends issued up to this number; 0 when not held. */
  heldFor = 0;

  constructor(
    readonly session: LocalSession,
    readonly group: string,
  ) {}
}
