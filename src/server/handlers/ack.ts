// MESSAGE_ACK: the device has processed every inbox message up to `seq`. Cumulative, so a
// lost ack is covered by the next one; no answer is sent.

import type { ImMessage } from '../../protocol/types.js';
import type { LocalSession } from '../../session/local-session.js';
import type { ServerContext } from '../context.js';

export function handleAck(ctx: ServerContext, session: LocalSession, message: ImMessage): void {
  const seq = Number(message.ack?.seq ?? 0);
  if (seq > 0) ctx.delivery.acknowledge(session, seq);
}
