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
      return ResultCode.BAD_REQUEST;
    case 'SB_ERR_SENDER_MISMATCH':
      return ResultCode.SENDER_MISMATCH;
    case 'SB_ERR_RECIPIENT_OFFLINE':
      return ResultCode.RECIPIENT_OFFLINE;
    case 'SB_ERR_TOO_MANY_DEVICES':
      return ResultCode.TOO_MANY_DEVICES;
    case 'SB_ERR_NOT_LOGGED_IN':
      return ResultCode.NOT_LOGGED_IN;
    default:
      return ResultCode.UNKNOWN_ERROR;
  }
}

export interface Failure {
  code: ErrorCode;
  reason: string;
}

export function loginResponse(sequence: UInt64 | undefined, sessionId: string, failure?: Failure): ImMessage {
  return {
    type: HeadType.LOGIN_RESPONSE,
    sequence,
    sessionId,
    loginResponse: failure
      ? { result: false, code: resultCodeFor(failure.code), info: failure.reason, errorCode: failure.code }
      : { result: true, code: ResultCode.SUCCESS, info: 'login ok' },
  };
}

export function messageResponse(sequence: UInt64 | undefined, sessionId: string, failure?: Failure): ImMessage {
  return {
    type: HeadType.MESSAGE_RESPONSE,
    sequence,
    sessionId,
    messageResponse: failure
      ? { result: false, code: resultCodeFor(failure.code), info: failure.reason, errorCode: failure.code }
      : { result: true, code: ResultCode.SUCCESS, info: 'ok' },
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
