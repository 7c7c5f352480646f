// TypeScript shapes of proto/im.proto, and the numeric values the wire contract fixes.
// Decoded messages carry proto3 defaults ('' / 0 / Long zero) for absent scalars and null for
// absent sub-messages; when building one, unset fields may simply be left out.

import type Long from 'long';

/** uint64 fields decode as Long (exact to 2^64-1); numbers are accepted when encoding. */
export type UInt64 = Long | number;

/**
 * The field numbers of proto/im.proto, for the code that reads or writes the wire by hand
 * (wire.ts and its users); protobufjs reads them from the .proto itself. Names as protobufjs
 * gives them (camelCase). test/protocol/schema.test.ts checks this table against the .proto,
 * both ways, and HeadType with it.
 */
export const Field = {
  Message: {
    type: 1,
    sequence: 2,
    sessionId: 3,
    loginRequest: 4,
    loginResponse: 5,
    messageRequest: 6,
    messageResponse: 7,
    notification: 8,
    heartBeat: 9,
    ack: 16,
    peerHello: 17,
    peerChallenge: 18,
    peerAuth: 19,
    peerDeliver: 20,
    peerNudge: 21,
    peerGroup: 22,
    conversationRequest: 23,
    conversationResponse: 24,
    receipt: 25,
    peerReceipt: 26,
  },
  LoginRequest: { uid: 1, deviceId: 2, token: 3, platform: 4, appVersion: 5, acks: 16, lastSeq: 17, inboxEpoch: 18, groups: 19, ownCopies: 20, noReplay: 21, receipts: 22, inboxEvents: 23 },
  LoginResponse: { result: 1, code: 2, info: 3, expose: 4, errorCode: 16, inboxHead: 17, syncFrom: 18, gap: 19, inboxEpoch: 20, reset: 21, heartbeatIntervalMs: 22 },
  MessageRequest: { msgId: 1, from: 2, to: 3, time: 4, msgType: 5, content: 6, url: 8, property: 9, fromNick: 10, json: 11, seq: 16, storedAt: 17, group: 18, event: 19, originDevice: 20, recalled: 21, edited: 22 },
  MessageResponse: { result: 1, code: 2, info: 3, expose: 4, errorCode: 16, seq: 17, duplicate: 18, ownSeq: 19 },
  MessageNotification: { noId: 1, json: 2, timestamp: 3 },
  MessageHeartBeat: { seq: 1, uid: 2, json: 3 },
  MessageAck: { seq: 1, group: 2 },
  ConversationRequest: { op: 1, peer: 2, before: 3, limit: 4, seq: 5, msgId: 6, group: 7, groups: 8, after: 9, content: 10, json: 11, cursor: 12 },
  Conversation: { peer: 1, lastSeq: 2, lastAt: 3, readSeq: 4, unread: 5, last: 6, truncated: 7, group: 8, name: 9 },
  GroupReader: { uid: 1, readSeq: 2 },
  ConversationResponse: { result: 1, code: 2, info: 3, errorCode: 16, conversations: 17, messages: 18, nextBefore: 19, oldest: 20, pruned: 21, readSeq: 22, unread: 23, eventSeq: 24, seq: 25, readers: 26, readCount: 27, memberCount: 28, nextAfter: 29, nextCursor: 30 },
  PeerHello: { nodeId: 1, nonce: 2 },
  PeerChallenge: { nodeId: 1, nonce: 2, mac: 3 },
  PeerAuth: { mac: 1 },
  PeerDeliver: { uid: 1, seq: 2, body: 3, epoch: 4 },
  PeerNudge: { uids: 1, all: 2 },
  PeerGroup: { group: 1, seq: 2, body: 3 },
  Receipt: { kind: 1, peer: 2, seq: 3, msgId: 4, at: 5 },
  PeerReceipt: { uid: 1, receipt: 2 },
} as const;

export const HeadType = {
  LOGIN_REQUEST: 0,
  LOGIN_RESPONSE: 1,
  LOGOUT_REQUEST: 2,
  LOGOUT_RESPONSE: 3,
  HEART_BEAT: 4,
  MESSAGE_REQUEST: 5,
  MESSAGE_RESPONSE: 6,
  MESSAGE_NOTIFICATION: 7,
  /** switchboard: client's cumulative receipt of inbox sequences. */
  MESSAGE_ACK: 8,
  /** switchboard: the conversation list, a history page or a read mark (ConversationRequest.op). */
  CONVERSATION_REQUEST: 9,
  CONVERSATION_RESPONSE: 10,
  /** switchboard: "delivered" / "read" for messages this user sent; to devices that asked (LoginRequest.receipts). */
  RECEIPT: 11,
  /** switchboard cluster: worker <-> worker frames (see PeerHello etc.). */
  PEER_HELLO: 20,
  PEER_CHALLENGE: 21,
  PEER_AUTH: 22,
  PEER_DELIVER: 23,
  PEER_NUDGE: 24,
  PEER_GROUP: 25,
  PEER_RECEIPT: 26,
} as const;
export type HeadType = (typeof HeadType)[keyof typeof HeadType];

