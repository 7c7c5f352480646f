// CONVERSATION_REQUEST for groups (PROTOCOL.md §14, "Groups in the chat list"): the chat list
// with the user's groups merged in, a group's history page, a group read mark and the members'
// read positions. The GroupStore authorises each by the session's uid (a member, or for history
// a former member up to its departure), so no request reads a group the user is not in.
//
// A read mark moves the position first, in the group store's one step, and only a mark that
// moved it stores a read event in the user's inbox (an own entry, as a 1:1 mark does) for its
// other devices: so a refusal, a repeat or a mark behind the position stores nothing. Two
// stores: marks racing from two devices may store their events out of order (a device keeps
// the highest seq per group, PROTOCOL.md), and if the event's append fails after the position
// moved, the answer is that error and the other devices see the position in their chat list.

import { groupEntryBody, previewMessage } from '../../protocol/conversation-view.js';
import { encodeMessageRequest, ownCopyBody, uint64Number } from '../../protocol/codec.js';
import type { Failure } from '../../protocol/messages.js';
import type { Conversation, ConversationRequest, ConversationResponse } from '../../protocol/types.js';
import { chatList, type ListedEntry } from '../../conversations/chat-list.js';
import { groupHistory } from '../../conversations/group-history.js';
import { groupReaders as readersOf } from '../../conversations/group-readers.js';
import { isGroupId, type GroupStore, type GroupSummary } from '../../groups/group-store.js';
import { isSwitchboardError, type ErrorCode } from '../../errors.js';
import type { LocalSession } from '../../session/local-session.js';
import type { ServerContext } from '../context.js';
import { fitNewest, fitPage, fitReaders, listEntry, pageSize } from './conversation-pages.js';

/** The refusals that are answers to the user, not faults. */
const ANSWERS = new Set<ErrorCode>(['SB_ERR_GROUP_NOT_FOUND', 'SB_ERR_GROUP_NOT_MEMBER', 'SB_ERR_GROUP_DISSOLVED', 'SB_ERR_BAD_GROUP', 'SB_ERR_BAD_REQUEST', 'SB_ERR_RECEIPTS_OFF']);

/**
 * A chat list page with groups reads every group of the user: it costs one message of the rate
 * and one more per this many groups read, so a user in many groups cannot make the worker read
 * a thousand groups a hundred times a second.
 */
export const GROUPS_PER_RATE_TOKEN = 10;

type Outcome = ConversationResponse | Failure;

/** Runs `work`, turning the group store's refusals into answers (anything else goes on to the caller). */
async function answering(work: () => Promise<Outcome>): Promise<Outcome> {
  try {
    return await work();
  } catch (err) {
    if (isSwitchboardError(err) && ANSWERS.has(err.code)) return { code: err.code, reason: err.message };
    throw err;
  }
}

function groupsOf(ctx: ServerContext): GroupStore | Failure {
  return ctx.groups?.store ?? { code: 'SB_ERR_BAD_REQUEST', reason: 'this server has no groups' };
}

/** LIST with `groups`: 1:1 conversations and groups by last activity, paged by `cursor`. */
export function groupList(ctx: ServerContext, session: LocalSession, request: ConversationRequest): Promise<Outcome> {
  const store = groupsOf(ctx);
  if ('reason' in store) return Promise.resolve(store);
  return answering(async () => {
    const page = await chatList(ctx.inbox, store, session.uid, request.cursor ?? '', pageSize(request.limit));
    ctx.rate.charge(session, Math.floor(page.groupsRead / GROUPS_PER_RATE_TOKEN));
    const conversations = page.entries.map(listed);
    const n = fitPage(ctx, conversations);
    return { conversations: conversations.slice(0, n), nextCursor: page.cursorAfter(n) };
  });
}

