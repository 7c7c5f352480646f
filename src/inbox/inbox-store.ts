// Every user's inbox: an append-only log of the messages sent to them, numbered 1, 2, 3, ...
// per user, plus each device's position in it. The store neither knows nor cares who sent a
// message or why (chat now, groups later): it stores opaque bodies. Embedded mode keeps it in
// memory; with --redis it lives in Redis. Both pass test/inbox/inbox-store.conformance.ts.
//
// A sequence number means something only together with the inbox's *epoch*: a random id the
// inbox gets when it is created (and again whenever its history is known to have forked, see
// resetEpoch). An inbox that lost its data (a Redis restarted empty) numbers from 1 again under
// a new epoch, so a device position from before is recognisably from another history instead of
// silently hiding the new messages that reuse its numbers.

import { randomFillSync } from 'node:crypto';

export interface InboxLimits {
  /** Messages kept per user; the oldest are pruned beyond it. */
  maxMessages: number;
  /** Messages older than this are pruned. */
  maxAgeMs: number;
  /** A (sender, msgId) seen within this window is a duplicate and is not stored again. */
  dedupeWindowMs: number;
}

export const DEFAULT_INBOX_LIMITS: Readonly<InboxLimits> = Object.freeze({
  maxMessages: 10_000,
  maxAgeMs: 30 * 24 * 3600_000,
  dedupeWindowMs: 24 * 3600_000,
});

export interface AppendRequest {
  /** The inbox owner (the recipient). */
  uid: string;
  /** Who sent it: with msgId, the dedupe key. */
  sender: string;
  /** Sender-chosen id; '' or '0' disables dedupe for this message. */
  msgId: string;
  /** Handed over to the store: the caller must not modify it afterwards. */
  body: Uint8Array;
  /**
   * The conversation the message belongs to in `uid`'s inbox (PROTOCOL.md §14): the other
   * party's uid, or the owner's own for a note to itself. Undefined: not a message of a
   * conversation, and not listed (an event).
   */
  conversation?: string;
  /** The owner sent it (its own copy, a note to itself): not unread, and it marks the conversation read up to itself. */
  own?: boolean;
}

export interface AppendResult {
  seq: number;
  /** True when (sender, msgId) was stored before: `seq` is the original one, nothing was added. */
  duplicate: boolean;
  /** The inbox's epoch: `seq` is a position in this history. */
  epoch: number;
}

export interface StoredMessage {
  seq: number;
  storedAt: number;
  body: Buffer;
}

export interface InboxBounds {
  /** Highest sequence ever assigned (0 for a new inbox). */
  head: number;
  /** Lowest sequence still retained; head + 1 when nothing is retained. */
  oldest: number;
  /** The inbox's epoch (never 0: reading an inbox that has none gives it one). */
  epoch: number;
}

export interface InboxRange extends InboxBounds {
  /** Retained messages with seq > after, ascending, at most `limit`. */
  messages: StoredMessage[];
}

/**
 * One conversation of an inbox's owner, as its chat list shows it. Kept up to date by every
 * append that names a `conversation` (O(1) per message, in the same atomic step).
 */
export interface ConversationEntry {
  /** The other party's uid (the owner's own for notes to itself). */
  conversation: string;
  /** The seq and store time of the conversation's last message in the owner's inbox. */
  lastSeq: number;
  lastAt: number;
  /** That message while it is retained; undefined once pruned. */
  last: StoredMessage | undefined;
  /** Read up to this seq of the owner's inbox (0: nothing read). */
  readSeq: number;
  /** Messages received in the conversation after readSeq (the owner's own never count). */
  unread: number;
}

export interface ConversationPage {
  /** Most recent activity first: descending lastSeq. */
  conversations: ConversationEntry[];
  /** Older conversations exist: ask again with `before` = the last entry's lastSeq. */
  more: boolean;
}

export interface HistoryPage {
  /** The conversation's newest retained messages with seq < before, at most `limit`, ascending. */
  messages: StoredMessage[];
  /** Older retained messages of the conversation exist: ask again with `before` = messages[0].seq. */
  more: boolean;
  /** The conversation had messages that retention pruned: a page that ends without `more` ends at the retention edge. */
  pruned: boolean;
  /** The inbox's lowest retained seq (head + 1 when it retains none). */
  oldest: number;
}

export interface ReadResult {
  /** False: the owner has no such conversation; nothing changed. */
  found: boolean;
  /** The read position afterwards: the mark, clamped to the last message, never lower than before. */
  readSeq: number;
  unread: number;
  /** The read event's seq in the owner's inbox; undefined when the position did not move (nothing appended). */
  eventSeq: number | undefined;
  /** The owner inbox's epoch (of eventSeq). */
  epoch: number;
}

export interface RewriteResult {
  /** False: the inbox does not retain the seq (pruned, or never stored); nothing changed. */
  found: boolean;
  /** False when found: the body was that already (a repeat), or not the one expected (`changed`); nothing changed. */
  rewritten: boolean;
  /** Found, but its body was not the `expected` one: it changed since it was read (a recall or another edit came first). */
  changed: boolean;
  /** The event's seq, when one was appended (only with `rewritten`). */
  eventSeq: number | undefined;
  epoch: number;
}

