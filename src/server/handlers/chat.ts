// MESSAGE_REQUEST: the sender is the session's user, whatever `from` says. The message is
// appended to the recipient's inbox; only once the append is confirmed does the sender get its
// MESSAGE_RESPONSE (with the assigned sequence), and then the recipient's online devices get
// it live. Appends are issued in arrival order and confirmed in that order, so one sender's
// messages keep their order without waiting for each other.

import { encodeMessageRequest, uint64String } from '../../protocol/codec.js';
import { DELIVERY_OVERHEAD, storedResponseFrame } from '../../protocol/chat-frames.js';
import { messageResponse } from '../../protocol/messages.js';
import type { ImMessage } from '../../protocol/types.js';
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
  request.from = session.uid;
  delete request.seq; // assigned by the inbox, never by the sender
  const body = encodeMessageRequest(request);
  // The delivery must fit a frame, and so must the forward to another worker (which adds `to`).
  if (body.length + DELIVERY_OVERHEAD + Buffer.byteLength(to) > ctx.limits.maxFrameLength) {
    conn.send(messageResponse(sequence, sessionId, { code: 'SB_ERR_MESSAGE_TOO_LARGE', reason: `the delivered message would exceed ${ctx.limits.maxFrameLength} bytes` }));
    return;
  }
  // Only clients that speak the extensions (acks) know msg_id is a dedupe key; an original
  // client may reuse ids, so its messages are never deduplicated.
  const msgId = session.acks ? uint64String(request.msgId) : '0';
  conn.startTask();
  ctx.inbox.append({ uid: to, sender: session.uid, msgId, body }).then(
    (stored) => {
      conn.sendFrame(storedResponseFrame(sequence, sessionId, stored.seq, stored.duplicate));
      if (!stored.duplicate) ctx.router.deliver(to, stored.seq, body);
      conn.endTask();
    },
    (err: unknown) => {
      conn.log.error({ err }, 'inbox append failed');
      conn.send(messageResponse(sequence, sessionId, { code: 'SB_ERR_STORE_UNAVAILABLE', reason: 'the message could not be stored; send it again with the same msg_id' }));
      conn.endTask();
    },
  );
}
