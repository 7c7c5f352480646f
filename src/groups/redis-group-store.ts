// Redis GroupStore. Everything of one group shares the hash tag {g:<id>}, so it lives in one
// Redis Cluster slot and every group script touches one slot; each user's index shares {u:<uid>}:
//
//   <prefix>{g:<id>}:info      hash    name, meta (JSON), owner, createdAt, head, count, dissolved (0|1)
//   <prefix>{g:<id>}:mem       hash    uid -> role (o|a|m) and the seq it joined at: "m17"
//   <prefix>{g:<id>}:ml        zset    score 0, member uid: the members in byte order, for paging
//   <prefix>{g:<id>}:former    hash    uid -> "<joined>|<left>|<l|r>" (left or removed)
//   <prefix>{g:<id>}:fq        zset    score left, member uid: who is forgotten first
//   <prefix>{g:<id>}:log       zset    score seq, member "<seq>|<storedAt>|<m|e><sender bytes>|<sender><body>"
//   <prefix>{g:<id>}:dd        hash    "<sender>\0<msgId>" -> "<seq>|<storedAt>"
//   <prefix>{g:<id>}:ddq       list    the dd fields, oldest first: forgotten from the front
//   <prefix>{g:<id>}:cur       hash    uid -> JSON {deviceId: "seq"} (at most maxDevicesPerMember)
//   <prefix>{g:<id>}:rd        zset    score the member's read position, member uid: members only
//   <prefix>{g:<id>}:rv        zset    the same, of the members who share it (receipts on): readers, readCount
//   <prefix>{g:<id>}:ev        zset    score seq, member seq: the retained event entries, which unread counts leave out
//   <prefix>{u:<uid>}:groups   zset    score 0, member group id: the user's groups, for paging
//   <prefix>{u:<uid>}:departed zset    score when, member group id: the most recent maxDeparted
//   <prefix>{u:<uid>}:gs       hash    group id -> "<seq>|<m|l|r|d>": the last change the index applied
//
// Every group operation is one script (redis-group-scripts.ts): the authorisation, the change and
// the event that records it happen atomically, and cost O(uids named) (a prune, O(entries
// pruned), aside). The limits are written into the scripts, as in the inbox. A dissolved group's
// keys expire maxAgeMs after it.
//
// The user indexes live in other slots, so they cannot change in the group's script. Membership
// in the group is the truth; the index follows it, and is only ever *ahead* of it:
//   - a join is written to the index first (a reservation, which also enforces maxGroupsPerUser
//     atomically in the user's slot), then to the group, then confirmed in the index with its seq;
//     a refused change takes its reservations back. (An add first asks the group, without
//     changing it, who is a member already and whether the actor may add: a stranger's attempt
//     reserves nothing. A uid removed between that question and the add is added without a
//     reservation, so the per-user limit can be passed by the number of such races.)
//   - a departure (removed, left, dissolved) is written to the group first, then to the index.
// Each index write carries the seq of the group event it follows and is ignored when the index
// already applied a later one, so writes that arrive out of order (two gates) converge. A crash
// between the steps leaves the index listing a group the user is not (or no longer) a member of:
// groupsOf checks each group it lists against the group's slot and repairs such entries on the
// spot (a departure it missed is recorded, with the group's seq, so departedOf learns it too; a
// reservation nobody confirmed is dropped). A dissolve whose departures were not all written is
// repaired the same way, user by user.

