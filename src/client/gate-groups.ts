// The gate's group API (PROTOCOL.md §13) for a logged-in user: create a group, list
// one's groups, read one and its members, change its membership, leave, dissolve. Each call
// carries the token of a gate login (Authorization: Bearer); a refusal rejects with a GateError
// of the gate's code (SB_ERR_GROUP_FORBIDDEN, SB_ERR_GROUP_NOT_MEMBER, SB_ERR_TOKEN_EXPIRED ...),
// a gate that cannot be reached with gateFailure()'s SB_ERR_CLIENT_CONNECT_FAILED.

import type { Group, GroupMeta, GroupOfUser, GroupRole, GroupView, Member } from '../groups/group-store.js';
import { gateFailure, gateRequest, type Gate } from './gate-login.js';

export type { Group, GroupMeta, GroupOfUser, GroupRole, GroupView, Member };

/** A page of a listing: pass `next` back as `after` for the following one; undefined on the last. */
export interface GroupPageRequest {
  after?: string;
  limit?: number;
}

export interface GroupChange {
  /** The seq of the event recording the change in the group's log; undefined when nothing changed. */
  seq: number | undefined;
}

export interface MembershipChange extends GroupChange {
  /** The uids the change applied to. */
  uids: string[];
}

/** The token of the current gate login, or a function returning it (asked before every call: a fresh login's). */
export type TokenSource = string | (() => string | Promise<string>);

export class GateGroups {
  readonly #gateUrl: Gate;
  readonly #token: TokenSource;

  constructor(gateUrl: Gate, token: TokenSource) {
    this.#gateUrl = gateUrl;
    this.#token = token;
  }

  /** Creates a group owned by the caller, with `members` besides it. */
  async createGroup(name: string, members: readonly string[] = [], meta?: GroupMeta): Promise<Group> {
    const { group } = await this.#call<{ group: Group }>('POST', '/api/groups', { name, members, ...(meta ? { meta } : {}) });
    return group;
  }

  /** The caller's groups with its role in each, in id order, a page at a time. */
  listGroups(page: GroupPageRequest = {}): Promise<{ groups: GroupOfUser[]; next: string | undefined }> {
    return this.#call<{ groups: GroupOfUser[]; next?: string | null }>('GET', `/api/groups${query(page)}`).then((r) => ({ groups: r.groups, next: r.next ?? undefined }));
  }

  /** Every group of the caller, page after page (at most `max`). */
  async allGroups(max = 10_000): Promise<GroupOfUser[]> {
    const all: GroupOfUser[] = [];
    let after: string | undefined;
    do {
      const page = await this.listGroups(after === undefined ? {} : { after });
      all.push(...page.groups);
      after = page.next;
    } while (after !== undefined && all.length < max);
    return all.slice(0, max);
  }

  /** The group as the caller (a member or former member) sees it. */
  async getGroup(group: string): Promise<GroupView> {
    return (await this.#call<{ group: GroupView }>('GET', groupPath(group))).group;
  }

  /** A new name, a new meta (replacing the old one), or both: by an admin or the owner. */
  update(group: string, change: { name?: string; meta?: GroupMeta }): Promise<GroupChange> {
    return this.#change('PATCH', groupPath(group), change);
  }

  /** The members in uid order, a page at a time: read by members only. */
  members(group: string, page: GroupPageRequest = {}): Promise<{ members: Member[]; next: string | undefined }> {
    return this.#call<{ members: Member[]; next?: string | null }>('GET', `${groupPath(group)}/members${query(page)}`).then((r) => ({ members: r.members, next: r.next ?? undefined }));
  }

  /** By an admin or the owner; uids that are members already are ignored. */
  addMembers(group: string, uids: readonly string[]): Promise<MembershipChange> {
    return this.#membership(`${groupPath(group)}/members`, uids);
  }

  /** By an admin (members only) or the owner; uids that are not members are ignored. */
  removeMembers(group: string, uids: readonly string[]): Promise<MembershipChange> {
    return this.#membership(`${groupPath(group)}/members/remove`, uids);
  }

  /** Any member but the owner. */
  leave(group: string): Promise<GroupChange> {
    return this.#change('POST', `${groupPath(group)}/leave`);
  }

  /** By the owner, of another member. */
  setRole(group: string, uid: string, role: 'admin' | 'member'): Promise<GroupChange> {
    return this.#change('PUT', `${groupPath(group)}/members/${encodeURIComponent(uid)}/role`, { role });
  }

  /** By the owner, to a member; the old owner becomes an admin. */
  transfer(group: string, uid: string): Promise<GroupChange> {
    return this.#change('POST', `${groupPath(group)}/transfer`, { uid });
  }

  /** By the owner: the group takes no more changes or messages. */
  dissolve(group: string): Promise<GroupChange> {
    return this.#change('DELETE', groupPath(group));
  }

  async #membership(path: string, uids: readonly string[]): Promise<MembershipChange> {
    const r = await this.#call<{ seq?: number | null; uids?: string[] }>('POST', path, { uids });
    return { seq: r.seq ?? undefined, uids: r.uids ?? [] };
  }

  async #change(method: string, path: string, body?: unknown): Promise<GroupChange> {
    const r = await this.#call<{ seq?: number | null }>(method, path, body);
    return { seq: r.seq ?? undefined };
  }

  async #call<T>(method: string, path: string, body?: unknown): Promise<T> {
    const token = typeof this.#token === 'function' ? await this.#token() : this.#token;
    return gateRequest<T>(this.#gateUrl, method, path, body, token).catch((err: unknown) => {
      throw gateFailure(this.#gateUrl, err);
    });
  }
}

function groupPath(group: string): string {
  return `/api/groups/${encodeURIComponent(group)}`;
}

function query(page: GroupPageRequest): string {
  const params = new URLSearchParams();
  if (page.after !== undefined) params.set('after', page.after);
  if (page.limit !== undefined) params.set('limit', String(page.limit));
  const s = params.toString();
  return s === '' ? '' : `?${s}`;
}
