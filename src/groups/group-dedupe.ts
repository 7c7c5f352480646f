// One group's memory of the (sender, msgId) pairs it stored recently, with their seq and store
// time: the memory GroupStore's dedupe. The ids themselves live in a DedupeWindow (the inbox's:
// ascending runs per sender, O(1) for rising ids, nothing per entry for the GC to trace); the
// (seq, storedAt) pairs, which a duplicate answers with, in one array in the same order. The
// window forgets its oldest entries first (expired, or past maxEntries), so the array only ever
// loses its front too, by as many entries as the window lost.

import { DedupeWindow, type DedupeKey } from '../inbox/dedupe-window.js';

/** Drop a consumed prefix once it dominates the array, so pushes stay amortised O(1). */
const COMPACT_AFTER = 64;

export class GroupDedupe {
  readonly #window: DedupeWindow;
  readonly #windowMs: number;
  /** seq, storedAt of each entry of #window, oldest first, from #start. */
  #times: number[] = [];
  #start = 0;

  constructor(maxEntries: number, windowMs: number) {
    this.#window = new DedupeWindow(maxEntries);
    this.#windowMs = windowMs;
  }

  /** The most one add() grows `bytes` by. */
  static readonly MAX_ADD_BYTES = DedupeWindow.MAX_ADD_BYTES + 16;

  get size(): number {
    return this.#window.size;
  }

  /** An estimate of the memory held: the window's and 16 bytes a pair. */
  get bytes(): number {
    return this.#window.bytes + (this.#times.length - this.#start) * 8;
  }

  /** The original of a retry of `key` by `sender`, if it is remembered at `now`. */
  find(sender: string, key: DedupeKey, now: number): { seq: number; storedAt: number } | undefined {
    this.#window.expire(now);
    this.#sync();
    const seq = this.#window.find(sender, key);
    if (seq === undefined) return undefined;
    return { seq, storedAt: this.#storedAt(seq) };
  }

  /** Remembers an entry find() did not have. Entries are added in ascending seq. */
  add(sender: string, key: DedupeKey, seq: number, storedAt: number): void {
    this.#window.add(sender, key, seq, storedAt + this.#windowMs);
    this.#times.push(seq, storedAt);
    this.#sync();
  }

  /** Drops the pairs of the entries the window forgot. */
  #sync(): void {
    const drop = (this.#times.length - this.#start) / 2 - this.#window.size;
    if (drop <= 0) return;
    this.#start += drop * 2;
    if (this.#start === this.#times.length) {
      this.#times = [];
      this.#start = 0;
    } else if (this.#start > COMPACT_AFTER && this.#start * 2 > this.#times.length) {
      this.#times.splice(0, this.#start);
      this.#start = 0;
    }
  }

  /** Binary search of the pairs (ascending by seq) for `seq`'s store time. */
  #storedAt(seq: number): number {
    const times = this.#times;
    let lo = this.#start / 2;
    let hi = times.length / 2 - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >>> 1;
      const at = times[mid * 2]!;
      if (at === seq) return times[mid * 2 + 1]!;
      if (at < seq) lo = mid + 1;
      else hi = mid - 1;
    }
    throw new RangeError(`dedupe entry ${seq} has no store time`);
  }
}
