// Refresh tokens: opaque to clients, random, one use each. Format:
//
//   rt1.<base64url(JSON {u: uid, f: family id, g: generation})>.<base64url(32 random bytes)>
//
// The payload only says where to look (which user's family, which generation); what makes a
// token good is the random part, and the store keeps only SHA-256 of the whole token. A plain
// hash is enough here, unlike for passwords: the token carries 256 random bits, so nobody who
// reads the store can search for a preimage, and a slow hash (scrypt, ~0.4 s) would only make
// every refresh cost what a password login costs. A token that names the current generation
// with another random part is a forgery (refused, nothing changes); one naming an earlier
// generation is a reuse, which revokes its family (user-store.ts, useFamily).

import { createHash, randomBytes } from 'node:crypto';
import { SwitchboardError } from '../errors.js';

const PREFIX = 'rt1';
const SECRET = /^[A-Za-z0-9_-]{43}$/;
const FAMILY_ID = /^[A-Za-z0-9_-]{22}$/;

export interface RefreshClaims {
  uid: string;
  familyId: string;
  generation: number;
}

/** A new family id: 128 random bits. */
export function newFamilyId(): string {
  return randomBytes(16).toString('base64url');
}

/** A new token of `claims`. */
export function mintRefreshToken(claims: RefreshClaims): string {
  const payload = Buffer.from(JSON.stringify({ u: claims.uid, f: claims.familyId, g: claims.generation })).toString('base64url');
  return `${PREFIX}.${payload}.${randomBytes(32).toString('base64url')}`;
}

/** What the store keeps of a token: SHA-256, hex. */
export function refreshTokenHash(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

/** The claims of a well-formed token (not yet checked against the store); SB_ERR_REFRESH_INVALID otherwise. */
export function parseRefreshToken(token: unknown): RefreshClaims {
  const invalid = (why: string) => new SwitchboardError('SB_ERR_REFRESH_INVALID', `refresh token ${why}`);
  if (typeof token !== 'string' || token.length > 512) throw invalid('is not an rt1 token');
  const parts = token.split('.');
  if (parts.length !== 3 || parts[0] !== PREFIX || !SECRET.test(parts[2]!)) throw invalid('is not an rt1 token');
  let claims: unknown;
  try {
    claims = JSON.parse(Buffer.from(parts[1]!, 'base64url').toString('utf8'));
  } catch {
    throw invalid('payload is not JSON');
  }
  const { u, f, g } = (claims ?? {}) as Record<string, unknown>;
  if (typeof u !== 'string' || u.length === 0 || u.length > 64 || typeof f !== 'string' || !FAMILY_ID.test(f) || !Number.isSafeInteger(g) || (g as number) < 1) {
    throw invalid('payload lacks u, f or g');
  }
  return { uid: u, familyId: f, generation: g as number };
}
