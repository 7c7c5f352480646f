// MESSAGE_REQUEST: the sender is the session's user, whatever `from` says. The message is
// appended to the recipient's inbox; only once the append is confirmed does the sender get its
// MESSAGE_RESPONSE (with the assigned sequence), and then the recipient's online devices get
// it live. Appends are issued in arrival order and confirmed in that order, so one sender's
// messages keep their order without waiting for each other. A store that can append
// synchronously (the memory one) is used so, and the whole message is handled in one go.

import { storedRequestBody, uint64String } from '../../protocol/codec.js';
import { DELIVERY_OVERHEAD, storedResponseFrame } from '../../protocol/chat-frames.js';
import { messageResponse } from '../../protocol/messages.js';
import type { ImMessage, UInt64 } from '../../protocol/types.js';
import type { AppendResult } from '../../inbox/inbox-store.js';
import type { LocalSession } from '../../session/local-session.js';
import type { Connection } from '../connection.js';
import type { ServerContext } from '../context.js';

export function handleChat(ctx: ServerContext, conn: Connection, session: LocalSession, message: ImMessage): void {
  const request = message.messageRequest;
  const sequence = message.sequence;
  const sessionId = session.sessionId;
  if (!request || !request.to) {
    conn.send(messageResponse(sequence, sessionId, { code: 'SB_ERR_BAD_REQUEST', reason: 'MESSAGE_REQUEST needs messageRequest.to' }));
    return;
  }
  if (request.from && request.from !== session.uid) {
    conn.send(messageResponse(sequence, sessionId, { code: 'SB_ERR_SENDER_MISMATCH', reason: `from must be ${session.uid} or empty` }));
    return;
  }
  const to = request.to;
  // `from` is the sender's own; `seq` is assigned by the inbox, never by the sender.
  const body = storedRequestBody(request, session.uid);
  // The delivery must fit a frame, and so must the forward to another worker (which adds `to`).
  if (body.length + DELIVERY_OVERHEAD + Buffer.byteLength(to) > ctx.limits.maxFrameLength) {
    conn.send(messageResponse(sequence, sessionId, { code: 'SB_ERR_MESSAGE_TOO_LARGE', reason: `the delivered message would exceed ${ctx.limits.maxFrameLength} bytes` }));
    return;
  }
  // Only clients that speak the extensions (acks) know msg_id is a dedupe key; an original
  // client may reuse ids, so its messages are never deduplicated.
  const msgId = session.acks ? uint64String(request.msgId) : '0';
  const append = { uid: to, sender: session.uid, msgId, body };
  const inbox = ctx.inbox;
  if (inbox.appendNow) {
    let result: AppendResult;
    try {
      result = inbox.appendNow(append);
    } catch (err) {
      storeFailed(conn, sequence, sessionId, err);
      return;
    }
    stored(ctx, conn, sequence, sessionId, to, body, result);
    return;
  }
  conn.startTask();
  inbox.append(append).then(
    (result) => {
      stored(ctx, conn, sequence, sessionId, to, body, result);
      conn.endTask();
    },
    (err: unknown) => {
      storeFailed(conn, sequence, sessionId, err);
      conn.endTask();
    },
  );
}

/** The append is confirmed: answer the sender, then deliver. */
function stored(ctx: ServerContext, conn: Connection, sequence: UInt64 | undefined, sessionId: string, to: string, body: Uint8Array, result: AppendResult): void {
  conn.sendFrame(storedResponseFrame(sequence, sessionId, result.seq, result.duplicate));
  if (!result.duplicate) ctx.router.deliver(to, result.seq, body, result.epoch);
}

function storeFailed(conn: Connection, sequence: UInt64 | undefined, sessionId: string, err: unknown): void {
  conn.log.error({ err }, 'inbox append failed');
  conn.send(messageResponse(sequence, sessionId, { code: 'SB_ERR_STORE_UNAVAILABLE', reason: 'the message could not be stored; send it again with the same msg_id' }));
}
