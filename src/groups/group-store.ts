// Groups: who is in them, with which role, and their one shared log. A group message is written
// once, to the group's log, under the group's next sequence number; a member's unread count is
// the head minus its device's position (the model of OpenIM's per-conversation seq and
// WuKongIM's channel log). Membership changes are entries of the same log (events), so every
// device of every member shows the same history in the same order. Embedded mode keeps groups in
// memory; with --redis they live in Redis. Both pass test/groups/group-store.conformance.ts.
//
// Visibility: a member added at seq S reads the entries from S (its own `added` event) on; one
// removed (or who left) at seq R reads up to R (its own `removed`/`left` event) and nothing
// after. Re-added, it reads from its new S only: one membership period per user is kept.
//
// Every change is authorised by the acting uid inside the store, in the same atomic step as the
// change: the caller (the gate, a worker) says who acts, the store decides whether they may.

import { randomFillSync } from 'node:crypto';
import { SwitchboardError } from '../errors.js';

export type GroupRole = 'owner' | 'admin' | 'member';

/** Small string map the clients attach to a group (an avatar URL, a topic): bounded, see GroupLimits. */
export type GroupMeta = Readonly<Record<string, string>>;

export interface Group {
  /** Server-generated: 'g' and 12 base32 characters (isGroupId). */
  id: string;
  name: string;
  meta: GroupMeta;
  owner: string;
  /** Milliseconds since the epoch. */
  createdAt: number;
  memberCount: number;
  /** The group's last sequence number (1 right after create: the `created` event). */
  head: number;
  dissolved: boolean;
}

/** A group as one user sees it: the group, and the user's place in it. */
export interface GroupView extends Group {
  /** The reader's role (in a dissolved group: the one it had at the end); undefined for a former member. */
  role: GroupRole | undefined;
  /** The first seq the reader may read (its `added` or the `created` event). */
  joined: number;
  /** The last seq a former member may read (its `removed` or `left` event); undefined for a member. */
  left: number | undefined;
}

export type EntryKind = 'message' | 'event';

export interface GroupEntry {
  seq: number;
  storedAt: number;
  kind: EntryKind;
  /** A message's sender; an event's actor. */
  sender: string;
  /** A message's body as appended; an event's JSON (decodeGroupEvent). */
  body: Buffer;
}

export type GroupEventType = 'created' | 'added' | 'removed' | 'left' | 'role' | 'transferred' | 'updated' | 'dissolved';

/**
 * The body of an event entry: JSON written by the store, fields in this order.
 *   created     uids: the initial members besides the owner (the actor); name; meta when not empty
 *   added       uids: the members added (never one that already was)
 *   removed     uids: the members removed
 *   left        (the actor left)
 *   role        uids: [the member], role: its new role ('admin' | 'member')
 *   transferred uids: [the new owner]; the actor, the old owner, is an admin from here on
 *   updated     name and/or meta: what the update set (meta is replaced as a whole)
 *   dissolved   (no entry follows)
 */
export interface GroupEvent {
  type: GroupEventType;
  actor: string;
  uids?: string[];
  role?: 'admin' | 'member';
  name?: string;
  meta?: GroupMeta;
}

