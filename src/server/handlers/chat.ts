// MESSAGE_REQUEST: the sender is the session's user, whatever `from` says. The message is
// appended to the recipient's inbox; only once the append is confirmed does the sender get its
// MESSAGE_RESPONSE (with the assigned sequence), and then the recipient's online devices get
// it live. Appends are issued in arrival order and confirmed in that order, so one sender's
// messages keep their order without waiting for each other. A store that answers append()
// synchronously (the memory one) has the whole message handled in one go, without a promise.
//
// Before the append: the sender's message rate (MessageRate), and, where the worker knows the
// accounts (RecipientCheck), that the recipient exists. A recipient not yet known to exist is
// looked up asynchronously; the returned promise makes the connection hold its later frames,
// so their responses keep their order.
//
// Own copies (LoginRequest.own_copies, PROTOCOL.md §14): a copy goes into the sender's own inbox
// for the sender's other devices, in the same store call as the recipient's (InboxStore.
// appendPair: one script with Redis), and the response carries the copy's seq (own_seq).

import { bodyIdentity, ownCopyBody, setsServerFields, storedRequestBody, uint64String } from '../../protocol/codec.js';
import { deliveryFits, storedResponseFrame } from '../../protocol/chat-frames.js';
import { messageResponse } from '../../protocol/messages.js';
import type { ImMessage, MessageRequest, UInt64 } from '../../protocol/types.js';
import { isPromise, type AppendRequest, type AppendResult } from '../../inbox/inbox-store.js';
import { isSwitchboardError } from '../../errors.js';
import type { LocalSession } from '../../session/local-session.js';
import type { Connection } from '../connection.js';
import type { ServerContext } from '../context.js';
import { handleGroupChat } from './group-chat.js';

export function handleChat(ctx: ServerContext, conn: Connection, session: LocalSession, message: ImMessage): void | Promise<void> {
  const request = message.messageRequest;
  const sequence = message.sequence;
  const sessionId = session.sessionId;
  // First, so that a flood costs the least: a few operations on the session's numbers.
  const refusal = ctx.rate.take(session, conn.lastInboundAt);
  if (refusal !== undefined) {
    conn.send(messageResponse(sequence, sessionId, refusal));
    if (ctx.rate.flooded(session)) conn.close(ctx.rate.flood);
    return;
  }
  // Server-set fields, present with a value (an empty one decodes as absent): on a group message as on a chat one.
  if (request && setsServerFields(request)) {
    conn.send(messageResponse(sequence, sessionId, { code: 'SB_ERR_BAD_REQUEST', reason: 'messageRequest.origin_device, event, recalled and edited are set by the server only' }));
    return;
  }
  if (request?.group) {
    handleGroupChat(ctx, conn, session, sequence, request);
    return;
  }
  if (!request || !request.to) {
    conn.send(messageResponse(sequence, sessionId, { code: 'SB_ERR_BAD_REQUEST', reason: 'MESSAGE_REQUEST needs messageRequest.to' }));
    return;
  }
  if (request.from && request.from !== session.uid) {
    conn.send(messageResponse(sequence, sessionId, { code: 'SB_ERR_SENDER_MISMATCH', reason: `from must be ${session.uid} or empty` }));
    return;
  }
  const recipients = ctx.recipients;
  if (recipients === undefined) {
    store(ctx, conn, session, sequence, request, request.to);
    return;
  }
  const to = recipients.uidOf(request.to);
  if (to === undefined) {
    unknownRecipient(conn, sequence, sessionId, request.to);
    return;
  }
  if (recipients.known(to)) {
    store(ctx, conn, session, sequence, request, to);
    return;
  }
  return recipients.exists(to).then(
    (exists) => {
      // Closed meanwhile: nothing was stored, and no answer can reach the sender.
      if (conn.state !== 'open') return;
      if (exists) store(ctx, conn, session, sequence, request, to);
      else unknownRecipient(conn, sequence, sessionId, to);
    },
    (err: unknown) => {
      conn.log.error({ err }, 'recipient lookup failed');
      conn.send(messageResponse(sequence, sessionId, { code: 'SB_ERR_STORE_UNAVAILABLE', reason: 'the recipient could not be looked up; send it again with the same msg_id' }));
    },
  );
}

