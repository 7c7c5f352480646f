// In-memory InboxStore: the embedded default. Bounded like the Redis one: per user at most
// maxMessages messages, none older than maxAgeMs, dedupe entries for dedupeWindowMs (and at
// most maxMessages of them). Nothing here waits, so appendNow() offers the append synchronously.
// Message bodies live in a MessageLog per user (slabs and typed arrays, not an object each),
// dedupe entries in a DedupeWindow per user (ascending runs of ids per sender).

import { DedupeWindow, dedupeKey } from './dedupe-window.js';
import { MessageLog } from './message-log.js';
import { DEFAULT_INBOX_LIMITS, hasDedupeId, type AppendRequest, type AppendResult, type InboxLimits, type InboxRange, type InboxStore, type StoredMessage } from './inbox-store.js';

interface Inbox {
  head: number;
  /** Retained messages, ascending. */
  log: MessageLog;
  dedupe: DedupeWindow;
  cursors: Map<string, number>;
}

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
    const key = hasDedupeId(msgId) ? dedupeKey(msgId) : undefined;
    if (key !== undefined) {
      inbox.dedupe.expire(now);
      const seen = inbox.dedupe.find(sender, key);
      if (seen !== undefined) return { seq: seen, duplicate: true };
    }
    const seq = ++inbox.head;
    inbox.log.push(seq, now, body);
    if (key !== undefined) inbox.dedupe.add(sender, key, seq, now + this.#limits.dedupeWindowMs);
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

  /** Memory always answers. */
  async ping(): Promise<void> {}

  async close(): Promise<void> {
    this.#inboxes.clear();
  }

  #inbox(uid: string): Inbox {
    let inbox = this.#inboxes.get(uid);
    if (!inbox) this.#inboxes.set(uid, (inbox = { head: 0, log: new MessageLog(), dedupe: new DedupeWindow(this.#limits.maxMessages), cursors: new Map() }));
    return inbox;
  }

  #prune(inbox: Inbox, now: number): void {
    const cutoff = now - this.#limits.maxAgeMs;
    const { log } = inbox;
    while (log.length > 0 && (log.length > this.#limits.maxMessages || log.oldestStoredAt() < cutoff)) log.shift();
  }
}
