// One inbox's conversations for the memory store (PROTOCOL.md §14): an entry per conversation
// (its last message, read position, unread count) and an index of the conversation's inbox seqs,
// each with the running count of messages received in it, so that a read mark anywhere costs
// O(log n) and a history page O(log n + page). Kept up to date by every append that names a
// conversation, in O(1). The index is a PairQueue (off the V8 heap once past a few entries).
// The Redis store keeps the same three things in a zset, a hash and a zset per conversation;
// both pass test/inbox/conversations.conformance.ts.

import { PairQueue } from './pair-queue.js';

/**
 * Accounted per conversation: the entry object, its Map slot, its PairQueue and typed array
 * objects (V8, rounded up), plus the id's characters. The index's array is counted as it is
 * (PairQueue.bytes).
 */
const CONVERSATION_BYTES = 320;

export interface Conversation {
  readonly id: string;
  lastSeq: number;
  lastAt: number;
  readSeq: number;
  unread: number;
  /** Messages received in it ever (counted at arrival). */
  received: number;
  /** Messages, own ones included, ever appended to it. */
  total: number;
  /** The index: (inbox seq, ascending; 2 × `received` right after it, + 1 for the owner's own). */
  index: PairQueue;
  /** Its neighbours in the order of last activity (the index's list). */
  older: Conversation | undefined;
  newer: Conversation | undefined;
}

export class ConversationIndex {
  readonly #byId = new Map<string, Conversation>();
  /** The list by last activity: an append moves its conversation to the newest end. */
  #oldest: Conversation | undefined;
  #newest: Conversation | undefined;
  #bytes = 0;
  readonly #maxConversations: number;
  readonly #maxIndexed: number;

  /** At most `maxConversations` conversations, each indexing its last `maxIndexed` seqs of the inbox. */
  constructor(maxConversations: number, maxIndexed: number) {
    this.#maxConversations = maxConversations;
    this.#maxIndexed = maxIndexed;
  }

  get bytes(): number {
    return this.#bytes;
  }

  get size(): number {
    return this.#byId.size;
  }

