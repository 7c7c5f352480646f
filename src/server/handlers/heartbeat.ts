// HEART_BEAT: echoed unchanged, before and after login. Receiving it already refreshed the
// connection's idle clock.

import type { ImMessage } from '../../protocol/types.js';
import type { Connection } from '../connection.js';

export function handleHeartbeat(conn: Connection, message: ImMessage): void {
  conn.send(message);
}