import type { RedisOptions } from 'ioredis';
import { SwitchboardError, isErrorCode } from '../errors.js';
import { hasDedupeId } from '../inbox/inbox-store.js';
import { createRedisClient, pingRedis, storeUnavailable, type RedisClient, type RedisTarget } from '../redis/redis-client.js';
import { groupScripts, userScripts } from './redis-group-scripts.js';
import {
  checkBody,
  checkDeviceId,
  checkGroupId,
  checkLimit,
  checkMeta,
  checkName,
  checkSeq,
  checkUid,
  checkUids,
  eventJson,
  groupLimits,
  newGroupId,
  type AppendResult,
  type ChangeResult,
  type Departure,
  type DepartureReason,
  type Group,
  type GroupEntry,
  type GroupLimits,
  type GroupMeta,
  type GroupRole,
  type GroupsPage,
  type GroupStore,
  type GroupSummary,
  type GroupView,
  type MarkReadResult,
  type MemberPage,
  type Page,
  type ReadCount,
  type ReaderPage,
  type ReadResult,
} from './group-store.js';

/**
 * The commands the group store sends (in its scripts or directly) beyond those the other stores
 * do (test/helpers/redis.ts SWITCHBOARD_ACL): what an ACL user needs in addition.
 */
export const GROUP_REDIS_COMMANDS = ['hmget', 'hincrby', 'hexists', 'zrem', 'zscore', 'zrangebylex', 'lindex', 'lpop', 'rpush', 'zcount', 'zmscore', 'zremrangebyscore'] as const;

/** Departures written to user indexes at once while a dissolve walks its members. */
const DISSOLVE_SLICE = 500;

const ROLE_OF: Record<string, GroupRole> = { o: 'owner', a: 'admin', m: 'member' };
const REASON_OF: Record<string, DepartureReason> = { l: 'left', r: 'removed', d: 'dissolved' };

type GroupKeys = [string, string, string, string, string, string, string, string, string, string, string, string];
type UserKeys = [string, string, string];
type Arg = string | number | Buffer;

type Scripts = {
  sbGroupCreate(...args: [...GroupKeys, ...Arg[]]): Promise<number>;
  sbGroupPrecheck(...args: [...GroupKeys, ...Arg[]]): Promise<number[]>;
  sbGroupAdd(...args: [...GroupKeys, ...Arg[]]): Promise<[number, (number | null)[]]>;
  sbGroupRemove(...args: [...GroupKeys, ...Arg[]]): Promise<[number, string[]]>;
  sbGroupLeave(...args: [...GroupKeys, ...Arg[]]): Promise<number>;
  sbGroupSetRole(...args: [...GroupKeys, ...Arg[]]): Promise<number>;
  sbGroupTransfer(...args: [...GroupKeys, ...Arg[]]): Promise<number>;
  sbGroupUpdate(...args: [...GroupKeys, ...Arg[]]): Promise<number>;
  sbGroupDissolve(...args: [...GroupKeys, ...Arg[]]): Promise<number>;
  sbGroupAppend(...args: [...GroupKeys, ...Arg[]]): Promise<[number, number, number]>;
  sbGroupMarkRead(...args: [...GroupKeys, ...Arg[]]): Promise<[number, number, number]>;
  sbGroupSummaryBuffer(...args: [...GroupKeys, ...Arg[]]): Promise<[Buffer, number, number, number, number, number, Buffer | null]>;
  sbGroupReaders(...args: [...GroupKeys, ...Arg[]]): Promise<string[]>;
  sbGroupChatSummaryBuffer(...args: [...GroupKeys, ...Arg[]]): Promise<[0] | [1, Buffer, number, number, number, number, Buffer | null]>;
  sbGroupReadCount(...args: [...GroupKeys, ...Arg[]]): Promise<[number, number]>;
  sbGroupReadBuffer(...args: [...GroupKeys, ...Arg[]]): Promise<[number, number, number, Buffer[]]>;
  sbGroupGet(...args: [...GroupKeys, ...Arg[]]): Promise<[string, string, string, number, number, number, number, string, number, number]>;
  sbGroupMembers(...args: [...GroupKeys, ...Arg[]]): Promise<string[]>;
  sbGroupCursor(...args: [...GroupKeys, ...Arg[]]): Promise<string | null>;
  sbGroupSaveCursor(...args: [...GroupKeys, ...Arg[]]): Promise<number>;
  sbGroupMembership(...args: [...GroupKeys, ...Arg[]]): Promise<string[]>;
  sbUserReserve(...args: [...UserKeys, ...Arg[]]): Promise<number>;
  sbUserRelease(...args: [...UserKeys, ...Arg[]]): Promise<number>;
  sbUserConfirm(...args: [...UserKeys, ...Arg[]]): Promise<number>;
  sbUserDepart(...args: [...UserKeys, ...Arg[]]): Promise<number>;
  sbUserForget(...args: [...UserKeys, ...Arg[]]): Promise<number>;
  sbUserDeparted(...args: [...UserKeys, ...Arg[]]): Promise<string[]>;
};

