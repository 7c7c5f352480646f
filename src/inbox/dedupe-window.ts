// One inbox's memory of the (sender, msg_id) pairs it stored recently, and under which seq: the
// memory inbox's dedupe. Entries are forgotten oldest first, once they expire or when there are
// more than `maxEntries`.
//
// Clients number their messages upward, so each sender's ids are kept as a run of ascending
// numbers in a PairQueue (id, seq): a new id costs one comparison and a push, a retry a binary
// search, and nothing per entry is left for the garbage collector to trace or copy. At 10 000
// entries per user a Map per sender cost more than the rest of the append (cache misses and
// old-generation marking), and JS arrays were copied by every scavenge. Ids that arrive out of
// order, and ids that are not a canonical decimal below 2^53, go to a Map beside the run.

import { hasDedupeId } from './inbox-store.js';
import { PairQueue } from './pair-queue.js';

/** A msg_id as a key: a canonical decimal up to 2^53 - 1 is its number, anything else its string. */
export type DedupeKey = number | string;

/**
 * The key of a msg_id. Only the canonical form becomes a number, so "16" and "016" (or "0x10",
 * "1e3") stay apart; a decimal past 2^53 - 1 stays a string, as a double could not hold it.
 */
export function dedupeKey(msgId: string): DedupeKey {
  const length = msgId.length;
  if (length === 0 || length > 16 || (msgId.charCodeAt(0) === 48 && length > 1)) return msgId;
  let n = 0;
  for (let i = 0; i < length; i++) {
    const digit = msgId.charCodeAt(i) - 48;
    if (digit < 0 || digit > 9) return msgId;
    n = n * 10 + digit;
  }
  // Rounding is monotonic: a value past 2^53 - 1 cannot round down to it.
  return n <= Number.MAX_SAFE_INTEGER ? n : msgId;
}

/** The dedupe key of a request's msg_id; undefined for one that is not deduplicated (hasDedupeId). */
export function dedupeKeyOf(msgId: string): DedupeKey | undefined {
  return hasDedupeId(msgId) ? dedupeKey(msgId) : undefined;
}

/** Drop a consumed prefix once it dominates an array, so pushes stay amortised O(1). */
const COMPACT_AFTER = 64;

/** One sender's entries: the ascending run, and the Map of the rest (with their order). */
class SenderEntries {
  /**
   * The run: (id, seq) pairs, ids ascending. Most senders to a user have one entry at a time:
   * a run of one is kept in `soloId` and `soloSeq` (-1: none), a longer one in `run`.
   */
  run: PairQueue | undefined;
  soloId = -1;
  soloSeq = 0;
  others: Map<DedupeKey, number> | undefined;
  /** The keys of `others` in insertion order, from `othersStart`. */
  otherKeys: DedupeKey[] | undefined;
  othersStart = 0;
  size = 0;

  /** `slot`: its number in the window's table of senders, which the window's order names it by. */
  constructor(
    readonly sender: string,
    readonly slot: number,
    /** The most entries the run can hold at once: the window's bound, and the one added before the oldest goes. */
    readonly maxRun: number,
  ) {}

  find(key: DedupeKey): number | undefined {
    if (typeof key === 'number') {
      if (key === this.soloId) return this.soloSeq;
      const run = this.run;
      if (run !== undefined && key <= run.lastFirst()!) {
        const i = run.lowerBound(key);
        if (run.first(i) === key) return run.second(i);
      }
    }
    return this.others?.get(key);
  }

  /** Adds an entry that find() did not have; true if it went to the run. */
  add(key: DedupeKey, seq: number): boolean {
    this.size++;
    if (typeof key === 'number') {
      const run = this.run;
      if (run !== undefined) {
        if (key > run.lastFirst()!) {
          run.push(key, seq);
          return true;
        }
      } else if (this.soloId < 0) {
        this.soloId = key;
        this.soloSeq = seq;
        return true;
      } else if (key > this.soloId) {
        const queue = (this.run = new PairQueue(2, this.maxRun));
        queue.push(this.soloId, this.soloSeq);
        queue.push(key, seq);
        this.soloId = -1;
        return true;
      }
    }
    if (this.others === undefined) {
      this.others = new Map([[key, seq]]);
      this.otherKeys = [key];
    } else {
      this.others.set(key, seq);
      this.otherKeys!.push(key);
    }
    return false;
  }

