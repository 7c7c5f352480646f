// A queue of number pairs in one Float64Array used as a ring: pushed at the newest end, dropped
// from the oldest. The memory inbox's per-entry indexes (a conversation's seqs, a dedupe window's
// ids and expiry order) live in these instead of JS arrays: a typed array's elements are off the
// V8 heap once it outgrows 64 bytes, so the scavenger never copies them, and growing or
// compacting one allocates no garbage array. With JS arrays a busy inbox's indexes were copied
// by every scavenge and promotion, and on this VM every fresh page written costs a page fault.
//
// A ring rather than an array that slides to its front: a queue that holds at most `maxPairs`
// (an inbox's bound) then grows to exactly that and no further. Doubling past it left a full
// inbox's indexes 64% larger than their entries (16 384 places for 10 000), memory the kernel
// zeroes as the inboxes fill (bench/README.md).

/** Pairs of a new queue's array: 64 bytes, so it stays on V8's heap (small indexes are the common case). */
const MIN_PAIRS = 4;

/** The capacity a full ring of `capacity` places grows to: double, but not past `max` unless it is there already. */
export function grownCapacity(capacity: number, max: number): number {
  return capacity < max ? Math.min(capacity * 2, max) : capacity * 2;
}

export class PairQueue {
  /** The bytes of a new queue's array. */
  static readonly EMPTY_BYTES = 16 * MIN_PAIRS;

  /** Pair i (from the oldest) at [2 * ((#start + i) mod #capacity)], and the next place. */
  #data: Float64Array;
  #capacity: number;
  #start = 0;
  #length = 0;
  readonly #minPairs: number;
  readonly #maxPairs: number;

  /**
   * `capacity`: pairs of the first array (at least 1); the queue never shrinks below it.
   * `maxPairs`: the most it is meant to hold; growing stops there (past it, it doubles, and shifts
   * bring it back). A queue whose length keeps crossing it copies its pairs at every crossing: a
   * user that pushes before it drops the oldest passes its limit + 1.
   */
  constructor(capacity = MIN_PAIRS, maxPairs = Number.POSITIVE_INFINITY) {
    this.#minPairs = Math.max(1, capacity);
    this.#capacity = this.#minPairs;
    this.#data = new Float64Array(2 * this.#capacity);
    this.#maxPairs = maxPairs;
  }

  /** Pairs held. */
  get length(): number {
    return this.#length;
  }

  /** The array's bytes (its free room included). */
  get bytes(): number {
    return this.#data.byteLength;
  }

  /** Where pair i is (i within the queue). */
  #at(i: number): number {
    const j = this.#start + i;
    return 2 * (j >= this.#capacity ? j - this.#capacity : j);
  }

  /** The first number of pair `i` (0: the oldest); undefined outside the queue. */
  first(i: number): number | undefined {
    return i >= 0 && i < this.#length ? this.#data[this.#at(i)] : undefined;
  }

  /** The second number of pair `i`. */
  second(i: number): number | undefined {
    return i >= 0 && i < this.#length ? this.#data[this.#at(i) + 1] : undefined;
  }

  /** The first number of the newest pair; undefined when empty. */
  lastFirst(): number | undefined {
    return this.#length > 0 ? this.#data[this.#at(this.#length - 1)] : undefined;
  }

  /** How much `bytes` grows with the next push. */
  pushCost(): number {
    return this.#length < this.#capacity ? 0 : 16 * (grownCapacity(this.#capacity, this.#maxPairs) - this.#capacity);
  }

  push(first: number, second: number): void {
    if (this.#length === this.#capacity) this.#move(grownCapacity(this.#capacity, this.#maxPairs));
    const at = this.#at(this.#length++);
    this.#data[at] = first;
    this.#data[at + 1] = second;
  }

  /**
   * Drops the `n` oldest pairs (all when n ≥ length); the array is halved while at most a quarter
   * of it is used, and goes back to `maxPairs` places once what is left fits.
   */
  shift(n = 1): void {
    n = Math.min(n, this.#length);
    this.#length -= n;
    this.#start = this.#length === 0 ? 0 : (this.#start + n) % this.#capacity;
    let capacity = this.#capacity;
    // Doubled past its bound (more pushed than it was meant to hold): back to the bound's array
    // as soon as it fits, or a full inbox's index stays twice its bound for good. Each crossing
    // copies the pairs, so a user's bound must be the most it holds (its users push one more
    // than their limit, then shift: maxPairs is that limit + 1).
    if (capacity > this.#maxPairs && this.#length <= this.#maxPairs) capacity = Math.max(this.#minPairs, this.#maxPairs);
    while (capacity > this.#minPairs && this.#length <= capacity / 4) capacity = Math.max(this.#minPairs, Math.floor(capacity / 2));
    if (capacity !== this.#capacity) this.#move(capacity);
  }

  /** Index of the first pair from `from` whose first number is ≥ `value` (first numbers ascending); length when none. */
  lowerBound(value: number, from = 0): number {
    const data = this.#data;
    let lo = from;
    let hi = this.#length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (data[this.#at(mid)]! < value) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** The first numbers of pairs [from, to), as an array. */
  firsts(from: number, to: number): number[] {
    const out: number[] = [];
    for (let i = Math.max(0, from), end = Math.min(to, this.#length); i < end; i++) out.push(this.#data[this.#at(i)]!);
    return out;
  }

  /** Moves the pairs, oldest first, to the front of a new array of `capacity` pairs: two block copies at most. */
  #move(capacity: number): void {
    const data = new Float64Array(2 * capacity);
    const head = Math.min(this.#length, this.#capacity - this.#start);
    data.set(this.#data.subarray(2 * this.#start, 2 * (this.#start + head)));
    if (head < this.#length) data.set(this.#data.subarray(0, 2 * (this.#length - head)), 2 * head);
    this.#data = data;
    this.#capacity = capacity;
    this.#start = 0;
  }
}
