// MESSAGE_ACK: the device has processed every inbox message up to `seq` (with `group`: every
// entry of that group's log up to `seq`). Cumulative, so a lost ack is covered by the next one;
// no answer is sent. An ack of a group the device has no stream in is ignored.

import { uint64Number } from '../../protocol/codec.js';
import type { ImMessage } from '../../protocol/types.js';
import type { LocalSession } from '../../session/local-session.js';
import type { ServerContext } from '../context.js';

export function handleAck(ctx: ServerContext, session: LocalSession, message: ImMessage): void {
  const seq = uint64Number(message.ack?.seq);
  if (seq <= 0) return;
  const group = message.ack?.group;
  if (group) ctx.groups?.delivery.acknowledge(session, group, seq);
  else ctx.delivery.acknowledge(session, seq);
}
