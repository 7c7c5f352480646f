// The gate's rate-limit policy over a RateLimitStore. Three limits, each for one attack:
//
//   per address        every login and registration request        the hashing one address takes
//   per name+address   failed logins                                guessing one password from one place
//   per name           failed logins from addresses not yet known   guessing spread over many places
//
// Failures are counted before the password is checked (a reservation that a success or an
// attempt that never reached the check gives back), so concurrent guesses cannot overshoot a
// limit. The per-name limit is not consulted for an address the user has logged in from within
// `knownAddressMs` (counted from the latest success there): guessers elsewhere, however many, cannot lock the user out of the places
// they log in from, and a guesser at one address runs into its per-name+address limit without
// touching the per-name count. Addresses are keyed by addressKey (IPv6 by /64).

import { addressKey } from './client-address.js';
import type { RateLimit, RateLimitStore } from './rate-limit-store.js';

export interface LoginLimits {
  /** Login and registration requests per client address; every request counts. */
  perIp: RateLimit;
  /** Failed logins per user name and client address. */
  perUserIp: RateLimit;
  /** Failed logins per user name, from addresses it has not logged in from recently. */
  perUser: RateLimit;
  /** A successful login makes its address known for the name for this long. */
  knownAddressMs: number;
}

/** How the password check of an admitted attempt ended. */
export type LoginOutcome = 'succeeded' | 'failed' | 'abandoned';

export type Admission =
  | { admitted: true; settle(outcome: LoginOutcome): Promise<void> }
  | { admitted: false; retryMs: number };

export class LoginLimiter {
  constructor(
    readonly store: RateLimitStore,
    readonly limits: LoginLimits,
  ) {}

  /** Counts one login or registration request from `address`: the ms until it may retry, or 0. */
  async request(address: string): Promise<number> {
    const w = await this.store.add(`ip:${addressKey(address)}`, 1, this.limits.perIp.windowMs);
    return w.count > this.limits.perIp.max ? w.resetMs : 0;
  }

  /**
   * Admits a login of `name` (normalised) from `address`, reserving one failure on its limits,
   * or says how long until it may retry. An admitted attempt must be settled exactly once.
   */
  async begin(name: string, address: string): Promise<Admission> {
    const { perUserIp, perUser, knownAddressMs } = this.limits;
    const at = addressKey(address);
    const pairKey = `fail:${name}|${at}`;
    const knownKey = `known:${name}|${at}`;
    const [pair, known] = await Promise.all([this.store.add(pairKey, 1, perUserIp.windowMs), this.store.get(knownKey)]);
    // A refusal keeps its count: past the limit, the count changes nothing until the window ends.
    if (pair.count > perUserIp.max) return { admitted: false, retryMs: pair.resetMs };
    const global = known.count === 0;
    if (global) {
      const perName = await this.store.add(`fail:${name}`, 1, perUser.windowMs);
      if (perName.count > perUser.max) {
        // Refused before the check: this address's reservation goes back.
        await this.store.add(pairKey, -1, perUserIp.windowMs);
        return { admitted: false, retryMs: perName.resetMs };
      }
    }
    let settled = false;
    return {
      admitted: true,
      settle: async (outcome) => {
        if (settled) return;
        settled = true;
        if (outcome === 'failed') return;
        const refunds: Promise<unknown>[] = [this.store.add(pairKey, -1, perUserIp.windowMs)];
        if (global) refunds.push(this.store.add(`fail:${name}`, -1, perUser.windowMs));
        if (outcome === 'succeeded') refunds.push(this.#know(knownKey, knownAddressMs));
        await Promise.all(refunds);
      },
    };
  }

  /**
   * Makes the address known for `knownAddressMs` from now. Windows are fixed, so the open one is
   * closed and a new one opened: a user who logs in every day from home stays known there, not
   * only for `knownAddressMs` after the first login.
   */
  async #know(knownKey: string, knownAddressMs: number): Promise<void> {
    const open = await this.store.get(knownKey);
    if (open.count > 0) await this.store.add(knownKey, -open.count, knownAddressMs);
    await this.store.add(knownKey, 1, knownAddressMs);
  }
}
