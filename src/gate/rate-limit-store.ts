// Where the gate's rate-limit counts live: fixed windows of a count per key. In memory for one
// gate (`switchboard start`), in Redis when several gate processes must share their counts
// (`switchboard gate`). Both pass test/gate/rate-limit-store.conformance.ts. What is counted and
// when a count refuses is the caller's policy (LoginLimiter); a store only counts.

export interface RateLimit {
  /** Counted events allowed per window. */
  max: number;
  windowMs: number;
}

export interface RateWindow {
  /** The count of the key's open window after the call; 0 when no window is open. */
  count: number;
  /** Milliseconds until that window closes; 0 when none is open. */
  resetMs: number;
}

export interface RateLimitStore {
  /**
   * Adds `by` to the count of `key`'s open window and returns the window. With no window open, a
   * positive `by` opens one of `windowMs` (it closes windowMs later, however often it is added
   * to); a zero or negative `by` opens nothing. A count never goes below 0, and a window whose
   * count comes back to 0 is closed (its key forgotten). Atomic: concurrent adds, from any
   * number of processes sharing the store, each see a distinct count.
   */
  add(key: string, by: number, windowMs: number): Promise<RateWindow>;
  /** The key's open window, without counting. */
  get(key: string): Promise<RateWindow>;
  close(): Promise<void>;
}

export const NO_WINDOW: Readonly<RateWindow> = Object.freeze({ count: 0, resetMs: 0 });