export interface GroupLimits {
  /** Members of one group, the owner included. Must allow 5 000-member groups. */
  maxMembers: number;
  /** Groups one user is a member of at once (checked when the user is added or creates one). */
  maxGroupsPerUser: number;
  /**
   * uids one create, addMembers or removeMembers names: the event listing them must fit in a
   * frame once delivered (500 uids of 64 characters: 33 KiB of JSON). Larger changes go in slices.
   */
  maxUidsPerCall: number;
  /** A uid (the user name) is 1 to this many characters. */
  maxUidLength: number;
  /** A group name is 1 to this many characters (code points), not only white space, no control characters. */
  maxNameLength: number;
  /** Keys of a group's meta. */
  maxMetaKeys: number;
  /** Bytes of a group's meta: the UTF-8 of every key and value together. */
  maxMetaBytes: number;
  /** Bytes of one message body (SB_ERR_MESSAGE_TOO_LARGE beyond). */
  maxBodyBytes: number;
  /** Entries (messages and events) kept per group; the oldest are pruned beyond it. */
  maxEntries: number;
  /** Entries older than this are pruned. */
  maxAgeMs: number;
  /**
   * A retried (sender, msgId) is found among the group's last this many deduplicated messages
   * (at most maxEntries), as long as it is younger than dedupeWindowMs.
   */
  dedupeEntries: number;
  dedupeWindowMs: number;
  /**
   * Device positions kept per member (and per former member still able to read): a new device
   * beyond it replaces the member's least advanced one. So a group holds at most
   * maxDevicesPerMember x (members + former members) positions.
   */
  maxDevicesPerMember: number;
  /**
   * Former members remembered per group (so that they can still read up to their departure);
   * the earliest departures are forgotten beyond it, and any whose last visible entry was pruned.
   */
  maxFormerMembers: number;
  /** Departures remembered per user (departedOf): the most recent ones. */
  maxDeparted: number;
  /** The most entries one read() and members one members() or groupsOf() page hold, whatever `limit` asks. */
  maxPageSize: number;
}

export const DEFAULT_GROUP_LIMITS: Readonly<GroupLimits> = Object.freeze({
  maxMembers: 10_000,
  maxGroupsPerUser: 1_000,
  maxUidsPerCall: 500,
  maxUidLength: 64,
  maxNameLength: 64,
  maxMetaKeys: 16,
  maxMetaBytes: 1024,
  maxBodyBytes: 64 * 1024,
  maxEntries: 10_000,
  maxAgeMs: 30 * 24 * 3600_000,
  dedupeEntries: 1_000,
  dedupeWindowMs: 24 * 3600_000,
  maxDevicesPerMember: 10,
  maxFormerMembers: 10_000,
  maxDeparted: 256,
  maxPageSize: 1_000,
});

/** Limits with defaults filled in, checked to be whole numbers that make sense together. */
export function groupLimits(limits: Partial<GroupLimits> = {}): GroupLimits {
  const merged = { ...DEFAULT_GROUP_LIMITS, ...limits };
  for (const [name, value] of Object.entries(merged)) {
    if (!Number.isSafeInteger(value) || value < 1) throw new SwitchboardError('SB_ERR_CONFIG', `group limit ${name} must be a whole number of at least 1, got ${value}`);
  }
  if (merged.maxMembers < 2) throw new SwitchboardError('SB_ERR_CONFIG', `group limit maxMembers must be at least 2, got ${merged.maxMembers}`);
  merged.dedupeEntries = Math.min(merged.dedupeEntries, merged.maxEntries);
  return merged;
}

export interface AppendResult {
  seq: number;
  /** The store time of the entry (the original's for a duplicate). */
  storedAt: number;
  /** True when (sender, msgId) was stored before: `seq` is the original one, nothing was added. */
  duplicate: boolean;
}

export interface ChangeResult {
  /** The seq of the event recording the change; undefined when nothing changed (nothing was appended). */
  seq: number | undefined;
  /** The uids the change applied to (added ones, removed ones), in the order given. */
  uids: string[];
}

export interface ReadResult {
  /** Entries visible to the reader with seq > after, ascending, at most `limit`. */
  entries: GroupEntry[];
  /** The last seq the reader may read: the group's head, or a former member's departure. */
  head: number;
  /** The lowest seq the group's log retains (its head + 1 when it retains none): the retention edge. */
  oldest: number;
  /** The first seq the reader may read. Entries in [max(after + 1, joined), oldest) were pruned. */
  joined: number;
}

export interface Member {
  uid: string;
  role: GroupRole;
  /** The seq of the event that made it a member. */
  joined: number;
}