/** HISTORY with `group`: the entries before `before` (0: the newest) the user may read, ascending. */
export function groupHistoryPage(ctx: ServerContext, session: LocalSession, request: ConversationRequest): Promise<Outcome> {
  const store = groupsOf(ctx);
  if ('reason' in store) return Promise.resolve(store);
  const group = request.group!;
  return answering(async () => {
    if (!isGroupId(group)) return { code: 'SB_ERR_BAD_GROUP', reason: 'conversationRequest.group is not a group id' };
    const page = await groupHistory(store, group, session.uid, uint64Number(request.before), pageSize(request.limit));
    const messages = fitNewest(ctx, page.entries);
    const more = page.more || messages.length < page.entries.length;
    return { messages, nextBefore: more && messages.length > 0 ? messages[0]!.seq! : 0, oldest: page.oldest, pruned: page.pruned };
  });
}

/** READ with `group`: moves the user's position in the group; one that moved stores a read event for its other devices. */
export function groupRead(ctx: ServerContext, session: LocalSession, request: ConversationRequest): Promise<Outcome> {
  const store = groupsOf(ctx);
  if ('reason' in store) return Promise.resolve(store);
  const group = request.group!;
  const seq = uint64Number(request.seq);
  return answering(async () => {
    if (!isGroupId(group) || seq <= 0) return { code: 'SB_ERR_BAD_REQUEST', reason: 'a group READ needs conversationRequest.group (a group id) and seq' };
    const result = await store.markRead(group, session.uid, seq, ctx.receipts.sharing(session));
    let eventSeq = 0;
    if (result.moved) {
      const body = groupReadEventBody(session, group, result.readSeq, Date.now());
      const stored = await ctx.inbox.append({ uid: session.uid, sender: session.uid, msgId: '0', body });
      ctx.router.deliver(session.uid, stored.seq, body, stored.epoch);
      eventSeq = stored.seq;
    }
    return { readSeq: result.readSeq, unread: result.unread, eventSeq };
  });
}

/** READERS (src/conversations/group-readers.ts), as much of the page as fits the frame. */
export function groupReaders(ctx: ServerContext, session: LocalSession, request: ConversationRequest): Promise<Outcome> {
  const store = groupsOf(ctx);
  if ('reason' in store) return Promise.resolve(store);
  const group = request.group ?? '';
  return answering(async () => {
    if (!isGroupId(group)) return { code: 'SB_ERR_BAD_REQUEST', reason: 'a READERS request needs conversationRequest.group (a group id)' };
    const answer = await readersOf(store, group, session.uid, ctx.receipts.sharing(session), { after: request.after || undefined, limit: pageSize(request.limit) }, uint64Number(request.seq));
    const n = fitReaders(ctx, answer.readers);
    const next = n < answer.readers.length ? answer.readers[n - 1]!.uid : answer.next;
    return { readers: answer.readers.slice(0, n), readCount: answer.read ?? 0, memberCount: answer.of, nextAfter: next ?? '' };
  });
}

/**
 * The group read event for the user's other devices: an own entry (like a 1:1 read event),
 * `event` {"type":"read","group":...,"seq":...}, from the user, to the group. Not a group
 * delivery: it carries no `group` field and is acknowledged as an inbox seq.
 */
export function groupReadEventBody(session: Pick<LocalSession, 'uid' | 'deviceId'>, group: string, seq: number, storedAt: number): Uint8Array {
  const body = encodeMessageRequest({ from: session.uid, to: group, storedAt, event: JSON.stringify({ type: 'read', group, seq }) });
  return ownCopyBody(body, session.deviceId);
}

function listed(e: ListedEntry): Conversation {
  return e.kind === 'peer' ? listEntry(e.entry) : groupEntry(e.summary);
}

/** A group's chat list entry: seqs are the group's, `peer` is empty. */
export function groupEntry(s: GroupSummary): Conversation {
  const entry: Conversation = { group: s.id, name: s.name, lastSeq: s.head, lastAt: s.last?.storedAt ?? 0, readSeq: s.readSeq, unread: s.unread };
  if (s.last) {
    const { request, truncated } = previewMessage({ seq: s.last.seq, body: groupEntryBody(s.id, s.last) });
    entry.last = request;
    entry.truncated = truncated;
    if (request.storedAt) entry.lastAt = uint64Number(request.storedAt);
  }
  return entry;
}