/** Result codes of LoginResponse and MessageResponse. 0..3 are the original's; 4.. are switchboard's. */
export const ResultCode = {
  SUCCESS: 0,
  AUTH_FAILED: 1,
  NO_TOKEN: 2,
  UNKNOWN_ERROR: 3,
  BAD_REQUEST: 4,
  SENDER_MISMATCH: 5,
  /** No longer sent: messages to offline users are stored. Kept so the number is not reused. */
  RECIPIENT_OFFLINE: 6,
  TOO_MANY_DEVICES: 7,
  NOT_LOGGED_IN: 8,
  /** MessageResponse: over the message rate; nothing stored. */
  RATE_LIMITED: 9,
  /** MessageResponse: the inbox store is at its memory bound; nothing stored. */
  STORE_FULL: 10,
  /** MessageResponse: the recipient has no account; nothing stored. */
  UNKNOWN_RECIPIENT: 11,
  /** MessageResponse: the sender may not send to this group (not a member, or it was dissolved); nothing stored. */
  GROUP_REFUSED: 12,
} as const;
export type ResultCode = (typeof ResultCode)[keyof typeof ResultCode];

/** `type` values of the JSON carried in MessageNotification.json. */
export const NotificationType = {
  SESSION_ON: 10,
  SESSION_OFF: 20,
  CONNECT_FINISHED: 30,
  /** switchboard: the server closes this connection right after this frame; data {code, reason}. */
  CLOSING: 90,
} as const;
export type NotificationType = (typeof NotificationType)[keyof typeof NotificationType];

/** LoginRequest.platform (PROTOCOL.md §4): 7..99 reserved, 100 and above a deployment's own. The server only stores it. */
export const Platform = {
  UNKNOWN: 0,
  IOS: 1,
  ANDROID: 2,
  WEB: 3,
  DESKTOP: 4,
  BOT: 5,
  CLI: 6,
} as const;
export type Platform = (typeof Platform)[keyof typeof Platform];

/** MessageRequest.msg_type conventions between clients (PROTOCOL.md §4); the server does not read it. */
export const MsgType = {
  TEXT: 1,
  IMAGE: 2,
  AUDIO: 3,
  VIDEO: 4,
  FILE: 5,
  LOCATION: 6,
} as const;
export type MsgType = (typeof MsgType)[keyof typeof MsgType];

/** The `sequence` an original client sends before login (2^64-1) and its session_id. */
export const PRE_LOGIN_SESSION_ID = '-1';

export interface LoginRequest {
  uid?: string;
  deviceId?: string;
  token?: string;
  platform?: number;
  appVersion?: string;
  acks?: boolean;
  /** Presence matters: absent means "use the server's stored position". */
  lastSeq?: UInt64 | null;
  /** The inbox epoch `lastSeq` belongs to (from an earlier LoginResponse); absent or 0: unknown. */
  inboxEpoch?: UInt64 | null;
  /** Group deliveries and per-group acks (needs acks). */
  groups?: boolean;
  /** Copies of what the user sends from its other devices (MessageRequest.originDevice set). */
  ownCopies?: boolean;
  /** Replay nothing: the position becomes the inbox head. */
  noReplay?: boolean;
  /** RECEIPTs for the messages this user sends. */
  receipts?: boolean;
  /** Inbox events (recalls, edits) are sent to this device. */
  inboxEvents?: boolean;
}

export interface LoginResponse {
  result?: boolean;
  code?: number;
  info?: string;
  expose?: number;
  errorCode?: string;
  inboxHead?: UInt64;
  syncFrom?: UInt64;
  gap?: boolean;
  inboxEpoch?: UInt64;
  reset?: boolean;
  /** The server's heartbeat interval, ms (absent from an older server). */
  heartbeatIntervalMs?: number;
}

