// Hand decoder for the frames every chat message brings in (MESSAGE_REQUEST from the sender,
// MESSAGE_ACK from the recipient, PEER_DELIVER from another worker), the inbound half of
// chat-frames.ts. It builds the
// same objects protobufjs would and, for a request, keeps its wire bytes so that the stored
// form needs no re-encoding (storedRequestBody in codec.ts).
//
// It only takes the form every protobuf encoder writes: fields in ascending order, each once,
// no default values, minimal varints, valid UTF-8, no unknown fields. Anything else returns
// undefined and protobufjs decodes it (or refuses it), so this decoder never accepts what
// protobufjs would not, nor decodes anything differently (test/protocol/chat-decoder.test.ts).
// One exception, found on that slow path only: a known field with another wire type than its
// own is malformed whoever decodes it, and throws SB_ERR_BAD_PROTOBUF at once.
//
//   Message { type = 5 (1), sequence (2)?, session_id (3)?, messageRequest (6) }
//   Message { type = 8 (1), sequence (2)?, session_id (3)?, ack (16) { seq (1)?, group (2)? } }
//   Message { type = 23 (1), peerDeliver (20) { uid (1)?, seq (2)?, body (3)?, epoch (4)? } }

import { isUtf8 } from 'node:buffer';
import Long from 'long';
import { SwitchboardError } from '../errors.js';
import { Field, HeadType, type ImMessage, type MessageAck, type MessageRequest, type PeerDeliver } from './types.js';
import { WireReader, WireType, tag } from './wire.js';

/** Constructors of the reflected types: decoded objects get the same prototype (and defaults). */
export interface DecodedTypes {
  message: new () => ImMessage;
  messageRequest: new () => MessageRequest;
  messageAck: new () => MessageAck;
  peerDeliver: new () => PeerDeliver;
}

/**
 * Where a request's wire bytes are: from `start` in `bytes`, the frame it came in (not a copy,
 * nor a view made per message: the frame lives until the handler has built the stored body from
 * it, which is a copy; a request waiting in a connection's bounded queue pins its read chunk
 * until then), and the two ranges the server replaces, as offsets in `bytes`: `from` (absent: an
 * empty range where it belongs, after msg_id and before `to`) and the fields only the server
 * sets, `seq` and `stored_at`, at the end (absent: `seqStart` is where the request ends).
 * Everything else is stored as it came.
 */
export interface RequestWire {
  bytes: Buffer;
  start: number;
  fromStart: number;
  fromEnd: number;
  seqStart: number;
}

/** Where a hand-decoded MessageRequest keeps its RequestWire (invisible to protobufjs and JSON). */
export const REQUEST_WIRE = Symbol('switchboard.requestWire');
export type WithWire = MessageRequest & { [REQUEST_WIRE]?: RequestWire };

const { VARINT, LEN } = WireType;
const M = Field.Message;
const R = Field.MessageRequest;

/**
 * The wire type of every field of the three messages the decoder reads, field by field (the
 * type checker wants them all); test/protocol/schema.test.ts checks them against proto/im.proto.
 */
export const KNOWN_WIRE_TYPES = {
  Message: {
    type: VARINT,
    sequence: VARINT,
    sessionId: LEN,
    loginRequest: LEN,
    loginResponse: LEN,
    messageRequest: LEN,
    messageResponse: LEN,
    notification: LEN,
    heartBeat: LEN,
    ack: LEN,
    peerHello: LEN,
    peerChallenge: LEN,
    peerAuth: LEN,
    peerDeliver: LEN,
    peerNudge: LEN,
    peerGroup: LEN,
    conversationRequest: LEN,
    conversationResponse: LEN,
    receipt: LEN,
    peerReceipt: LEN,
  },
  MessageRequest: { msgId: VARINT, from: LEN, to: LEN, time: VARINT, msgType: VARINT, content: LEN, url: LEN, property: LEN, fromNick: LEN, json: LEN, seq: VARINT, storedAt: VARINT, group: LEN, event: LEN, originDevice: LEN, recalled: VARINT, edited: VARINT },
  MessageAck: { seq: VARINT, group: LEN },
  PeerDeliver: { uid: LEN, seq: VARINT, body: LEN, epoch: VARINT },
} as const satisfies {
  Message: Record<keyof typeof Field.Message, WireType>;
  MessageRequest: Record<keyof typeof Field.MessageRequest, WireType>;
  MessageAck: Record<keyof typeof Field.MessageAck, WireType>;
  PeerDeliver: Record<keyof typeof Field.PeerDeliver, WireType>;
};

/** The wire type of each field number (index) of a message; -1: unknown. */
function wireTypes(numbers: Record<string, number>, types: Record<string, WireType>): Int8Array {
  const table = new Int8Array(Math.max(...Object.values(numbers)) + 1).fill(-1);
  for (const [name, field] of Object.entries(numbers)) table[field] = types[name]!;
  return table;
}
const MESSAGE_WIRE = wireTypes(Field.Message, KNOWN_WIRE_TYPES.Message);
const REQUEST_WIRE_TYPES = wireTypes(Field.MessageRequest, KNOWN_WIRE_TYPES.MessageRequest);
const ACK_WIRE = wireTypes(Field.MessageAck, KNOWN_WIRE_TYPES.MessageAck);
const PEER_DELIVER_WIRE = wireTypes(Field.PeerDeliver, KNOWN_WIRE_TYPES.PeerDeliver);

