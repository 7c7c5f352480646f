// Every user's inbox: an append-only log of the messages sent to them, numbered 1, 2, 3, ...
// per user, plus each device's position in it. The store neither knows nor cares who sent a
// message or why (chat now, groups later): it stores opaque bodies. Embedded mode keeps it in
// memory; with --redis it lives in Redis. Both pass test/inbox/inbox-store.conformance.ts.

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
}

export interface AppendResult {
  seq: number;
  /** True when (sender, msgId) was stored before: `seq` is the original one, nothing was added. */
  duplicate: boolean;
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
}

export interface InboxRange extends InboxBounds {
  /** Retained messages with seq > after, ascending, at most `limit`. */
  messages: StoredMessage[];
}

export interface InboxStore {
  /** Atomically assigns the next sequence and stores the message (or finds its duplicate). */
  append(request: AppendRequest): Promise<AppendResult>;
  /**
   * The same as append(), done synchronously: offered by stores that never wait (the memory
   * one), so that storing a chat message costs no promise. The caller uses it when present.
   */
  appendNow?(request: AppendRequest): AppendResult;
  /** Messages after `after`, oldest first, at most `limit` (0: bounds only). */
  range(uid: string, after: number, limit: number): Promise<InboxRange>;
  /** The device's saved position; undefined when the device has none. */
  cursor(uid: string, deviceId: string): Promise<number | undefined>;
  /** Saves the device's position; a position lower than the saved one is ignored. */
  saveCursor(uid: string, deviceId: string, seq: number): Promise<void>;
  /** Resolves once the store answers; rejects with SB_ERR_STORE_UNAVAILABLE, in bounded time. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

export function hasDedupeId(msgId: string): boolean {
  return msgId !== '' && msgId !== '0';
}
