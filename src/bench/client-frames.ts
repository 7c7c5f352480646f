// The frames a bench client sends: its login, and the two per message, assembled by hand like the server's hot
// frames (src/protocol/chat-frames.ts), with src/protocol/wire.ts: encoding them with protobufjs made the driver, not the
// server, the bottleneck. test/bench/client-frames.test.ts checks them against protobufjs.
//   Message { type = MESSAGE_REQUEST (1), sequence = msg_id (2),
//             messageRequest (6) = { msg_id (1), from (2), to (3), time (4), msg_type = 1 (5), content (6) } }
//   Message { type = MESSAGE_ACK (1), ack (16) = { seq (1) } }

import { HEADER_LENGTH, writeHeader } from '../protocol/frame.js';
import { Field, HeadType } from '../protocol/types.js';
import { encodeMessageFrame } from '../protocol/codec.js';
import { WireType, lengthDelimitedLength, tag, varintFieldLength, writeStringField, writeVarint } from '../protocol/wire.js';

const { VARINT, LEN } = WireType;
const TYPE_TAG = tag(Field.Message.type, VARINT);
const SEQUENCE_TAG = tag(Field.Message.sequence, VARINT);
const REQUEST_TAG = tag(Field.Message.messageRequest, LEN);
const ACK_TAG = tag(Field.Message.ack, LEN);
const R = Field.MessageRequest;
const MSG_ID_TAG = tag(R.msgId, VARINT);
const FROM_TAG = tag(R.from, LEN);
const TO_TAG = tag(R.to, LEN);
const TIME_TAG = tag(R.time, VARINT);
const MSG_TYPE_TAG = tag(R.msgType, VARINT);
const CONTENT_TAG = tag(R.content, LEN);
const ACK_SEQ_TAG = tag(Field.MessageAck.seq, VARINT);

/**
 * A bench client's LOGIN_REQUEST: a token login as an acks device. `lastSeq` above any inbox
 * head starts the device at the head, so what earlier runs left is not replayed.
 */
export function loginRequestFrame(uid: string, token: string, options: { deviceId?: string; lastSeq?: number } = {}): Buffer {
  const { deviceId = 'bench', lastSeq } = options;
  return encodeMessageFrame({ type: HeadType.LOGIN_REQUEST, sequence: 1, loginRequest: { uid, deviceId, token, acks: true, ...(lastSeq === undefined ? {} : { lastSeq }) } });
}

/** A MESSAGE_REQUEST from `from` to `to`; `from` and `to` are latin1 (bench user ids), `content` too. */
export function messageRequestFrame(msgId: number, from: string, to: string, time: number, content: string): Buffer {
  const request =
    varintFieldLength(MSG_ID_TAG, msgId) +
    lengthDelimitedLength(FROM_TAG, from.length) +
    lengthDelimitedLength(TO_TAG, to.length) +
    varintFieldLength(TIME_TAG, time) +
    varintFieldLength(MSG_TYPE_TAG, 1) +
    lengthDelimitedLength(CONTENT_TAG, content.length);
  const body = varintFieldLength(TYPE_TAG, HeadType.MESSAGE_REQUEST) + varintFieldLength(SEQUENCE_TAG, msgId) + lengthDelimitedLength(REQUEST_TAG, request);
  const frame = Buffer.allocUnsafe(HEADER_LENGTH + body);
  writeHeader(frame, 0, body);
  let pos = writeVarint(frame, HEADER_LENGTH, TYPE_TAG);
  pos = writeVarint(frame, pos, HeadType.MESSAGE_REQUEST);
  pos = writeVarint(frame, pos, SEQUENCE_TAG);
  pos = writeVarint(frame, pos, msgId);
  pos = writeVarint(frame, pos, REQUEST_TAG);
  pos = writeVarint(frame, pos, request);
  pos = writeVarint(frame, pos, MSG_ID_TAG);
  pos = writeVarint(frame, pos, msgId);
  pos = writeStringField(frame, pos, FROM_TAG, from, from.length, 'latin1');
  pos = writeStringField(frame, pos, TO_TAG, to, to.length, 'latin1');
  pos = writeVarint(frame, pos, TIME_TAG);
  pos = writeVarint(frame, pos, time);
  pos = writeVarint(frame, pos, MSG_TYPE_TAG);
  pos = writeVarint(frame, pos, 1);
  writeStringField(frame, pos, CONTENT_TAG, content, content.length, 'latin1');
  return frame;
}

/** A cumulative MESSAGE_ACK up to inbox sequence `seq`. */
export function ackFrame(seq: number): Buffer {
  const ack = varintFieldLength(ACK_SEQ_TAG, seq);
  const body = varintFieldLength(TYPE_TAG, HeadType.MESSAGE_ACK) + lengthDelimitedLength(ACK_TAG, ack);
  const frame = Buffer.allocUnsafe(HEADER_LENGTH + body);
  writeHeader(frame, 0, body);
  let pos = writeVarint(frame, HEADER_LENGTH, TYPE_TAG);
  pos = writeVarint(frame, pos, HeadType.MESSAGE_ACK);
  pos = writeVarint(frame, pos, ACK_TAG);
  pos = writeVarint(frame, pos, ack);
  pos = writeVarint(frame, pos, ACK_SEQ_TAG);
  writeVarint(frame, pos, seq);
  return frame;
}
