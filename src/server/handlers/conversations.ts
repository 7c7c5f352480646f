// CONVERSATION_REQUEST (PROTOCOL.md §14): the session user's chat list, a history page of one
// conversation, or a read mark. All three read or write the user's own inbox only (the store
// keeps the list in the same step as every message), so no request can name another user's
// conversations. A read mark that moves the position appends a read event to the inbox, an own
// entry delivered like an own copy: the user's other devices that asked for own copies get it
// live and at replay, the marking device and the others pass over it.
//
// A request costs one message of the sender's rate (MessageRate), and the response is bounded by
// the frame limit: a page holds what fits, and `next_before` says where the next one starts.

import { encodeMessageRequest, isOwnCopy, ownCopyBody, uint64Number, uint64String } from '../../protocol/codec.js';
import { inboxEventBody, tombstoneBody } from '../../protocol/recall.js';
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

/** A RECALL looks for the message among this many of the conversation's newest (in each of the two inboxes). */
export const RECALL_SCAN = 1000;
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
      work = recall(ctx, session, request);
      break;
    default:
      respond(conn, sequence, session, { code: 'SB_ERR_BAD_REQUEST', reason: `conversationRequest.op must be 1 (LIST), 2 (HISTORY), 3 (READ), 4 (RECALL) or 6 (READERS), got ${request.op ?? 0}` });
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
 * RECALL: the message `msg_id` this user sent `peer` becomes a tombstone in both inboxes (the
 * peer's, and the own copy in this user's), each with a recall event for the devices, in the
 * same store step as its tombstone. Idempotent: a repeat (after a lost answer) finds the
 * tombstones and stores nothing. The two inboxes are two steps: a repeat completes one the
 * first left undone.
 */
async function recall(ctx: ServerContext, session: LocalSession, request: ConversationRequest): Promise<ConversationResponse | Failure> {
  const peer = peerOf(ctx, request);
  const msgId = uint64String(request.msgId ?? 0);
  if (peer === undefined || msgId === '0') return { code: 'SB_ERR_BAD_REQUEST', reason: 'a RECALL request needs conversationRequest.peer and msg_id' };
  const windowMs = ctx.limits.recallWindowMs;
  if (windowMs === 0) return { code: 'SB_ERR_RECALL_EXPIRED', reason: 'recall is off on this server (--recall-window-s 0)' };
  const uid = session.uid;
  const theirs = await findSent(ctx, peer, uid, msgId, uid, false);
  // The own copy (none for a note to oneself, or from a worker started with --no-own-copies).
  const mine = peer === uid ? undefined : await findSent(ctx, uid, peer, msgId, uid, true);
  const found = theirs ?? mine;
  if (found === undefined) return { code: 'SB_ERR_NO_MESSAGE', reason: `no message of yours with msg_id ${msgId} among the latest ${RECALL_SCAN} of the conversation with ${quoted(peer)}` };
  const age = Date.now() - found.storedAt;
  if (age > windowMs) return { code: 'SB_ERR_RECALL_EXPIRED', reason: `the message was stored ${Math.round(age / 1000)} s ago; it can be recalled for ${windowMs / 1000} s` };
  const tombstone = tombstoneBody(storedMessage(found));
  const now = Date.now();
  const event = (other: string, seq: number) => inboxEventBody(JSON.stringify({ type: 'recall', peer: other, seq, msgId }), { from: uid, to: peer, storedAt: now });
  if (theirs) {
    const body = event(uid, theirs.seq);
    const done = await ctx.inbox.rewrite(peer, theirs.seq, tombstone, { uid: peer, sender: uid, msgId: '0', body });
    if (done.eventSeq !== undefined) ctx.router.deliver(peer, done.eventSeq, body, done.epoch);
  }
  let eventSeq = 0;
  if (mine) {
    // The user's own entry: its other devices with own_copies get it, not this one (it has the answer).
    const body = ownCopyBody(event(peer, mine.seq), session.deviceId);
    const done = await ctx.inbox.rewrite(uid, mine.seq, ownCopyBody(tombstone, mine.originDevice), { uid, sender: uid, msgId: '0', body });
    if (done.eventSeq !== undefined) {
      ctx.router.deliver(uid, done.eventSeq, body, done.epoch);
      eventSeq = done.eventSeq;
    }
  }
  return { seq: theirs?.seq ?? 0, eventSeq };
}

interface Sent extends StoredMessage {
  /** An own copy's origin_device. */
  originDevice: string;
}

/**
 * The message `msgId` from `from` in `owner`'s conversation with `conversation` (`own`: its own
 * copy), among that conversation's newest RECALL_SCAN messages.
 */
async function findSent(ctx: ServerContext, owner: string, conversation: string, msgId: string, from: string, own: boolean): Promise<Sent | undefined> {
  let before = 0;
  for (let scanned = 0; scanned < RECALL_SCAN; ) {
    const page = await ctx.inbox.history(owner, conversation, before, MAX_PAGE);
    for (let i = page.messages.length - 1; i >= 0; i--) {
      const m = page.messages[i]!;
      if (isOwnCopy(m.body) !== own) continue;
      const origin = originOf(m.body);
      if (origin?.from !== from || uint64String(origin.msgId) !== msgId) continue;
      return { ...m, originDevice: own ? (storedMessage(m).originDevice ?? '') : '' };
    }
    scanned += page.messages.length;
    if (!page.more || page.messages.length === 0) return undefined;
    before = page.messages[0]!.seq;
  }
  return undefined;
}

function quoted(peer: string): string {
  return JSON.stringify(peer.length > 40 ? `${peer.slice(0, 40)}...` : peer);
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
