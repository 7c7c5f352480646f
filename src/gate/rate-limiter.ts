// Fixed-window rate limits keyed by a string (an IP, a username). Bounded: at most `maxKeys`
// keys are tracked; the oldest window is dropped first, so a flood of distinct keys cannot grow
// memory.

export interface RateLimit {
  /** Requests allowed per window. */
  max: number;
  windowMs: number;
}

export class RateLimiter {
  readonly #windows = new Map<string, { start: number; count: number }>();

  constructor(
    readonly limit: RateLimit,
    readonly maxKeys = 100_000,
    readonly now: () => number = Date.now,
  ) {}

  /** Counts one request for `key`; returns the ms until it may retry, or 0 when allowed. */
  take(key: string): number {
    const now = this.now();
    let w = this.#windows.get(key);
    if (!w || now - w.start >= this.limit.windowMs) {
      this.#windows.delete(key);
      if (this.#windows.size >= this.maxKeys) this.#windows.delete(this.#windows.keys().next().value!);
      w = { start: now, count: 0 };
      this.#windows.set(key, w);
    }
    w.count++;
    return w.count > this.limit.max ? w.start + this.limit.windowMs - now : 0;
  }
}
