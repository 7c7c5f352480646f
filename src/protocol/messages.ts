// Builders for the envelopes the server sends, so every handler fills them the same way.

import { resultNameOf, type ErrorCode } from '../errors.js';
import { HeadType, NotificationType, ResultCode, type ImMessage, type UInt64 } from './types.js';

/** The result code an original client understands best for `code` (the error catalogue's). */
export function resultCodeFor(code: ErrorCode): ResultCode {
  return ResultCode[resultNameOf(code)];
}

export interface Failure {
  code: ErrorCode;
  reason: string;
}

/** Where the replay after a login starts (LoginResponse extension fields). */
export interface SyncStart {
  inboxHead: number;
  syncFrom: number;
  gap: boolean;
  /** The inbox epoch `inboxHead` and `syncFrom` belong to. */
  epoch: number;
  /** The device's position was of another epoch or above the head: the replay starts at the oldest retained message. */
  reset: boolean;
}

/** `heartbeatIntervalMs`: the worker's interval, told to a client that logged in (so it heartbeats often enough). */
export function loginResponse(sequence: UInt64 | undefined, sessionId: string, outcome: Failure | SyncStart, heartbeatIntervalMs?: number): ImMessage {
  return {
    type: HeadType.LOGIN_RESPONSE,
    sequence,
    sessionId,
    loginResponse:
      'code' in outcome
        ? { result: false, code: resultCodeFor(outcome.code), info: outcome.reason, errorCode: outcome.code }
        : {
            result: true,
            code: ResultCode.SUCCESS,
            info: 'login ok',
            inboxHead: outcome.inboxHead,
            syncFrom: outcome.syncFrom,
            gap: outcome.gap,
            inboxEpoch: outcome.epoch,
            reset: outcome.reset,
            heartbeatIntervalMs,
          },
  };
}

/** Where a chat message was stored (MessageResponse extension fields). */
export interface Stored {
  seq: number;
  duplicate: boolean;
}

export function messageResponse(sequence: UInt64 | undefined, sessionId: string, outcome: Failure | Stored): ImMessage {
  return {
    type: HeadType.MESSAGE_RESPONSE,
    sequence,
    sessionId,
    messageResponse:
      'code' in outcome
        ? { result: false, code: resultCodeFor(outcome.code), info: outcome.reason, errorCode: outcome.code }
        : { result: true, code: ResultCode.SUCCESS, info: 'ok', seq: outcome.seq, duplicate: outcome.duplicate },
  };
}

export function logoutResponse(sequence: UInt64 | undefined, sessionId: string): ImMessage {
  return { type: HeadType.LOGOUT_RESPONSE, sequence, sessionId };
}

/** Notification JSON is `{type, data}` as in the original protocol. */
export function notification(type: NotificationType, data: unknown, sessionId = ''): ImMessage {
  const now = Date.now();
  return {
    type: HeadType.MESSAGE_NOTIFICATION,
    sessionId,
    notification: { noId: now, json: JSON.stringify({ type, data }), timestamp: String(now) },
  };
}

/** The last frame before the server closes a connection: says which error and why. */
export function closingNotification(failure: Failure, sessionId = ''): ImMessage {
  return notification(NotificationType.CLOSING, { code: failure.code, reason: failure.reason }, sessionId);
}
