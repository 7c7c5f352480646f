// CONVERSATION_REQUEST (PROTOCOL.md §14): the session user's chat list, a history page of one
// conversation, a read mark, or a recall or an edit of a message the user sent (rewrites.ts). The
// first three read or write the user's own inbox only (the store keeps the list in the same step
// as every message), so no request can name another user's conversations. A read mark that
// moves the position appends a read event to the inbox, an own entry delivered like an own copy:
// the user's other devices that asked for own copies get it live and at replay, the marking
// device and the others pass over it.
//
// A request costs one message of the sender's rate (MessageRate), and the response is bounded by
// the frame limit: a page holds what fits, and `next_before` says where the next one starts.

import { encodeMessageRequest, isOwnCopy, ownCopyBody, uint64Number } from '../../protocol/codec.js';
import { originOf } from '../../protocol/receipts.js';
import { MAX_PAGE, storedMessage } from '../../protocol/conversation-view.js';
import { resultCodeFor, type Failure } from '../../protocol/messages.js';
import { ConversationOp, HeadType, ResultCode, type ConversationRequest, type ConversationResponse, type ImMessage, type UInt64 } from '../../protocol/types.js';
import type { StoredMessage } from '../../inbox/inbox-store.js';
import { isSwitchboardError } from '../../errors.js';
import type { LocalSession } from '../../session/local-session.js';
import type { Connection } from '../connection.js';
import type { ServerContext } from '../context.js';
import { fitNewest, fitPage, listEntry, pageSize } from './conversation-pages.js';
import { groupHistoryPage, groupList, groupRead, groupReaders } from './group-conversations.js';
import { edit, quoted, recall } from './rewrites.js';

/** A READ looks this far back for the newest of the peer's messages it covers (its receipt); none among them: no receipt. */
const RECEIPT_LOOKBACK = 8;

export function handleConversations(ctx: ServerContext, conn: Connection, session: LocalSession, message: ImMessage): void | Promise<void> {
  const sequence = message.sequence;
  const refusal = ctx.rate.take(session, conn.lastInboundAt);
  if (refusal !== undefined) {
    respond(conn, sequence, session, refusal);
    if (ctx.rate.flooded(session)) conn.close(ctx.rate.flood);
    return;
  }
  const request = message.conversationRequest ?? {};
  let work: Promise<ConversationResponse | Failure>;
  switch (request.op) {
    case ConversationOp.LIST:
      work = request.groups ? groupList(ctx, session, request) : list(ctx, session, request);
      break;
    case ConversationOp.HISTORY:
      work = request.group ? groupHistoryPage(ctx, session, request) : history(ctx, session, request);
      break;
    case ConversationOp.READ:
      work = request.group ? groupRead(ctx, session, request) : read(ctx, session, request);
      break;
    case ConversationOp.READERS:
      work = groupReaders(ctx, session, request);
      break;
    case ConversationOp.RECALL:
      work = recall(ctx, session, request, peerOf(ctx, request));
      break;
    case ConversationOp.EDIT:
      work = edit(ctx, session, request, peerOf(ctx, request));
      break;
    default:
      respond(conn, sequence, session, { code: 'SB_ERR_BAD_REQUEST', reason: `conversationRequest.op must be 1 (LIST), 2 (HISTORY), 3 (READ), 4 (RECALL), 5 (EDIT) or 6 (READERS), got ${request.op ?? 0}` });
      return;
  }
  // Not returned: the connection reads on while the store answers (the response has the request's sequence).
  conn.startTask();
  void work.then(
    (outcome) => {
      respond(conn, sequence, session, outcome);
      conn.endTask();
    },
    (err: unknown) => {
      if (isSwitchboardError(err) && err.code === 'SB_ERR_STORE_FULL') respond(conn, sequence, session, { code: err.code, reason: err.message });
      else {
        conn.log.error({ err, op: request.op }, 'conversation request failed');
        respond(conn, sequence, session, { code: 'SB_ERR_STORE_UNAVAILABLE', reason: 'the inbox store did not answer; ask again' });
      }
      conn.endTask();
    },
  );
}

