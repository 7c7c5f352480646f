// How fast a client may send chat messages: a token bucket per session (device) and one per
// user, shared by the user's sessions on this worker. A check is a few arithmetic operations
// on numbers the session carries, at the time its connection read its last frame: no
// allocation, no timer. A user's bucket outlives the user's last session until it has refilled
// (the sweep drops it then), so logging in again does not buy a fresh burst.
//
// What this bounds: one connection, `messageRate`; one user on one worker, `userMessageRate`.
// Each worker sees only its own sessions (and counts --max-devices per worker too), so across
// W workers a user can send W × userMessageRate: sharing a bucket between workers would cost a
// Redis round trip per message.

import type { WorkerLimits } from '../config.js';
import type { Failure } from '../protocol/messages.js';
import type { LocalSessionMap } from '../session/local-session-map.js';
import type { LocalSession, RateState } from '../session/local-session.js';

/** How often the users' buckets are walked to forget the refilled ones. */
const SWEEP_MS = 5_000;

export class MessageRate {
  /** Buckets of users who sent on this worker: those online, and those gone until refilled. */
  readonly #users = new Map<string, RateState>();
  /** Tokens per millisecond (0: that bucket is off) and bucket sizes. */
  readonly #perMs: number;
  readonly #burst: number;
  readonly #userPerMs: number;
  readonly #userBurst: number;
  readonly #floodRefusals: number;
  readonly #floodWindowMs: number;
  readonly #connectionRefusal: Failure;
  readonly #userRefusal: Failure;
  /** Why a flooding connection is closed. */
  readonly flood: Failure;
  #sweptAt = Number.NEGATIVE_INFINITY;

  constructor(limits: WorkerLimits) {
    this.#perMs = limits.messageRate / 1000;
    this.#burst = Math.max(1, limits.messageBurst);
    this.#userPerMs = limits.userMessageRate / 1000;
    this.#userBurst = Math.max(1, limits.userMessageBurst);
    this.#floodRefusals = limits.floodRefusals;
    this.#floodWindowMs = limits.floodWindowMs;
    // Made once: a refusal costs no string building.
    this.#connectionRefusal = {
      code: 'SB_ERR_RATE_LIMITED',
      reason: `over ${limits.messageRate} messages/s (burst ${this.#burst}) on this connection; nothing stored, send it again later`,
    };
    this.#userRefusal = {
      code: 'SB_ERR_RATE_LIMITED',
      reason: `over ${limits.userMessageRate} messages/s (burst ${this.#userBurst}) for this user on this worker; nothing stored, send it again later`,
    };
    this.flood = {
      code: 'SB_ERR_FLOOD',
      reason: `${limits.floodRefusals} messages refused for the message rate within ${limits.floodWindowMs} ms`,
    };
  }

  /** Users whose bucket is kept (for tests and the limits table). */
  get users(): number {
    return this.#users.size;
  }

  /**
   * Takes a token for one message of `session` at `now` (ms) from both buckets; returns the
   * refusal when either is empty (then neither is charged). Counts the refusal towards a flood.
   */
  take(session: LocalSession, now: number): Failure | undefined {
    if (this.#perMs > 0) {
      const tokens = refill(session.rateTokens, session.rateAt, now, this.#perMs, this.#burst);
      session.rateAt = now;
      if (tokens < 1) {
        session.rateTokens = tokens;
        return this.#refuse(session, now, this.#connectionRefusal);
      }
      session.rateTokens = tokens - 1;
    }
    if (this.#userPerMs > 0) {
      const user = (session.userRate ??= this.#user(session.uid));
      const tokens = refill(user.tokens, user.at, now, this.#userPerMs, this.#userBurst);
      user.at = now;
      if (tokens < 1) {
        user.tokens = tokens;
        // Nothing is sent: the device's token goes back.
        if (this.#perMs > 0) session.rateTokens += 1;
        return this.#refuse(session, now, this.#userRefusal);
      }
      user.tokens = tokens - 1;
    }
    return undefined;
  }

  /**
   * Charges `tokens` more to both buckets for a request that cost that many messages' work (a
   * chat list with groups reads every group of the user). The buckets may go below zero: the
   * session's next requests wait until they have refilled.
   */
  charge(session: LocalSession, tokens: number): void {
    if (tokens <= 0) return;
    if (this.#perMs > 0) session.rateTokens -= tokens;
    if (this.#userPerMs > 0) (session.userRate ??= this.#user(session.uid)).tokens -= tokens;
  }

  /**
   * True once the session has been refused `floodRefusals` times within one window: a window
   * opens at a refusal that comes `floodWindowMs` or more after the current one opened.
   */
  flooded(session: LocalSession): boolean {
    return this.#floodRefusals > 0 && session.refusals >= this.#floodRefusals;
  }

  /**
   * Forgets the buckets of users with no session here that have refilled. Called by the
   * worker's sweep; walks the buckets at most every SWEEP_MS (they take seconds to refill).
   */
  sweep(now: number, sessions: LocalSessionMap): void {
    if (now - this.#sweptAt < SWEEP_MS && now >= this.#sweptAt) return;
    this.#sweptAt = now;
    for (const [uid, user] of this.#users) {
      if (sessions.byUser(uid).length > 0) continue;
      if (refill(user.tokens, user.at, now, this.#userPerMs, this.#userBurst) >= this.#userBurst) this.#users.delete(uid);
    }
  }

  #user(uid: string): RateState {
    let user = this.#users.get(uid);
    if (!user) this.#users.set(uid, (user = { tokens: this.#userBurst, at: 0 }));
    return user;
  }

  #refuse(session: LocalSession, now: number, refusal: Failure): Failure {
    if (now - session.refusalsSince >= this.#floodWindowMs) {
      session.refusalsSince = now;
      session.refusals = 0;
    }
    session.refusals++;
    return refusal;
  }
}

/** A bucket's tokens at `now`; a clock that went back refills nothing. */
function refill(tokens: number, at: number, now: number, perMs: number, burst: number): number {
  const elapsed = now - at;
  if (elapsed > 0) tokens += elapsed * perMs;
  return tokens > burst ? burst : tokens;
}
