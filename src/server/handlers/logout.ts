// LOGOUT_REQUEST: answered, then the connection is closed; the server's close handler removes
// the session everywhere, exactly as for a dropped connection.

import { logoutResponse } from '../../protocol/messages.js';
import type { ImMessage } from '../../protocol/types.js';
import type { LocalSession } from '../../session/local-session.js';
import type { Connection } from '../connection.js';

export function handleLogout(conn: Connection, session: LocalSession, message: ImMessage): void {
  conn.send(logoutResponse(message.sequence, session.sessionId));
  conn.log.info('logout');
  conn.close();
}
