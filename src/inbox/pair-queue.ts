// A queue of number pairs in one Float64Array: pushed at the newest end, dropped from the
// oldest. The memory inbox's per-entry indexes (a conversation's seqs, a dedupe window's ids and
// expiry order) live in these instead of JS arrays: a typed array's elements are off the V8 heap
// once it outgrows 64 bytes, so the scavenger never copies them, and growing or compacting one
// allocates no garbage array. With JS arrays a busy inbox's indexes were copied by every
// scavenge and promotion, and on this VM every fresh page written costs a page fault.

/** Pairs of a new queue's array: 64 bytes, so it stays on V8's heap (small indexes are the common case). */
const MIN_PAIRS = 4;

export class PairQueue {
  /** The bytes of a new queue's array. */
  static readonly EMPTY_BYTES = 16 * MIN_PAIRS;

  /** Pair i (from the oldest) at [2 * (#start + i)], [2 * (#start + i) + 1]. */
  #data: Float64Array;
  #start = 0;
  #end = 0;
  readonly #minPairs: number;

  /** `capacity`: pairs of the first array (at least 1); the queue never shrinks below it. */
  constructor(capacity = MIN_PAIRS) {
    this.#data = new Float64Array(2 * Math.max(1, capacity));
    this.#minPairs = Math.max(1, capacity);
  }

  /** Pairs held. */
  get length(): number {
    return this.#end - this.#start;
  }

  /** The array's bytes (its free room included). */
  get bytes(): number {
    return this.#data.byteLength;
  }

  /** The first number of pair `i` (0: the oldest); undefined outside the queue. */
  first(i: number): number | undefined {
    return i >= 0 && i < this.#end - this.#start ? this.#data[2 * (this.#start + i)] : undefined;
  }

  /** The second number of pair `i`. */
  second(i: number): number | undefined {
    return i >= 0 && i < this.#end - this.#start ? this.#data[2 * (this.#start + i) + 1] : undefined;
  }

  /** The first number of the newest pair; undefined when empty. */
  lastFirst(): number | undefined {
    return this.#end > this.#start ? this.#data[2 * (this.#end - 1)] : undefined;
  }

  /** How much `bytes` grows with the next push. */
  pushCost(): number {
    const capacity = this.#data.length / 2;
    return this.#end < capacity || this.#slides() ? 0 : this.#data.byteLength;
  }

  push(first: number, second: number): void {
    if (2 * this.#end === this.#data.length) this.#makeRoom();
    const at = 2 * this.#end++;
    this.#data[at] = first;
    this.#data[at + 1] = second;
  }

  /** Drops the `n` oldest pairs (all when n ≥ length); the array is halved while at most a quarter of it is used. */
  shift(n = 1): void {
    this.#start = Math.min(this.#start + n, this.#end);
    const length = this.#end - this.#start;
    if (length === 0) this.#start = this.#end = 0;
    let capacity = this.#data.length / 2;
    if (capacity <= this.#minPairs || length > capacity / 4) return;
    while (capacity > this.#minPairs && length <= capacity / 4) capacity = Math.max(this.#minPairs, capacity / 2);
    this.#move(capacity);
  }

  /** Index of the first pair from `from` whose first number is ≥ `value` (first numbers ascending); length when none. */
  lowerBound(value: number, from = 0): number {
    const data = this.#data;
    const base = this.#start;
    let lo = from;
    let hi = this.#end - base;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (data[2 * (base + mid)]! < value) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** The first numbers of pairs [from, to), as an array. */
  firsts(from: number, to: number): number[] {
    const out: number[] = [];
    for (let i = Math.max(0, from), end = Math.min(to, this.length); i < end; i++) out.push(this.#data[2 * (this.#start + i)]!);
    return out;
  }

  /**
   * Full: slides to the front when at most three quarters are used, else doubles. A slide copies
   * the pairs once per quarter of the array pushed at least: amortised O(1), and a window moving
   * at a steady length keeps its array.
   */
  #slides(): boolean {
    return this.#start > 0 && 4 * this.length <= 3 * (this.#data.length / 2);
  }

  #makeRoom(): void {
    const capacity = this.#data.length / 2;
    if (this.#slides()) {
      this.#data.copyWithin(0, 2 * this.#start, 2 * this.#end);
      this.#end -= this.#start;
      this.#start = 0;
    } else {
      this.#move(capacity * 2);
    }
  }

  /** Moves the pairs to the front of a new array of `capacity` pairs. */
  #move(capacity: number): void {
    const data = new Float64Array(2 * capacity);
    data.set(this.#data.subarray(2 * this.#start, 2 * this.#end));
    this.#end -= this.#start;
    this.#start = 0;
    this.#data = data;
  }
}