/** MessageRequest's string fields, as a bit set: from, to, content, url, property, from_nick, json. */
const STRING_FIELDS = [R.from, R.to, R.content, R.url, R.property, R.fromNick, R.json].reduce((set, field) => set | (1 << field), 0);
const TYPE_TAG = tag(M.type, VARINT);
const MSG_ID_TAG = tag(R.msgId, VARINT);
const ACK_SEQ_TAG = tag(Field.MessageAck.seq, VARINT);
const ACK_GROUP_TAG = tag(Field.MessageAck.group, LEN);

/**
 * Whether the hand decoder may leave a field it does not take to protobufjs. A known field of
 * another wire type is malformed: protobufjs would skip it as unknown, so it is refused here.
 */
function declined(table: Int8Array, field: number, wireType: number, where: string): undefined {
  const expected = field < table.length ? table[field]! : -1;
  if (expected >= 0 && expected !== wireType) {
    throw new SwitchboardError('SB_ERR_BAD_PROTOBUF', `frame body is not a valid Message: ${where} field ${field} has wire type ${wireType}, not ${expected}`);
  }
  return undefined;
}

/** The last varint `c` read as protobufjs gives a non-zero uint64 (Long), or undefined for zero. */
function long(c: WireReader): Long | undefined {
  return c.lo === 0 && c.hi === 0 ? undefined : new Long(c.lo | 0, c.hi | 0, true);
}

/** A non-empty, valid UTF-8 string between pos and end, or undefined. */
function text(buf: Buffer, pos: number, end: number): string | undefined {
  if (end === pos) return undefined;
  for (let i = pos; i < end; i++) {
    if (buf[i]! >= 0x80) return isUtf8(buf.subarray(pos, end)) ? buf.toString('utf8', pos, end) : undefined;
  }
  return buf.toString('latin1', pos, end);
}

/** Decodes a MESSAGE_REQUEST, MESSAGE_ACK or PEER_DELIVER frame body; undefined for anything else. */
export function decodeChatMessage(body: Buffer, types: DecodedTypes): ImMessage | undefined {
  // type: the first field, one byte.
  if (body.length < 2 || body[0] !== TYPE_TAG) return undefined;
  const type = body[1];
  if (type !== HeadType.MESSAGE_REQUEST && type !== HeadType.MESSAGE_ACK && type !== HeadType.PEER_DELIVER) return undefined;
  const c = new WireReader(body, 2, body.length, true);
  const message = new types.message();
  message.type = type;
  let last: number = M.type;
  while (c.pos < c.limit) {
    const fieldTag = c.tag();
    const field = fieldTag >>> 3;
    if (fieldTag < 0 || field <= last) return undefined;
    last = field;
    const wireType = fieldTag & 7;
    if (field === M.sequence && wireType === VARINT) {
      if (!c.varint()) return undefined;
      const sequence = long(c);
      if (!sequence) return undefined;
      message.sequence = sequence;
    } else if (field === M.sessionId && wireType === LEN) {
      const end = c.length();
      const sessionId = end < 0 ? undefined : text(body, c.pos, end);
      if (sessionId === undefined) return undefined;
      message.sessionId = sessionId;
      c.pos = end;
    } else if (field === M.messageRequest && wireType === LEN && type === HeadType.MESSAGE_REQUEST) {
      const end = c.length();
      const request = end < 0 ? undefined : decodeRequest(new WireReader(body, c.pos, end, true), types);
      if (!request) return undefined;
      message.messageRequest = request;
      c.pos = end;
    } else if (field === M.ack && wireType === LEN && type === HeadType.MESSAGE_ACK) {
      const end = c.length();
      const ack = end < 0 ? undefined : decodeAck(new WireReader(body, c.pos, end, true), types);
      if (!ack) return undefined;
      message.ack = ack;
      c.pos = end;
    } else if (field === M.peerDeliver && wireType === LEN && type === HeadType.PEER_DELIVER) {
      const end = c.length();
      const peerDeliver = end < 0 ? undefined : decodePeerDeliver(new WireReader(body, c.pos, end, true), types);
      if (!peerDeliver) return undefined;
      message.peerDeliver = peerDeliver;
      c.pos = end;
    } else {
      return declined(MESSAGE_WIRE, field, wireType, 'Message');
    }
  }
  return message;
}

