// Nudges caused by resends found stored (handlers/chat.ts, stored()): each session nudges a
// recipient at once, then at most once per nudge interval; a resend to it within the interval is
// not dropped but deferred to the sweep after it (or the session's end). So a client resending one
// old msg_id in a loop costs each of the recipient's sessions a read per interval, not one per
// resend: a nudge waiting makes a session's next live message a read (delivery.ts).

import type { LocalSession } from '../session/local-session.js';
import type { MessageRouter } from './cluster-seam.js';

/** Recipients a session remembers at once; beyond, the oldest is forgotten (its deferred nudge sent). */
export const RESEND_NUDGE_USERS = 8;

export class ResendNudges {
  readonly #router: () => MessageRouter;
  readonly #intervalMs: number;

  constructor(router: () => MessageRouter, intervalMs: number) {
    this.#router = router;
    this.#intervalMs = intervalMs;
  }

  nudge(session: LocalSession, uid: string, now: number): void {
    const nudges = (session.resendNudges ??= new Map());
    const last = nudges.get(uid);
    if (last !== undefined && now - last.at < this.#intervalMs) {
      last.deferred = true;
      return;
    }
    if (last === undefined && nudges.size >= RESEND_NUDGE_USERS) {
      const [oldest, entry] = nudges.entries().next().value!;
      nudges.delete(oldest);
      if (entry.deferred) this.#router().nudge(oldest);
    }
    nudges.set(uid, { at: now, deferred: false });
    this.#router().nudge(uid);
  }

  /** The session ended: its deferred nudges go now. */
  released(session: LocalSession): void {
    const nudges = session.resendNudges;
    if (nudges === undefined) return;
    session.resendNudges = undefined;
    for (const [uid, entry] of nudges) if (entry.deferred) this.#router().nudge(uid);
  }

  /** Sends the deferred nudges whose interval is over, and forgets the others. */
  sweep(sessions: Iterable<LocalSession>, now: number): void {
    for (const session of sessions) {
      const nudges = session.resendNudges;
      if (nudges === undefined) continue;
      for (const [uid, entry] of nudges) {
        if (now - entry.at < this.#intervalMs) continue;
        if (entry.deferred) {
          entry.at = now;
          entry.deferred = false;
          this.#router().nudge(uid);
        } else nudges.delete(uid);
      }
      if (nudges.size === 0) session.resendNudges = undefined;
    }
  }
}
