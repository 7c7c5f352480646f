// The operator's routes, present only when the gate has an admin credential (--admin-token-file):
// without one they do not exist (404, SB_ERR_NOT_FOUND), so an unset credential never means
// "anyone". The credential is compared in constant time (both sides hashed first, so neither
// their contents nor their lengths show in the time taken); every request counts against the
// client address's login budget, so it cannot be guessed quickly either.

import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { SwitchboardError } from '../errors.js';
import { checkUsername } from '../auth/password.js';
import type { UserStore } from '../users/user-store.js';
import type { TokenIssuer } from './token-issuer.js';
import { bearer } from './user-requests.js';

export interface AdminRoutesOptions {
  adminToken: string;
  users: Pick<UserStore, 'exists'>;
  issuer: Pick<TokenIssuer, 'revokeUser'>;
  /** Counts one request of the address; the ms until it may retry, or 0. */
  limitAddress(ip: string): Promise<number>;
}

const digest = (value: string) => createHash('sha256').update(value, 'utf8').digest();

export function adminRoutes(app: FastifyInstance, options: AdminRoutesOptions): void {
  const expected = digest(options.adminToken);

  void app.register(async (scope) => {
    scope.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
      const retryMs = await options.limitAddress(request.ip);
      if (retryMs > 0) {
        reply.header('retry-after', Math.max(1, Math.ceil(retryMs / 1000)));
        throw new SwitchboardError('SB_ERR_RATE_LIMITED', 'too many requests; retry later');
      }
      let given: string;
      try {
        given = bearer(request.headers.authorization);
      } catch {
        given = '';
      }
      if (!timingSafeEqual(digest(given), expected)) {
        request.log.warn({ ip: request.ip, url: request.url }, 'admin request refused');
        reply.header('www-authenticate', 'Bearer');
        throw new SwitchboardError('SB_ERR_ADMIN_AUTH_FAILED');
      }
    });

    // Ends every login of the user and closes its sessions on every worker (PROTOCOL.md §16).
    scope.post<{ Params: { name: string } }>('/api/admin/users/:name/revoke', async (request) => {
      let uid: string;
      try {
        uid = checkUsername(request.params.name);
      } catch {
        throw new SwitchboardError('SB_ERR_UNKNOWN_RECIPIENT', `no account ${JSON.stringify(request.params.name.slice(0, 64))}`);
      }
      if (!(await options.users.exists(uid))) throw new SwitchboardError('SB_ERR_UNKNOWN_RECIPIENT', `no account ${uid}`);
      const { families, before } = await options.issuer.revokeUser(uid, 'user revoked by an operator');
      return { uid, revokedLogins: families, revokedBefore: before };
    });
  });
}
