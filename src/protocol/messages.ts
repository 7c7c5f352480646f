// Builders for the envelopes the server sends, so every handler fills them the same way.

import type { ErrorCode } from '../errors.js';
import { HeadType, NotificationType, ResultCode, type ImMessage, type UInt64 } from './types.js';

/** Maps an error code to the result code an original client understands best. */
export function resultCodeFor(code: ErrorCode): ResultCode {
  switch (code) {
    case 'SB_ERR_NO_TOKEN':
      return ResultCode.NO_TOKEN;
    case 'SB_ERR_TOKEN_INVALID':
    case 'SB_ERR_TOKEN_EXPIRED':
    case 'SB_ERR_TOKEN_MISMATCH':
      return ResultCode.AUTH_FAILED;
    case 'SB_ERR_BAD_REQUEST':
    case 'SB_ERR_ALREADY_LOGGED_IN':
    case 'SB_ERR_MESSAGE_TOO_LARGE':
      return ResultCode.BAD_REQUEST;
    case 'SB_ERR_SENDER_MISMATCH':
      return ResultCode.SENDER_MISMATCH;
    case 'SB_ERR_TOO_MANY_DEVICES':
      return ResultCode.TOO_MANY_DEVICES;
    case 'SB_ERR_NOT_LOGGED_IN':
      return ResultCode.NOT_LOGGED_IN;
    case 'SB_ERR_RATE_LIMITED':
      return ResultCode.RATE_LIMITED;
    case 'SB_ERR_STORE_FULL':
      return ResultCode.STORE_FULL;
    case 'SB_ERR_UNKNOWN_RECIPIENT':
      return ResultCode.UNKNOWN_RECIPIENT;
    default:
      return ResultCode.UNKNOWN_ERROR;
  }
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