export interface RedisGroupStoreOptions {
  /** A redis:// URL. */
  /** One Redis (a redis:// URL) or a Redis Cluster's seed nodes. */
  url: RedisTarget;
  limits?: Partial<GroupLimits>;
  /** Prefix of every key, default "sb:". */
  keyPrefix?: string;
  /** Bound on every command (SB_ERR_STORE_UNAVAILABLE after it); default 2 s. */
  timeoutMs?: number;
  redisOptions?: RedisOptions;
  /** The clock entries are stamped and aged by (tests inject one); default Date.now. */
  now?: () => number;
}

export class RedisGroupStore implements GroupStore {
  readonly #redis: RedisClient & Scripts;
  readonly #limits: GroupLimits;
  readonly #prefix: string;
  readonly #now: () => number;

  constructor(options: RedisGroupStoreOptions) {
    this.#limits = groupLimits(options.limits);
    this.#prefix = options.keyPrefix ?? 'sb:';
    this.#now = options.now ?? Date.now;
    const redis = createRedisClient(options.url, options);
    const group = groupScripts(this.#limits);
    const user = userScripts(this.#limits);
    const name = (s: string) => s[0]!.toUpperCase() + s.slice(1);
    for (const [script, lua] of Object.entries(group)) redis.defineCommand(`sbGroup${name(script)}`, { numberOfKeys: 12, lua });
    for (const [script, lua] of Object.entries(user)) redis.defineCommand(`sbUser${name(script)}`, { numberOfKeys: 3, lua });
    this.#redis = redis as RedisClient & Scripts;
  }

  /** The underlying connection, for health checks and logging of its events. */
  get redis(): RedisClient {
    return this.#redis;
  }

  async create(owner: string, name: string, members: readonly string[] = [], meta: GroupMeta = {}): Promise<Group> {
    const limits = this.#limits;
    checkUid(owner, limits);
    checkName(name, limits);
    const checkedMeta = checkMeta(meta, limits);
    const others = checkUids(members, limits, { allowEmpty: true }).filter((uid) => uid !== owner);
    if (others.length + 1 > limits.maxMembers) throw full(limits.maxMembers);
    const metaJson = JSON.stringify(checkedMeta);
    const body = eventJson('created', JSON.stringify(owner), { uids: others.map((uid) => JSON.stringify(uid)), name: JSON.stringify(name), ...(metaJson === '{}' ? {} : { meta: metaJson }) });
    const everyone = [owner, ...others];
    // A fresh id is taken with a chance of 2^-60 per group: another one is drawn then.
    for (;;) {
      const id = newGroupId();
      await this.#reserve(id, everyone);
      const now = this.#now();
      let seq: number;
      try {
        seq = await this.#run(() => this.#redis.sbGroupCreate(...this.#groupKeys(id), owner, now, body, metaJson, name, others.length, ...others));
      } catch (err) {
        await this.#release(id, everyone);
        throw err;
      }
      if (seq === 0) {
        await this.#release(id, everyone);
        continue;
      }
      await this.#confirm(id, everyone.map((uid) => [uid, seq]));
      return { id, name, meta: checkedMeta, owner, createdAt: now, memberCount: everyone.length, head: seq, dissolved: false };
    }
  }

  async get(group: string, uid: string): Promise<GroupView> {
    checkGroupId(group);
    checkUid(uid, this.#limits);
    const [name, meta, owner, createdAt, count, head, dissolved, role, joined, last] = await this.#run(() => this.#redis.sbGroupGet(...this.#groupKeys(group), uid, this.#now()));
    return {
      id: group,
      name,
      meta: Object.freeze(JSON.parse(meta) as Record<string, string>),
      owner,
      createdAt: Number(createdAt),
      memberCount: Number(count),
      head: Number(head),
      dissolved: dissolved === 1,
      role: role === '' ? undefined : ROLE_OF[role],
      joined: Number(joined),
      left: role === '' ? Number(last) : undefined,
    };
  }

  async addMembers(group: string, actor: string, uids: readonly string[]): Promise<ChangeResult> {
    const limits = this.#limits;
    const wanted = checkUids(uids, limits);
    checkGroupId(group);
    checkUid(actor, limits);
    const keys = this.#groupKeys(group);
    // Authorised (and the group's room checked) before any user index is touched: a stranger's
    // attempt writes nothing anywhere. The script checks all of it again, atomically.
    const [count, ...isMember] = await this.#run(() => this.#redis.sbGroupPrecheck(...keys, actor, this.#now(), wanted.length, ...wanted));
    const fresh = wanted.filter((_, i) => isMember[i] === 0);
    if (Number(count) + fresh.length > limits.maxMembers) throw full(limits.maxMembers);
    const reserved = await this.#reserve(group, fresh);
    let seq: number;
    let joined: (number | null)[];
    try {
      [seq, joined] = await this.#run(() => this.#redis.sbGroupAdd(...keys, actor, JSON.stringify(actor), this.#now(), wanted.length, ...wanted.flatMap((uid) => [uid, JSON.stringify(uid)])));
    } catch (err) {
      await this.#release(group, reserved);
      throw err;
    }
    // Every uid named is a member now: confirming those that were already repairs an index
    // entry a crash lost, so a retried add heals the index.
    await this.#confirm(group, wanted.map((uid, i) => [uid, Number(joined[i])]));
    const added = seq === 0 ? [] : wanted.filter((_, i) => Number(joined[i]) === seq);
    return { seq: seq === 0 ? undefined : Number(seq), uids: added };
  }

  async removeMembers(group: string, actor: string, uids: readonly string[]): Promise<ChangeResult> {
    const wanted = checkUids(uids, this.#limits);
    checkGroupId(group);
    checkUid(actor, this.#limits);
    const now = this.#now();
    const [seq, removed] = await this.#run(() => this.#redis.sbGroupRemove(...this.#groupKeys(group), actor, JSON.stringify(actor), now, wanted.length, ...wanted.flatMap((uid) => [uid, JSON.stringify(uid)])));
    if (seq === 0) return { seq: undefined, uids: [] };
    await this.#departAll(group, removed, Number(seq), 'r', now);
    return { seq: Number(seq), uids: removed };
  }

  async leave(group: string, uid: string): Promise<number> {
    checkGroupId(group);
    checkUid(uid, this.#limits);
    const now = this.#now();
    const seq = Number(await this.#run(() => this.#redis.sbGroupLeave(...this.#groupKeys(group), uid, now, eventJson('left', JSON.stringify(uid)))));
    await this.#departAll(group, [uid], seq, 'l', now);
    return seq;
  }

  async setRole(group: string, actor: string, uid: string, role: 'admin' | 'member'): Promise<ChangeResult> {
    if (role !== 'admin' && role !== 'member') throw new SwitchboardError('SB_ERR_BAD_GROUP', "a role set is 'admin' or 'member'");
    checkUid(uid, this.#limits);
    checkGroupId(group);
    checkUid(actor, this.#limits);
    const body = eventJson('role', JSON.stringify(actor), { uids: [JSON.stringify(uid)], role: JSON.stringify(role) });
    const seq = Number(await this.#run(() => this.#redis.sbGroupSetRole(...this.#groupKeys(group), actor, uid, role === 'admin' ? 'a' : 'm', this.#now(), body)));
    return seq === 0 ? { seq: undefined, uids: [] } : { seq, uids: [uid] };
  }

  async transfer(group: string, actor: string, newOwner: string): Promise<ChangeResult> {
    checkUid(newOwner, this.#limits);
    checkGroupId(group);
    checkUid(actor, this.#limits);
    const body = eventJson('transferred', JSON.stringify(actor), { uids: [JSON.stringify(newOwner)] });
    const seq = Number(await this.#run(() => this.#redis.sbGroupTransfer(...this.#groupKeys(group), actor, newOwner, this.#now(), body)));
    return seq === 0 ? { seq: undefined, uids: [] } : { seq, uids: [newOwner] };
  }

  async update(group: string, actor: string, change: { name?: string; meta?: GroupMeta }): Promise<number> {
    const limits = this.#limits;
    if (change.name === undefined && change.meta === undefined) throw new SwitchboardError('SB_ERR_BAD_GROUP', 'an update sets a name, a meta or both');
    const name = change.name === undefined ? undefined : checkName(change.name, limits);
    const metaJson = change.meta === undefined ? undefined : JSON.stringify(checkMeta(change.meta, limits));
    checkGroupId(group);
    checkUid(actor, limits);
    const body = eventJson('updated', JSON.stringify(actor), { ...(name === undefined ? {} : { name: JSON.stringify(name) }), ...(metaJson === undefined ? {} : { meta: metaJson }) });
    return Number(await this.#run(() => this.#redis.sbGroupUpdate(...this.#groupKeys(group), actor, this.#now(), body, name ?? '', metaJson ?? '')));
  }

  /**
   * The members' departures are written after the group's script, DISSOLVE_SLICE users at a
   * time; a crash part way is repaired by groupsOf, which finds the group dissolved.
   */
  async dissolve(group: string, actor: string): Promise<number> {
    checkGroupId(group);
    checkUid(actor, this.#limits);
    const now = this.#now();
    const keys = this.#groupKeys(group);
    const seq = Number(await this.#run(() => this.#redis.sbGroupDissolve(...keys, actor, now, eventJson('dissolved', JSON.stringify(actor)))));
    let after = '-';
    for (;;) {
      const uids = await this.#run(() => this.#redis.zrangebylex(keys[2], after, '+', 'LIMIT', 0, DISSOLVE_SLICE));
      await this.#departAll(group, uids, seq, 'd', now);
      if (uids.length < DISSOLVE_SLICE) return seq;
      after = `(${uids[uids.length - 1]}`;
    }
  }

  async append(group: string, sender: string, msgId: string, body: Uint8Array, share = false): Promise<AppendResult> {
    checkBody(body, this.#limits);
    checkGroupId(group);
    checkUid(sender, this.#limits);
    const field = hasDedupeId(msgId) ? `${sender}\0${msgId}` : '';
    const [seq, storedAt, duplicate] = await this.#run(() => this.#redis.sbGroupAppend(...this.#groupKeys(group), sender, this.#now(), Buffer.from(body.buffer, body.byteOffset, body.byteLength), field, share ? 1 : 0));
    return { seq: Number(seq), storedAt: Number(storedAt), duplicate: duplicate === 1 };
  }

  async markRead(group: string, uid: string, seq: number, share: boolean): Promise<MarkReadResult> {
    checkSeq(seq, 'a read position');
    checkGroupId(group);
    checkUid(uid, this.#limits);
    const [readSeq, unread, moved] = await this.#run(() => this.#redis.sbGroupMarkRead(...this.#groupKeys(group), uid, seq, share ? 1 : 0, this.#now()));
    return { readSeq: Number(readSeq), unread: Number(unread), moved: moved === 1 };
  }

  async summary(group: string, uid: string): Promise<GroupSummary> {
    checkGroupId(group);
    checkUid(uid, this.#limits);
    const [name, count, dissolved, last, readSeq, unread, entry] = await this.#run(() => this.#redis.sbGroupSummaryBuffer(...this.#groupKeys(group), uid, this.#now()));
    return {
      id: group,
      name: name.toString('utf8'),
      memberCount: Number(count),
      dissolved: dissolved === 1,
      head: Number(last),
      last: entry === null ? undefined : parseEntry(entry),
      readSeq: Number(readSeq),
      unread: Number(unread),
    };
  }

  async chatGroups(uid: string): Promise<GroupSummary[]> {
    checkUid(uid, this.#limits);
    const ids = await this.#run(() => this.#redis.zrange(this.#userKeys(uid)[0], 0, -1));
    const now = this.#now();
    const answers = await this.#run(() => Promise.all(ids.map((id) => this.#redis.sbGroupChatSummaryBuffer(...this.#groupKeys(id), uid, now))));
    const out: GroupSummary[] = [];
    for (const [i, answer] of answers.entries()) {
      if (answer[0] !== 1) continue;
      const [, name, count, head, readSeq, unread, entry] = answer;
      out.push({ id: ids[i]!, name: name.toString('utf8'), memberCount: Number(count), dissolved: false, head: Number(head), last: entry === null ? undefined : parseEntry(entry), readSeq: Number(readSeq), unread: Number(unread) });
    }
    return out;
  }

  async unshare(uid: string): Promise<void> {
    checkUid(uid, this.#limits);
    const ids = await this.#run(() => this.#redis.zrange(this.#userKeys(uid)[0], 0, -1));
    // One key per group, each in its own slot: separate commands (pipelined by the client).
    await this.#run(() => Promise.all(ids.map((id) => this.#redis.zrem(this.#groupKeys(id)[10], uid))));
  }

  async readers(group: string, uid: string, page: Page): Promise<ReaderPage> {
    checkGroupId(group);
    checkUid(uid, this.#limits);
    const limit = checkLimit(page.limit, this.#limits.maxPageSize);
    const [next, ...pairs] = await this.#run(() => this.#redis.sbGroupReaders(...this.#groupKeys(group), uid, page.after ?? '', limit, this.#now()));
    const readers = [];
    for (let i = 0; i < pairs.length; i += 2) readers.push({ uid: pairs[i]!, readSeq: Number(pairs[i + 1]) });
    return { readers, next: next === '' ? undefined : next };
  }

  async readCount(group: string, uid: string, seq: number): Promise<ReadCount> {
    checkSeq(seq, 'seq');
    if (seq < 1) throw new SwitchboardError('SB_ERR_BAD_GROUP', 'seq is a whole number >= 1');
    checkGroupId(group);
    checkUid(uid, this.#limits);
    const [read, of] = await this.#run(() => this.#redis.sbGroupReadCount(...this.#groupKeys(group), uid, seq, this.#now()));
    return { read: Number(read), of: Number(of) };
  }

  async read(group: string, uid: string, after: number, limit: number): Promise<ReadResult> {
    checkSeq(after, 'after');
    limit = checkLimit(limit, this.#limits.maxPageSize);
    checkGroupId(group);
    checkUid(uid, this.#limits);
    const [head, oldest, joined, members] = await this.#run(() => this.#redis.sbGroupReadBuffer(...this.#groupKeys(group), uid, after, limit, this.#now()));
    return { entries: members.map(parseEntry), head: Number(head), oldest: Number(oldest), joined: Number(joined) };
  }

  async members(group: string, uid: string, page: Page): Promise<MemberPage> {
    checkGroupId(group);
    checkUid(uid, this.#limits);
    const limit = checkLimit(page.limit, this.#limits.maxPageSize);
    const [next, ...pairs] = await this.#run(() => this.#redis.sbGroupMembers(...this.#groupKeys(group), uid, page.after ?? '', limit, this.#now()));
    const members = [];
    for (let i = 0; i < pairs.length; i += 2) {
      const value = pairs[i + 1]!;
      members.push({ uid: pairs[i]!, role: ROLE_OF[value[0]!]!, joined: Number(value.slice(1)) });
    }
    return { members, next: next === '' ? undefined : next };
  }

  /**
   * A page may hold fewer than `limit` groups and still have a `next`: index entries the group
   * does not confirm are repaired and left out (see the top of the file).
   */
  async groupsOf(uid: string, page: Page): Promise<GroupsPage> {
    checkUid(uid, this.#limits);
    const limit = checkLimit(page.limit, this.#limits.maxPageSize);
    if (limit === 0) return { groups: [], next: undefined };
    const keys = this.#userKeys(uid);
    const ids = await this.#run(() => this.#redis.zrangebylex(keys[0], page.after === undefined ? '-' : `(${page.after}`, '+', 'LIMIT', 0, limit + 1));
    const next = ids.length > limit ? ids[limit - 1] : undefined;
    const listed = ids.slice(0, limit);
    const states = await Promise.all(listed.map((id) => this.#run(() => this.#redis.sbGroupMembership(...this.#groupKeys(id), uid))));
    const groups = [];
    const now = this.#now();
    const repairs: Promise<unknown>[] = [];
    for (const [i, [state, a, b]] of states.entries()) {
      const id = listed[i]!;
      if (state === 'member') groups.push({ id, role: ROLE_OF[a!]! });
      else if (state === 'dissolved') repairs.push(this.#redis.sbUserDepart(...keys, id, a!, 'd', now));
      else if (state === 'former') repairs.push(this.#redis.sbUserDepart(...keys, id, a!, b!, now));
      else repairs.push(this.#redis.sbUserForget(...keys, id, state === 'gone' ? Number.MAX_SAFE_INTEGER : a!));
    }
    await this.#run(() => Promise.all(repairs));
    return { groups, next };
  }

  async departedOf(uid: string): Promise<Departure[]> {
    checkUid(uid, this.#limits);
    const flat = await this.#run(() => this.#redis.sbUserDeparted(...this.#userKeys(uid)));
    const out: Departure[] = [];
    for (let i = 0; i < flat.length; i += 4) out.push({ id: flat[i]!, seq: Number(flat[i + 1]), reason: REASON_OF[flat[i + 2]!]!, at: Number(flat[i + 3]) });
    return out;
  }

  async cursor(group: string, uid: string, deviceId: string): Promise<number | undefined> {
    checkDeviceId(deviceId);
    checkGroupId(group);
    checkUid(uid, this.#limits);
    const value = await this.#run(() => this.#redis.sbGroupCursor(...this.#groupKeys(group), uid, deviceId, this.#now()));
    return value === null ? undefined : Number(value);
  }

  async saveCursor(group: string, uid: string, deviceId: string, seq: number): Promise<void> {
    checkDeviceId(deviceId);
    checkSeq(seq, 'a position');
    checkGroupId(group);
    checkUid(uid, this.#limits);
    await this.#run(() => this.#redis.sbGroupSaveCursor(...this.#groupKeys(group), uid, deviceId, seq, this.#now()));
  }

  ping(): Promise<void> {
    return pingRedis(this.#redis, 'group');
  }

  async close(): Promise<void> {
    await this.#redis.quit().catch(() => this.#redis.disconnect());
  }

  /** Reserves `group` in each user's index; resolves the uids newly reserved. All or nothing: SB_ERR_GROUP_TOO_MANY. */
  async #reserve(group: string, uids: readonly string[]): Promise<string[]> {
    const answers = await Promise.allSettled(uids.map((uid) => this.#run(() => this.#redis.sbUserReserve(...this.#userKeys(uid), group))));
    const reserved = uids.filter((_, i) => answers[i]!.status === 'fulfilled' && (answers[i] as PromiseFulfilledResult<number>).value === 1);
    const failed = answers.find((a): a is PromiseRejectedResult => a.status === 'rejected');
    const refused = uids.filter((_, i) => answers[i]!.status === 'fulfilled' && (answers[i] as PromiseFulfilledResult<number>).value === 0);
    if (failed === undefined && refused.length === 0) return reserved;
    await this.#release(group, reserved);
    if (failed !== undefined) throw failed.reason;
    throw new SwitchboardError('SB_ERR_GROUP_TOO_MANY', `${refused.join(', ')} ${refused.length === 1 ? 'is a member' : 'are members'} of ${this.#limits.maxGroupsPerUser} groups, the most there may be`);
  }

  /** Takes reservations back; best effort: one left behind is repaired by groupsOf. */
  async #release(group: string, uids: readonly string[]): Promise<void> {
    await Promise.allSettled(uids.map((uid) => this.#redis.sbUserRelease(...this.#userKeys(uid), group)));
  }

  async #confirm(group: string, joins: readonly (readonly [string, number])[]): Promise<void> {
    await this.#run(() => Promise.all(joins.map(([uid, seq]) => this.#redis.sbUserConfirm(...this.#userKeys(uid), group, seq))));
  }

  async #departAll(group: string, uids: readonly string[], seq: number, reason: 'l' | 'r' | 'd', now: number): Promise<void> {
    await this.#run(() => Promise.all(uids.map((uid) => this.#redis.sbUserDepart(...this.#userKeys(uid), group, seq, reason, now))));
  }

  /** Runs a Redis call: a refusal a script raised becomes its SwitchboardError, anything else SB_ERR_STORE_UNAVAILABLE. */
  async #run<T>(call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (err) {
      throw fromRedis(err);
    }
  }

  #groupKeys(group: string): GroupKeys {
    const base = `${this.#prefix}{g:${group}}`;
    return [`${base}:info`, `${base}:mem`, `${base}:ml`, `${base}:former`, `${base}:fq`, `${base}:log`, `${base}:dd`, `${base}:ddq`, `${base}:cur`, `${base}:rd`, `${base}:rv`, `${base}:ev`];
  }

  #userKeys(uid: string): UserKeys {
    const base = `${this.#prefix}{u:${uid}}`;
    return [`${base}:groups`, `${base}:departed`, `${base}:gs`];
  }
}

/** "SB_ERR_GROUP_X message script: <sha>, on @user_script:N." as a script raised it → its error. */
const REFUSAL = /\b(SB_ERR_[A-Z_]+) (.*?)(?: script: [0-9a-f]+, on @user_script:\d+\.)?$/s;

function fromRedis(err: unknown): SwitchboardError {
  if (err instanceof SwitchboardError) return err;
  const match = err instanceof Error ? REFUSAL.exec(err.message) : null;
  if (match && isErrorCode(match[1]!)) return new SwitchboardError(match[1], match[2]);
  return storeUnavailable('group', err);
}

const BAR = 0x7c;

/** "<seq>|<storedAt>|<m|e><sender bytes>|<sender><body>" → GroupEntry; the body may hold anything. */
function parseEntry(member: Buffer): GroupEntry {
  const a = member.indexOf(BAR);
  const b = member.indexOf(BAR, a + 1);
  const c = member.indexOf(BAR, b + 2);
  const senderEnd = c + 1 + Number(member.toString('latin1', b + 2, c));
  return {
    seq: Number(member.toString('latin1', 0, a)),
    storedAt: Number(member.toString('latin1', a + 1, b)),
    kind: member[b + 1] === 0x65 ? 'event' : 'message',
    sender: member.toString('utf8', c + 1, senderEnd),
    body: member.subarray(senderEnd),
  };
}

function full(max: number): SwitchboardError {
  return new SwitchboardError('SB_ERR_GROUP_FULL', `a group has at most ${max} members`);
}