  /** Forgets this sender's oldest entry of the run, or of the others. */
  shift(fromRun: boolean): void {
    this.size--;
    if (fromRun) {
      const run = this.run;
      if (run === undefined) this.soloId = -1;
      else {
        run.shift();
        if (run.length === 0) this.run = undefined;
      }
      return;
    }
    const keys = this.otherKeys!;
    this.others!.delete(keys[this.othersStart++]!);
    if (this.others!.size === 0) {
      this.others = undefined;
      this.otherKeys = undefined;
      this.othersStart = 0;
    } else if (this.othersStart > COMPACT_AFTER && this.othersStart * 2 > keys.length) {
      keys.splice(0, this.othersStart);
      this.othersStart = 0;
    }
  }
}

// What the memory accounting (MemoryInboxStore) charges for a window: estimates measured with
// V8's heap statistics on Node 20, rounded up. An entry: its pair in the expiry order and its
// pair in the run, 16 bytes each, with the queues' slack: a PairQueue shrinks once a quarter of
// it is used, so at most 64 bytes each (measured 120 in all, growing). A sender: its
// SenderEntries, its run queue and its key in #senders. An entry off the run: a Map entry and
// its key. A window with any entry: the queue's and the Map's first allocation.
const ENTRY_BYTES = 128;
const SENDER_BYTES = 200;
const OTHER_BYTES = 120;
const BASE_BYTES = 512;

export class DedupeWindow {
  /** The most `bytes` can grow by one add(). */
  static readonly MAX_ADD_BYTES = BASE_BYTES + ENTRY_BYTES + SENDER_BYTES + OTHER_BYTES;

  readonly #senders = new Map<string, SenderEntries>();
  /** The senders by slot; a slot is reused (#freeSlots) once its sender has no entry left. */
  #slots: (SenderEntries | undefined)[] = [];
  #freeSlots: number[] = [];
  /** Every entry in insertion (= expiry) order: (when it expires, its sender's slot × 2 + 1 if it is in the sender's run). */
  readonly #order: PairQueue;
  /** Entries kept off the runs (in a sender's Map). */
  #others = 0;
  /** The sender last looked up, found or made: an append finds, then adds, for one sender, and a conversation sends in runs. */
  #last: SenderEntries | undefined;

  constructor(readonly maxEntries: number) {
    // add() pushes before it drops the oldest: one more than the bound, momentarily.
    this.#order = new PairQueue(undefined, maxEntries + 1);
  }

  get size(): number {
    return this.#order.length;
  }

  /** An estimate of the memory the entries hold (see ENTRY_BYTES); 0 when empty. */
  get bytes(): number {
    const size = this.size;
    return size === 0 ? 0 : BASE_BYTES + size * ENTRY_BYTES + this.#senders.size * SENDER_BYTES + this.#others * OTHER_BYTES;
  }

  /** The seq `sender`'s `key` was stored under, if it is remembered. */
  find(sender: string, key: DedupeKey): number | undefined {
    return this.#entries(sender)?.find(key);
  }

  #entries(sender: string): SenderEntries | undefined {
    const last = this.#last;
    if (last !== undefined && last.sender === sender) return last;
    const entries = this.#senders.get(sender);
    if (entries !== undefined) this.#last = entries;
    return entries;
  }

  /** Remembers an entry find() did not have, forgetting the oldest past `maxEntries`. */
  add(sender: string, key: DedupeKey, seq: number, expiresAt: number): void {
    let entries = this.#entries(sender);
    if (!entries) {
      const slot = this.#freeSlots.pop() ?? this.#slots.length;
      entries = new SenderEntries(sender, slot, this.maxEntries + 1);
      this.#slots[slot] = entries;
      this.#senders.set(sender, entries);
      this.#last = entries;
    }
    const inRun = entries.add(key, seq);
    if (!inRun) this.#others++;
    this.#order.push(expiresAt, entries.slot * 2 + (inRun ? 1 : 0));
    if (this.size > this.maxEntries) this.#shift();
  }

  /** Forgets the entries that expire at or before `now`. */
  expire(now: number): void {
    const order = this.#order;
    while (order.length > 0 && order.first(0)! <= now) this.#shift();
  }

  #shift(): void {
    const code = this.#order.second(0)!;
    this.#order.shift();
    const slot = code >>> 1;
    const inRun = (code & 1) === 1;
    const entries = this.#slots[slot]!;
    if (!inRun) this.#others--;
    entries.shift(inRun);
    if (entries.size === 0) {
      if (this.#last === entries) this.#last = undefined;
      this.#senders.delete(entries.sender);
      this.#slots[slot] = undefined;
      this.#freeSlots.push(slot);
    }
    if (this.#order.length === 0) {
      // All gone: the tables back to nothing.
      this.#slots = [];
      this.#freeSlots = [];
    }
  }
}
