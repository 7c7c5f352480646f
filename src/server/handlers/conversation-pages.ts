// What CONVERSATION_RESPONSE pages hold and how much of a page fits one frame: shared by the 1:1
// requests (conversations.ts) and the group ones (group-conversations.ts).

import { encodeMessage, uint64Number } from '../../protocol/codec.js';
import { DEFAULT_PAGE, MAX_PAGE, previewMessage, storedMessage } from '../../protocol/conversation-view.js';
import { HEADER_LENGTH } from '../../protocol/frame.js';
import { HeadType, type Conversation, type ConversationResponse, type MessageRequest } from '../../protocol/types.js';
import type { ConversationEntry, StoredMessage } from '../../inbox/inbox-store.js';
import type { ServerContext } from '../context.js';

/** Room kept in a response frame for the envelope and the page's own fields. */
const RESPONSE_OVERHEAD = 128;

export function pageSize(limit: number | undefined): number {
  return !limit ? DEFAULT_PAGE : Math.min(limit, MAX_PAGE);
}

/** A chat list entry as the response carries it. */
export function listEntry(c: ConversationEntry): Conversation {
  const entry: Conversation = { peer: c.conversation, lastSeq: c.lastSeq, lastAt: c.lastAt, readSeq: c.readSeq, unread: c.unread };
  if (c.last) {
    const { request, truncated } = previewMessage(c.last);
    entry.last = request;
    entry.truncated = truncated;
    // The time deliveries show (the worker stamps it into the message), not the store's own by a millisecond.
    if (request.storedAt) entry.lastAt = uint64Number(request.storedAt);
  }
  return entry;
}

/**
 * How many of a list page's first entries fit the frame: halved until they do. Each entry is
 * small (a preview), so the bound of its size mostly shows the page fits without encoding it twice.
 */
export function fitPage(ctx: ServerContext, conversations: Conversation[]): number {
  const room = ctx.limits.maxFrameLength - RESPONSE_OVERHEAD;
  let n = conversations.length;
  if (conversations.reduce((bytes, c) => bytes + entryBound(c), 0) > room) {
    while (n > 1 && encodedLength({ conversations: conversations.slice(0, n) }) > room) n = Math.ceil(n / 2);
  }
  return n;
}

/**
 * A history page's messages, newest first until the frame is full (the page then starts later,
 * and says there is more), in ascending order. One message too large on its own is sent without
 * its content and json.
 */
export function fitNewest(ctx: ServerContext, page: readonly StoredMessage[]): MessageRequest[] {
  const room = ctx.limits.maxFrameLength - RESPONSE_OVERHEAD;
  const messages: MessageRequest[] = [];
  let bytes = 0;
  for (let i = page.length - 1; i >= 0; i--) {
    const stored = page[i]!;
    const length = stored.body.length + 16;
    if (messages.length > 0 && bytes + length > room) break;
    bytes += length;
    messages.push(delivered(stored, bytes > room));
  }
  return messages.reverse();
}

/** A stored message as a page holds it; `stripped`: too large for a page on its own, its content and json left out. */
function delivered(stored: StoredMessage, stripped: boolean): MessageRequest {
  const request = storedMessage(stored);
  if (stripped) {
    request.content = '';
    request.json = '';
  }
  return request;
}

/** How many of a READERS page's first readers fit the frame (at least one: a uid is at most 64 characters). */
export function fitReaders(ctx: ServerContext, readers: readonly { uid: string }[]): number {
  const room = ctx.limits.maxFrameLength - RESPONSE_OVERHEAD;
  let bytes = 0;
  for (const [i, r] of readers.entries()) {
    // Tag and length of the entry, the uid's, and the seq's tag and varint.
    bytes += Buffer.byteLength(r.uid) + 16;
    if (bytes > room && i > 0) return i;
  }
  return readers.length;
}

/** At most the bytes entry `c` takes in a response: its strings at 3 bytes a UTF-16 unit, and 24 bytes of tags, lengths and varints per field. */
function entryBound(c: Conversation): number {
  const last = c.last;
  const strings = (c.peer?.length ?? 0) + (c.group?.length ?? 0) + (c.name?.length ?? 0) + (last ? (last.from?.length ?? 0) + (last.to?.length ?? 0) + (last.content?.length ?? 0) + (last.originDevice?.length ?? 0) + (last.group?.length ?? 0) + (last.event?.length ?? 0) : 0);
  return strings * 3 + 24 * 16;
}

function encodedLength(response: ConversationResponse): number {
  return HEADER_LENGTH + encodeMessage({ type: HeadType.CONVERSATION_RESPONSE, conversationResponse: response }).length;
}
