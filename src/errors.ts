// The one catalogue of switchboard errors. Every error carries a stable string code; code
// matches on `err.code`, never on the message. Each entry holds the code's default message, the
// result code an original client is sent for it (`result`, a ResultCode name; UNKNOWN_ERROR
// when absent) and the gate's HTTP status (`http`; 500 when absent), so that the three are
// never out of step. Each code is documented in PROTOCOL.md (the ones a client can see) or
// OPERATIONS.md, and a test keeps the catalogue and the docs in step.

import type { ResultCode } from './protocol/types.js';

interface ErrorEntry {
  message: string;
  result?: keyof typeof ResultCode;
  http?: number;
}

export const ERROR_CODES = {
  // Framing: the stream is unrecoverable after any of these, the connection is closed.
  SB_ERR_FRAME_BAD_MAGIC: { message: 'frame magic is not 0x0086' },
  SB_ERR_FRAME_BAD_VERSION: { message: 'frame version is not supported' },
  SB_ERR_FRAME_NEGATIVE_LENGTH: { message: 'frame body length is negative' },
  SB_ERR_FRAME_TOO_LONG: { message: 'frame body length exceeds the maximum' },
  SB_ERR_BAD_PROTOBUF: { message: 'frame body is not a valid Message' },
  SB_ERR_UNKNOWN_TYPE: { message: 'message type is unknown or not accepted from a client' },

  // Session lifecycle.
  SB_ERR_NOT_LOGGED_IN: { message: 'only LOGIN_REQUEST and HEART_BEAT are accepted before login', result: 'NOT_LOGGED_IN' },
  SB_ERR_PRELOGIN_QUEUE_FULL: { message: 'too many frames sent while the login was in progress' },
  SB_ERR_LOGIN_TIMEOUT: { message: 'no successful login within the login timeout' },
  SB_ERR_ALREADY_LOGGED_IN: { message: 'this connection is already logged in', result: 'BAD_REQUEST' },
  SB_ERR_NO_TOKEN: { message: 'login carries no token', result: 'NO_TOKEN', http: 401 },
  SB_ERR_TOKEN_INVALID: { message: 'token is malformed or its signature does not verify', result: 'AUTH_FAILED', http: 401 },
  SB_ERR_TOKEN_EXPIRED: { message: 'token has expired', result: 'AUTH_FAILED', http: 401 },
  SB_ERR_TOKEN_MISMATCH: { message: 'token was issued for another user or device', result: 'AUTH_FAILED', http: 403 },
  SB_ERR_TOKEN_REVOKED: { message: 'token was issued before a revocation of its user or device (logout, password change, operator)', result: 'AUTH_FAILED', http: 401 },
  SB_ERR_TOO_MANY_DEVICES: { message: 'user is logged in on the maximum number of devices', result: 'TOO_MANY_DEVICES' },
  SB_ERR_SESSION_REPLACED: { message: 'a new login from the same user and device replaced this session' },
  SB_ERR_IDLE_TIMEOUT: { message: 'no frame received within the idle timeout' },
  SB_ERR_SLOW_CONSUMER: { message: 'connection did not drain its output in time' },
  SB_ERR_SERVER_SHUTDOWN: { message: 'server is shutting down' },
  SB_ERR_INBOX_RESET: { message: "the inbox was reset (its epoch changed): this session's position is void; log in again" },
  SB_ERR_TOO_MANY_CONNECTIONS: { message: 'this address has the maximum number of connections open' },
  SB_ERR_SERVER_BUSY: { message: 'too many connections are waiting to log in: this one waited longest' },
  SB_ERR_INTERNAL: { message: 'internal server error' },

  // Cluster.
  SB_ERR_PEER_NOT_AUTHENTICATED: { message: 'peer frame before the peer handshake completed' },
  SB_ERR_PEER_AUTH_FAILED: { message: 'peer handshake failed: the cluster secret was not proven' },
  SB_ERR_PEER_BAD_HELLO: { message: 'PEER_HELLO lacks a valid node id or a 16-byte nonce, or came twice' },
  SB_ERR_PEER_UNKNOWN_NODE: { message: 'the claimed node id is not another worker in the registry' },
  SB_ERR_PEER_HANDSHAKE_TIMEOUT: { message: 'the peer handshake was not completed within the handshake timeout' },
  SB_ERR_PEER_REPLACED: { message: 'a newer link from the same worker replaced this one' },

  // TLS.
  SB_ERR_TLS_FILES: { message: 'a TLS certificate, key or CA file could not be read or is not valid' },
  SB_ERR_TLS_HANDSHAKE: { message: 'the TLS handshake failed: the certificate was not verified, or the other side does not speak TLS' },

  // Chat.
  SB_ERR_BAD_REQUEST: { message: 'request is missing a required field', result: 'BAD_REQUEST', http: 400 },
  SB_ERR_SENDER_MISMATCH: { message: 'from differs from the logged-in user', result: 'SENDER_MISMATCH' },
  SB_ERR_MESSAGE_TOO_LARGE: { message: 'the message would not fit in a frame once delivered', result: 'BAD_REQUEST' },
  SB_ERR_STORE_UNAVAILABLE: { message: 'a store (Redis) did not answer in time or refused; try again later (a message: with the same msg_id)', http: 503 },
  SB_ERR_STORE_FULL: { message: 'the inbox store is at its memory bound; send it again later with the same msg_id', result: 'STORE_FULL' },
  SB_ERR_UNKNOWN_RECIPIENT: { message: 'no user with this name exists', result: 'UNKNOWN_RECIPIENT', http: 404 },
  SB_ERR_NO_MESSAGE: { message: 'no message of yours with this msg_id is among the latest of the conversation', result: 'BAD_REQUEST', http: 404 },
  SB_ERR_RECALL_EXPIRED: { message: 'the message is older than the recall window', result: 'BAD_REQUEST', http: 409 },
  SB_ERR_EDIT_EXPIRED: { message: 'the message is older than the edit window', result: 'BAD_REQUEST', http: 409 },
  SB_ERR_NO_CONVERSATION: { message: 'the user has no conversation with this peer (none yet, or it aged out)', result: 'BAD_REQUEST', http: 404 },
  SB_ERR_FLOOD: { message: 'too many messages were refused for exceeding the message rate' },

  // Client SDK.
  SB_ERR_CLIENT_CLOSED: { message: 'client was closed' },
  SB_ERR_CLIENT_CONNECTION_LOST: { message: 'connection was lost before the server answered' },
  SB_ERR_CLIENT_TIMEOUT: { message: 'server did not answer in time' },
  SB_ERR_CLIENT_QUEUE_FULL: { message: 'too many requests are waiting for the connection' },
  SB_ERR_CLIENT_LOGIN_FAILED: { message: 'server refused the login' },
  SB_ERR_CLIENT_CONNECT_FAILED: { message: 'the server or the gate could not be reached' },

  // Naming service (ZooKeeper).
  SB_ERR_ZOOKEEPER_CLIENT_MISSING: { message: 'the native ZooKeeper client (npm package zookeeper) is not installed' },
  SB_ERR_REGISTRY_UNAVAILABLE: { message: 'the registry (ZooKeeper) could not be reached or refused an operation' },
  SB_ERR_REGISTRY_CLOSED: { message: 'the registry was closed' },
  SB_ERR_REGISTRY_ACL: { message: "ZooKeeper refused switchboard's identity, or the registry is not protected by the cluster ACL" },

  // Accounts.
  SB_ERR_BAD_PASSWORD: { message: 'password does not meet the password rule', http: 400 },
  SB_ERR_BAD_USERNAME: { message: 'user name does not meet the user name rule', http: 400 },
  SB_ERR_USERNAME_TAKEN: { message: 'an account with this user name already exists', http: 409 },

  // Gate (HTTP).
  SB_ERR_LOGIN_FAILED: { message: 'wrong username or password', http: 401 },
  SB_ERR_REGISTRATION_CLOSED: { message: 'registration is switched off', http: 403 },
  // Also a chat refusal: the sender is over its message rate.
  SB_ERR_RATE_LIMITED: { message: 'too many requests', result: 'RATE_LIMITED', http: 429 },
  SB_ERR_NO_WORKER: { message: 'no worker is available', http: 503 },
  SB_ERR_NOT_FOUND: { message: 'no such route', http: 404 },
  SB_ERR_REFRESH_INVALID: { message: 'refresh token is malformed, unknown, expired, revoked or not the current one: log in with the password', http: 401 },
  SB_ERR_REFRESH_REUSED: { message: 'refresh token was used before: its login is revoked on every holder; log in with the password', http: 401 },
  SB_ERR_ADMIN_AUTH_FAILED: { message: 'the admin credential is missing or wrong', http: 401 },

  // Process.
  SB_ERR_CONFIG: { message: 'invalid configuration' },

  // Groups. No ResultCode names these yet (the group protocol extension will add its own):
  // an unknown group is, to a sender, an unknown recipient; a malformed request a bad one; the
  // rest are UNKNOWN_ERROR to an original client, which never addresses a group anyway.
  SB_ERR_BAD_GROUP: { message: 'the group id, name, metadata, member list or device id is not valid', result: 'BAD_REQUEST', http: 400 },
  SB_ERR_GROUP_NOT_FOUND: { message: 'no group with this id exists', result: 'UNKNOWN_RECIPIENT', http: 404 },
  SB_ERR_GROUP_NOT_MEMBER: { message: 'the user is not a member of the group', result: 'GROUP_REFUSED', http: 403 },
  SB_ERR_GROUP_FORBIDDEN: { message: "the user's role in the group does not allow this", http: 403 },
  SB_ERR_GROUP_FULL: { message: 'the group has the maximum number of members', http: 409 },
  SB_ERR_GROUP_TOO_MANY: { message: 'the user is a member of the maximum number of groups', http: 409 },
  SB_ERR_GROUP_OWNER_CANNOT_LEAVE: { message: 'the owner cannot leave the group: transfer the ownership or dissolve it first', http: 409 },
  SB_ERR_GROUP_DISSOLVED: { message: 'the group was dissolved: it accepts no more changes or messages', result: 'GROUP_REFUSED', http: 410 },
  SB_ERR_RECEIPTS_OFF: { message: "the user's receipts setting is off: it shares no read positions in groups and sees none", result: 'BAD_REQUEST', http: 403 },
} as const satisfies Record<string, ErrorEntry>;

export type ErrorCode = keyof typeof ERROR_CODES;

/** The ResultCode name an original client is sent for `code`. */
export function resultNameOf(code: ErrorCode): keyof typeof ResultCode {
  return (ERROR_CODES[code] as ErrorEntry).result ?? 'UNKNOWN_ERROR';
}

/** The HTTP status the gate answers `code` with. */
export function httpStatusOf(code: ErrorCode): number {
  return (ERROR_CODES[code] as ErrorEntry).http ?? 500;
}

export class SwitchboardError extends Error {
  readonly code: ErrorCode;

  constructor(code: ErrorCode, message?: string, options?: { cause?: unknown }) {
    super(message ?? ERROR_CODES[code].message, options);
    this.name = 'SwitchboardError';
    this.code = code;
  }
}

export function isSwitchboardError(err: unknown): err is SwitchboardError {
  return err instanceof SwitchboardError;
}

export function isErrorCode(value: string): value is ErrorCode {
  return Object.hasOwn(ERROR_CODES, value);
}