export interface MessageRequest {
  msgId?: UInt64;
  from?: string;
  to?: string;
  time?: UInt64;
  msgType?: number;
  content?: string;
  url?: string;
  property?: string;
  fromNick?: string;
  json?: string;
  seq?: UInt64;
  /** Set by the server: when it accepted the message, ms since the epoch (its clock, not the sender's). */
  storedAt?: UInt64;
  /** A request: the group to send to; a delivery: the group of the entry (`seq` is then the group's). */
  group?: string;
  /** Server-set on group event deliveries: the event's JSON. */
  event?: string;
  /** Server-set on the copy in the sender's own inbox: the device that sent it. */
  originDevice?: string;
  /** switchboard: set by the server on the tombstone of a recalled message. */
  recalled?: boolean;
  /** switchboard: set by the server on a message its sender edited (content and json are the edit's). */
  edited?: boolean;
}

export interface MessageResponse {
  result?: boolean;
  code?: number;
  info?: string;
  expose?: number;
  errorCode?: string;
  seq?: UInt64;
  duplicate?: boolean;
  /** The sequence of the copy in the sender's own inbox; absent when none is kept. */
  ownSeq?: UInt64;
}

export interface MessageAck {
  seq?: UInt64;
  /** `seq` is of this group's sequence; empty: the inbox. */
  group?: string;
}

/** ConversationRequest.op. */
export const ConversationOp = {
  LIST: 1,
  HISTORY: 2,
  READ: 3,
  RECALL: 4,
  EDIT: 5,
  READERS: 6,
} as const;
export type ConversationOp = (typeof ConversationOp)[keyof typeof ConversationOp];

export interface ConversationRequest {
  op?: number;
  peer?: string;
  before?: UInt64;
  limit?: number;
  seq?: UInt64;
  msgId?: UInt64;
  group?: string;
  groups?: boolean;
  after?: string;
  cursor?: string;
  /** EDIT: the new content and json. */
  content?: string;
  json?: string;
}

export interface Conversation {
  peer?: string;
  lastSeq?: UInt64;
  lastAt?: UInt64;
  readSeq?: UInt64;
  unread?: number;
  last?: MessageRequest | null;
  truncated?: boolean;
  group?: string;
  name?: string;
}

export interface GroupReader {
  uid?: string;
  readSeq?: UInt64;
}

export interface ConversationResponse {
  result?: boolean;
  code?: number;
  info?: string;
  errorCode?: string;
  conversations?: Conversation[];
  messages?: MessageRequest[];
  nextBefore?: UInt64;
  oldest?: UInt64;
  pruned?: boolean;
  readSeq?: UInt64;
  unread?: number;
  eventSeq?: UInt64;
  seq?: UInt64;
  readers?: GroupReader[];
  readCount?: number;
  memberCount?: number;
  nextAfter?: string;
  nextCursor?: string;
}

export interface MessageNotification {
  noId?: UInt64;
  json?: string;
  timestamp?: string;
}

export interface MessageHeartBeat {
  seq?: number;
  uid?: string;
  json?: string;
}

export interface PeerHello {
  nodeId?: string;
  nonce?: Uint8Array;
}

export interface PeerChallenge {
  nodeId?: string;
  nonce?: Uint8Array;
  mac?: Uint8Array;
}

export interface PeerAuth {
  mac?: Uint8Array;
}

export interface PeerDeliver {
  uid?: string;
  seq?: UInt64;
  body?: Uint8Array;
  epoch?: UInt64;
}

export interface PeerGroup {
  group?: string;
  seq?: UInt64;
  body?: Uint8Array;
}

/** Receipt.kind. */
export const ReceiptKind = {
  DELIVERED: 1,
  READ: 2,
} as const;
export type ReceiptKind = (typeof ReceiptKind)[keyof typeof ReceiptKind];

export interface Receipt {
  kind?: number;
  peer?: string;
  seq?: UInt64;
  msgId?: UInt64;
  at?: UInt64;
}

export interface PeerReceipt {
  uid?: string;
  receipt?: Receipt | null;
}

export interface PeerNudge {
  uids?: string[];
  all?: boolean;
}

export interface ImMessage {
  type: number;
  sequence?: UInt64;
  sessionId?: string;
  loginRequest?: LoginRequest | null;
  loginResponse?: LoginResponse | null;
  messageRequest?: MessageRequest | null;
  messageResponse?: MessageResponse | null;
  notification?: MessageNotification | null;
  heartBeat?: MessageHeartBeat | null;
  ack?: MessageAck | null;
  peerHello?: PeerHello | null;
  peerChallenge?: PeerChallenge | null;
  peerAuth?: PeerAuth | null;
  peerDeliver?: PeerDeliver | null;
  peerNudge?: PeerNudge | null;
  peerGroup?: PeerGroup | null;
  conversationRequest?: ConversationRequest | null;
  conversationResponse?: ConversationResponse | null;
  receipt?: Receipt | null;
  peerReceipt?: PeerReceipt | null;
}
