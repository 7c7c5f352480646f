// In-memory InboxStore: the embedded default. Bounded like the Redis one: per user at most
// maxMessages messages, none older than maxAgeMs, dedupe entries for dedupeWindowMs (and at
// most maxMessages of them). Nothing here waits, so appendNow() offers the append synchronously.
// Message bodies live in a MessageLog per user (slabs and typed arrays, not an object each).

import { MessageLog } from './message-log.js';
import { DEFAULT_INBOX_LIMITS, hasDedupeId, type AppendRequest, type AppendResult, type InboxLimits, type InboxRange, type InboxStore, type StoredMessage } from './inbox-store.js';

interface Inbox {
  head: number;
  /** Retained messages, ascending. */
  log: MessageLog;
  /** Per sender: msg_id → the seq it was stored under (see DedupeId). */
  dedupe: Map<string, Map<DedupeId, number>>;
  dedupeSize: number;
  /**
   * The entries in insertion (= expiry) order as parallel arrays (no object per entry);
   * `dedupeStart` is the index of the oldest. Expiry and eviction take from the front:
   * iterating a Map from its front instead walks over every entry deleted since V8 last
   * rehashed it, thousands once the cap is reached.
   */
  dedupeSenders: string[];
  dedupeIds: DedupeId[];
  dedupeExpires: number[];
  dedupeStart: number;
  cursors: Map<string, number>;
}

/**
 * A msg_id as a Map key: up to 15 digits (below 10^15, so exact) the number, which a Map hashes
 * without a string per message; anything else the string itself. Only the canonical decimal
 * form becomes a number, so "16" and "016" (or "0x10") stay apart.
 */
type DedupeId = number | string;

function dedupeId(msgId: string): DedupeId {
  const length = msgId.length;
  if (length === 0 || length > 15 || (msgId.charCodeAt(0) === 48 && length > 1)) return msgId;
  let n = 0;
  for (let i = 0; i < length; i++) {
    const digit = msgId.charCodeAt(i) - 48;
    if (digit < 0 || digit > 9) return msgId;
    n = n * 10 + digit;
  }
  return n;
}

/** Drop a consumed prefix once it dominates the array, so pushes stay amortised O(1). */
const COMPACT_AFTER = 64;

export class MemoryInboxStore implements InboxStore {
  readonly #inboxes = new Map<string, Inbox>();
  readonly #limits: InboxLimits;
  readonly #now: () => number;

  constructor(limits: Partial<InboxLimits> = {}, now: () => number = Date.now) {
    this.#limits = { ...DEFAULT_INBOX_LIMITS, ...limits };
    this.#now = now;
  }

  async append(request: AppendRequest): Promise<AppendResult> {
    return this.appendNow(request);
  }

  appendNow({ uid, sender, msgId, body }: AppendRequest): AppendResult {
    const now = this.#now();
    const inbox = this.#inbox(uid);
    const id = hasDedupeId(msgId) ? dedupeId(msgId) : undefined;
    let bySender: Map<DedupeId, number> | undefined;
    if (id !== undefined) {
      this.#expireDedupe(inbox, now);
      bySender = inbox.dedupe.get(sender);
      const seen = bySender?.get(id);
      if (seen !== undefined) return { seq: seen, duplicate: true };
    }
    const seq = ++inbox.head;
    inbox.log.push(seq, now, body);
    if (id !== undefined) {
      if (!bySender) inbox.dedupe.set(sender, (bySender = new Map()));
      bySender.set(id, seq);
      inbox.dedupeSenders.push(sender);
      inbox.dedupeIds.push(id);
      inbox.dedupeExpires.push(now + this.#limits.dedupeWindowMs);
      if (++inbox.dedupeSize > this.#limits.maxMessages) this.#shiftDedupe(inbox);
    }
    this.#prune(inbox, now);
    return { seq, duplicate: false };
  }

  async range(uid: string, after: number, limit: number): Promise<InboxRange> {
    const inbox = this.#inboxes.get(uid);
    if (!inbox) return { head: 0, oldest: 1, messages: [] };
    this.#prune(inbox, this.#now());
    const { log, head } = inbox;
    const oldest = log.length > 0 ? log.firstSeq : head + 1;
    const messages: StoredMessage[] = [];
    for (let seq = Math.max(after + 1, oldest); seq <= head && messages.length < limit; seq++) messages.push(log.get(seq)!);
    return { head, oldest, messages };
  }

  async cursor(uid: string, deviceId: string): Promise<number | undefined> {
    return this.#inboxes.get(uid)?.cursors.get(deviceId);
  }

  async saveCursor(uid: string, deviceId: string, seq: number): Promise<void> {
    const cursors = this.#inbox(uid).cursors;
    if (seq > (cursors.get(deviceId) ?? -1)) cursors.set(deviceId, seq);
  }

  async close(): Promise<void> {
    this.#inboxes.clear();
  }

  #inbox(uid: string): Inbox {
    let inbox = this.#inboxes.get(uid);
    if (!inbox) this.#inboxes.set(uid, (inbox = { head: 0, log: new MessageLog(), dedupe: new Map(), dedupeSize: 0, dedupeSenders: [], dedupeIds: [], dedupeExpires: [], dedupeStart: 0, cursors: new Map() }));
    return inbox;
  }

  #prune(inbox: Inbox, now: number): void {
    const cutoff = now - this.#limits.maxAgeMs;
    const { log } = inbox;
    while (log.length > 0 && (log.length > this.#limits.maxMessages || log.oldestStoredAt() < cutoff)) log.shift();
  }

  #expireDedupe(inbox: Inbox, now: number): void {
    const expires = inbox.dedupeExpires;
    while (inbox.dedupeStart < expires.length && expires[inbox.dedupeStart]! <= now) this.#shiftDedupe(inbox);
  }

  /** Forgets the oldest dedupe entry. */
  #shiftDedupe(inbox: Inbox): void {
    const i = inbox.dedupeStart++;
    const sender = inbox.dedupeSenders[i]!;
    const bySender = inbox.dedupe.get(sender)!;
    bySender.delete(inbox.dedupeIds[i]!);
    if (bySender.size === 0) inbox.dedupe.delete(sender);
    inbox.dedupeSize--;
    if (inbox.dedupeStart > COMPACT_AFTER && inbox.dedupeStart * 2 > inbox.dedupeIds.length) {
      inbox.dedupeSenders.splice(0, inbox.dedupeStart);
      inbox.dedupeIds.splice(0, inbox.dedupeStart);
      inbox.dedupeExpires.splice(0, inbox.dedupeStart);
      inbox.dedupeStart = 0;
    }
  }
}
