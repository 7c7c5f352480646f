// Groups in the chat list as the SDK shows them (PROTOCOL.md §14, "Groups in the chat list"):
// the merged list's entries, a group's history page and its readers, from CONVERSATION_RESPONSE
// fields to plain numbers, GroupMessages and GroupEventMessages.

import { uint64Number } from '../protocol/codec.js';
import type { Conversation, ConversationResponse, MessageRequest } from '../protocol/types.js';
import type { ConversationSummary } from './conversations.js';
import { incomingMessage, type IncomingMessage } from './incoming.js';
import type { GroupEvent } from '../groups/group-store.js';

/**
 * A message of a group (a delivery with `group` set), to a client logged in with `groups`: the
 * fields of a 1:1 message, but `seq` is the group's (one order for every member's every
 * device) and the group stands where the recipient would.
 */
export interface GroupMessage extends Omit<IncomingMessage, 'to' | 'own' | 'originDevice' | 'recalled' | 'edited'> {
  group: string;
}

/** A membership change of a group ("alice added bob"), an entry of the group's stream as messages are. */
export interface GroupEventMessage {
  group: string;
  seq: number;
  /** The event as the server wrote it: its `type`, `actor` and the fields of that type. */
  event: GroupEvent;
  /** Who acted (the event's `actor`). */
  actor: string;
  storedAt: number | undefined;
}

/** A chat list entry of the merged list: a 1:1 conversation (`peer`) or a group (`group`, `name`). */
export interface ChatListEntry extends ConversationSummary {
  /** The group id for a group's entry ('' for a 1:1 one); its seqs are the group's then. */
  group: string;
  name: string;
  /** A group's last entry (a message or a membership event); undefined for a 1:1 entry (see `last`) or once pruned. */
  lastGroupEntry: GroupMessage | GroupEventMessage | undefined;
}

export interface ChatList {
  /** Most recent activity first. */
  entries: ChatListEntry[];
  /** Pass as `cursor` for the next page; '' when this was the last. */
  nextCursor: string;
}

export interface GroupHistory {
  /** Ascending by the group's seq: the newest entries before `before`. */
  entries: (GroupMessage | GroupEventMessage)[];
  /** Older entries: ask again with `before: nextBefore`; 0 when there are none. */
  nextBefore: number;
  /** The group's lowest retained seq. */
  oldest: number;
  /** Entries this user could read were pruned by retention. */
  pruned: boolean;
}

export interface GroupReaders {
  /** The members' shared read positions (0: read nothing, or private), in byte order of their uids. */
  readers: { uid: string; readSeq: number }[];
  /** With `seq`: the other members who read up to it. */
  readCount: number;
  /** The other members. */
  memberCount: number;
  /** Pass as `after` for the next page; '' when this was the last. */
  nextAfter: string;
}

export function chatList(body: ConversationResponse, uid: string): ChatList {
  return { entries: (body.conversations ?? []).map((c) => chatListEntry(c, uid)), nextCursor: body.nextCursor ?? '' };
}

export function groupHistory(body: ConversationResponse, group: string): GroupHistory {
  return {
    entries: (body.messages ?? []).map((m) => groupEntryOf(group, m)).filter((e) => e !== undefined),
    nextBefore: uint64Number(body.nextBefore),
    oldest: uint64Number(body.oldest),
    pruned: body.pruned === true,
  };
}

export function groupReaders(body: ConversationResponse): GroupReaders {
  return {
    readers: (body.readers ?? []).map((r) => ({ uid: r.uid ?? '', readSeq: uint64Number(r.readSeq) })),
    readCount: body.readCount ?? 0,
    memberCount: body.memberCount ?? 0,
    nextAfter: body.nextAfter ?? '',
  };
}

/** A group's entry as delivered (a message, or an event with `event`); undefined for an event that is not one. */
export function groupEntryOf(group: string, m: MessageRequest): GroupMessage | GroupEventMessage | undefined {
  const seq = uint64Number(m.seq);
  const storedAt = m.storedAt ? uint64Number(m.storedAt) : undefined;
  if (m.event) {
    const event = parseGroupEvent(m.event);
    return event && { group, seq, event, actor: m.from || event.actor, storedAt };
  }
  return {
    group,
    seq,
    from: m.from ?? '',
    content: m.content ?? '',
    msgId: String(m.msgId ?? 0),
    time: uint64Number(m.time),
    storedAt,
    msgType: m.msgType ?? 0,
    json: m.json ?? '',
    url: m.url ?? '',
    property: m.property ?? '',
    fromNick: m.fromNick ?? '',
  };
}

function chatListEntry(c: Conversation, uid: string): ChatListEntry {
  const group = c.group ?? '';
  return {
    peer: c.peer ?? '',
    group,
    name: c.name ?? '',
    lastSeq: uint64Number(c.lastSeq),
    lastAt: uint64Number(c.lastAt),
    readSeq: uint64Number(c.readSeq),
    unread: c.unread ?? 0,
    last: c.last && !group ? incomingMessage(c.last, uid) : undefined,
    lastGroupEntry: c.last && group ? groupEntryOf(group, c.last) : undefined,
    truncated: c.truncated === true,
  };
}

/** A group event's JSON, when it is an object with a string `type` and `actor`; else undefined. */
export function parseGroupEvent(json: string): GroupEvent | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(json);
  } catch {
    return undefined;
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return undefined;
  const event = parsed as Partial<GroupEvent>;
  if (typeof event.type !== 'string' || typeof event.actor !== 'string') return undefined;
  return event as GroupEvent;
}
