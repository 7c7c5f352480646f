// Receipts (PROTOCOL.md §14): a sender's devices that asked (LoginRequest.receipts) are told
// when a device of the recipient acknowledged its messages (DELIVERED) and when the recipient
// marked the conversation read (READ). Cumulative: a receipt covers every message the sender
// sent that recipient up to the recipient's inbox `seq`, so one per sender per ack is enough,
// and a receipt lost (the sender offline, a link down) is covered by the next one. They are
// never stored: at most once.
//
// For DELIVERED, each delivery written to an ack device is remembered (seq, sender, msg_id) until
// the device acknowledges it: at most MAX_MARKS per session (ReceiptMarks), the oldest dropped
// when full (a later receipt from the same sender covers it). A user who turned receipts off
// (the privacy setting in the UserStore) sends none and gets none; the setting is read at login
// and again, in the background, once it is older than the TTL (30 s) when the session
// acknowledges, marks read or would be sent a receipt.

import type { Logger } from '../log.js';
import { isOwnCopy } from '../protocol/codec.js';
import { ReceiptKind, type Receipt, type UInt64 } from '../protocol/types.js';
import type { LocalSession } from '../session/local-session.js';
import { ReceiptMarks } from '../session/receipt-marks.js';
import type { UserStore } from '../users/user-store.js';
import type { MessageRouter } from './cluster-seam.js';

/** How stale a session's copy of its user's receipts setting may get, by default. */
export const SETTING_TTL_MS = 30_000;

export class Receipts {
  readonly #users: Pick<UserStore, 'receipts'> | undefined;
  readonly #router: () => MessageRouter;
  readonly #log: Logger;
  readonly #settingTtlMs: number;

  /** `router` is asked per receipt: the worker makes it after this. */
  constructor(users: Pick<UserStore, 'receipts'> | undefined, router: () => MessageRouter, log: Logger, settingTtlMs = SETTING_TTL_MS) {
    this.#users = users;
    this.#router = router;
    this.#log = log;
    this.#settingTtlMs = settingTtlMs;
  }

  /**
   * At login: the user's setting, before any delivery. Without a UserStore receipts are on. A
   * store that does not answer does not fail the login: receipts are off for the session (the
   * private choice) until a later read succeeds.
   */
  async prepare(session: LocalSession): Promise<void> {
    if (!this.#users) return;
    session.receiptsCheckedAt = Date.now();
    try {
      session.receiptsOn = await this.#users.receipts(session.uid);
    } catch (err) {
      session.receiptsOn = false;
      this.#log.warn({ err, uid: session.uid }, 'receipts setting read failed; the last one holds');
    }
  }

  /** Delivery `seq` (stored `body`) was written to `session`. */
  written(session: LocalSession, seq: number, body: Uint8Array): void {
    if (!session.acks || !session.receiptsOn || isOwnCopy(body)) return;
    (session.receiptMarks ??= new ReceiptMarks()).add(seq, body, session.uid);
  }

  /** `session` acknowledged everything up to `seq`: a DELIVERED receipt to each sender of what that covers. */
  acknowledged(session: LocalSession, seq: number): void {
    this.#refresh(session);
    const marks = session.receiptMarks;
    if (marks === undefined || marks.oldestSeq > seq) return;
    // The newest acknowledged message of each sender.
    const newest = marks.take(seq);
    if (!session.receiptsOn) return;
    const at = Date.now();
    for (const mark of newest) this.#send(mark.from, { kind: ReceiptKind.DELIVERED, peer: session.uid, seq: mark.seq, msgId: mark.msgId, at });
  }

  /** `session`'s user marked the conversation with `peer` read, its newest message from `peer` covered being `seq` (msg_id `msgId`). */
  read(session: LocalSession, peer: string, seq: number, msgId: UInt64): void {
    this.#refresh(session);
    if (!session.receiptsOn || peer === session.uid) return;
    this.#send(peer, { kind: ReceiptKind.READ, peer: session.uid, seq, msgId, at: Date.now() });
  }

  /** Whether `session` is sent receipts: it asked, and its user has them on. */
  wants(session: LocalSession): boolean {
    return session.receipts && this.sharing(session);
  }

  /**
   * The user's setting as the session knows it (at most the TTL old): whether its group read
   * positions are shared and it may see the other members'.
   */
  sharing(session: LocalSession): boolean {
    this.#refresh(session);
    return session.receiptsOn;
  }

  #send(to: string, receipt: Receipt): void {
    this.#router().receipt(to, receipt);
  }

  /** Re-reads the setting in the background once it is older than the TTL; meanwhile the last one holds. */
  #refresh(session: LocalSession): void {
    const users = this.#users;
    if (!users) return;
    const now = Date.now();
    if (now - session.receiptsCheckedAt < this.#settingTtlMs) return;
    session.receiptsCheckedAt = now;
    users.receipts(session.uid).then(
      (on) => (session.receiptsOn = on),
      (err: unknown) => this.#log.warn({ err, uid: session.uid }, 'receipts setting read failed; the last one holds'),
    );
  }
}
