// The gate's group management API (PROTOCOL.md "Group management over HTTP"): every route takes
// `Authorization: Bearer <token>` and the token's uid acts. The store decides whether the actor
// may (in the same atomic step as the change); this file checks the token, the shape of the
// request, that added members have accounts, and tells the workers of every change that
// appended an event (GroupNotifier), so that their sessions see it live. Each user's requests
// are rate limited, changes and reads apart, in the gate's RateLimitStore (shared by every gate
// on one Redis): a change costs an append and a read on every worker with a member online.

import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { TokenSigner } from '../auth/token.js';
import { normalizeUsername } from '../auth/password.js';
import { SwitchboardError } from '../errors.js';
import type { UserStore } from '../users/user-store.js';
import type { GroupNotifier } from '../groups/group-notifier.js';
import type { RateLimit, RateLimitStore } from './rate-limit-store.js';
import { checkGroupId, groupLimits, type GroupLimits, type GroupMeta, type GroupStore } from '../groups/group-store.js';
import { takeUserRate, tokenUser, type RevocationSource } from './user-requests.js';

export interface GroupRoutesOptions {
  store: GroupStore;
  notifier: GroupNotifier;
  /** The store's limits (the same values): bound the request bodies and pages. */
  limits?: Partial<GroupLimits>;
  signer: TokenSigner;
  /**
   * Members added must have an account here (names normalised as at registration); undefined:
   * any uid, unchecked and as written (users live outside switchboard: --allow-unknown-recipients).
   */
  users: UserStore | undefined;
  /** What the bearer tokens are checked against (the gate's accounts). */
  revocations: RevocationSource;
  rates: GroupRates;
}

/** Per-user limits of the group routes: a request over its window's max is refused with 429. */
export interface GroupRates {
  store: RateLimitStore;
  /** Every request that may change a group (all but GET and HEAD), whatever it answers. */
  changes: RateLimit;
  /** GET and HEAD requests. */
  reads: RateLimit;
}

/** A page holds this many entries when `limit` is not given. */
const DEFAULT_PAGE = 100;
/** Unknown uids named in a refusal's message, at most (the caller's own input, nothing else). */
const NAMED_UNKNOWN = 10;

declare module 'fastify' {
  interface FastifyRequest {
    /** The uid of the request's verified bearer token (group routes). */
    groupActor: string;
  }
}

interface IdParams {
  id: string;
}

interface PageQuery {
  after?: string;
  limit?: string;
}