export interface InboxStore {
  /**
   * Atomically assigns the next sequence and stores the message (or finds its duplicate). A store
   * that never waits (the memory one) answers at once: it returns the result, or throws its
   * refusal, so that storing a chat message costs no promise. One that waits (Redis) returns a
   * promise, which rejects on failure. `await` takes both; the chat handler uses the result
   * directly when it is not a promise (see isPromise).
   */
  append(request: AppendRequest): AppendResult | Promise<AppendResult>;
  /**
   * Appends `first`, then `second` (a message and its own copy in the sender's inbox), answering
   * at once or with a promise as append() does. Either may be stored while the other is refused:
   * memory stores them one after the other and only its memory bound refuses the second
   * (SB_ERR_STORE_FULL); Redis stores them in the same batch, where an inbox the script cannot
   * write (or, on a Redis Cluster, a master that fails its call) fails alone. The caller's
   * resend of both then finds what was stored a duplicate and stores the rest.
   */
  appendPair(first: AppendRequest, second: AppendRequest): [AppendResult, AppendResult] | Promise<[AppendResult, AppendResult]>;
  /**
   * The owner's conversations with lastSeq < `before` (0: from the most recent), most recent
   * first, at most `limit`. One whose last message is older than the retention age is gone; so
   * is the least recent one beyond maxMessages conversations.
   */
  conversations(uid: string, before: number, limit: number): Promise<ConversationPage>;
  /** One conversation's retained messages before `before` (0: the newest), a page of at most `limit`. */
  history(uid: string, conversation: string, before: number, limit: number): Promise<HistoryPage>;
  /**
   * Marks the conversation read up to `seq` (clamped to its last message). When that moves the
   * read position forward, `event` (the read event for the owner's other devices: an own entry,
   * not a message of any conversation) is appended to the owner's inbox in the same atomic step.
   * Unread becomes the number of received messages after the new position.
   */
  markRead(uid: string, conversation: string, seq: number, event: Uint8Array): Promise<ReadResult>;
  /**
   * Replaces the body of message `seq` (a recalled message's tombstone, an edited message, PROTOCOL.md
   * §14); its store time, seq and conversation stay. When it did, `event` (if any) is appended in
   * the same atomic step. Idempotent: a body equal to the stored one changes nothing and appends
   * nothing. `expected`: only if the stored body is that one (else `changed`, nothing done), so
   * that an edit made from what it read never overwrites a tombstone stored meanwhile.
   */
  rewrite(uid: string, seq: number, body: Uint8Array, event: AppendRequest | undefined, expected?: Uint8Array): Promise<RewriteResult>;
  /** Messages after `after`, oldest first, at most `limit` (0: bounds only). */
  range(uid: string, after: number, limit: number): Promise<InboxRange>;
  /** The device's saved position (always one of the inbox's current epoch); undefined when the device has none. */
  cursor(uid: string, deviceId: string): Promise<number | undefined>;
  /**
   * Saves the device's position, atomically clamped to the inbox head: a position lower than the
   * saved one is ignored, and so is one of another `epoch` than the inbox's (a session that
   * outlived a reset cannot write its old position into the new history).
   */
  saveCursor(uid: string, deviceId: string, seq: number, epoch: number): Promise<void>;
  /**
   * The inbox's history forked (a device holds a position above the head of the same epoch: a
   * failover to a replica that lagged behind): if its epoch is still `from`, atomically gives it
   * a new one and forgets every saved position, so that every device resyncs instead of skipping
   * the messages that now reuse those sequence numbers. The sequence itself goes on. Resolves the
   * epoch the inbox has afterwards (the new one, or whatever another caller already set).
   */
  resetEpoch(uid: string, from: number): Promise<number>;
  /** Resolves once the store answers; rejects with SB_ERR_STORE_UNAVAILABLE, in bounded time. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

/**
 * Fresh epochs: random, non-zero, below 2^53 (exact as a JS number and as a Lua double), so that
 * two inboxes created independently (before and after a data loss) differ. Random bytes are drawn
 * 1024 epochs at a time: the Redis store passes a candidate with every append and read, and one
 * randomBytes call each cost that path a tenth of its CPU.
 */
export class EpochSource {
  readonly #pool: Buffer;
  #at: number;

  constructor(epochsPerDraw = 1024) {
    this.#pool = Buffer.alloc(7 * epochsPerDraw);
    this.#at = this.#pool.length;
  }

  next(): number {
    for (;;) {
      if (this.#at === this.#pool.length) {
        randomFillSync(this.#pool);
        this.#at = 0;
      }
      const epoch = (this.#pool[this.#at]! & 0x1f) * 2 ** 48 + this.#pool.readUIntBE(this.#at + 1, 6);
      this.#at += 7;
      if (epoch !== 0) return epoch;
    }
  }
}

/** One fresh epoch (see EpochSource), for the rare caller. */
export function newEpoch(): number {
  return new EpochSource(1).next();
}

export function hasDedupeId(msgId: string): boolean {
  return msgId !== '' && msgId !== '0';
}

/** True for a promise (or any thenable): what a store that waits returns from append(). */
export function isPromise<T>(value: T | PromiseLike<T>): value is PromiseLike<T> {
  return typeof (value as PromiseLike<T> | null)?.then === 'function';
}