export interface Page {
  /** Exclusive: the page starts after this uid (members) or group id (groupsOf), in byte order. */
  after?: string;
  limit: number;
}

export interface MemberPage {
  members: Member[];
  /** Pass as `after` for the next page; undefined on the last one. */
  next: string | undefined;
}

export interface GroupOfUser {
  id: string;
  role: GroupRole;
}

export interface GroupsPage {
  groups: GroupOfUser[];
  next: string | undefined;
}

export type DepartureReason = 'left' | 'removed' | 'dissolved';

export interface Departure {
  id: string;
  /** The seq of the event: the last the user may read. */
  seq: number;
  reason: DepartureReason;
  /** When it was recorded (the store's clock). */
  at: number;
}

/** A member's place in reading the group (PROTOCOL.md §14, "Groups in the chat list"). */
export interface GroupReadState {
  /**
   * Read up to this seq (0: nothing marked yet). markRead moves it forward only; a message the
   * member sends moves it up to that message (it has seen what came before).
   */
  readSeq: number;
  /**
   * Messages (events not counted) after max(readSeq, joined - 1) up to the last seq the member
   * may read, among the retained ones. O(log n): head minus position minus the events between.
   */
  unread: number;
}

export interface MarkReadResult extends GroupReadState {
  /** The position moved forward (false: the mark was at or behind it). */
  moved: boolean;
}

/** A group as the reader's chat list shows it. */
export interface GroupSummary extends GroupReadState {
  id: string;
  name: string;
  memberCount: number;
  dissolved: boolean;
  /** The last seq the reader may read (the group's head for a member). */
  head: number;
  /** The entry at `head` while retained; undefined once pruned. */
  last: GroupEntry | undefined;
}

export interface GroupReader {
  uid: string;
  /** The member's shared read position: 0 when it has read nothing, or keeps its reads private. */
  readSeq: number;
}

export interface ReaderPage {
  readers: GroupReader[];
  next: string | undefined;
}

export interface ReadCount {
  /** Members other than the asker whose shared read position is at `seq` or beyond. */
  read: number;
  /** Members other than the asker. */
  of: number;
}

