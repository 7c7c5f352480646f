// The chat list, history pages and read marks as the SDK shows them (PROTOCOL.md §14): the
// CONVERSATION_RESPONSE's fields as plain numbers and IncomingMessages.

import { uint64Number } from '../protocol/codec.js';
import type { Conversation, ConversationResponse } from '../protocol/types.js';
import { incomingMessage, type IncomingMessage } from './incoming.js';

export interface ConversationSummary {
  /** The other party's uid (this user's own for notes to itself). */
  peer: string;
  /** Inbox seq and server time of the conversation's last message. */
  lastSeq: number;
  lastAt: number;
  /** Read up to this inbox seq (0: nothing read). */
  readSeq: number;
  /** Messages received after readSeq. */
  unread: number;
  /** A preview of the last message (content cut to 256 bytes); undefined once retention pruned it. */
  last: IncomingMessage | undefined;
  /** The preview left something out (content cut, or url, property, json or fromNick dropped). */
  truncated: boolean;
}

export interface ConversationList {
  /** Most recent first. */
  conversations: ConversationSummary[];
  /** More, older conversations: ask again with `before: nextBefore`; 0 when this was the last page. */
  nextBefore: number;
}

export interface HistoryPage {
  /** Ascending by seq: the newest of those before `before`. */
  messages: IncomingMessage[];
  /** Older messages: ask again with `before: nextBefore`; 0 when there are none. */
  nextBefore: number;
  /** The inbox's lowest retained seq. */
  oldest: number;
  /** The conversation had older messages that retention pruned (with nextBefore 0: this page ends at the retention edge). */
  pruned: boolean;
}

export interface ReadMark {
  /** The read position now: the mark, clamped to the last message, never lower than before. */
  readSeq: number;
  unread: number;
  /** The read event's seq in this user's inbox (what the other devices get); 0 when the position did not move. */
  eventSeq: number;
}

export function conversationList(body: ConversationResponse, uid: string): ConversationList {
  return { conversations: (body.conversations ?? []).map((c) => summary(c, uid)), nextBefore: uint64Number(body.nextBefore) };
}

export function historyPage(body: ConversationResponse, uid: string): HistoryPage {
  return {
    messages: (body.messages ?? []).map((m) => incomingMessage(m, uid)),
    nextBefore: uint64Number(body.nextBefore),
    oldest: uint64Number(body.oldest),
    pruned: body.pruned === true,
  };
}

export function readMark(body: ConversationResponse): ReadMark {
  return { readSeq: uint64Number(body.readSeq), unread: body.unread ?? 0, eventSeq: uint64Number(body.eventSeq) };
}

function summary(c: Conversation, uid: string): ConversationSummary {
  return {
    peer: c.peer ?? '',
    lastSeq: uint64Number(c.lastSeq),
    lastAt: uint64Number(c.lastAt),
    readSeq: uint64Number(c.readSeq),
    unread: c.unread ?? 0,
    last: c.last ? incomingMessage(c.last, uid) : undefined,
    truncated: c.truncated === true,
  };
}
