// How far a legacy (non-acknowledging) device has really been served: the deliveries written to
// its connection, each with the offset in the connection's output where its frame ends, so that
// only those whose bytes the kernel has taken count as delivered. A delivery still in the
// process's own buffers when the connection dies (cut as a slow consumer, say) is replayed at
// the next login instead of being lost with them.
//
// One Float64Array of (seq, end) pairs used as a ring: no object per delivery. It grows by
// doubling up to MAX_PENDING pairs; beyond that the oldest pending pair is dropped, which only
// makes the position coarser (a dropped delivery counts once a later one does), never ahead of
// what the kernel took.

const FIRST_CAPACITY = 16;
/** Pending deliveries tracked one by one per session: 4096 pairs = 64 KiB at most. */
export const MAX_PENDING = 4096;

export class HandoffRing {
  /** Highest seq whose frame the kernel has taken completely: the device's delivered position. */
  delivered: number;
  /** (seq, end offset) pairs, oldest at #start; allocated at the first push. */
  #pairs: Float64Array | undefined;
  #start = 0;
  #count = 0;

  constructor(delivered: number) {
    this.delivered = delivered;
  }

  /** Deliveries written whose frames the kernel had not all taken at the last confirm(). */
  get pending(): number {
    return this.#count;
  }

  /** True when the next push() has to grow the ring or drop a pair: time for a confirm(). */
  get full(): boolean {
    return this.#count === (this.#pairs ? this.#pairs.length / 2 : 0);
  }

  /** Records delivery `seq`, whose frame ends at `end` bytes into the connection's output. */
  push(seq: number, end: number): void {
    let pairs = this.#pairs;
    const capacity = pairs ? pairs.length / 2 : 0;
    if (this.#count === capacity) {
      if (capacity < MAX_PENDING) {
        pairs = this.#resize(Math.max(FIRST_CAPACITY, capacity * 2));
      } else {
        // Coarser from here: the dropped delivery is covered by the next one's confirmation.
        this.#start = (this.#start + 1) % capacity;
        this.#count--;
      }
    }
    const i = ((this.#start + this.#count) % (pairs!.length / 2)) * 2;
    pairs![i] = seq;
    pairs![i + 1] = end;
    this.#count++;
  }

  /**
   * The kernel has taken the connection's first `handed` bytes: every delivery whose frame ends
   * within them is delivered. Returns the delivered position.
   */
  confirm(handed: number): number {
    const pairs = this.#pairs;
    if (!pairs) return this.delivered;
    const capacity = pairs.length / 2;
    while (this.#count > 0 && pairs[this.#start * 2 + 1]! <= handed) {
      this.delivered = pairs[this.#start * 2]!;
      this.#start = (this.#start + 1) % capacity;
      this.#count--;
    }
    return this.delivered;
  }

  /** Gives back the ring's memory once nothing is pending: an idle session holds no array. */
  compact(): void {
    if (this.#count === 0 && this.#pairs) {
      this.#pairs = undefined;
      this.#start = 0;
    }
  }

  #resize(capacity: number): Float64Array {
    const next = new Float64Array(capacity * 2);
    const pairs = this.#pairs;
    if (pairs) {
      const old = pairs.length / 2;
      for (let k = 0; k < this.#count; k++) {
        const from = ((this.#start + k) % old) * 2;
        next[k * 2] = pairs[from]!;
        next[k * 2 + 1] = pairs[from + 1]!;
      }
    }
    this.#pairs = next;
    this.#start = 0;
    return next;
  }
}
