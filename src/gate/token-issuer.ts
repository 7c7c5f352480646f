// What the gate does with tokens once a password (or a refresh token) has been checked: a login
// starts a refresh family and gets an access token and the family's first refresh token; a
// refresh rotates the family; a logout ends it; a password change or an operator ends all of a
// user's. Every end that must reach open sessions is recorded as a revocation in the UserStore
// (the workers refuse older access tokens at login) and published on the RevocationNotifier (the
// workers close the sessions at once; their periodic check makes good a lost message).

import type { Logger } from '../log.js';
import type { TokenSigner } from '../auth/token.js';
import { SwitchboardError } from '../errors.js';
import type { RevocationNotifier } from '../users/revocation-notifier.js';
import type { Revocation, UserStore } from '../users/user-store.js';
import { mintRefreshToken, newFamilyId, parseRefreshToken, refreshTokenHash } from './refresh-tokens.js';

export interface TokenLimits {
  /** Access token lifetime (`--token-ttl-s`). */
  tokenTtlMs: number;
  /** A refresh family's absolute lifetime from its login (`--refresh-ttl-s`). */
  refreshTtlMs: number;
  /** A family unused this long ends (`--refresh-idle-s`); 0: only the absolute lifetime. */
  refreshIdleMs: number;
  /** Families (logged-in devices) one user may hold; the oldest beyond it are evicted (`--max-logins-per-user`). */
  maxFamiliesPerUser: number;
}

/** What a login or refresh hands the client. */
export interface TokenPair {
  token: string;
  /** The access token's expiry, ms since the epoch. */
  expiresAt: number;
  refreshToken: string;
  /** The family's absolute end: no refresh after it (an idle end may come sooner). */
  refreshExpiresAt: number;
}

export interface TokenIssuerOptions {
  users: UserStore;
  signer: TokenSigner;
  notifier: RevocationNotifier;
  limits: TokenLimits;
  log: Logger;
}

export class TokenIssuer {
  readonly #o: TokenIssuerOptions;

  constructor(options: TokenIssuerOptions) {
    this.#o = options;
  }

  /** A login of `uid` on `deviceId`: a new family. */
  async issue(uid: string, deviceId: string, now = Date.now()): Promise<TokenPair> {
    const { tokenTtlMs, refreshTtlMs, maxFamiliesPerUser } = this.#o.limits;
    const familyId = newFamilyId();
    const refreshToken = mintRefreshToken({ uid, familyId, generation: 1 });
    const refreshExpiresAt = now + refreshTtlMs;
    const evicted = await this.#o.users.createFamily(uid, { id: familyId, deviceId, tokenHash: refreshTokenHash(refreshToken), now, expiresAt: refreshExpiresAt, maxFamilies: maxFamiliesPerUser });
    if (evicted.length > 0) this.#o.log.info({ uid, evicted: evicted.length, max: maxFamiliesPerUser }, 'oldest logins evicted');
    const token = this.#o.signer.mint({ uid, deviceId, ttlMs: tokenTtlMs, now });
    return { token, expiresAt: now + tokenTtlMs, refreshToken, refreshExpiresAt };
  }

  /**
   * Rotates the family of `presented`: a new pair for its device. A reused token revokes its
   * family and device (SB_ERR_REFRESH_REUSED); anything else wrong is SB_ERR_REFRESH_INVALID.
   */
  async refresh(presented: unknown, now = Date.now()): Promise<TokenPair & { uid: string; deviceId: string }> {
    const claims = parseRefreshToken(presented);
    const { tokenTtlMs, refreshIdleMs } = this.#o.limits;
    const next = mintRefreshToken({ ...claims, generation: claims.generation + 1 });
    const used = await this.#o.users.useFamily(claims.uid, claims.familyId, {
      generation: claims.generation,
      tokenHash: refreshTokenHash(presented as string),
      now,
      idleMs: refreshIdleMs,
      action: { rotate: refreshTokenHash(next) },
    });
    if (used.outcome === 'invalid') throw new SwitchboardError('SB_ERR_REFRESH_INVALID');
    const { family } = used;
    if (used.outcome === 'reused') {
      await this.#revoke({ uid: claims.uid, deviceId: family.deviceId, before: now }, 'refresh token reused: login revoked');
      throw new SwitchboardError('SB_ERR_REFRESH_REUSED');
    }
    const token = this.#o.signer.mint({ uid: claims.uid, deviceId: family.deviceId, ttlMs: tokenTtlMs, now });
    return { uid: claims.uid, deviceId: family.deviceId, token, expiresAt: now + tokenTtlMs, refreshToken: next, refreshExpiresAt: family.expiresAt };
  }

  /**
   * Ends the family of `presented` and revokes its device (its access tokens and sessions).
   * `bearerUid`: the uid of an access token sent along, which must be the refresh token's.
   */
  async logout(presented: unknown, bearerUid: string | undefined, now = Date.now()): Promise<{ uid: string; deviceId: string }> {
    const claims = parseRefreshToken(presented);
    if (bearerUid !== undefined && bearerUid !== claims.uid) throw new SwitchboardError('SB_ERR_TOKEN_MISMATCH', 'the refresh token belongs to another user than the access token');
    const used = await this.#o.users.useFamily(claims.uid, claims.familyId, {
      generation: claims.generation,
      tokenHash: refreshTokenHash(presented as string),
      now,
      idleMs: this.#o.limits.refreshIdleMs,
      action: 'revoke',
    });
    if (used.outcome === 'invalid') throw new SwitchboardError('SB_ERR_REFRESH_INVALID');
    await this.#revoke({ uid: claims.uid, deviceId: used.family.deviceId, before: now }, used.outcome === 'reused' ? 'refresh token reused: login revoked' : 'logout');
    return { uid: claims.uid, deviceId: used.family.deviceId };
  }

  /** Ends every family of `uid` and revokes the user (every device's access tokens and sessions). */
  async revokeUser(uid: string, why: string, now = Date.now()): Promise<{ families: number; before: number }> {
    const families = await this.#o.users.revokeFamilies(uid);
    await this.#revoke({ uid, before: now }, why, families);
    return { families, before: now };
  }

  async #revoke(revocation: Revocation, why: string, families?: number): Promise<void> {
    // Device revocations are kept as long as an access token issued before them can live (and
    // a day at least, for a worker that missed the message and its checks meanwhile).
    await this.#o.users.revoke(revocation, Math.max(this.#o.limits.tokenTtlMs, 86_400_000));
    this.#o.notifier.publish(revocation);
    this.#o.log.info({ uid: revocation.uid, deviceId: revocation.deviceId, before: revocation.before, families }, why);
  }
}