  /** `bytes` recomputed from every conversation, for tests of the bookkeeping. */
  recount(): number {
    let total = 0;
    for (const c of this.#byId.values()) total += CONVERSATION_BYTES + c.id.length + c.index.bytes;
    return total;
  }

  /** What an append to a new conversation `id` adds (its entry and index). */
  static newCost(id: string): number {
    return CONVERSATION_BYTES + id.length + PairQueue.EMPTY_BYTES;
  }

  /** What an append to conversation `id` adds (before its conversation or index is trimmed). */
  addCost(id: string): number {
    const c = this.get(id);
    return c === undefined ? ConversationIndex.newCost(id) : c.index.pushCost();
  }

  get(id: string): Conversation | undefined {
    // Most appends go on in the conversation of the last one.
    const newest = this.#newest;
    return newest !== undefined && newest.id === id ? newest : this.#byId.get(id);
  }

  /** Message `seq` of the conversation, stored at `at`; `own`: the owner sent it. */
  add(id: string, seq: number, at: number, own: boolean): void {
    let c = this.get(id);
    if (c === undefined) {
      c = { id, lastSeq: 0, lastAt: 0, readSeq: 0, unread: 0, received: 0, total: 0, index: new PairQueue(undefined, this.#maxIndexed + 1), older: undefined, newer: undefined };
      this.#bytes += ConversationIndex.newCost(id);
      if (this.#byId.size >= this.#maxConversations) this.#drop(this.#oldest!);
      this.#byId.set(id, c);
    } else {
      this.#unlink(c);
    }
    // The newest end.
    c.older = this.#newest;
    if (this.#newest) this.#newest.newer = c;
    else this.#oldest = c;
    this.#newest = c;
    c.lastSeq = seq;
    c.lastAt = at;
    c.total++;
    if (own) {
      c.readSeq = seq;
      c.unread = 0;
    } else {
      c.received++;
      c.unread++;
    }
    const { index } = c;
    const before = index.bytes;
    index.push(seq, c.received * 2 + (own ? 1 : 0));
    this.#bytes += index.bytes - before;
    // The inbox retains at most maxIndexed seqs: older ones are pruned from it anyway (#trim books its own change).
    // The push above made it one more, momentarily: the index's ring is sized for that.
    this.#trim(c, seq - this.#maxIndexed + 1);
  }

  /**
   * Conversations with lastSeq < before (0: all), most recent first, at most `limit`, and whether
   * there are more. From the newest end: O(the conversations skipped and listed).
   */
  page(before: number, limit: number): { conversations: Conversation[]; more: boolean } {
    if (limit <= 0) return { conversations: [], more: false };
    let c = this.#newest;
    while (c !== undefined && before !== 0 && c.lastSeq >= before) c = c.older;
    const found: Conversation[] = [];
    for (; c !== undefined && found.length < limit; c = c.older) found.push(c);
    return { conversations: found, more: c !== undefined };
  }

  /**
   * Forgets conversations whose last message is older than `cutoff`: O(those), least recent
   * first. Index entries below what the inbox retains go when their conversation is next read
   * or appended to (each index holds at most maxIndexed), not here: a read must not walk every
   * conversation.
   */
  expire(cutoff: number): void {
    while (this.#oldest !== undefined && this.#oldest.lastAt < cutoff) this.#drop(this.#oldest);
  }

  /** Drops every index's entries below `oldest` (what the inbox no longer retains): the periodic sweep's, O(conversations). */
  trimAll(oldest: number): void {
    for (const c of this.#byId.values()) this.#trim(c, oldest);
  }

  /**
   * Conversation `c`'s retained seqs below `before` (0: all), newest `limit` of them ascending,
   * after trimming what is below `oldest`.
   */
  history(c: Conversation, before: number, limit: number, oldest: number): { seqs: number[]; more: boolean; pruned: boolean } {
    this.#trim(c, oldest);
    const { index } = c;
    const end = before === 0 ? index.length : index.lowerBound(before);
    const from = Math.max(0, end - limit);
    return { seqs: index.firsts(from, end), more: from > 0, pruned: c.total > index.length };
  }

  /** Moves `c`'s read position to `seq` (clamped to its last message) if that is forward; true when it moved. */
  markRead(c: Conversation, seq: number, oldest: number): boolean {
    seq = Math.min(seq, c.lastSeq);
    if (seq <= c.readSeq) return false;
    this.#trim(c, oldest);
    c.readSeq = seq;
    if (seq === c.lastSeq) {
      c.unread = 0;
      return true;
    }
    const { index } = c;
    if (index.length === 0) {
      c.unread = 0;
      return true;
    }
    const at = index.lowerBound(seq + 1) - 1;
    // Below the first retained entry: what was pruned counts as read.
    const first = index.second(0)!;
    const receivedAt = at >= 0 ? Math.floor(index.second(at)! / 2) : Math.floor(first / 2) - (first % 2 === 1 ? 0 : 1);
    c.unread = c.received - receivedAt;
    return true;
  }

  #unlink(c: Conversation): void {
    if (c.older) c.older.newer = c.newer;
    else this.#oldest = c.newer;
    if (c.newer) c.newer.older = c.older;
    else this.#newest = c.older;
    c.older = c.newer = undefined;
  }

  #drop(c: Conversation): void {
    this.#unlink(c);
    this.#byId.delete(c.id);
    this.#bytes -= CONVERSATION_BYTES + c.id.length + c.index.bytes;
  }

  /** Drops index entries below `oldest`. */
  #trim(c: Conversation, oldest: number): void {
    const { index } = c;
    const first = index.first(0);
    if (first === undefined || first >= oldest) return;
    const before = index.bytes;
    // An append drops one entry at a time once the inbox is full: look at the next before searching.
    const second = index.first(1);
    index.shift(second === undefined || second >= oldest ? 1 : index.lowerBound(oldest, 2));
    this.#bytes += index.bytes - before;
  }
}