/** Appends the message to `to`'s inbox, then answers and delivers. */
function store(ctx: ServerContext, conn: Connection, session: LocalSession, sequence: UInt64 | undefined, request: MessageRequest, to: string): void {
  const sessionId = session.sessionId;
  // `from` is the sender's own; `seq` is assigned by the inbox and `stored_at` is now, never
  // what the sender says.
  const body = storedRequestBody(request, session.uid, Date.now(), to);
  // A message to oneself is in the sender's inbox already.
  const own = ctx.limits.ownCopies && to !== session.uid ? ownCopyBody(body, session.deviceId) : undefined;
  if (!deliveryFits(body.length, Buffer.byteLength(to), ctx.limits.maxFrameLength) || (own && !deliveryFits(own.length, Buffer.byteLength(session.uid), ctx.limits.maxFrameLength))) {
    conn.send(messageResponse(sequence, sessionId, { code: 'SB_ERR_MESSAGE_TOO_LARGE', reason: `the delivered message would exceed ${ctx.limits.maxFrameLength} bytes` }));
    return;
  }
  // Only clients that speak the extensions (acks) know msg_id is a dedupe key; an original
  // client may reuse ids, so its messages are never deduplicated.
  const msgId = session.acks ? uint64String(request.msgId) : '0';
  // Each message is listed in its conversation (PROTOCOL.md §14): the recipient's with the sender,
  // the copy in the sender's with the recipient; a note to oneself is the sender's own, and read.
  const append: AppendRequest = { uid: to, sender: session.uid, msgId, body, conversation: session.uid, own: to === session.uid };
  if (own) {
    storeWithCopy(ctx, conn, session, sequence, to, append, { uid: session.uid, sender: ownSender(session.uid, to), msgId, body: own, conversation: to, own: true });
    return;
  }
  let result: AppendResult | Promise<AppendResult>;
  try {
    result = ctx.inbox.append(append);
  } catch (err) {
    storeFailed(conn, sequence, sessionId, err);
    return;
  }
  if (!isPromise(result)) {
    stored(ctx, conn, session, sequence, to, body, result);
    return;
  }
  conn.startTask();
  result.then(
    (result) => {
      stored(ctx, conn, session, sequence, to, body, result);
      conn.endTask();
    },
    (err: unknown) => {
      storeFailed(conn, sequence, sessionId, err);
      conn.endTask();
    },
  );
}

/** Appends the message to `to`'s inbox and its own copy to the sender's (InboxStore.appendPair), then answers and delivers both. */
function storeWithCopy(ctx: ServerContext, conn: Connection, session: LocalSession, sequence: UInt64 | undefined, to: string, append: AppendRequest, own: AppendRequest): void {
  let results: [AppendResult, AppendResult] | Promise<[AppendResult, AppendResult]>;
  try {
    results = ctx.inbox.appendPair(append, own);
  } catch (err) {
    storeFailed(conn, sequence, session.sessionId, err);
    return;
  }
  if (!isPromise(results)) {
    storedWithCopy(ctx, conn, session, sequence, to, append.body, own.body, results);
    return;
  }
  conn.startTask();
  results.then(
    (results) => {
      storedWithCopy(ctx, conn, session, sequence, to, append.body, own.body, results);
      conn.endTask();
    },
    (err: unknown) => {
      storeFailed(conn, sequence, session.sessionId, err);
      conn.endTask();
    },
  );
}

/**
 * The dedupe sender of an own copy: (sender, recipient), since a msg_id is unique per sender and
 * recipient (PROTOCOL.md §5), and apart from the sender's messages to itself (keyed by its uid alone).
 */
