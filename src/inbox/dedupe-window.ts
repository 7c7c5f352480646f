// One inbox's memory of the (sender, msg_id) pairs it stored recently, and under which seq: the
// memory inbox's dedupe. Entries are forgotten oldest first, once they expire or when there are
// more than `maxEntries`.
//
// Clients number their messages upward, so each sender's ids are kept as a run of ascending
// numbers in an array of doubles: a new id costs one comparison and a push, a retry a binary search,
// and nothing per entry is left for the garbage collector to trace. At 10 000 entries per user
// a Map per sender cost more than the rest of the append (cache misses and old-generation
// marking). Ids that arrive out of order, and ids that are not a canonical decimal below 2^53,
// go to a Map beside the run.

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

/** Drop a consumed prefix once it dominates an array, so pushes stay amortised O(1). */
const COMPACT_AFTER = 64;

/** One sender's entries: the ascending run, and the Map of the rest (with their order). */
class SenderEntries {
  /**
   * The run, as pairs from index `start`: run[i] an id, run[i + 1] its seq. An array of numbers
   * holds unboxed doubles: no object per entry and nothing in it for the GC to mark. A sender's
   * first entry makes it from a literal, sized to fit, since most senders to a user have few.
   */
  run: number[] | undefined;
  start = 0;
  others: Map<DedupeKey, number> | undefined;
  /** The keys of `others` in insertion order, from `othersStart`. */
  otherKeys: DedupeKey[] | undefined;
  othersStart = 0;
  size = 0;

  constructor(readonly sender: string) {}

  find(key: DedupeKey): number | undefined {
    const run = this.run;
    if (run !== undefined && typeof key === 'number' && key <= run[run.length - 2]!) {
      // Binary search over the pairs.
      let lo = this.start >>> 1;
      let hi = (run.length >>> 1) - 1;
      while (lo <= hi) {
        const mid = (lo + hi) >>> 1;
        const id = run[mid * 2]!;
        if (id === key) return run[mid * 2 + 1];
        if (id < key) lo = mid + 1;
        else hi = mid - 1;
      }
    }
    return this.others?.get(key);
  }

  /** Adds an entry that find() did not have; true if it went to the run. */
  add(key: DedupeKey, seq: number): boolean {
    this.size++;
    if (typeof key === 'number') {
      const run = this.run;
      if (run === undefined) {
        this.run = [key, seq];
        return true;
      }
      if (key > run[run.length - 2]!) {
        run.push(key, seq);
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
      const run = this.run!;
      const start = (this.start += 2);
      if (start === run.length) {
        this.run = undefined;
        this.start = 0;
      } else if (start > COMPACT_AFTER && start * 2 > run.length) {
        run.splice(0, start);
        this.start = 0;
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
// V8's heap statistics on Node 20, rounded up. An entry: its places in the three parallel
// arrays and its pair in the run, with the arrays' slack. A sender: its SenderEntries, its run
// array and its key in #senders. An entry off the run: a Map entry and its key. A window with
// any entry: the arrays' and the Map's first allocation.
const ENTRY_BYTES = 100;
const SENDER_BYTES = 200;
const OTHER_BYTES = 120;
const BASE_BYTES = 512;

export class DedupeWindow {
  /** The most `bytes` can grow by one add(). */
  static readonly MAX_ADD_BYTES = BASE_BYTES + ENTRY_BYTES + SENDER_BYTES + OTHER_BYTES;

  readonly #senders = new Map<string, SenderEntries>();
  // Every entry in insertion (= expiry) order, as parallel arrays from `#first`: its sender,
  // whether it is in the sender's run, and when it expires.
  #owners: SenderEntries[] = [];
  #inRun: boolean[] = [];
  #expires: number[] = [];
  #first = 0;
  /** Entries kept off the runs (in a sender's Map). */
  #others = 0;

  constructor(readonly maxEntries: number) {}

  get size(): number {
    return this.#owners.length - this.#first;
  }

  /** An estimate of the memory the entries hold (see ENTRY_BYTES); 0 when empty. */
  get bytes(): number {
    const size = this.size;
    return size === 0 ? 0 : BASE_BYTES + size * ENTRY_BYTES + this.#senders.size * SENDER_BYTES + this.#others * OTHER_BYTES;
  }

  /** The seq `sender`'s `key` was stored under, if it is remembered. */
  find(sender: string, key: DedupeKey): number | undefined {
    return this.#senders.get(sender)?.find(key);
  }

  /** Remembers an entry find() did not have, forgetting the oldest past `maxEntries`. */
  add(sender: string, key: DedupeKey, seq: number, expiresAt: number): void {
    let entries = this.#senders.get(sender);
    if (!entries) this.#senders.set(sender, (entries = new SenderEntries(sender)));
    this.#owners.push(entries);
    const inRun = entries.add(key, seq);
    if (!inRun) this.#others++;
    this.#inRun.push(inRun);
    this.#expires.push(expiresAt);
    if (this.size > this.maxEntries) this.#shift();
  }

  /** Forgets the entries that expire at or before `now`. */
  expire(now: number): void {
    // #shift() may replace the arrays: read them afresh each time.
    while (this.#first < this.#expires.length && this.#expires[this.#first]! <= now) this.#shift();
  }

  #shift(): void {
    const i = this.#first++;
    const entries = this.#owners[i]!;
    const inRun = this.#inRun[i]!;
    if (!inRun) this.#others--;
    entries.shift(inRun);
    if (entries.size === 0) this.#senders.delete(entries.sender);
    if (this.#first === this.#owners.length) {
      this.#owners = [];
      this.#inRun = [];
      this.#expires = [];
      this.#first = 0;
    } else if (this.#first > COMPACT_AFTER && this.#first * 2 > this.#owners.length) {
      this.#owners.splice(0, this.#first);
      this.#inRun.splice(0, this.#first);
      this.#expires.splice(0, this.#first);
      this.#first = 0;
    }
  }
}