export interface GroupStore {
  /**
   * Creates a group owned by `owner` with `members` (the owner need not be listed), appending
   * seq 1, the `created` event. Refused: SB_ERR_BAD_GROUP (name, meta, uids), SB_ERR_GROUP_FULL,
   * SB_ERR_GROUP_TOO_MANY (the owner or a member at maxGroupsPerUser).
   */
  create(owner: string, name: string, members?: readonly string[], meta?: GroupMeta): Promise<Group>;
  /** A member's (or former member's) view of the group. */
  get(group: string, uid: string): Promise<GroupView>;
  /**
   * By an admin or the owner. Uids that are members already are ignored (nothing is appended if
   * all are); the others are added at the `added` event's seq. All or nothing: SB_ERR_GROUP_FULL,
   * SB_ERR_GROUP_TOO_MANY when any one does not fit.
   */
  addMembers(group: string, actor: string, uids: readonly string[]): Promise<ChangeResult>;
  /**
   * By an admin (members only) or the owner (members and admins); nobody removes the owner.
   * Uids that are not members are ignored. All or nothing: SB_ERR_GROUP_FORBIDDEN if any one
   * may not be removed by `actor`.
   */
  removeMembers(group: string, actor: string, uids: readonly string[]): Promise<ChangeResult>;
  /** Any member but the owner (SB_ERR_GROUP_OWNER_CANNOT_LEAVE). Resolves the `left` event's seq. */
  leave(group: string, uid: string): Promise<number>;
  /** By the owner, of a member other than itself; nothing is appended if the role is already `role`. */
  setRole(group: string, actor: string, uid: string, role: 'admin' | 'member'): Promise<ChangeResult>;
  /** By the owner, to a member (SB_ERR_GROUP_NOT_MEMBER otherwise); the old owner becomes an admin. */
  transfer(group: string, actor: string, newOwner: string): Promise<ChangeResult>;
  /** By an admin or the owner: a new name, a new meta (replacing the old one), or both. Resolves the event's seq. */
  update(group: string, actor: string, change: { name?: string; meta?: GroupMeta }): Promise<number>;
  /**
   * By the owner: appends the `dissolved` event; no write is accepted after it
   * (SB_ERR_GROUP_DISSOLVED), reads by its members go on within retention.
   */
  dissolve(group: string, actor: string): Promise<number>;
  /**
   * Appends a message by a member. Dedupe by (sender, msgId) as in the inbox: '' or '0' disables
   * it; see GroupLimits.dedupeEntries. A new message moves the sender's read position up to it
   * (`share`: its shared one too, see markRead); a duplicate moves nothing.
   */
  append(group: string, sender: string, msgId: string, body: Uint8Array, share?: boolean): Promise<AppendResult>;
  /**
   * Moves the member's read position forward to `seq` (clamped to the head; never back).
   * `share` (the member's receipts privacy setting): the position is also the one other members
   * see (readers, readCount); otherwise only the member's own unread count follows it. A message
   * appended with `share` moves both for its sender. By a member only (SB_ERR_GROUP_NOT_MEMBER).
   */
  markRead(group: string, uid: string, seq: number, share: boolean): Promise<MarkReadResult>;
  /** The group as `uid`'s chat list shows it: last entry, read position, unread. A member or former member. */
  summary(group: string, uid: string): Promise<GroupSummary>;
  /**
   * The summaries of the groups `uid` is a member of (not dissolved ones), in no particular
   * order: what a chat list with groups shows. One read per group and no writes (nothing is
   * repaired or pruned: an index entry its group does not confirm is left out).
   */
  chatGroups(uid: string): Promise<GroupSummary[]>;
  /**
   * Withdraws `uid`'s shared read positions in every group it is in (its receipts setting was
   * turned off): other members see none from now on. O(groups of the user).
   */
  unshare(uid: string): Promise<void>;
  /** The members' shared read positions, in byte order of their uids: read by a member only. */
  readers(group: string, uid: string, page: Page): Promise<ReaderPage>;
  /** How many other members have read up to `seq` (>= 1), by their shared positions: asked by a member only. O(log n). */
  readCount(group: string, uid: string, seq: number): Promise<ReadCount>;
  /** The entries visible to `uid` (a member or former member) after `after`, at most `limit` and maxPageSize (0: bounds only). */
  read(group: string, uid: string, after: number, limit: number): Promise<ReadResult>;
  /** The members, in byte order of their uids: read by a member only (of a dissolved group: one at its end). */
  members(group: string, uid: string, page: Page): Promise<MemberPage>;
  /** The groups `uid` is a member of (dissolved ones not), in byte order of their ids, with its role there. */
  groupsOf(uid: string, page: Page): Promise<GroupsPage>;
  /**
   * The groups `uid` recently left, was removed from or saw dissolved, most recent first, at most
   * maxDeparted: what a device that was offline learns at login. Re-added, a group is no longer listed.
   */
  departedOf(uid: string): Promise<Departure[]>;
  /** The device's saved position in the group; undefined when it has none. */
  cursor(group: string, uid: string, deviceId: string): Promise<number | undefined>;
  /**
   * Saves the device's position, atomically clamped to the last seq `uid` may read: a position
   * lower than the saved one is ignored. By a member or a former member that can still read.
   */
  saveCursor(group: string, uid: string, deviceId: string, seq: number): Promise<void>;
  /** Resolves once the store answers; rejects with SB_ERR_STORE_UNAVAILABLE, in bounded time. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

// Ids, validation and the event bodies: shared by every implementation, so that both refuse
// the same requests with the same codes and write the same bytes.

const BASE32 = 'abcdefghijklmnopqrstuvwxyz234567';
const GROUP_ID = /^g[a-z2-7]{12}$/;

/** A fresh group id: 'g' and 12 lower-case base32 characters, 60 random bits. */
export function newGroupId(): string {
  const bytes = randomFillSync(Buffer.alloc(12));
  let id = 'g';
  for (const byte of bytes) id += BASE32[byte & 31];
  return id;
}

export function isGroupId(value: unknown): value is string {
  return typeof value === 'string' && GROUP_ID.test(value);
}

function bad(message: string): SwitchboardError {
  return new SwitchboardError('SB_ERR_BAD_GROUP', message);
}

export function checkGroupId(group: unknown): string {
  if (!isGroupId(group)) throw bad(`not a group id: ${JSON.stringify(String(group).slice(0, 40))}`);
  return group;
}

// C0, DEL and C1 controls; lone surrogates are refused by isWellFormed.
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

/** No lone surrogate (String.prototype.isWellFormed, Node 20; lib.es2024 types it). */
function wellFormed(s: string): boolean {
  return (s as string & { isWellFormed(): boolean }).isWellFormed();
}

export function checkName(name: unknown, limits: GroupLimits): string {
  if (typeof name !== 'string' || name.trim() === '' || CONTROL.test(name) || !wellFormed(name) || [...name].length > limits.maxNameLength) {
    throw bad(`a group name is 1 to ${limits.maxNameLength} characters, not only white space, without control characters`);
  }
  return name;
}

/** A copy of `meta`, checked: at most maxMetaKeys string values, maxMetaBytes of UTF-8 in all. */
export function checkMeta(meta: unknown, limits: GroupLimits): GroupMeta {
  if (typeof meta !== 'object' || meta === null || Array.isArray(meta)) throw bad('group meta is an object of strings');
  const entries = Object.entries(meta);
  if (entries.length > limits.maxMetaKeys) throw bad(`group meta has at most ${limits.maxMetaKeys} keys`);
  let bytes = 0;
  for (const [key, value] of entries) {
    if (key === '' || typeof value !== 'string' || !wellFormed(key) || !wellFormed(value)) throw bad('group meta keys are non-empty strings and its values strings');
    bytes += Buffer.byteLength(key) + Buffer.byteLength(value);
  }
  if (bytes > limits.maxMetaBytes) throw bad(`group meta holds at most ${limits.maxMetaBytes} bytes, got ${bytes}`);
  // Own data properties only (a '__proto__' key stays an ordinary key).
  return Object.freeze(Object.fromEntries(entries)) as GroupMeta;
}

export function checkUid(uid: unknown, limits: GroupLimits): string {
  if (typeof uid !== 'string' || uid === '' || uid.length > limits.maxUidLength || CONTROL.test(uid) || !wellFormed(uid)) throw bad(`a uid is 1 to ${limits.maxUidLength} characters, without control characters`);
  return uid;
}

/** The uids of a change, checked, without repeats, in the order given: 1 to maxUidsPerCall of them. */
export function checkUids(uids: unknown, limits: GroupLimits, { allowEmpty = false } = {}): string[] {
  if (!Array.isArray(uids)) throw bad('uids is a list');
  const unique = [...new Set(uids.map((uid) => checkUid(uid, limits)))];
  if ((unique.length === 0 && !allowEmpty) || unique.length > limits.maxUidsPerCall) throw bad(`a change names 1 to ${limits.maxUidsPerCall} uids, got ${unique.length}: larger ones go in slices`);
  return unique;
}

/** Whether the group store can keep positions for this device id (what checkDeviceId() demands). */
export function isDeviceId(deviceId: unknown): deviceId is string {
  return typeof deviceId === 'string' && deviceId !== '' && deviceId.length <= 128 && wellFormed(deviceId);
}

export function checkDeviceId(deviceId: unknown): string {
  if (!isDeviceId(deviceId)) throw bad('a device id is 1 to 128 characters');
  return deviceId;
}

export function checkBody(body: Uint8Array, limits: GroupLimits): void {
  if (body.byteLength > limits.maxBodyBytes) throw new SwitchboardError('SB_ERR_MESSAGE_TOO_LARGE', `a group message body is at most ${limits.maxBodyBytes} bytes, got ${body.byteLength}`);
}

/** A sequence number or position given by a caller: a whole number >= 0. */
export function checkSeq(seq: unknown, what: string): number {
  if (!Number.isSafeInteger(seq) || (seq as number) < 0) throw bad(`${what} is a whole number >= 0`);
  return seq as number;
}

/** A page's or read's `limit`, at most `max`. */
export function checkLimit(limit: unknown, max = Number.MAX_SAFE_INTEGER): number {
  return Math.min(checkSeq(limit, 'limit'), max);
}

/** Byte order of UTF-8 (= code point order), the order Redis sorts members in. */
export function compareUids(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x === y) continue;
    // A surrogate (an astral code point) sorts after every BMP code point, which UTF-16 order
    // gets wrong only against U+E000..U+FFFF.
    const xs = x >= 0xd800 && x <= 0xdfff;
    const ys = y >= 0xd800 && y <= 0xdfff;
    if (xs !== ys) return xs ? 1 : -1;
    return x - y;
  }
  return a.length - b.length;
}