function ownSender(uid: string, to: string): string {
  // The last one made is kept: a connection's frames are handled in a run, mostly to one peer,
  // and the same string object keys the dedupe window's lookups without being hashed again.
  if (uid !== lastOwner || to !== lastPeer) {
    lastOwner = uid;
    lastPeer = to;
    lastOwnSender = `${uid}\0${to}`;
  }
  return lastOwnSender;
}
let lastOwner = '';
let lastPeer = '';
let lastOwnSender = '\0';

function storedWithCopy(ctx: ServerContext, conn: Connection, session: LocalSession, sequence: UInt64 | undefined, to: string, body: Uint8Array, own: Uint8Array, [result, ownResult]: [AppendResult, AppendResult]): void {
  conn.sendFrame(storedResponseFrame(sequence, session.sessionId, result.seq, result.duplicate, ownResult.seq));
  // One of the two a duplicate, the other new: the resend after a send that stored only one of
  // them (a refused copy, a failed Redis call). Nothing was delivered then (the refusal was the
  // answer), so both are now; a device that has one reads its inbox and is sent nothing twice.
  // Both duplicates: see stored().
  if (result.duplicate && ownResult.duplicate) {
    ctx.resendNudges.nudge(session, to, conn.lastInboundAt);
    ctx.resendNudges.nudge(session, session.uid, conn.lastInboundAt);
    return;
  }
  // The copy is the same message (bodyIdentity leaves origin_device out): its identity is worked out once.
  const id = bodyIdentity(body);
  ctx.router.deliver(to, result.seq, body, result.epoch, id);
  // To every device of the sender, this one included: delivery passes over it for the device that sent it.
  ctx.router.deliver(session.uid, ownResult.seq, own, ownResult.epoch, id);
}

/**
 * The append is confirmed: answer the sender, then deliver. A duplicate is not delivered (its
 * body is the resend's, not the one stored), but its recipient's sessions are nudged to read their
 * inbox: the send that stored it may have been answered as failed (a Redis call that timed out
 * and ran afterwards, redis-client.ts), and then nothing delivered it. Where that seq was taken
 * again after a failover to a lagging replica, the read is what shows a session sent the lost
 * message there that its inbox forked (delivery.ts); without it the next message would come as
 * the one after the session's position. A session that has it reads nothing new.
 */
function stored(ctx: ServerContext, conn: Connection, session: LocalSession, sequence: UInt64 | undefined, to: string, body: Uint8Array, result: AppendResult): void {
  conn.sendFrame(storedResponseFrame(sequence, session.sessionId, result.seq, result.duplicate));
  if (result.duplicate) ctx.resendNudges.nudge(session, to, conn.lastInboundAt);
  else ctx.router.deliver(to, result.seq, body, result.epoch);
}

function storeFailed(conn: Connection, sequence: UInt64 | undefined, sessionId: string, err: unknown): void {
  // At its memory bound the store refuses: an answer for the sender, not a fault (the store
  // logs the bound being reached, not every refusal).
  if (isSwitchboardError(err) && err.code === 'SB_ERR_STORE_FULL') {
    conn.send(messageResponse(sequence, sessionId, { code: err.code, reason: err.message }));
    return;
  }
  conn.log.error({ err }, 'inbox append failed');
  conn.send(messageResponse(sequence, sessionId, { code: 'SB_ERR_STORE_UNAVAILABLE', reason: 'the message could not be stored; send it again with the same msg_id' }));
}

function unknownRecipient(conn: Connection, sequence: UInt64 | undefined, sessionId: string, to: string): void {
  const name = to.length > 40 ? `${to.slice(0, 40)}...` : to;
  conn.send(messageResponse(sequence, sessionId, { code: 'SB_ERR_UNKNOWN_RECIPIENT', reason: `no user ${JSON.stringify(name)}; nothing stored` }));
}
