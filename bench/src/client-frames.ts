// The frames a bench client sends: its login, and the two per message, assembled by hand like the server's hot
// frames (src/protocol/chat-frames.ts), with src/protocol/wire.ts: encoding them with protobufjs made the driver, not the
// server, the bottleneck. test/bench/client-frames.test.ts checks them against protobufjs.
//   Message { type = MESSAGE_REQUEST (1), sequence = msg_id (2),
//             messageRequest (6) = { msg_id (1), from (2), to (3), time (4), msg_type = 1 (5), content (6) } }
//   Message { type = MESSAGE_ACK (1), ack (16) = { seq (1) } }
// and for groups the same two with MessageRequest.group (18) instead of `to`, MessageAck.group (2) beside `seq`;
// and for `bench conversations` the chat list and history requests (PROTOCOL.md §14):
//   Message { type = CONVERSATION_REQUEST (1), sequence (2), conversationRequest (23) = { op (1), peer (2), before (3), limit (4) } }

import { HEADER_LENGTH, writeHeader } from '../../src/protocol/frame.js';
import { Field, HeadType } from '../../src/protocol/types.js';
import { encodeMessageFrame } from '../../src/protocol/codec.js';
import { WireType, oneByteTag, tagBytes, varintLength, writeBytes, writeVarint } from '../../src/protocol/wire.js';

const { VARINT, LEN } = WireType;
// One byte each, stored as they are; MESSAGE_REQUEST, MESSAGE_ACK and msg_type 1 are one-byte values too.
const TYPE_TAG = oneByteTag(Field.Message.type, VARINT);
const SEQUENCE_TAG = oneByteTag(Field.Message.sequence, VARINT);
const REQUEST_TAG = oneByteTag(Field.Message.messageRequest, LEN);
const R = Field.MessageRequest;
const MSG_ID_TAG = oneByteTag(R.msgId, VARINT);
const FROM_TAG = oneByteTag(R.from, LEN);
const TO_TAG = oneByteTag(R.to, LEN);
const TIME_TAG = oneByteTag(R.time, VARINT);
const MSG_TYPE_TAG = oneByteTag(R.msgType, VARINT);
const CONTENT_TAG = oneByteTag(R.content, LEN);
const ACK_SEQ_TAG = oneByteTag(Field.MessageAck.seq, VARINT);
/** Message.ack: 82 01. */
const ACK_TAG = tagBytes(Field.Message.ack, LEN);
/** MessageRequest.group: 92 01. */
const GROUP_TAG = tagBytes(R.group, LEN);
const ACK_GROUP_TAG = oneByteTag(Field.MessageAck.group, LEN);
/** Message.conversationRequest: ba 01. */
const CONVERSATION_TAG = tagBytes(Field.Message.conversationRequest, LEN);
const C = Field.ConversationRequest;
const OP_TAG = oneByteTag(C.op, VARINT);
const PEER_TAG = oneByteTag(C.peer, LEN);
const BEFORE_TAG = oneByteTag(C.before, VARINT);
const LIMIT_TAG = oneByteTag(C.limit, VARINT);
const GROUPS_TAG = oneByteTag(C.groups, VARINT);

/**
 * A bench client's LOGIN_REQUEST: a token login as an acks device. `lastSeq` above any inbox
 * head starts the device at the head, so what earlier runs left is not replayed; `receipts`
 * (field 22, `b0 01 01`) asks for the RECEIPTs of what the user sends. One per connection, so
 * it is encoded with protobufjs, not by hand: it is off the hot path.
 */
export function loginRequestFrame(uid: string, token: string, options: { deviceId?: string; lastSeq?: number; groups?: boolean; receipts?: boolean } = {}): Buffer {
  const { deviceId = 'bench', lastSeq, groups, receipts } = options;
  return encodeMessageFrame({
    type: HeadType.LOGIN_REQUEST,
    sequence: 1,
    loginRequest: { uid, deviceId, token, acks: true, ...(lastSeq === undefined ? {} : { lastSeq }), ...(groups ? { groups } : {}), ...(receipts ? { receipts } : {}) },
  });
}

/** A MESSAGE_REQUEST from `from` to `to`; `from` and `to` are latin1 (bench user ids), `content` too. */
export function messageRequestFrame(msgId: number, from: string, to: string, time: number, content: string): Buffer {
  const request =
    1 + varintLength(msgId) + 1 + varintLength(from.length) + from.length + 1 + varintLength(to.length) + to.length + 1 + varintLength(time) + 2 + 1 + varintLength(content.length) + content.length;
  const body = 2 + 1 + varintLength(msgId) + 1 + varintLength(request) + request;
  const frame = Buffer.allocUnsafe(HEADER_LENGTH + body);
  writeHeader(frame, 0, body);
  let pos = HEADER_LENGTH;
  frame[pos++] = TYPE_TAG;
  frame[pos++] = HeadType.MESSAGE_REQUEST;
  frame[pos++] = SEQUENCE_TAG;
  pos = writeVarint(frame, pos, msgId);
  frame[pos++] = REQUEST_TAG;
  pos = writeVarint(frame, pos, request);
  frame[pos++] = MSG_ID_TAG;
  pos = writeVarint(frame, pos, msgId);
  pos = latin1Field(frame, pos, FROM_TAG, from);
  pos = latin1Field(frame, pos, TO_TAG, to);
  frame[pos++] = TIME_TAG;
  pos = writeVarint(frame, pos, time);
  frame[pos++] = MSG_TYPE_TAG;
  frame[pos++] = 1;
  latin1Field(frame, pos, CONTENT_TAG, content);
  return frame;
}