export function groupRoutes(app: FastifyInstance, options: GroupRoutesOptions): void {
  const { store, notifier, signer, users, rates, revocations } = options;
  const limits = groupLimits(options.limits);
  const uid = { type: 'string', minLength: 1, maxLength: limits.maxUidLength } as const;
  const uids = { type: 'array', minItems: 1, maxItems: limits.maxUidsPerCall, items: uid } as const;
  const meta = { type: 'object', maxProperties: limits.maxMetaKeys, additionalProperties: { type: 'string' } } as const;
  const name = { type: 'string', minLength: 1, maxLength: limits.maxNameLength * 2 } as const;
  // A member list is larger than the gate's bodyLimit (4 KiB, made for credentials): its own
  // bound, what the largest valid list takes as JSON (every character escaped as \uXXXX).
  const listBodyLimit = 1024 + limits.maxUidsPerCall * (limits.maxUidLength * 6 + 3) + limits.maxMetaBytes * 6 + limits.maxNameLength * 12;
  const params = { type: 'object', required: ['id'], properties: { id: { type: 'string' } } } as const;
  const page = {
    type: 'object',
    additionalProperties: false,
    properties: { after: { type: 'string', maxLength: 256 }, limit: { type: 'string', pattern: '^[0-9]{1,7}$' } },
  } as const;
  const object = <P extends Record<string, unknown>, R extends readonly string[]>(properties: P, required: R) =>
    ({ type: 'object', additionalProperties: false, required, properties }) as const;
  const pageOf = (q: PageQuery) => ({ after: q.after === '' ? undefined : q.after, limit: q.limit === undefined ? DEFAULT_PAGE : Math.max(1, Math.min(Number(q.limit), limits.maxPageSize)) });
  const seqOf = (seq: number | undefined) => ({ seq: seq ?? null });

  /** A uid named in a request: folded as at registration where members have accounts, else as written. */
  const uidOf = (given: string): string => (users === undefined ? given : (normalizeUsername(given) ?? given));

  /** Accounts of the uids to add, by their normalised names; SB_ERR_UNKNOWN_RECIPIENT naming the caller's unknown ones. */
  const existing = async (given: readonly string[]): Promise<string[]> => {
    // The store refuses what is not a uid.
    if (users === undefined) return [...new Set(given)];
    const names = given.map((u) => ({ given: u, uid: normalizeUsername(u) }));
    const found = await Promise.all(names.map(async (n) => n.uid !== undefined && (await users.exists(n.uid))));
    const unknown = names.filter((_, i) => !found[i]).map((n) => n.given);
    if (unknown.length > 0) {
      const shown = unknown.slice(0, NAMED_UNKNOWN).map((u) => JSON.stringify(u)).join(', ');
      throw new SwitchboardError('SB_ERR_UNKNOWN_RECIPIENT', `${unknown.length === 1 ? 'this uid has' : `${unknown.length} uids have`} no account: ${shown}${unknown.length > NAMED_UNKNOWN ? ', ...' : ''}`);
    }
    return [...new Set(names.map((n) => n.uid!))];
  };

  const changed = (request: FastifyRequest, group: string, seq: number | undefined, what: string, added?: string[]) => {
    if (seq === undefined) return;
    notifier.publish({ group, seq, ...(added && added.length > 0 ? { added } : {}) });
    request.log.info({ uid: request.groupActor, group, seq, change: what }, 'group changed');
  };

  /**
   * Counts the request on its user's window (changes or reads): a refusal keeps its count, so a
   * flood past the limit changes nothing until the window ends. Logged once per window.
   */
  const admit = async (request: FastifyRequest, reply: FastifyReply) => {
    const read = request.method === 'GET' || request.method === 'HEAD';
    const uid = request.groupActor;
    await takeUserRate(rates.store, `${read ? 'group-read' : 'group-change'}:${uid}`, read ? rates.reads : rates.changes, request, reply, `group ${read ? 'reads' : 'changes'}`, 'group requests rate limited', { uid, read });
  };

  // Routes in a scope of their own: the token hook runs before the body is even parsed, so an
  // unauthenticated request costs no validation and learns nothing about the body's rules, and a
  // request over its rate limit is refused before the body is read.
  void app.register(async (scope) => {
    scope.decorateRequest('groupActor', '');
    scope.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
      request.groupActor = await tokenUser(signer, request, reply, revocations);
      await admit(request, reply);
    });

    scope.post<{ Body: { name: string; members?: string[]; meta?: GroupMeta } }>(
      '/api/groups',
      { bodyLimit: listBodyLimit, schema: { body: object({ name, members: { ...uids, minItems: 0 }, meta }, ['name'] as const) } },
      async (request, reply) => {
        const actor = request.groupActor;
        const members = (await existing(request.body.members ?? [])).filter((m) => m !== actor);
        const group = await store.create(actor, request.body.name, members, request.body.meta ?? {});
        changed(request, group.id, group.head, 'created', [actor, ...members]);
        reply.code(201);
        return { group };
      },
    );

    scope.get<{ Querystring: PageQuery }>('/api/groups', { schema: { querystring: page } }, async (request) => {
      const { groups, next } = await store.groupsOf(request.groupActor, pageOf(request.query));
      return { groups, next: next ?? null };
    });

    scope.get<{ Params: IdParams }>('/api/groups/:id', { schema: { params } }, async (request) => {
      const group = await store.get(checkGroupId(request.params.id), request.groupActor);
      return { group: { ...group, role: group.role ?? null, left: group.left ?? null } };
    });

    scope.patch<{ Params: IdParams; Body: { name?: string; meta?: GroupMeta } }>(
      '/api/groups/:id',
      { bodyLimit: listBodyLimit, schema: { params, body: { ...object({ name, meta }, [] as const), minProperties: 1 } } },
      async (request) => {
        const id = checkGroupId(request.params.id);
        const seq = await store.update(id, request.groupActor, request.body);
        changed(request, id, seq, 'updated');
        return seqOf(seq);
      },
    );

    scope.delete<{ Params: IdParams }>('/api/groups/:id', { schema: { params } }, async (request) => {
      const id = checkGroupId(request.params.id);
      const seq = await store.dissolve(id, request.groupActor);
      changed(request, id, seq, 'dissolved');
      return seqOf(seq);
    });

    scope.get<{ Params: IdParams; Querystring: PageQuery }>('/api/groups/:id/members', { schema: { params, querystring: page } }, async (request) => {
      const { members, next } = await store.members(checkGroupId(request.params.id), request.groupActor, pageOf(request.query));
      return { members, next: next ?? null };
    });

    scope.post<{ Params: IdParams; Body: { uids: string[] } }>(
      '/api/groups/:id/members',
      { bodyLimit: listBodyLimit, schema: { params, body: object({ uids }, ['uids'] as const) } },
      async (request) => {
        const id = checkGroupId(request.params.id);
        // The store refuses a stranger before anything is looked up there; the account check
        // comes first all the same, so that an add is all or nothing.
        const result = await store.addMembers(id, request.groupActor, await existing(request.body.uids));
        changed(request, id, result.seq, 'added', result.uids);
        return { seq: result.seq ?? null, uids: result.uids };
      },
    );

    scope.post<{ Params: IdParams; Body: { uids: string[] } }>(
      '/api/groups/:id/members/remove',
      { bodyLimit: listBodyLimit, schema: { params, body: object({ uids }, ['uids'] as const) } },
      async (request) => {
        const id = checkGroupId(request.params.id);
        const result = await store.removeMembers(id, request.groupActor, request.body.uids.map(uidOf));
        changed(request, id, result.seq, 'removed');
        return { seq: result.seq ?? null, uids: result.uids };
      },
    );

    scope.post<{ Params: IdParams }>('/api/groups/:id/leave', { schema: { params } }, async (request) => {
      const id = checkGroupId(request.params.id);
      const seq = await store.leave(id, request.groupActor);
      changed(request, id, seq, 'left');
      return seqOf(seq);
    });

    scope.put<{ Params: IdParams & { uid: string }; Body: { role: 'admin' | 'member' } }>(
      '/api/groups/:id/members/:uid/role',
      { schema: { params: { ...params, required: ['id', 'uid'], properties: { ...params.properties, uid } }, body: object({ role: { type: 'string', enum: ['admin', 'member'] } }, ['role'] as const) } },
      async (request) => {
        const id = checkGroupId(request.params.id);
        const member = uidOf(request.params.uid);
        const result = await store.setRole(id, request.groupActor, member, request.body.role);
        changed(request, id, result.seq, 'role');
        return seqOf(result.seq);
      },
    );

    scope.post<{ Params: IdParams; Body: { uid: string } }>('/api/groups/:id/transfer', { schema: { params, body: object({ uid }, ['uid'] as const) } }, async (request) => {
      const id = checkGroupId(request.params.id);
      const result = await store.transfer(id, request.groupActor, uidOf(request.body.uid));
      changed(request, id, result.seq, 'transferred');
      return seqOf(result.seq);
    });
  });
}