/**
 * An event's body. Built from JSON fragments so that the Redis scripts, which choose the uids
 * inside the atomic step, can concatenate the same fragments (JSON.stringify of each value)
 * into the same bytes.
 */
export function eventJson(type: GroupEventType, actorJson: string, fields: { uids?: string[]; role?: string; name?: string; meta?: string } = {}): string {
  let json = `{"type":"${type}","actor":${actorJson}`;
  if (fields.uids !== undefined) json += `,"uids":[${fields.uids.join(',')}]`;
  if (fields.role !== undefined) json += `,"role":${fields.role}`;
  if (fields.name !== undefined) json += `,"name":${fields.name}`;
  if (fields.meta !== undefined) json += `,"meta":${fields.meta}`;
  return `${json}}`;
}

const EVENT_TYPES = new Set<string>(['created', 'added', 'removed', 'left', 'role', 'transferred', 'updated', 'dissolved']);

/** The event an `event` entry's body holds; SB_ERR_BAD_GROUP if it is not one. */
export function decodeGroupEvent(body: Uint8Array): GroupEvent {
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('utf8'));
  } catch (err) {
    throw new SwitchboardError('SB_ERR_BAD_GROUP', 'a group event is JSON', { cause: err });
  }
  const v = value as Record<string, unknown>;
  const isStrings = (x: unknown): x is string[] => Array.isArray(x) && x.every((s) => typeof s === 'string');
  if (
    typeof v !== 'object' || v === null || typeof v.type !== 'string' || !EVENT_TYPES.has(v.type) || typeof v.actor !== 'string' ||
    (v.uids !== undefined && !isStrings(v.uids)) ||
    (v.role !== undefined && v.role !== 'admin' && v.role !== 'member') ||
    (v.name !== undefined && typeof v.name !== 'string') ||
    (v.meta !== undefined && (typeof v.meta !== 'object' || v.meta === null || Array.isArray(v.meta) || !Object.values(v.meta).every((s) => typeof s === 'string')))
  ) {
    throw new SwitchboardError('SB_ERR_BAD_GROUP', 'not a group event');
  }
  const event: GroupEvent = { type: v.type as GroupEventType, actor: v.actor };
  if (v.uids !== undefined) event.uids = v.uids as string[];
  if (v.role !== undefined) event.role = v.role as 'admin' | 'member';
  if (v.name !== undefined) event.name = v.name;
  if (v.meta !== undefined) event.meta = v.meta as GroupMeta;
  return event;
}

