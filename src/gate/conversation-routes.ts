// The gate's conversation reads (PROTOCOL.md §14, "Over HTTP"): the chat list and history pages
// of the bearer token's user, the same pages a worker answers CONVERSATION_REQUEST with. Read
// marks are made on a worker connection only: they are events the user's other devices get,
// and delivering them is a worker's job. Each user's reads are rate limited in the gate's
// RateLimitStore (shared by every gate on one Redis).

import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { TokenSigner } from '../auth/token.js';
import { normalizeUsername } from '../auth/password.js';
import type { ConversationEntry, InboxStore, StoredMessage } from '../inbox/inbox-store.js';
import { DEFAULT_PAGE, MAX_PAGE, previewMessage, storedMessage } from '../protocol/conversation-view.js';
import type { MessageRequest } from '../protocol/types.js';
import { uint64String } from '../protocol/codec.js';
import type { RateLimit, RateLimitStore } from './rate-limit-store.js';
import { takeUserRate, tokenUser } from './user-requests.js';

export interface ConversationRoutesOptions {
  inbox: InboxStore;
  signer: TokenSigner;
  /** Peers are user names, folded as at registration; false: as written (users live outside switchboard). */
  normalizePeers: boolean;
  rates: { store: RateLimitStore; reads: RateLimit };
}


interface PageQuery {
  before?: string;
  limit?: string;
}

export function conversationRoutes(app: FastifyInstance, options: ConversationRoutesOptions): void {
  const { inbox, signer, normalizePeers, rates } = options;
  const page = {
    type: 'object',
    additionalProperties: false,
    properties: { before: { type: 'string', pattern: '^[0-9]{1,16}$' }, limit: { type: 'string', pattern: '^[0-9]{1,7}$' } },
  } as const;
  const params = { type: 'object', required: ['peer'], properties: { peer: { type: 'string', minLength: 1, maxLength: 256 } } } as const;
  const pageOf = (q: PageQuery) => ({ before: q.before === undefined ? 0 : Number(q.before), limit: q.limit === undefined || Number(q.limit) === 0 ? DEFAULT_PAGE : Math.min(Number(q.limit), MAX_PAGE) });

  void app.register(async (scope) => {
    scope.decorateRequest('conversationUser', '');
    scope.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
      const uid = (request.conversationUser = tokenUser(signer, request, reply));
      await takeUserRate(rates.store, `conversation-read:${uid}`, rates.reads, request, reply, 'conversation reads', 'conversation reads rate limited', { uid });
    });

    scope.get<{ Querystring: PageQuery }>('/api/conversations', { schema: { querystring: page } }, async (request) => {
      const { before, limit } = pageOf(request.query);
      const result = await inbox.conversations(request.conversationUser, before, limit);
      const last = result.conversations.at(-1);
      return { conversations: result.conversations.map(entryJson), nextBefore: result.more && last ? last.lastSeq : null };
    });

    scope.get<{ Params: { peer: string }; Querystring: PageQuery }>('/api/conversations/:peer/messages', { schema: { params, querystring: page } }, async (request) => {
      const { before, limit } = pageOf(request.query);
      const given = request.params.peer;
      const peer = normalizePeers ? (normalizeUsername(given) ?? given) : given;
      const result = await inbox.history(request.conversationUser, peer, before, limit);
      return {
        messages: result.messages.map((m) => messageJson(storedMessage(m))),
        nextBefore: result.more && result.messages.length > 0 ? result.messages[0]!.seq : null,
        oldest: result.oldest,
        pruned: result.pruned,
      };
    });
  });
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The uid of the request's verified bearer token (conversation routes). */
    conversationUser: string;
  }
}

function entryJson(c: ConversationEntry) {
  const preview = c.last ? previewMessage(c.last as StoredMessage) : undefined;
  return {
    peer: c.conversation,
    lastSeq: c.lastSeq,
    // The time deliveries show (the worker stamps it into the message), as the TCP list does.
    lastAt: preview?.request.storedAt ? Number(uint64String(preview.request.storedAt)) : c.lastAt,
    readSeq: c.readSeq,
    unread: c.unread,
    last: preview ? messageJson(preview.request) : null,
    truncated: preview?.truncated ?? false,
  };
}

/** A MessageRequest as JSON: uint64s as numbers (seq, stored_at: below 2^53) or strings (msg_id, time: the client's), empty fields left out. */
function messageJson(m: MessageRequest) {
  const out: Record<string, unknown> = { seq: Number(uint64String(m.seq)), storedAt: Number(uint64String(m.storedAt)) };
  if (m.msgId) out['msgId'] = uint64String(m.msgId);
  for (const key of ['from', 'to', 'content', 'url', 'property', 'fromNick', 'json', 'originDevice'] as const) if (m[key]) out[key] = m[key];
  if (m.msgType) out['msgType'] = m.msgType;
  if (m.time) out['time'] = uint64String(m.time);
  if (m.recalled) out['recalled'] = true;
  if (m.edited) out['edited'] = true;
  return out;
}
