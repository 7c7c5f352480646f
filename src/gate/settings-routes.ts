// The user's own settings at the gate: today one, the receipts privacy setting (PROTOCOL.md
// §14). Off, the user's devices send no "delivered"/"read" receipts and get none. Workers read
// it at each login and again at most every 30 s of a session (src/server/receipts.ts), so a
// change reaches every device within that. Turned off, the user's shared group read positions
// are withdrawn at once (a worker whose copy of the setting is still on may share one again by
// a message or mark in those 30 s; the next one after withdraws it). Rate limited per user in
// the gate's RateLimitStore.

import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { TokenSigner } from '../auth/token.js';
import { SwitchboardError } from '../errors.js';
import type { UserStore } from '../users/user-store.js';
import type { GroupStore } from '../groups/group-store.js';
import type { RateLimit, RateLimitStore } from './rate-limit-store.js';
import { takeUserRate, tokenUser } from './user-requests.js';

export interface SettingsRoutesOptions {
  users: Pick<UserStore, 'receipts' | 'setReceipts' | 'revocations'>;
  signer: TokenSigner;
  rates: { store: RateLimitStore; requests: RateLimit };
  /** Where the user's shared group read positions are withdrawn when receipts go off; unset: the gate has no groups. */
  groups?: Pick<GroupStore, 'unshare'>;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The uid of the request's verified bearer token (settings routes). */
    settingsUser: string;
  }
}

export function settingsRoutes(app: FastifyInstance, options: SettingsRoutesOptions): void {
  const { users, signer, rates, groups } = options;
  const body = { type: 'object', additionalProperties: false, required: ['receipts'], properties: { receipts: { type: 'boolean' } } } as const;

  void app.register(async (scope) => {
    scope.decorateRequest('settingsUser', '');
    scope.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
      const uid = (request.settingsUser = await tokenUser(signer, request, reply, users));
      await takeUserRate(rates.store, `settings:${uid}`, rates.requests, request, reply, 'settings requests', 'settings requests rate limited', { uid });
    });

    scope.get('/api/settings', async (request) => ({ receipts: await users.receipts(request.settingsUser) }));

    scope.put<{ Body: { receipts: boolean } }>('/api/settings', { schema: { body } }, async (request) => {
      const { receipts } = request.body;
      if (!(await users.setReceipts(request.settingsUser, receipts))) throw new SwitchboardError('SB_ERR_UNKNOWN_RECIPIENT', `${request.settingsUser} has no account here: settings belong to accounts`);
      if (!receipts) await groups?.unshare(request.settingsUser);
      request.log.info({ uid: request.settingsUser, receipts }, 'settings changed');
      return { receipts };
    });
  });
}
