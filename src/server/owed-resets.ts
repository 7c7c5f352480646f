// Inbox forks this worker found but could not give a new epoch: the store refused resetEpoch
// (Redis down, or this worker's client not reaching the new master right after a failover).
// Until the new epoch is stored, a device could resume at a position of the forked epoch once the
// head has passed it and skip the reused seqs unseen; so Delivery remembers the fork here, refuses
// such logins and closes such sessions, and the reset is tried again at each login of the user and
// at every sweep. In memory only: a worker that dies forgets what it owes.

import type { Logger } from '../log.js';
import type { InboxStore } from '../inbox/inbox-store.js';

/** Forks remembered at once (about 150 bytes each); beyond, the oldest is forgotten and logged. */
export const MAX_OWED_RESETS = 10_000;

interface Owed {
  /** The forked epoch: the inbox's when the fork was found. */
  readonly epoch: number;
  /** Attempts that failed since the fork was remembered. */
  attempts: number;
  /** A sweep's attempt is under way. */
  retrying: boolean;
  /** The sweep's next attempt not before this (ms since the epoch): each failure doubles the wait, up to RETRY_MAX_MS. */
  nextAt: number;
}

/** The sweep's retries of one owed reset back off from 1 s to this (a login of the user tries at once). */
export const RETRY_MAX_MS = 30_000;

export class OwedResets {
  readonly #inbox: Pick<InboxStore, 'resetEpoch'>;
  readonly #log: Logger;
  readonly #max: number;
  /** By uid, oldest first. */
  readonly #owed = new Map<string, Owed>();

  constructor(inbox: Pick<InboxStore, 'resetEpoch'>, log: Logger, max = MAX_OWED_RESETS) {
    this.#inbox = inbox;
    this.#log = log;
    this.#max = max;
  }

  get size(): number {
    return this.#owed.size;
  }

  /** `uid`'s inbox forked at `epoch` and the store refused its new epoch. */
  owe(uid: string, epoch: number): void {
    const owed = this.#owed.get(uid);
    if (owed?.epoch === epoch) return;
    if (owed === undefined && this.#owed.size >= this.#max) {
      const [oldest, forgotten] = this.#owed.entries().next().value!;
      this.#owed.delete(oldest);
      this.#log.error({ uid: oldest, epoch: forgotten.epoch, max: this.#max }, 'owed inbox epoch resets at their bound: oldest forgotten');
    }
    // Another epoch than one still owed: that one was replaced meanwhile (no longer owed). Deleted
    // first, so that the Map's order stays the order in which forks were found.
    this.#owed.delete(uid);
    this.#owed.set(uid, { epoch, attempts: 0, retrying: false, nextAt: 0 });
  }

  /** Whether a position of `uid` in `epoch` is one of a forked history whose new epoch is owed. */
  owes(uid: string, epoch: number): boolean {
    return this.#owed.size !== 0 && this.#owed.get(uid)?.epoch === epoch;
  }

  /**
   * At a login, the inbox being at `epoch`: stores the owed new epoch first, and resolves true
   * (the inbox has another epoch now); rejects as resetEpoch does while the store refuses.
   * Resolves false when nothing is owed at `epoch`.
   */
  async settle(uid: string, epoch: number): Promise<boolean> {
    const owed = this.#owed.get(uid);
    if (owed === undefined) return false;
    if (owed.epoch !== epoch) {
      // The inbox left that epoch meanwhile (another worker's reset, a data loss): nothing owed.
      this.#owed.delete(uid);
      return false;
    }
    let to: number;
    try {
      to = await this.#inbox.resetEpoch(uid, epoch);
    } catch (err) {
      owed.attempts++;
      throw err;
    }
    this.#settled(uid, owed, to);
    return true;
  }

  /** The sweep: one attempt per owed reset whose wait is over, none beside one still under way. */
  retry(now = Date.now()): void {
    for (const [uid, owed] of this.#owed) if (!owed.retrying && now >= owed.nextAt) void this.#retry(uid, owed);
  }

  async #retry(uid: string, owed: Owed): Promise<void> {
    owed.retrying = true;
    try {
      this.#settled(uid, owed, await this.#inbox.resetEpoch(uid, owed.epoch));
    } catch (err) {
      owed.attempts++;
      owed.nextAt = Date.now() + Math.min(RETRY_MAX_MS, 1000 * 2 ** Math.min(owed.attempts - 1, 15));
      // While the store refuses, the first failures and then one in ten: an outage would repeat this line for every owed user.
      if (owed.attempts <= 3 || owed.attempts % 10 === 0) this.#log.error({ err, uid, attempts: owed.attempts }, 'inbox epoch reset failed');
    } finally {
      owed.retrying = false;
    }
  }

  /** resetEpoch resolved `to` (whoever changed the epoch): nothing is owed any more. */
  #settled(uid: string, owed: Owed, to: number): void {
    // Settled meanwhile by the other path (a login, the sweep), or forgotten at the bound.
    if (this.#owed.get(uid) !== owed) return;
    this.#owed.delete(uid);
    this.#log.info({ uid, from: owed.epoch, to, attempts: owed.attempts }, 'owed inbox epoch reset stored');
  }
}
