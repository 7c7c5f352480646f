// What every route of a logged-in user does first (groups, conversations, settings): verify the
// bearer token of /api/login (its signature, its expiry, and that no logout, password change or
// operator revoked it since: one read of the user's revocations), and count the request against
// the user's rate, refusing it with retry-after past the limit, before the body is read.

import type { FastifyReply, FastifyRequest } from 'fastify';
import type { TokenClaims, TokenSigner } from '../auth/token.js';
import { SwitchboardError } from '../errors.js';
import { revokedBy, type UserStore } from '../users/user-store.js';
import type { RateLimit, RateLimitStore } from './rate-limit-store.js';

/** The token of an `Authorization: Bearer <token>` header (SB_ERR_NO_TOKEN, SB_ERR_TOKEN_INVALID otherwise). */
export function bearer(header: string | undefined): string {
  if (header === undefined || header === '') throw new SwitchboardError('SB_ERR_NO_TOKEN', 'the request carries no Authorization: Bearer <token>');
  const match = /^Bearer +(\S+) *$/i.exec(header);
  if (!match) throw new SwitchboardError('SB_ERR_TOKEN_INVALID', 'the Authorization header is not "Bearer <token>"');
  return match[1]!;
}

/** Where a route reads the revocations its tokens are checked against. */
export type RevocationSource = Pick<UserStore, 'revocations'>;

/**
 * The uid of the request's bearer token, refused (SB_ERR_TOKEN_REVOKED) when `revocations` hold a
 * revocation of its user or device issued after it. A refusal says `www-authenticate: Bearer`, as 401s must.
 */
export async function tokenUser(signer: TokenSigner, request: FastifyRequest, reply: FastifyReply, revocations: RevocationSource): Promise<string> {
  const claims = signedClaims(signer, request, reply);
  const revoked = (await revocations.revocations([claims.uid])).get(claims.uid);
  if (revoked && revokedBy(revoked, claims.deviceId, claims.issuedAt)) {
    reply.header('www-authenticate', 'Bearer');
    throw new SwitchboardError('SB_ERR_TOKEN_REVOKED', 'this token was issued before its user or device was revoked (a logout, a password change or an operator): log in again or refresh');
  }
  return claims.uid;
}

/** The claims of the request's bearer token, by its signature and expiry alone (a logout needs no more). */
export function signedClaims(signer: TokenSigner, request: FastifyRequest, reply: FastifyReply): TokenClaims {
  try {
    return signer.verify(bearer(request.headers.authorization));
  } catch (err) {
    reply.header('www-authenticate', 'Bearer');
    throw err;
  }
}

/**
 * Counts one request of `key` (the user's, per kind) in `store`; past `limit` it throws
 * SB_ERR_RATE_LIMITED with retry-after, logging `logged` once per window.
 */
export async function takeUserRate(store: RateLimitStore, key: string, limit: RateLimit, request: FastifyRequest, reply: FastifyReply, what: string, logged: string, fields: object): Promise<void> {
  const window = await store.add(key, 1, limit.windowMs);
  if (window.count <= limit.max) return;
  if (window.count === limit.max + 1) request.log.info({ ...fields, max: limit.max, windowMs: limit.windowMs }, logged);
  reply.header('retry-after', Math.max(1, Math.ceil(window.resetMs / 1000)));
  throw new SwitchboardError('SB_ERR_RATE_LIMITED', `more than ${limit.max} ${what} within ${limit.windowMs / 1000} s; retry later`);
}
