// The one catalogue of switchboard errors. Every error carries a stable string code; code
// matches on `err.code`, never on the message. Each code is documented in PROTOCOL.md (the ones
// a client can see) or OPERATIONS.md, and a test keeps the catalogue and the docs in step.

export const ERROR_CODES = {
  // Framing: the stream is unrecoverable after any of these, the connection is closed.
  SB_ERR_FRAME_BAD_MAGIC: 'frame magic is not 0x0086',
  SB_ERR_FRAME_BAD_VERSION: 'frame version is not supported',
  SB_ERR_FRAME_NEGATIVE_LENGTH: 'frame body length is negative',
  SB_ERR_FRAME_TOO_LONG: 'frame body length exceeds the maximum',
  SB_ERR_BAD_PROTOBUF: 'frame body is not a valid Message',
  SB_ERR_UNKNOWN_TYPE: 'message type is unknown or not accepted from a client',

  // Session lifecycle.
  SB_ERR_NOT_LOGGED_IN: 'only LOGIN_REQUEST and HEART_BEAT are accepted before login',
  SB_ERR_PRELOGIN_QUEUE_FULL: 'too many frames sent while the login was in progress',
  SB_ERR_LOGIN_TIMEOUT: 'no successful login within the login timeout',
  SB_ERR_ALREADY_LOGGED_IN: 'this connection is already logged in',
  SB_ERR_NO_TOKEN: 'login carries no token',
  SB_ERR_TOKEN_INVALID: 'token is malformed or its signature does not verify',
  SB_ERR_TOKEN_EXPIRED: 'token has expired',
  SB_ERR_TOKEN_MISMATCH: 'token was issued for another user or device',
  SB_ERR_TOO_MANY_DEVICES: 'user is logged in on the maximum number of devices',
  SB_ERR_SESSION_REPLACED: 'a new login from the same user and device replaced this session',
  SB_ERR_IDLE_TIMEOUT: 'no frame received within the idle timeout',
  SB_ERR_SLOW_CONSUMER: 'connection did not drain its output in time',
  SB_ERR_SERVER_SHUTDOWN: 'server is shutting down',
  SB_ERR_INBOX_RESET: "the inbox was reset (its epoch changed): this session's position is void; log in again",
  SB_ERR_TOO_MANY_CONNECTIONS: 'this address has the maximum number of connections open',
  SB_ERR_SERVER_BUSY: 'too many connections are waiting to log in: this one waited longest',
  SB_ERR_INTERNAL: 'internal server error',

  // Cluster.
  SB_ERR_PEER_NOT_AUTHENTICATED: 'peer frame before the peer handshake completed',
  SB_ERR_PEER_AUTH_FAILED: 'peer handshake failed: the cluster secret was not proven',
  SB_ERR_PEER_BAD_HELLO: 'PEER_HELLO lacks a valid node id or a 16-byte nonce, or came twice',
  SB_ERR_PEER_UNKNOWN_NODE: 'the claimed node id is not another worker in the registry',
  SB_ERR_PEER_HANDSHAKE_TIMEOUT: 'the peer handshake was not completed within the handshake timeout',
  SB_ERR_PEER_REPLACED: 'a newer link from the same worker replaced this one',

  // Chat.
  SB_ERR_BAD_REQUEST: 'request is missing a required field',
  SB_ERR_SENDER_MISMATCH: 'from differs from the logged-in user',
  SB_ERR_MESSAGE_TOO_LARGE: 'the message would not fit in a frame once delivered',
  SB_ERR_STORE_UNAVAILABLE: 'a store (Redis) did not answer in time or refused; try again later (a message: with the same msg_id)',
  SB_ERR_STORE_FULL: 'the inbox store is at its memory bound; send it again later with the same msg_id',
  SB_ERR_UNKNOWN_RECIPIENT: 'no user with this name exists',
  SB_ERR_FLOOD: 'too many messages were refused for exceeding the message rate',

  // Client SDK.
  SB_ERR_CLIENT_CLOSED: 'client was closed',
  SB_ERR_CLIENT_CONNECTION_LOST: 'connection was lost before the server answered',
  SB_ERR_CLIENT_TIMEOUT: 'server did not answer in time',
  SB_ERR_CLIENT_QUEUE_FULL: 'too many requests are waiting for the connection',
  SB_ERR_CLIENT_LOGIN_FAILED: 'server refused the login',
  SB_ERR_CLIENT_CONNECT_FAILED: 'the server or the gate could not be reached',

  // Naming service (ZooKeeper).
  SB_ERR_REGISTRY_UNAVAILABLE: 'the registry (ZooKeeper) could not be reached or refused an operation',
  SB_ERR_REGISTRY_CLOSED: 'the registry was closed',
  SB_ERR_REGISTRY_ACL: "ZooKeeper refused switchboard's identity, or the registry is not protected by the cluster ACL",

  // Accounts.
  SB_ERR_BAD_PASSWORD: 'password does not meet the password rule',
  SB_ERR_BAD_USERNAME: 'user name does not meet the user name rule',
  SB_ERR_USERNAME_TAKEN: 'an account with this user name already exists',

  // Gate (HTTP).
  SB_ERR_LOGIN_FAILED: 'wrong username or password',
  SB_ERR_REGISTRATION_CLOSED: 'registration is switched off',
  // Also a chat refusal: the sender is over its message rate.
  SB_ERR_RATE_LIMITED: 'too many requests',
  SB_ERR_NO_WORKER: 'no worker is available',
  SB_ERR_NOT_FOUND: 'no such route',

  // Process.
  SB_ERR_CONFIG: 'invalid configuration',
} as const;

export type ErrorCode = keyof typeof ERROR_CODES;

export class SwitchboardError extends Error {
  readonly code: ErrorCode;

  constructor(code: ErrorCode, message?: string, options?: { cause?: unknown }) {
    super(message ?? ERROR_CODES[code], options);
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
