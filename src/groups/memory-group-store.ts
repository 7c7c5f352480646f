// In-memory GroupStore: the embedded default. Every operation runs to completion without an
// await between its checks and its changes, so each is atomic as the Redis scripts are, and the
// user indexes (groupsOf, departedOf) change in the same step as the group: nothing to repair.
//
// Bounded like the Redis one (GroupLimits: entries and age per group, members, former members,
// positions, groups per user, departures per user), and as a whole: every group's and user
// index's memory is accounted (see `bytes`), and a create, an add or a message that would take
// the total past maxBytes is refused with SB_ERR_STORE_FULL. Removals, leaves, role changes and
// dissolving are never refused for memory: their events are bounded by the log's limits. A sweep
// prunes by age the groups nobody writes to and forgets dissolved groups once their log aged out.
//
// The log of a group is a MessageLog (slabs and typed arrays, the inbox's): an entry's kind and
// sender are written in front of its body, [kind: 1][sender length: u16 BE][sender][body].

import { SwitchboardError } from '../errors.js';
import { dedupeKeyOf } from '../inbox/dedupe-window.js';
import { MessageLog } from '../inbox/message-log.js';
import { GroupDedupe } from './group-dedupe.js';
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
  compareUids,
  eventJson,
  groupLimits,
  newGroupId,
  type AppendResult,
  type ChangeResult,
  type Departure,
  type DepartureReason,
  type EntryKind,
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

export interface MemoryGroupLimits extends GroupLimits {
  /** Accounted bytes of all groups and user indexes together (SB_ERR_STORE_FULL beyond). */
  maxBytes: number;
}

/** Sized for an embedded node, beside the inbox's 256 MiB. */
export const DEFAULT_MEMORY_GROUP_BYTES = 256 * 1024 * 1024;

// What the accounting charges for the objects (estimates for Node 20, rounded up; the log's
// typed arrays and slabs and the dedupe are counted by MessageLog.bytes and GroupDedupe.bytes):
// a group (its object, Maps, log, dedupe and the members array), a member (Map entry, object,
// array slot), a former member, one device position (its uid's Map the first time), a user index,
// a group in it, a departure. Plus the characters of every string kept.
const GROUP_BYTES = 4096;
const MEMBER_BYTES = 160;
const FORMER_BYTES = 120;
const CURSOR_BYTES = 64;
const CURSORS_BYTES = 160;
const USER_BYTES = 512;
const USER_GROUP_BYTES = 48;
const DEPARTED_BYTES = 160;
const READ_BYTES = 64;
const EVENT_BYTES = 8;

/** The sweep visits this many groups per run, one run a second. */
const SWEEP_BATCH = 10_000;
const SWEEP_MS = 1000;

const KIND_MESSAGE = 0x6d; // 'm'
const KIND_EVENT = 0x65; // 'e'

interface MemberState {
  role: GroupRole;
  joined: number;
}

interface FormerState {
  joined: number;
  left: number;
  reason: DepartureReason;
}

interface GroupState {
  id: string;
  name: string;
  meta: GroupMeta;
  owner: string;
  createdAt: number;
  head: number;
  dissolved: boolean;
  members: Map<string, MemberState>;
  /** The members' uids in byte order (compareUids), for paging. */
  sorted: string[];
  /** In order of departure (ascending `left`): the earliest is forgotten first. */
  former: Map<string, FormerState>;
  log: MessageLog;
  dedupe: GroupDedupe;
  /** uid -> deviceId -> position; members' and former members' only. */
  cursors: Map<string, Map<string, number>>;
  /** Members' read positions (uid -> seq), and the ones they share (receipts on). */
  reads: Map<string, number>;
  shared: Map<string, number>;
  /** The seqs of the retained event entries, ascending: what unread counts leave out. */
  events: number[];
  /** The accounted bytes of everything but the log and the dedupe. */
  bytes: number;
}

interface UserIndex {
  /** The ids of the user's groups, ascending. */
  groups: string[];
  /** In order of departure: the earliest is forgotten first. */
  departed: Map<string, Departure>;
}

