// RevocationCheck: a worker's side of token revocation. Workers check a token only at login, so
// a session stays open after its user's password change, an operator's revoke or its device's
// logout unless it is closed: this closes it (SB_ERR_TOKEN_REVOKED), on the notifier's message
// at once, and, should that message be lost, at the next periodic check of every local session
// against the UserStore (every `checkMs`: the documented bound). At login it refuses a token
// issued at or before a revocation that covers it (tokens carry their issue time).

import type { Logger } from '../log.js';
import { SwitchboardError } from '../errors.js';
import type { LocalSession } from '../session/local-session.js';
import type { LocalSessionMap } from '../session/local-session-map.js';
import type { RevocationNotifier } from '../users/revocation-notifier.js';
import { revokedBy, type Revocation, type UserStore } from '../users/user-store.js';

export const DEFAULT_REVOCATION_CHECK_MS = 30_000;

export interface RevocationCheckOptions {
  users: Pick<UserStore, 'revocations'>;
  notifier: RevocationNotifier;
  sessions: LocalSessionMap;
  /** The periodic check's period: how late a lost revocation message closes its sessions at most. */
  checkMs: number;
  log: Logger;
}

export class RevocationCheck {
  readonly #o: RevocationCheckOptions;
  #timer: NodeJS.Timeout | undefined;
  #unsubscribe: (() => void) | undefined;
  #checking = false;

  constructor(options: RevocationCheckOptions) {
    this.#o = options;
  }

  start(): void {
    this.#unsubscribe = this.#o.notifier.subscribe({
      revoked: (revocation) => this.#apply(revocation),
      missed: () => void this.checkAll(),
    });
    this.#timer = setInterval(() => void this.checkAll(), this.#o.checkMs);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#unsubscribe?.();
  }

  /** At login: SB_ERR_TOKEN_REVOKED when a revocation covers the token (SB_ERR_STORE_UNAVAILABLE when the store cannot say). */
  async admit(uid: string, deviceId: string, issuedAt: number): Promise<void> {
    const revocations = (await this.#o.users.revocations([uid])).get(uid);
    if (revocations && revokedBy(revocations, deviceId, issuedAt)) {
      throw new SwitchboardError('SB_ERR_TOKEN_REVOKED', 'this token was issued before its user or device was revoked (a logout, a password change or an operator): log in at the gate again');
    }
  }

  /** Every local session against the store; closes the revoked ones. One at a time. */
  async checkAll(): Promise<number> {
    if (this.#checking) return 0;
    this.#checking = true;
    try {
      const uids = new Set<string>();
      for (const session of this.#o.sessions) uids.add(session.uid);
      if (uids.size === 0) return 0;
      const all = await this.#o.users.revocations([...uids]);
      let closed = 0;
      for (const [uid, revocations] of all) {
        if (revocations.before === 0 && revocations.devices.size === 0) continue;
        for (const session of [...this.#o.sessions.byUser(uid)]) {
          if (revokedBy(revocations, session.deviceId, session.tokenIssuedAt)) closed += this.#close(session);
        }
      }
      if (closed > 0) this.#o.log.info({ closed }, 'revoked sessions closed by the periodic check');
      return closed;
    } catch (err) {
      this.#o.log.warn({ err }, 'revocation check failed');
      return 0;
    } finally {
      this.#checking = false;
    }
  }

  #apply({ uid, deviceId, before }: Revocation): void {
    let closed = 0;
    for (const session of [...this.#o.sessions.byUser(uid)]) {
      if (deviceId !== undefined && session.deviceId !== deviceId) continue;
      if (session.tokenIssuedAt <= before) closed += this.#close(session);
    }
    if (closed > 0) this.#o.log.info({ uid, deviceId, closed }, 'revoked sessions closed');
  }

  #close(session: LocalSession): number {
    session.outbound.close({ code: 'SB_ERR_TOKEN_REVOKED', reason: 'the login of this session was revoked (a logout, a password change or an operator): log in at the gate again' });
    return 1;
  }
}