function latin1Field(frame: Buffer, pos: number, fieldTag: number, value: string): number {
  frame[pos++] = fieldTag;
  pos = writeVarint(frame, pos, value.length);
  return pos + frame.write(value, pos, 'latin1');
}

/** A cumulative MESSAGE_ACK up to inbox sequence `seq`. */
export function ackFrame(seq: number): Buffer {
  const ack = 1 + varintLength(seq);
  const body = 2 + ACK_TAG.length + 1 + ack;
  const frame = Buffer.allocUnsafe(HEADER_LENGTH + body);
  writeHeader(frame, 0, body);
  let pos = HEADER_LENGTH;
  frame[pos++] = TYPE_TAG;
  frame[pos++] = HeadType.MESSAGE_ACK;
  pos = writeBytes(frame, pos, ACK_TAG);
  frame[pos++] = ack;
  frame[pos++] = ACK_SEQ_TAG;
  writeVarint(frame, pos, seq);
  return frame;
}

/** A MESSAGE_REQUEST from `from` to group `group` (MessageRequest.group, no `to`); all latin1. */
export function groupMessageFrame(msgId: number, from: string, group: string, time: number, content: string): Buffer {
  const request =
    1 + varintLength(msgId) + 1 + varintLength(from.length) + from.length + GROUP_TAG.length + varintLength(group.length) + group.length + 1 + varintLength(time) + 2 + 1 + varintLength(content.length) + content.length;
  const body = 2 + 1 + varintLength(msgId) + 1 + varintLength(request) + request;
  const frame = Buffer.allocUnsafe(HEADER_LENGTH + body);
  writeHeader(frame, 0, body);
  let pos = HEADER_LENGTH;
  frame[pos++] = TYPE_TAG;
  frame[pos++] = HeadType.MESSAGE_REQUEST;
  frame[pos++] = SEQUENCE_TAG;
  pos = writeVarint(frame, pos, msgId);
  frame[pos++] = REQUEST_TAG;
  pos = writeVarint(frame, pos, request);
  frame[pos++] = MSG_ID_TAG;
  pos = writeVarint(frame, pos, msgId);
  pos = latin1Field(frame, pos, FROM_TAG, from);
  frame[pos++] = TIME_TAG;
  pos = writeVarint(frame, pos, time);
  frame[pos++] = MSG_TYPE_TAG;
  frame[pos++] = 1;
  pos = latin1Field(frame, pos, CONTENT_TAG, content);
  pos = writeBytes(frame, pos, GROUP_TAG);
  pos = writeVarint(frame, pos, group.length);
  frame.write(group, pos, 'latin1');
  return frame;
}

/** A cumulative MESSAGE_ACK of group `group` (latin1) up to its sequence `seq`. */
export function groupAckFrame(group: string, seq: number): Buffer {
  const ack = 1 + varintLength(seq) + 1 + varintLength(group.length) + group.length;
  const body = 2 + ACK_TAG.length + varintLength(ack) + ack;
  const frame = Buffer.allocUnsafe(HEADER_LENGTH + body);
  writeHeader(frame, 0, body);
  let pos = HEADER_LENGTH;
  frame[pos++] = TYPE_TAG;
  frame[pos++] = HeadType.MESSAGE_ACK;
  pos = writeBytes(frame, pos, ACK_TAG);
  pos = writeVarint(frame, pos, ack);
  frame[pos++] = ACK_SEQ_TAG;
  pos = writeVarint(frame, pos, seq);
  latin1Field(frame, pos, ACK_GROUP_TAG, group);
  return frame;
}

/**
 * A CONVERSATION_REQUEST: `op` LIST (1) or HISTORY (2) of the conversation with `peer` (latin1),
 * entries below `before` (0: from the newest), at most `limit` (0: the server's 50). Fields at
 * their default are left out, as protobuf encoders do.
 */
export function conversationRequestFrame(sequence: number, op: number, before: number, limit: number, peer = '', groups = false): Buffer {
  const request =
    2 + (peer ? 1 + varintLength(peer.length) + peer.length : 0) + (before ? 1 + varintLength(before) : 0) + (limit ? 1 + varintLength(limit) : 0) + (groups ? 2 : 0);
  const body = 2 + 1 + varintLength(sequence) + CONVERSATION_TAG.length + varintLength(request) + request;
  const frame = Buffer.allocUnsafe(HEADER_LENGTH + body);
  writeHeader(frame, 0, body);
  let pos = HEADER_LENGTH;
  frame[pos++] = TYPE_TAG;
  frame[pos++] = HeadType.CONVERSATION_REQUEST;
  frame[pos++] = SEQUENCE_TAG;
  pos = writeVarint(frame, pos, sequence);
  pos = writeBytes(frame, pos, CONVERSATION_TAG);
  pos = writeVarint(frame, pos, request);
  frame[pos++] = OP_TAG;
  frame[pos++] = op;
  if (peer) pos = latin1Field(frame, pos, PEER_TAG, peer);
  if (before) {
    frame[pos++] = BEFORE_TAG;
    pos = writeVarint(frame, pos, before);
  }
  if (limit) {
    frame[pos++] = LIMIT_TAG;
    pos = writeVarint(frame, pos, limit);
  }
  if (groups) {
    frame[pos++] = GROUPS_TAG;
    frame[pos++] = 1;
  }
  return frame;
}