async function list(ctx: ServerContext, session: LocalSession, request: ConversationRequest): Promise<ConversationResponse> {
  const before = uint64Number(request.before);
  const page = await ctx.inbox.conversations(session.uid, before, pageSize(request.limit));
  const conversations = page.conversations.map(listEntry);
  const n = fitPage(ctx, conversations);
  const more = page.more || n < conversations.length;
  return { conversations: conversations.slice(0, n), nextBefore: more && n > 0 ? page.conversations[n - 1]!.lastSeq : 0 };
}

async function history(ctx: ServerContext, session: LocalSession, request: ConversationRequest): Promise<ConversationResponse | Failure> {
  const peer = peerOf(ctx, request);
  if (peer === undefined) return { code: 'SB_ERR_BAD_REQUEST', reason: 'a HISTORY request needs conversationRequest.peer' };
  const page = await ctx.inbox.history(session.uid, peer, uint64Number(request.before), pageSize(request.limit));
  const messages = fitNewest(ctx, page.messages);
  const more = page.more || messages.length < page.messages.length;
  return { messages, nextBefore: more && messages.length > 0 ? messages[0]!.seq! : 0, oldest: page.oldest, pruned: page.pruned };
}

async function read(ctx: ServerContext, session: LocalSession, request: ConversationRequest): Promise<ConversationResponse | Failure> {
  const peer = peerOf(ctx, request);
  const seq = uint64Number(request.seq);
  if (peer === undefined || seq <= 0) return { code: 'SB_ERR_BAD_REQUEST', reason: 'a READ request needs conversationRequest.peer and seq' };
  // The mark is the conversation's newest message at or below `seq`: what the read event tells
  // the other devices is then exactly the position stored (a mark past the last message, or
  // anywhere between two of its messages, means the same messages).
  const around = await ctx.inbox.history(session.uid, peer, seq + 1, RECEIPT_LOOKBACK);
  const newest = around.messages.at(-1);
  // (0: nothing of it at or below `seq`, nothing moves; the store still says whether it exists.)
  const mark = newest ? newest.seq : Math.min(seq, around.oldest - 1);
  const event = readEventBody(session, peer, mark, Date.now());
  const result = await ctx.inbox.markRead(session.uid, peer, mark, event);
  if (!result.found) return { code: 'SB_ERR_NO_CONVERSATION', reason: `no conversation with ${quoted(peer)}` };
  if (result.eventSeq !== undefined) {
    ctx.router.deliver(session.uid, result.eventSeq, event, result.epoch);
    // READ receipt: the newest of the peer's own messages the mark covers (not this user's replies).
    const received = [...around.messages].reverse().find((m) => !isOwnCopy(m.body));
    const origin = received && originOf(received.body);
    if (origin) ctx.receipts.read(session, peer, received!.seq, origin.msgId);
  }
  return { readSeq: result.readSeq, unread: result.unread, eventSeq: result.eventSeq ?? 0 };
}

/**
 * The read event for the user's other devices: an own entry (origin_device first, like an own
 * copy), `event` {"type":"read","peer":...,"seq":...}, from the user, to the peer.
 */
export function readEventBody(session: Pick<LocalSession, 'uid' | 'deviceId'>, peer: string, seq: number, storedAt: number): Uint8Array {
  const body = encodeMessageRequest({ from: session.uid, to: peer, storedAt, event: JSON.stringify({ type: 'read', peer, seq }) });
  return ownCopyBody(body, session.deviceId);
}

/** The conversation a request names, as the chat handler keys it (a user name normalised like a recipient's). */
function peerOf(ctx: ServerContext, request: ConversationRequest): string | undefined {
  if (!request.peer) return undefined;
  return ctx.recipients?.uidOf(request.peer) ?? request.peer;
}

function respond(conn: Connection, sequence: UInt64 | undefined, session: LocalSession, outcome: ConversationResponse | Failure): void {
  const response: ConversationResponse =
    'reason' in outcome ? { result: false, code: resultCodeFor(outcome.code), info: outcome.reason, errorCode: outcome.code } : { result: true, code: ResultCode.SUCCESS, info: 'ok', ...outcome };
  conn.send({ type: HeadType.CONVERSATION_RESPONSE, sequence, sessionId: session.sessionId, conversationResponse: response });
}
