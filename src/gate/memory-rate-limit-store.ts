// In-memory RateLimitStore: the embedded gate's, and the reference the Redis store must match.
// Bounded: at most `maxKeys` windows are kept; beyond that the oldest-opened one is dropped
// first, so a flood of distinct keys cannot grow memory (it can only make the gate forget old
// counts early). Expired windows are dropped when touched or evicted. The clock is injected.

import { NO_WINDOW, type RateLimitStore, type RateWindow } from './rate-limit-store.js';

export const DEFAULT_MAX_KEYS = 100_000;

export class MemoryRateLimitStore implements RateLimitStore {
  /** Insertion order is opening order: the first entry is the oldest window. */
  readonly #windows = new Map<string, { closesAt: number; count: number }>();

  constructor(
    readonly maxKeys = DEFAULT_MAX_KEYS,
    readonly now: () => number = Date.now,
  ) {}

  /** Windows held (open or expired but not yet dropped). */
  get size(): number {
    return this.#windows.size;
  }

  async add(key: string, by: number, windowMs: number): Promise<RateWindow> {
    const now = this.now();
    let w = this.#open(key, now);
    if (!w) {
      if (by <= 0) return { ...NO_WINDOW };
      if (this.#windows.size >= this.maxKeys) this.#windows.delete(this.#windows.keys().next().value!);
      w = { closesAt: now + windowMs, count: 0 };
      this.#windows.set(key, w);
    }
    w.count = Math.max(0, w.count + by);
    if (w.count === 0) {
      this.#windows.delete(key);
      return { ...NO_WINDOW };
    }
    return { count: w.count, resetMs: w.closesAt - now };
  }

  async get(key: string): Promise<RateWindow> {
    const now = this.now();
    const w = this.#open(key, now);
    return w ? { count: w.count, resetMs: w.closesAt - now } : { ...NO_WINDOW };
  }

  async close(): Promise<void> {
    this.#windows.clear();
  }

  /** The key's window if it is still open; an expired one is dropped. */
  #open(key: string, now: number): { closesAt: number; count: number } | undefined {
    const w = this.#windows.get(key);
    if (w && now >= w.closesAt) {
      this.#windows.delete(key);
      return undefined;
    }
    return w;
  }
}
