// The gate's conversation reads (PROTOCOL.md §14, "Over HTTP"): the chat list (with the user's
// groups when asked), history pages of a 1:1 or a group conversation and a group's read
// positions, for the bearer token's user: the same pages a worker answers CONVERSATION_REQUEST
// with. Read marks are made on a worker connection only: they are events the user's other
// devices get, and delivering them is a worker's job. Each user's reads are rate limited in the
// gate's RateLimitStore (shared by every gate on one Redis).

import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { TokenSigner } from '../auth/token.js';
import { normalizeUsername } from '../auth/password.js';
import type { ConversationEntry, InboxStore, StoredMessage } from '../inbox/inbox-store.js';
import { checkGroupId, type GroupStore, type GroupSummary } from '../groups/group-store.js';
import type { UserStore } from '../users/user-store.js';
import { chatList, type ListedEntry } from '../conversations/chat-list.js';
import { groupHistory } from '../conversations/group-history.js';
import { groupReaders } from '../conversations/group-readers.js';
import { SwitchboardError } from '../errors.js';
import { DEFAULT_PAGE, MAX_PAGE, groupEntryBody, previewMessage, storedMessage } from '../protocol/conversation-view.js';
import type { MessageRequest } from '../protocol/types.js';
import { uint64String } from '../protocol/codec.js';
import type { RateLimit, RateLimitStore } from './rate-limit-store.js';
import { takeUserRate, tokenUser, type RevocationSource } from './user-requests.js';

export interface ConversationRoutesOptions {
  inbox: InboxStore;
  signer: TokenSigner;
  /** Peers are user names, folded as at registration; false: as written (users live outside switchboard). */
  normalizePeers: boolean;
  rates: { store: RateLimitStore; reads: RateLimit };
  /** The groups: the list with `groups=1`, group history and readers; undefined: none of these. */
  groups?: GroupStore;
  /** The receipts setting (READERS is refused to a user who turned receipts off); undefined: receipts on for all. */
  users?: Pick<UserStore, 'receipts'>;
  /** What the bearer tokens are checked against (the gate's accounts). */
  revocations: RevocationSource;
}


interface PageQuery {
  before?: string;
  limit?: string;
}

interface ListQuery extends PageQuery {
  groups?: string;
  cursor?: string;
}

interface ReadersQuery {
  seq?: string;
  after?: string;
  limit?: string;
}

export function conversationRoutes(app: FastifyInstance, options: ConversationRoutesOptions): void {
  const { inbox, signer, normalizePeers, rates, groups, users, revocations } = options;
  const page = {
    type: 'object',
    additionalProperties: false,
    properties: { before: { type: 'string', pattern: '^[0-9]{1,16}$' }, limit: { type: 'string', pattern: '^[0-9]{1,7}$' } },
  } as const;
  const list = {
    type: 'object',
    additionalProperties: false,
    properties: { ...page.properties, groups: { type: 'string', enum: ['0', '1', 'true', 'false'] }, cursor: { type: 'string', maxLength: 64 } },
  } as const;
  const readersQuery = {
    type: 'object',
    additionalProperties: false,
    properties: { seq: { type: 'string', pattern: '^[0-9]{1,16}$' }, after: { type: 'string', maxLength: 256 }, limit: page.properties.limit },
  } as const;
  const groupParams = { type: 'object', required: ['id'], properties: { id: { type: 'string', minLength: 1, maxLength: 64 } } } as const;
  const params = { type: 'object', required: ['peer'], properties: { peer: { type: 'string', minLength: 1, maxLength: 256 } } } as const;
  const pageOf = (q: PageQuery) => ({ before: q.before === undefined ? 0 : Number(q.before), limit: q.limit === undefined || Number(q.limit) === 0 ? DEFAULT_PAGE : Math.min(Number(q.limit), MAX_PAGE) });

  void app.register(async (scope) => {
    scope.decorateRequest('conversationUser', '');
    scope.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
      const uid = (request.conversationUser = await tokenUser(signer, request, reply, revocations));
      await takeUserRate(rates.store, `conversation-read:${uid}`, rates.reads, request, reply, 'conversation reads', 'conversation reads rate limited', { uid });
    });

    scope.get<{ Querystring: ListQuery }>('/api/conversations', { schema: { querystring: list } }, async (request) => {
      const { before, limit } = pageOf(request.query);
      if (request.query.groups === '1' || request.query.groups === 'true') {
        if (!groups) throw new SwitchboardError('SB_ERR_BAD_REQUEST', 'this gate has no groups');
        const merged = await chatList(inbox, groups, request.conversationUser, request.query.cursor ?? '', limit);
        return { conversations: merged.entries.map(listedJson), nextCursor: merged.cursorAfter(merged.entries.length) || null };
      }
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

    if (!groups) return;
    scope.get<{ Params: { id: string }; Querystring: PageQuery }>('/api/groups/:id/messages', { schema: { params: groupParams, querystring: page } }, async (request) => {
      const { before, limit } = pageOf(request.query);
      const result = await groupHistory(groups, checkGroupId(request.params.id), request.conversationUser, before, limit);
      return {
        messages: result.entries.map((m) => messageJson(storedMessage(m))),
        nextBefore: result.more ? result.entries[0]!.seq : null,
        oldest: result.oldest,
        pruned: result.pruned,
      };
    });

    scope.get<{ Params: { id: string }; Querystring: ReadersQuery }>('/api/groups/:id/readers', { schema: { params: groupParams, querystring: readersQuery } }, async (request) => {
      const uid = request.conversationUser;
      const group = checkGroupId(request.params.id);
      const limit = request.query.limit === undefined || Number(request.query.limit) === 0 ? DEFAULT_PAGE : Math.min(Number(request.query.limit), MAX_PAGE);
      const seq = request.query.seq === undefined ? 0 : Number(request.query.seq);
      const sharing = users ? await users.receipts(uid) : true;
      const answer = await groupReaders(groups, group, uid, sharing, { after: request.query.after || undefined, limit }, seq);
      return { readers: answer.readers, readCount: answer.read ?? null, memberCount: answer.of, nextAfter: answer.next ?? null };
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

function listedJson(e: ListedEntry) {
  return e.kind === 'peer' ? entryJson(e.entry) : groupJson(e.summary);
}

function groupJson(s: GroupSummary) {
  const preview = s.last ? previewMessage({ seq: s.last.seq, body: groupEntryBody(s.id, s.last) }) : undefined;
  return {
    group: s.id,
    name: s.name,
    lastSeq: s.head,
    lastAt: preview?.request.storedAt ? Number(uint64String(preview.request.storedAt)) : (s.last?.storedAt ?? 0),
    readSeq: s.readSeq,
    unread: s.unread,
    last: preview ? messageJson(preview.request) : null,
    truncated: preview?.truncated ?? false,
  };
}

/** A MessageRequest as JSON: uint64s as numbers (seq, stored_at: below 2^53) or strings (msg_id, time: the client's), empty fields left out. */
function messageJson(m: MessageRequest) {
  const out: Record<string, unknown> = { seq: Number(uint64String(m.seq)), storedAt: Number(uint64String(m.storedAt)) };
  if (m.msgId) out['msgId'] = uint64String(m.msgId);
  for (const key of ['from', 'to', 'content', 'url', 'property', 'fromNick', 'json', 'originDevice', 'group', 'event'] as const) if (m[key]) out[key] = m[key];
  if (m.msgType) out['msgType'] = m.msgType;
  if (m.time) out['time'] = uint64String(m.time);
  if (m.recalled) out['recalled'] = true;
  if (m.edited) out['edited'] = true;
  return out;
}
