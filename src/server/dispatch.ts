// The one switch from message type to handler, and the rule that nothing but LOGIN_REQUEST and
// HEART_BEAT is accepted before login; any type not handled here closes the connection with
// SB_ERR_UNKNOWN_TYPE.

import { SwitchboardError } from '../errors.js';
import { HeadType, type ImMessage } from '../protocol/types.js';
import type { Connection } from './connection.js';
import type { ServerContext } from './context.js';
import { handleAck } from './handlers/ack.js';
import { handleChat } from './handlers/chat.js';
import { handleConversations } from './handlers/conversations.js';
import { handleHeartbeat } from './handlers/heartbeat.js';
import { handleLogin } from './handlers/login.js';
import { handleLogout } from './handlers/logout.js';

export function dispatch(ctx: ServerContext, conn: Connection, message: ImMessage): void | Promise<void> {
  switch (message.type) {
    case HeadType.LOGIN_REQUEST:
      return handleLogin(ctx, conn, message);
    case HeadType.HEART_BEAT:
      return handleHeartbeat(conn, message);
    case HeadType.MESSAGE_REQUEST:
      return handleChat(ctx, conn, requireSession(conn, message), message);
    case HeadType.LOGOUT_REQUEST:
      return handleLogout(conn, requireSession(conn, message), message);
    case HeadType.MESSAGE_ACK:
      return handleAck(ctx, requireSession(conn, message), message);
    case HeadType.CONVERSATION_REQUEST:
      return handleConversations(ctx, conn, requireSession(conn, message), message);
    default:
      throw new SwitchboardError('SB_ERR_UNKNOWN_TYPE', `message type ${message.type} is not accepted from a client`);
  }
}

function requireSession(conn: Connection, message: ImMessage) {
  const session = conn.session;
  if (!session) throw new SwitchboardError('SB_ERR_NOT_LOGGED_IN', `message type ${message.type} sent before login`);
  return session;
}
