// MESSAGE_REQUEST: the sender is the session's user, whatever `from` says; the message goes to
// every local session of `to` as the same MESSAGE_REQUEST envelope (encoded once), and the
// sender gets a MESSAGE_RESPONSE echoing its `sequence`. Synchronous, so one sender's messages
// leave in the order they arrived.

import { encodeMessageFrame } from '../../protocol/codec.js';
import { messageResponse } from '../../protocol/messages.js';
import type { ImMessage } from '../../protocol/types.js';
import type { LocalSession } from '../../session/local-session.js';
import type { Connection } from '../connection.js';
import type { ServerContext } from '../context.js';

export function handleChat(ctx: ServerContext, conn: Connection, session: LocalSession, message: ImMessage): void {
  const request = message.messageRequest;
  const sequence = message.sequence;
  if (!request || !request.to) {
    conn.send(messageResponse(sequence, session.sessionId, { code: 'SB_ERR_BAD_REQUEST', reason: 'MESSAGE_REQUEST needs messageRequest.to' }));
    return;
  }
  if (request.from && request.from !== session.uid) {
    conn.send(messageResponse(sequence, session.sessionId, { code: 'SB_ERR_SENDER_MISMATCH', reason: `from must be ${session.uid} or empty` }));
    return;
  }
  const targets = ctx.sessions.byUser(request.to);
  if (targets.length === 0) {
    conn.send(messageResponse(sequence, session.sessionId, { code: 'SB_ERR_RECIPIENT_OFFLINE', reason: `${request.to} has no online session` }));
    return;
  }
  // Reuse the decoded envelope: the sender's session id is not the recipient's business.
  request.from = session.uid;
  message.sessionId = '';
  const frame = encodeMessageFrame(message);
  for (const target of targets) target.outbound.sendFrame(frame);
  conn.send(messageResponse(sequence, session.sessionId));
}