export class MemoryGroupStore implements GroupStore {
  readonly #groups = new Map<string, GroupState>();
  readonly #users = new Map<string, UserIndex>();
  readonly #limits: MemoryGroupLimits;
  readonly #now: () => number;
  #bytes = 0;
  #sweepAt: Iterator<GroupState> | undefined;
  readonly #sweep: NodeJS.Timeout;

  constructor(limits: Partial<MemoryGroupLimits> = {}, now: () => number = Date.now) {
    const { maxBytes = DEFAULT_MEMORY_GROUP_BYTES, ...rest } = limits;
    this.#limits = { ...groupLimits(rest), maxBytes };
    this.#now = now;
    this.#sweep = setInterval(() => this.sweep(), SWEEP_MS);
    this.#sweep.unref();
  }

  /** The accounted memory of every group and user index; a create, add or message never takes it past maxBytes. */
  get bytes(): number {
    return this.#bytes;
  }

  /** `bytes` recomputed from every group and index, for tests of the bookkeeping. */
  audit(): number {
    let total = 0;
    for (const g of this.#groups.values()) total += bytesOf(g);
    for (const [uid, user] of this.#users) total += userBytes(uid, user);
    return total;
  }

  async create(owner: string, name: string, members: readonly string[] = [], meta: GroupMeta = {}): Promise<Group> {
    const limits = this.#limits;
    checkUid(owner, limits);
    checkName(name, limits);
    const checkedMeta = checkMeta(meta, limits);
    const others = checkUids(members, limits, { allowEmpty: true }).filter((uid) => uid !== owner);
    if (others.length + 1 > limits.maxMembers) throw full(limits.maxMembers);
    for (const uid of [owner, ...others]) this.#checkRoom(uid);
    const metaJson = JSON.stringify(checkedMeta);
    const body = eventJson('created', JSON.stringify(owner), { uids: others.map((uid) => JSON.stringify(uid)), name: JSON.stringify(name), ...(metaJson === '{}' ? {} : { meta: metaJson }) });
    this.#reserve(GROUP_BYTES + 2 * (name.length + metaJson.length) + MessageLog.firstPushCost(body.length) + (others.length + 1) * (MEMBER_BYTES + USER_GROUP_BYTES + 2 * owner.length));
    let id = newGroupId();
    while (this.#groups.has(id)) id = newGroupId();
    const now = this.#now();
    const g: GroupState = {
      id,
      name,
      meta: checkedMeta,
      owner,
      createdAt: now,
      head: 0,
      dissolved: false,
      members: new Map(),
      sorted: [],
      former: new Map(),
      log: new MessageLog(),
      dedupe: new GroupDedupe(limits.dedupeEntries, limits.dedupeWindowMs),
      cursors: new Map(),
      reads: new Map(),
      shared: new Map(),
      events: [],
      bytes: GROUP_BYTES + 2 * (name.length + metaJson.length),
    };
    this.#groups.set(id, g);
    this.#bytes += bytesOf(g);
    const seq = this.#appendEntry(g, KIND_EVENT, owner, Buffer.from(body), now);
    this.#join(g, owner, 'owner', seq);
    for (const uid of others) this.#join(g, uid, 'member', seq);
    return snapshot(g);
  }

  async get(group: string, uid: string): Promise<GroupView> {
    const g = this.#group(group);
    checkUid(uid, this.#limits);
    this.#prune(g, this.#now());
    const reader = readerOf(g, uid);
    return { ...snapshot(g), role: g.members.get(uid)?.role, joined: reader.joined, left: g.members.has(uid) ? undefined : reader.last };
  }

  async addMembers(group: string, actor: string, uids: readonly string[]): Promise<ChangeResult> {
    const limits = this.#limits;
    const wanted = checkUids(uids, limits);
    const g = this.#writable(group, actor, 'admin');
    const fresh = wanted.filter((uid) => !g.members.has(uid));
    if (fresh.length === 0) return { seq: undefined, uids: [] };
    if (g.members.size + fresh.length > limits.maxMembers) throw full(limits.maxMembers);
    for (const uid of fresh) this.#checkRoom(uid);
    let cost = 0;
    for (const uid of fresh) cost += MEMBER_BYTES + USER_GROUP_BYTES + 2 * uid.length;
    const body = eventJson('added', JSON.stringify(actor), { uids: fresh.map((uid) => JSON.stringify(uid)) });
    this.#reserve(cost + g.log.pushCost(body.length + 3 + actor.length * 3));
    const seq = this.#appendEntry(g, KIND_EVENT, actor, Buffer.from(body), this.#now());
    for (const uid of fresh) this.#join(g, uid, 'member', seq);
    return { seq, uids: fresh };
  }

  async removeMembers(group: string, actor: string, uids: readonly string[]): Promise<ChangeResult> {
    const wanted = checkUids(uids, this.#limits);
    const g = this.#writable(group, actor, 'admin');
    const actorRole = g.members.get(actor)!.role;
    const targets: string[] = [];
    for (const uid of wanted) {
      const role = g.members.get(uid)?.role;
      if (role === undefined) continue;
      if (role === 'owner') throw forbidden('nobody removes the owner: the owner transfers the group or dissolves it');
      if (role === 'admin' && actorRole !== 'owner') throw forbidden(`only the owner removes an admin (${uid})`);
      targets.push(uid);
    }
    if (targets.length === 0) return { seq: undefined, uids: [] };
    const body = eventJson('removed', JSON.stringify(actor), { uids: targets.map((uid) => JSON.stringify(uid)) });
    const now = this.#now();
    const seq = this.#appendEntry(g, KIND_EVENT, actor, Buffer.from(body), now);
    for (const uid of targets) this.#depart(g, uid, seq, 'removed', now);
    return { seq, uids: targets };
  }

  async leave(group: string, uid: string): Promise<number> {
    const g = this.#writable(group, uid, 'member');
    if (g.members.get(uid)!.role === 'owner') throw new SwitchboardError('SB_ERR_GROUP_OWNER_CANNOT_LEAVE');
    const now = this.#now();
    const seq = this.#appendEntry(g, KIND_EVENT, uid, Buffer.from(eventJson('left', JSON.stringify(uid))), now);
    this.#depart(g, uid, seq, 'left', now);
    return seq;
  }

  async setRole(group: string, actor: string, uid: string, role: 'admin' | 'member'): Promise<ChangeResult> {
    if (role !== 'admin' && role !== 'member') throw new SwitchboardError('SB_ERR_BAD_GROUP', "a role set is 'admin' or 'member'");
    checkUid(uid, this.#limits);
    const g = this.#writable(group, actor, 'owner');
    const target = g.members.get(uid);
    if (target === undefined) throw notMember(uid);
    if (target.role === 'owner') throw forbidden("the owner's role changes only by a transfer");
    if (target.role === role) return { seq: undefined, uids: [] };
    const body = eventJson('role', JSON.stringify(actor), { uids: [JSON.stringify(uid)], role: JSON.stringify(role) });
    const seq = this.#appendEntry(g, KIND_EVENT, actor, Buffer.from(body), this.#now());
    target.role = role;
    return { seq, uids: [uid] };
  }

  async transfer(group: string, actor: string, newOwner: string): Promise<ChangeResult> {
    checkUid(newOwner, this.#limits);
    const g = this.#writable(group, actor, 'owner');
    const target = g.members.get(newOwner);
    if (target === undefined) throw notMember(newOwner);
    if (newOwner === actor) return { seq: undefined, uids: [] };
    const body = eventJson('transferred', JSON.stringify(actor), { uids: [JSON.stringify(newOwner)] });
    const seq = this.#appendEntry(g, KIND_EVENT, actor, Buffer.from(body), this.#now());
    g.members.get(actor)!.role = 'admin';
    target.role = 'owner';
    g.owner = newOwner;
    return { seq, uids: [newOwner] };
  }

  async update(group: string, actor: string, change: { name?: string; meta?: GroupMeta }): Promise<number> {
    const limits = this.#limits;
    if (change.name === undefined && change.meta === undefined) throw new SwitchboardError('SB_ERR_BAD_GROUP', 'an update sets a name, a meta or both');
    const name = change.name === undefined ? undefined : checkName(change.name, limits);
    const meta = change.meta === undefined ? undefined : checkMeta(change.meta, limits);
    const g = this.#writable(group, actor, 'admin');
    const metaJson = meta === undefined ? undefined : JSON.stringify(meta);
    const body = eventJson('updated', JSON.stringify(actor), { ...(name === undefined ? {} : { name: JSON.stringify(name) }), ...(metaJson === undefined ? {} : { meta: metaJson }) });
    const seq = this.#appendEntry(g, KIND_EVENT, actor, Buffer.from(body), this.#now());
    const before = 2 * (g.name.length + JSON.stringify(g.meta).length);
    if (name !== undefined) g.name = name;
    if (meta !== undefined) g.meta = meta;
    const after = 2 * (g.name.length + JSON.stringify(g.meta).length);
    g.bytes += after - before;
    this.#bytes += after - before;
    return seq;
  }

  async dissolve(group: string, actor: string): Promise<number> {
    const g = this.#writable(group, actor, 'owner');
    const now = this.#now();
    const seq = this.#appendEntry(g, KIND_EVENT, actor, Buffer.from(eventJson('dissolved', JSON.stringify(actor))), now);
    g.dissolved = true;
    // The members stay (they read up to the end); their indexes list a departure.
    for (const uid of g.members.keys()) this.#indexDepart(uid, g.id, seq, 'dissolved', now);
    return seq;
  }

  async append(group: string, sender: string, msgId: string, body: Uint8Array, share = false): Promise<AppendResult> {
    checkBody(body, this.#limits);
    const g = this.#writable(group, sender, 'member');
    const now = this.#now();
    const key = dedupeKeyOf(msgId);
    if (key !== undefined) {
      const before = g.dedupe.bytes;
      const seen = g.dedupe.find(sender, key, now);
      this.#bytes += g.dedupe.bytes - before;
      if (seen) return { seq: seen.seq, storedAt: seen.storedAt, duplicate: true };
    }
    this.#reserve(g.log.pushCost(body.byteLength + 3 + sender.length * 3) + (key === undefined ? 0 : GroupDedupe.MAX_ADD_BYTES));
    const seq = this.#appendEntry(g, KIND_MESSAGE, sender, body, now);
    if (key !== undefined) {
      const before = g.dedupe.bytes;
      g.dedupe.add(sender, key, seq, now);
      this.#bytes += g.dedupe.bytes - before;
    }
    this.#moveRead(g, g.reads, sender, seq);
    this.#share(g, sender, seq, share);
    return { seq, storedAt: now, duplicate: false };
  }

  async markRead(group: string, uid: string, seq: number, share: boolean): Promise<MarkReadResult> {
    checkSeq(seq, 'a read position');
    // Not in a dissolved group: nothing is left to read, and nothing to keep a position for.
    const g = this.#writable(group, uid, 'member');
    this.#prune(g, this.#now());
    const member = g.members.get(uid)!;
    const position = Math.min(seq, g.head);
    const moved = this.#moveRead(g, g.reads, uid, position);
    this.#share(g, uid, position, share);
    const readSeq = g.reads.get(uid) ?? 0;
    return { readSeq, unread: unreadOf(g, readSeq, member.joined, g.head), moved };
  }

  async summary(group: string, uid: string): Promise<GroupSummary> {
    const g = this.#group(group);
    checkUid(uid, this.#limits);
    this.#prune(g, this.#now());
    const { joined, last } = readerOf(g, uid);
    const readSeq = g.reads.get(uid) ?? 0;
    const stored = g.log.length > 0 && last >= g.log.firstSeq ? g.log.get(last) : undefined;
    return {
      id: g.id,
      name: g.name,
      memberCount: g.members.size,
      dissolved: g.dissolved,
      head: last,
      last: stored && decodeEntry(stored),
      readSeq,
      unread: unreadOf(g, readSeq, joined, last),
    };
  }

  async chatGroups(uid: string): Promise<GroupSummary[]> {
    checkUid(uid, this.#limits);
    const out: GroupSummary[] = [];
    for (const id of this.#users.get(uid)?.groups ?? []) {
      const g = this.#groups.get(id);
      if (g !== undefined && !g.dissolved && g.members.has(uid)) out.push(await this.summary(id, uid));
    }
    return out;
  }

  async unshare(uid: string): Promise<void> {
    checkUid(uid, this.#limits);
    for (const id of this.#users.get(uid)?.groups ?? []) {
      const g = this.#groups.get(id);
      if (g !== undefined) this.#share(g, uid, 0, false);
    }
  }

  async readers(group: string, uid: string, page: Page): Promise<ReaderPage> {
    const { members, next } = await this.members(group, uid, page);
    const g = this.#groups.get(group)!;
    return { readers: members.map((m) => ({ uid: m.uid, readSeq: g.shared.get(m.uid) ?? 0 })), next };
  }

  /** O(members): the memory store walks the shared positions (at most maxMembers). */
  async readCount(group: string, uid: string, seq: number): Promise<ReadCount> {
    checkSeq(seq, 'seq');
    if (seq < 1) throw new SwitchboardError('SB_ERR_BAD_GROUP', 'seq is a whole number >= 1');
    const g = this.#group(group);
    checkUid(uid, this.#limits);
    if (!g.members.has(uid)) throw notMember(uid);
    let read = 0;
    for (const [member, at] of g.shared) if (at >= seq && member !== uid) read++;
    return { read, of: g.members.size - 1 };
  }

  async read(group: string, uid: string, after: number, limit: number): Promise<ReadResult> {
    checkSeq(after, 'after');
    limit = checkLimit(limit, this.#limits.maxPageSize);
    const g = this.#group(group);
    checkUid(uid, this.#limits);
    this.#prune(g, this.#now());
    const { joined, last } = readerOf(g, uid);
    const { log } = g;
    const oldest = log.length > 0 ? log.firstSeq : g.head + 1;
    const entries: GroupEntry[] = [];
    for (let seq = Math.max(after + 1, joined, oldest); seq <= last && entries.length < limit; seq++) entries.push(decodeEntry(log.get(seq)!));
    return { entries, head: last, oldest, joined };
  }

  async members(group: string, uid: string, page: Page): Promise<MemberPage> {
    const g = this.#group(group);
    checkUid(uid, this.#limits);
    if (!g.members.has(uid)) throw notMember(uid);
    const limit = checkLimit(page.limit, this.#limits.maxPageSize);
    const { sorted } = g;
    const from = page.after === undefined ? 0 : upperBound(sorted, page.after, compareUids);
    const uids = sorted.slice(from, from + limit);
    return {
      members: uids.map((member) => ({ uid: member, ...g.members.get(member)! })),
      next: from + limit < sorted.length && uids.length > 0 ? uids[uids.length - 1] : undefined,
    };
  }

  async groupsOf(uid: string, page: Page): Promise<GroupsPage> {
    checkUid(uid, this.#limits);
    const limit = checkLimit(page.limit, this.#limits.maxPageSize);
    const ids = this.#users.get(uid)?.groups ?? [];
    const from = page.after === undefined ? 0 : upperBound(ids, page.after, compareUids);
    const chosen = ids.slice(from, from + limit);
    return {
      groups: chosen.map((id) => ({ id, role: this.#groups.get(id)!.members.get(uid)!.role })),
      next: from + limit < ids.length && chosen.length > 0 ? chosen[chosen.length - 1] : undefined,
    };
  }

  async departedOf(uid: string): Promise<Departure[]> {
    checkUid(uid, this.#limits);
    const departed = this.#users.get(uid)?.departed;
    return departed ? [...departed.values()].reverse().map((d) => ({ ...d })) : [];
  }

  async cursor(group: string, uid: string, deviceId: string): Promise<number | undefined> {
    checkDeviceId(deviceId);
    const g = this.#group(group);
    checkUid(uid, this.#limits);
    this.#prune(g, this.#now());
    readerOf(g, uid);
    return g.cursors.get(uid)?.get(deviceId);
  }

  /** A new device past maxDevicesPerMember replaces the member's least advanced one. */
  async saveCursor(group: string, uid: string, deviceId: string, seq: number): Promise<void> {
    checkDeviceId(deviceId);
    checkSeq(seq, 'a position');
    const g = this.#group(group);
    checkUid(uid, this.#limits);
    this.#prune(g, this.#now());
    const position = Math.min(seq, readerOf(g, uid).last);
    let devices = g.cursors.get(uid);
    if (devices === undefined) {
      g.cursors.set(uid, (devices = new Map()));
      this.#grow(g, CURSORS_BYTES + 2 * uid.length);
    }
    const saved = devices.get(deviceId);
    if (saved !== undefined) {
      if (position > saved) devices.set(deviceId, position);
      return;
    }
    if (devices.size >= this.#limits.maxDevicesPerMember) {
      let least: string | undefined;
      for (const [device, at] of devices) if (least === undefined || at < devices.get(least)!) least = device;
      devices.delete(least!);
      this.#grow(g, -(CURSOR_BYTES + 2 * least!.length));
    }
    devices.set(deviceId, position);
    this.#grow(g, CURSOR_BYTES + 2 * deviceId.length);
  }

  /**
   * In the next SWEEP_BATCH groups (all of them in turn, a batch a second): prunes by age, and
   * forgets a dissolved group once nothing of its log is retained (its members' departures stay
   * in their indexes; the group then reads as not found, as in Redis, where its keys expire).
   */
  sweep(): void {
    const now = this.#now();
    for (let n = 0; n < SWEEP_BATCH; n++) {
      this.#sweepAt ??= this.#groups.values();
      const next = this.#sweepAt.next();
      if (next.done) {
        this.#sweepAt = undefined;
        return;
      }
      const g = next.value;
      this.#prune(g, now);
      if (g.dissolved && g.log.length === 0) {
        this.#groups.delete(g.id);
        this.#bytes -= bytesOf(g);
      }
    }
  }

  /** Memory always answers. */
  async ping(): Promise<void> {}

  async close(): Promise<void> {
    clearInterval(this.#sweep);
    this.#groups.clear();
    this.#users.clear();
    this.#bytes = 0;
  }

  /** The group, or SB_ERR_GROUP_NOT_FOUND. A dissolved group is gone once its whole log aged out. */
  #group(group: string): GroupState {
    const g = this.#groups.get(checkGroupId(group));
    if (g !== undefined && g.dissolved) {
      this.#prune(g, this.#now());
      if (g.log.length === 0) {
        this.#groups.delete(g.id);
        this.#bytes -= bytesOf(g);
      }
    }
    if (g === undefined || !this.#groups.has(g.id)) throw new SwitchboardError('SB_ERR_GROUP_NOT_FOUND', `no group ${group}`);
    return g;
  }

  /**
   * The group if `actor` is a member with at least `role` and the group accepts changes; else
   * the refusal, in this order: not found, not a member, dissolved, forbidden.
   */
  #writable(group: string, actor: string, role: GroupRole): GroupState {
    const g = this.#group(group);
    checkUid(actor, this.#limits);
    const member = g.members.get(actor);
    if (member === undefined) throw notMember(actor);
    if (g.dissolved) throw new SwitchboardError('SB_ERR_GROUP_DISSOLVED');
    if (RANK[member.role] < RANK[role]) throw forbidden(role === 'owner' ? 'only the owner may do this' : 'only an admin or the owner may do this');
    return g;
  }

  /** Appends an entry, then prunes: by count, by age, and the former members who can read nothing any more. */
  #appendEntry(g: GroupState, kind: number, sender: string, body: Uint8Array, now: number): number {
    const senderBytes = Buffer.byteLength(sender);
    const record = Buffer.allocUnsafe(3 + senderBytes + body.byteLength);
    record[0] = kind;
    record.writeUInt16BE(senderBytes, 1);
    record.write(sender, 3, 'utf8');
    record.set(body, 3 + senderBytes);
    const before = g.log.bytes;
    const seq = ++g.head;
    g.log.push(seq, now, record);
    if (kind === KIND_EVENT) {
      g.events.push(seq);
      this.#grow(g, EVENT_BYTES);
    }
    while (g.log.length > this.#limits.maxEntries) g.log.shift();
    this.#bytes += g.log.bytes - before;
    this.#prune(g, now);
    return seq;
  }

  #prune(g: GroupState, now: number): void {
    const { log } = g;
    const before = log.bytes;
    const cutoff = now - this.#limits.maxAgeMs;
    while (log.length > 0 && log.oldestStoredAt() < cutoff) log.shift();
    this.#bytes += log.bytes - before;
    const oldest = log.length > 0 ? log.firstSeq : g.head + 1;
    const { events } = g;
    if (events.length > 0 && events[0]! < oldest) {
      const n = lowerBound(events, oldest);
      events.splice(0, n);
      this.#grow(g, -n * EVENT_BYTES);
    }
    for (const [uid, former] of g.former) {
      if (former.left >= oldest) break;
      this.#forget(g, uid);
    }
  }

  #join(g: GroupState, uid: string, role: GroupRole, seq: number): void {
    g.members.set(uid, { role, joined: seq });
    g.sorted.splice(upperBound(g.sorted, uid, compareUids), 0, uid);
    this.#grow(g, MEMBER_BYTES + 2 * uid.length);
    if (g.former.delete(uid)) this.#grow(g, -(FORMER_BYTES + 2 * uid.length));
    const user = this.#user(uid);
    const before = userBytes(uid, user);
    user.groups.splice(upperBound(user.groups, g.id, compareUids), 0, g.id);
    user.departed.delete(g.id);
    this.#bytes += userBytes(uid, user) - before;
  }

  #depart(g: GroupState, uid: string, seq: number, reason: DepartureReason, now: number): void {
    const member = g.members.get(uid)!;
    g.members.delete(uid);
    g.sorted.splice(upperBound(g.sorted, uid, compareUids) - 1, 1);
    g.former.set(uid, { joined: member.joined, left: seq, reason });
    for (const reads of [g.reads, g.shared]) if (reads.delete(uid)) this.#grow(g, -(READ_BYTES + 2 * uid.length));
    this.#grow(g, FORMER_BYTES - MEMBER_BYTES);
    while (g.former.size > this.#limits.maxFormerMembers) this.#forget(g, g.former.keys().next().value!);
    this.#indexDepart(uid, g.id, seq, reason, now);
  }

  /** Forgets a former member, and its positions: it can read nothing any more. */
  #forget(g: GroupState, uid: string): void {
    g.former.delete(uid);
    this.#grow(g, -(FORMER_BYTES + 2 * uid.length));
    const devices = g.cursors.get(uid);
    if (devices === undefined) return;
    let freed = CURSORS_BYTES + 2 * uid.length;
    for (const device of devices.keys()) freed += CURSOR_BYTES + 2 * device.length;
    g.cursors.delete(uid);
    this.#grow(g, -freed);
  }

  #indexDepart(uid: string, id: string, seq: number, reason: DepartureReason, now: number): void {
    const user = this.#user(uid);
    const before = userBytes(uid, user);
    const at = upperBound(user.groups, id, compareUids) - 1;
    if (user.groups[at] === id) user.groups.splice(at, 1);
    user.departed.delete(id);
    user.departed.set(id, { id, seq, reason, at: now });
    while (user.departed.size > this.#limits.maxDeparted) user.departed.delete(user.departed.keys().next().value!);
    this.#bytes += userBytes(uid, user) - before;
  }

  #user(uid: string): UserIndex {
    let user = this.#users.get(uid);
    if (user === undefined) {
      this.#users.set(uid, (user = { groups: [], departed: new Map() }));
      this.#bytes += userBytes(uid, user);
    }
    return user;
  }

  /** SB_ERR_GROUP_TOO_MANY if `uid` is in maxGroupsPerUser groups already. */
  #checkRoom(uid: string): void {
    const count = this.#users.get(uid)?.groups.length ?? 0;
    if (count >= this.#limits.maxGroupsPerUser) throw new SwitchboardError('SB_ERR_GROUP_TOO_MANY', `${uid} is a member of ${count} groups, the most there may be`);
  }

  #reserve(cost: number): void {
    if (this.#bytes + cost > this.#limits.maxBytes) throw new SwitchboardError('SB_ERR_STORE_FULL', `the group store holds ${this.#bytes} of its ${this.#limits.maxBytes} bytes; try again later (a message: with the same msg_id)`);
  }

  /** Moves uid's position in `reads` forward to seq; true if it moved. */
  #moveRead(g: GroupState, reads: Map<string, number>, uid: string, seq: number): boolean {
    const at = reads.get(uid);
    if (at !== undefined && at >= seq) return false;
    if (at === undefined) this.#grow(g, READ_BYTES + 2 * uid.length);
    reads.set(uid, seq);
    return true;
  }

  /** Receipts on: the shared position follows `seq`; off: the member shares none (any it shared goes). */
  #share(g: GroupState, uid: string, seq: number, share: boolean): void {
    if (share) this.#moveRead(g, g.shared, uid, seq);
    else if (g.shared.delete(uid)) this.#grow(g, -(READ_BYTES + 2 * uid.length));
  }

  #grow(g: GroupState, bytes: number): void {
    g.bytes += bytes;
    this.#bytes += bytes;
  }
}

const RANK: Record<GroupRole, number> = { member: 0, admin: 1, owner: 2 };

/** The seqs `uid` may read, or SB_ERR_GROUP_NOT_MEMBER. */
function readerOf(g: GroupState, uid: string): { joined: number; last: number } {
  const member = g.members.get(uid);
  if (member !== undefined) return { joined: member.joined, last: g.head };
  const former = g.former.get(uid);
  if (former !== undefined) return { joined: former.joined, last: former.left };
  throw notMember(uid);
}

/** Messages after max(readSeq, joined - 1, the retention edge) up to `last`: the entries there minus the events. */
function unreadOf(g: GroupState, readSeq: number, joined: number, last: number): number {
  const oldest = g.log.length > 0 ? g.log.firstSeq : g.head + 1;
  const from = Math.max(readSeq, joined - 1, oldest - 1);
  if (last <= from) return 0;
  return last - from - (lowerBound(g.events, last + 1) - lowerBound(g.events, from + 1));
}

/** The index of the first element of `sorted` at or above `value`. */
function lowerBound(sorted: readonly number[], value: number): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (sorted[mid]! < value) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function snapshot(g: GroupState): Group {
  return { id: g.id, name: g.name, meta: g.meta, owner: g.owner, createdAt: g.createdAt, memberCount: g.members.size, head: g.head, dissolved: g.dissolved };
}

function decodeEntry(stored: { seq: number; storedAt: number; body: Buffer }): GroupEntry {
  const { body } = stored;
  const senderBytes = body.readUInt16BE(1);
  const kind: EntryKind = body[0] === KIND_EVENT ? 'event' : 'message';
  return { seq: stored.seq, storedAt: stored.storedAt, kind, sender: body.toString('utf8', 3, 3 + senderBytes), body: body.subarray(3 + senderBytes) };
}

/** The index of the first element of `sorted` after `value`. */
function upperBound(sorted: readonly string[], value: string, compare: (a: string, b: string) => number): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (compare(sorted[mid]!, value) <= 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function bytesOf(g: GroupState): number {
  return g.bytes + g.log.bytes + g.dedupe.bytes;
}

function userBytes(uid: string, user: UserIndex): number {
  return USER_BYTES + 2 * uid.length + user.groups.length * USER_GROUP_BYTES + user.departed.size * DEPARTED_BYTES;
}

function notMember(uid: string): SwitchboardError {
  return new SwitchboardError('SB_ERR_GROUP_NOT_MEMBER', `${uid} is not a member of the group`);
}

function forbidden(message: string): SwitchboardError {
  return new SwitchboardError('SB_ERR_GROUP_FORBIDDEN', message);
}

function full(max: number): SwitchboardError {
  return new SwitchboardError('SB_ERR_GROUP_FULL', `a group has at most ${max} members`);
}