/** MessageAck { seq (1)?, group (2)? }. */
function decodeAck(c: WireReader, types: DecodedTypes): MessageAck | undefined {
  const ack = new types.messageAck();
  if (c.pos === c.limit) return ack;
  let fieldTag = c.tag();
  if (fieldTag === ACK_SEQ_TAG) {
    if (!c.varint()) return undefined;
    const seq = long(c);
    if (!seq) return undefined;
    ack.seq = seq;
    if (c.pos === c.limit) return ack;
    fieldTag = c.tag();
  }
  if (fieldTag === ACK_GROUP_TAG) {
    const end = c.length();
    const group = end < 0 ? undefined : text(c.buf, c.pos, end);
    if (group === undefined || end !== c.limit) return undefined;
    ack.group = group;
    return ack;
  }
  const field = fieldTag >>> 3;
  return fieldTag >= 0 && (field === Field.MessageAck.seq || field === Field.MessageAck.group) ? declined(ACK_WIRE, field, fieldTag & 7, 'MessageAck') : undefined;
}

/** PeerDeliver { uid (1)?, seq (2)?, body (3)?, epoch (4)? }; the body a view of the frame, as protobufjs gives it. */
function decodePeerDeliver(c: WireReader, types: DecodedTypes): PeerDeliver | undefined {
  const { buf } = c;
  const d = new types.peerDeliver();
  const P = Field.PeerDeliver;
  let last = 0;
  while (c.pos < c.limit) {
    const fieldTag = c.tag();
    const field = fieldTag >>> 3;
    if (fieldTag < 0 || field <= last) return undefined;
    last = field;
    const wireType = fieldTag & 7;
    if (wireType === VARINT && (field === P.seq || field === P.epoch)) {
      if (!c.varint()) return undefined;
      const value = long(c);
      if (!value) return undefined;
      if (field === P.seq) d.seq = value;
      else d.epoch = value;
    } else if (wireType === LEN && (field === P.uid || field === P.body)) {
      const end = c.length();
      if (end <= c.pos) return undefined;
      if (field === P.uid) {
        const uid = text(buf, c.pos, end);
        if (uid === undefined) return undefined;
        d.uid = uid;
      } else {
        d.body = buf.subarray(c.pos, end);
      }
      c.pos = end;
    } else {
      return declined(PEER_DELIVER_WIRE, field, wireType, 'PeerDeliver');
    }
  }
  return d;
}

/** MessageRequest, keeping its bytes minus `from` and `seq` as its RequestWire. */
function decodeRequest(c: WireReader, types: DecodedTypes): MessageRequest | undefined {
  const { buf } = c;
  const start = c.pos;
  const request: WithWire = new types.messageRequest();
  let last = 0;
  // The byte ranges of `from` and of `seq` and `stored_at`, cut out of the kept bytes; `from`
  // marks where it goes.
  let fromStart = -1;
  let fromEnd = -1;
  let seqStart = -1;
  while (c.pos < c.limit) {
    const fieldStart = c.pos;
    const fieldTag = c.tag();
    const field = fieldTag >>> 3;
    if (fieldTag < 0 || field <= last) return undefined;
    last = field;
    const wireType = fieldTag & 7;
    if (wireType === VARINT && (field === R.msgId || field === R.time || field === R.msgType || field === R.seq || field === R.storedAt)) {
      if (!c.varint() || (c.lo === 0 && c.hi === 0)) return undefined;
      if (field === R.msgType) {
        // uint32: protobufjs keeps the low 32 bits of a wider varint; take only what fits.
        if (c.hi !== 0) return undefined;
        request.msgType = c.lo;
      } else if (field === R.seq || field === R.storedAt) {
        // seq or stored_at: set by the server, never by the sender; cut from the tail.
        if (field === R.seq) request.seq = long(c);
        else request.storedAt = long(c);
        if (seqStart < 0) seqStart = fieldStart;
      } else if (field === R.msgId) {
        request.msgId = long(c);
      } else {
        request.time = long(c);
      }
    } else if (wireType === LEN && field < 32 && ((STRING_FIELDS >>> field) & 1) === 1) {
      const end = c.length();
      const value = end < 0 ? undefined : text(buf, c.pos, end);
      if (value === undefined) return undefined;
      c.pos = end;
      switch (field) {
        case R.from:
          request.from = value;
          fromStart = fieldStart;
          fromEnd = end;
          break;
        case R.to:
          request.to = value;
          break;
        case R.content:
          request.content = value;
          break;
        case R.url:
          request.url = value;
          break;
        case R.property:
          request.property = value;
          break;
        case R.fromNick:
          request.fromNick = value;
          break;
        default:
          request.json = value;
      }
    } else {
      return declined(REQUEST_WIRE_TYPES, field, wireType, 'MessageRequest');
    }
  }
  // Fields ascend and seq (16) and stored_at (17) are the highest, so they are the tail; `from`
  // (2) can only be preceded by msg_id (1).
  if (fromStart < 0) {
    c.pos = start;
    if (c.tag() !== MSG_ID_TAG || !c.varint()) c.pos = start;
    fromStart = fromEnd = c.pos;
  }
  request[REQUEST_WIRE] = { bytes: buf, start, fromStart, fromEnd, seqStart: seqStart < 0 ? c.limit : seqStart };
  return request;
}
