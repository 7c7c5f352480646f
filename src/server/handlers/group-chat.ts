// MESSAGE_REQUEST with `group`: a message to a group. The sender must have logged in with
// `groups`; the GroupStore checks that it is a member and appends the message to the group's
// log (one write, whatever the group's size). Only then is the sender answered, with the
// group's seq, and the entry fanned out (GroupDelivery, and one PEER_GROUP per other worker).
// Appends of one connection are issued in arrival order; the connection counts them as tasks,
// so a flood pauses its reading instead of queueing without bound.

import { storedRequestBody, uint64String } from '../../protocol/codec.js';
import { deliveryFits, storedResponseFrame } from '../../protocol/chat-frames.js';
import { messageResponse, type Failure } from '../../protocol/messages.js';
import type { MessageRequest, UInt64 } from '../../protocol/types.js';
import { isGroupId } from '../../groups/group-store.js';
import { isSwitchboardError, type ErrorCode } from '../../errors.js';
import type { LocalSession } from '../../session/local-session.js';
import type { Connection } from '../connection.js';
import type { ServerContext } from '../context.js';

/** Refusals of the store that are answers to the sender, not faults. */
const ANSWERS = new Set<ErrorCode>(['SB_ERR_GROUP_NOT_FOUND', 'SB_ERR_GROUP_NOT_MEMBER', 'SB_ERR_GROUP_DISSOLVED', 'SB_ERR_BAD_GROUP', 'SB_ERR_MESSAGE_TOO_LARGE']);

export function handleGroupChat(ctx: ServerContext, conn: Connection, session: LocalSession, sequence: UInt64 | undefined, request: MessageRequest): void {
  const sessionId = session.sessionId;
  const refuse = (failure: Failure): void => conn.send(messageResponse(sequence, sessionId, failure));
  const group = request.group!;
  const groups = ctx.groups;
  if (groups === undefined || session.groups === undefined) {
    refuse({ code: 'SB_ERR_BAD_REQUEST', reason: 'group messages need a login with groups (LoginRequest.groups)' });
    return;
  }
  if (!isGroupId(group)) {
    refuse({ code: 'SB_ERR_BAD_GROUP', reason: 'messageRequest.group is not a group id' });
    return;
  }
  if (request.to && request.to !== group) {
    refuse({ code: 'SB_ERR_BAD_REQUEST', reason: 'messageRequest.to must be empty or the group id' });
    return;
  }
  if (request.event) {
    refuse({ code: 'SB_ERR_BAD_REQUEST', reason: 'messageRequest.event is set by the server only' });
    return;
  }
  const body = storedRequestBody(request, session.uid, Date.now(), group);
  if (!deliveryFits(body.length, Buffer.byteLength(group), ctx.limits.maxFrameLength)) {
    refuse({ code: 'SB_ERR_MESSAGE_TOO_LARGE', reason: `the delivered message would exceed ${ctx.limits.maxFrameLength} bytes` });
    return;
  }
  conn.startTask();
  const issue = groups.delivery.appendStarted(session, group);
  groups.store.append(group, session.uid, uint64String(request.msgId), body, ctx.receipts.sharing(session)).then(
    (result) => {
      conn.sendFrame(storedResponseFrame(sequence, sessionId, result.seq, result.duplicate));
      groups.delivery.appendEnded(session, group, issue, result.seq);
      // A resend found its first copy stored: the worker that stored it may have died before
      // forwarding it, so the group's sessions that lack it are told to read it (not sent this
      // body: a resend's content is not what was stored).
      ctx.router.deliverGroup(group, result.seq, result.duplicate ? undefined : body, session);
      conn.endTask();
    },
    (err: unknown) => {
      groups.delivery.appendEnded(session, group, issue, undefined);
      if (isSwitchboardError(err) && ANSWERS.has(err.code)) {
        refuse({ code: err.code, reason: err.message });
      } else {
        conn.log.error({ err, group }, 'group append failed');
        refuse({ code: 'SB_ERR_STORE_UNAVAILABLE', reason: 'the message could not be stored; send it again with the same msg_id' });
      }
      conn.endTask();
    },
  );
}
