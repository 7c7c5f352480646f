// What every route of a logged-in user does first (groups, conversations, settings): verify the
// bearer token of /api/login, and count the request against the user's rate, refusing it with
// retry-after past the limit, before the body is read.

import type { FastifyReply, FastifyRequest } from 'fastify';
import type { TokenSigner } from '../auth/token.js';
import { SwitchboardError } from '../errors.js';
import type { RateLimit, RateLimitStore } from './rate-limit-store.js';

/** The token of an `Authorization: Bearer <token>` header (SB_ERR_NO_TOKEN, SB_ERR_TOKEN_INVALID otherwise). */
export function bearer(header: string | undefined): string {
  if (header === undefined || header === '') throw new SwitchboardError('SB_ERR_NO_TOKEN', 'the request carries no Authorization: Bearer <token>');
  const match = /^Bearer +(\S+) *$/i.exec(header);
  if (!match) throw new SwitchboardError('SB_ERR_TOKEN_INVALID', 'the Authorization header is not "Bearer <token>"');
  return match[1]!;
}

/** The uid of the request's bearer token; a refusal says `www-authenticate: Bearer`, as 401s must. */
export function tokenUser(signer: TokenSigner, request: FastifyRequest, reply: FastifyReply): string {
  try {
    return signer.verify(bearer(request.headers.authorization)).uid;
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
