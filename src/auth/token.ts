// Login tokens: an HMAC-SHA256 signature over user id, device id and expiry, so a worker can
// verify a login with nothing but the shared secret. Minted by `switchboard token` (and the
// gate). Format: `sb1.<base64url(JSON {u, d, e})>.<base64url(HMAC)>`; `d` = "*" binds the
// token to any device of that user (development tokens only).

import { createHmac, timingSafeEqual } from 'node:crypto';
import { SwitchboardError } from '../errors.js';

const PREFIX = 'sb1';
export const ANY_DEVICE = '*';

/** The secret every command falls back to; its use is logged as a warning. */
export const DEV_SECRET = 'switchboard-development-secret';

/** The latest time a Date can hold (ms since the epoch): no expiry may lie beyond it. */
const MAX_DATE_MS = 8.64e15;

export interface TokenClaims {
  uid: string;
  deviceId: string;
  /** Expiry, milliseconds since the epoch. */
  expiresAt: number;
}

export interface MintOptions {
  uid: string;
  deviceId?: string;
  ttlMs: number;
  now?: number;
}

/** What TokenSigner refuses (SB_ERR_CONFIG), for a caller that checks before building anything. */
export function checkTokenSecret(secret: string): void {
  if (secret.length === 0) throw new SwitchboardError('SB_ERR_CONFIG', 'token secret must not be empty');
}

export class TokenSigner {
  readonly #secret: Buffer;

  constructor(secret: string) {
    checkTokenSecret(secret);
    this.#secret = Buffer.from(secret, 'utf8');
  }

  mint({ uid, deviceId = ANY_DEVICE, ttlMs, now = Date.now() }: MintOptions): string {
    if (uid.length === 0) throw new SwitchboardError('SB_ERR_CONFIG', 'token user id must not be empty');
    const expiresAt = now + ttlMs;
    // Past this, the expiry is no time at all: verify() could neither compare nor print it.
    if (!Number.isFinite(expiresAt) || Math.abs(expiresAt) > MAX_DATE_MS) throw new SwitchboardError('SB_ERR_CONFIG', `token lifetime ${ttlMs} ms is out of range`);
    const payload = Buffer.from(JSON.stringify({ u: uid, d: deviceId, e: expiresAt })).toString('base64url');
    return `${PREFIX}.${payload}.${this.#sign(payload)}`;
  }

  /**
   * Checks signature and expiry and returns the claims. Throws SB_ERR_NO_TOKEN,
   * SB_ERR_TOKEN_INVALID or SB_ERR_TOKEN_EXPIRED.
   */
  verify(token: string | undefined, now = Date.now()): TokenClaims {
    if (!token) throw new SwitchboardError('SB_ERR_NO_TOKEN');
    const parts = token.split('.');
    if (parts.length !== 3 || parts[0] !== PREFIX) throw new SwitchboardError('SB_ERR_TOKEN_INVALID', 'token is not an sb1 token');
    const payload = parts[1]!;
    // Compare the text, not the decoded bytes: base64url decoding ignores stray characters and
    // the unused low bits of the last one, so altered signatures would decode to the same bytes.
    const given = Buffer.from(parts[2]!, 'utf8');
    const expected = Buffer.from(this.#sign(payload), 'utf8');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
      throw new SwitchboardError('SB_ERR_TOKEN_INVALID', 'token signature does not verify');
    }
    let claims: { u?: unknown; d?: unknown; e?: unknown } | null;
    try {
      claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
    } catch (err) {
      throw new SwitchboardError('SB_ERR_TOKEN_INVALID', 'token payload is not JSON', { cause: err });
    }
    if (typeof claims?.u !== 'string' || typeof claims.d !== 'string' || typeof claims.e !== 'number') {
      throw new SwitchboardError('SB_ERR_TOKEN_INVALID', 'token payload lacks u, d or e');
    }
    if (claims.e <= now) throw new SwitchboardError('SB_ERR_TOKEN_EXPIRED', `token expired at ${new Date(claims.e).toISOString()}`);
    return { uid: claims.u, deviceId: claims.d, expiresAt: claims.e };
  }

  /** Verifies the token and that it was issued for this user and device. */
  verifyFor(token: string | undefined, uid: string, deviceId: string, now = Date.now()): TokenClaims {
    const claims = this.verify(token, now);
    if (claims.uid !== uid) throw new SwitchboardError('SB_ERR_TOKEN_MISMATCH', 'token was issued for another user');
    if (claims.deviceId !== ANY_DEVICE && claims.deviceId !== deviceId) {
      throw new SwitchboardError('SB_ERR_TOKEN_MISMATCH', 'token was issued for another device');
    }
    return claims;
  }

  #sign(payload: string): string {
    return createHmac('sha256', this.#secret).update(`${PREFIX}.${payload}`).digest('base64url');
  }
}
