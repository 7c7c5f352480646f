// Hand decoder for the two frames every chat message brings in (MESSAGE_REQUEST from the
// sender, MESSAGE_ACK from the recipient), the inbound half of chat-frames.ts. It builds the
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
//   Message { type = 8 (1), sequence (2)?, session_id (3)?, ack (16) { seq (1)? } }

import { isUtf8 } from 'node:buffer';
import Long from 'long';
import { SwitchboardError } from '../errors.js';
import { HeadType, type ImMessage, type MessageAck, type MessageRequest } from './types.js';

/** Constructors of the reflected types: decoded objects get the same prototype (and defaults). */
export interface DecodedTypes {
  message: new () => ImMessage;
  messageRequest: new () => MessageRequest;
  messageAck: new () => MessageAck;
}

/**
 * A view of a request's wire bytes (not a copy: it lives until the handler has built the stored
 * body from it, which is a copy; a request waiting in a connection's bounded queue pins its read
 * chunk until then), and the two ranges the server replaces: `from` (absent:
 * an empty range where it belongs, after msg_id and before `to`) and the fields only the server
 * sets, `seq` and `stored_at`, at the end (absent: `seqStart` is the length). Everything else is
 * stored as it came.
 */
export interface RequestWire {
  bytes: Buffer;
  fromStart: number;
  fromEnd: number;
  seqStart: number;
}

/** Where a hand-decoded MessageRequest keeps its RequestWire (invisible to protobufjs and JSON). */
export const REQUEST_WIRE = Symbol('switchboard.requestWire');
export type WithWire = MessageRequest & { [REQUEST_WIRE]?: RequestWire };

const VARINT = 0;
const LENGTH_DELIMITED = 2;
/** MessageRequest's string fields, as a bit set: from, to, content, url, property, from_nick, json. */
const STRING_FIELDS = (1 << 2) | (1 << 3) | (1 << 6) | (1 << 8) | (1 << 9) | (1 << 10) | (1 << 11);

/** The wire type of each field number (index) the schema knows; -1: unknown. */
function wireTypes(entries: [field: number, wireType: number][]): Int8Array {
  const table = new Int8Array(32).fill(-1);
  for (const [field, wireType] of entries) table[field] = wireType;
  return table;
}
// Message: type, sequence, session_id, the nine bodies 4..9 and 16..21.
const MESSAGE_WIRE = wireTypes([
  [1, VARINT],
  [2, VARINT],
  ...[3, 4, 5, 6, 7, 8, 9, 16, 17, 18, 19, 20, 21].map((field): [number, number] => [field, LENGTH_DELIMITED]),
]);
// MessageRequest: msg_id, from, to, time, msg_type, content, url, property, from_nick, json, seq, stored_at.
const ACK_WIRE = wireTypes([[1, VARINT]]);
const REQUEST_WIRE_TYPES = wireTypes([
  ...[1, 4, 5, 16, 17].map((field): [number, number] => [field, VARINT]),
  ...[2, 3, 6, 8, 9, 10, 11].map((field): [number, number] => [field, LENGTH_DELIMITED]),
]);

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

/** A read position; `lo`/`hi` hold the last varint read. */
class Cursor {
  lo = 0;
  hi = 0;
  constructor(
    readonly buf: Buffer,
    public pos: number,
    readonly end: number,
  ) {}

  /**
   * Reads a minimal varint of at most 10 bytes (64 bits) into lo/hi. False for a truncated,
   * overlong (a trailing 0x00 byte) or wider-than-64-bit one.
   */
  varint(): boolean {
    const { buf, end } = this;
    let pos = this.pos;
    let lo = 0;
    let hi = 0;
    let b = 0;
    for (let shift = 0; shift < 28; shift += 7) {
      if (pos >= end) return false;
      b = buf[pos++]!;
      lo |= (b & 0x7f) << shift;
      if (b < 0x80) return this.#done(pos, lo >>> 0, 0, b, shift);
    }
    // Byte 5 holds bits 28..34: four for lo, three for hi.
    if (pos >= end) return false;
    b = buf[pos++]!;
    lo |= (b & 0x0f) << 28;
    hi = (b & 0x7f) >> 4;
    if (b < 0x80) return this.#done(pos, lo >>> 0, hi, b, 28);
    for (let shift = 3; shift <= 31; shift += 7) {
      if (pos >= end) return false;
      b = buf[pos++]!;
      hi |= (b & 0x7f) << shift;
      if (b < 0x80) {
        // The 10th byte carries bit 63 only.
        if (shift === 31 && b > 1) return false;
        return this.#done(pos, lo >>> 0, hi >>> 0, b, shift);
      }
    }
    return false;
  }

  #done(pos: number, lo: number, hi: number, last: number, shift: number): boolean {
    if (last === 0 && shift !== 0) return false;
    this.pos = pos;
    this.lo = lo;
    this.hi = hi;
    return true;
  }

  /** Reads a tag; returns `field << 3 | wireType`, or -1. */
  tag(): number {
    if (!this.varint() || this.hi !== 0 || this.lo > 0x7fffffff) return -1;
    return this.lo;
  }

  /** Reads a length prefix; returns the end of the bytes it announces, or -1. */
  length(): number {
    if (!this.varint() || this.hi !== 0 || this.lo > this.end - this.pos) return -1;
    return this.pos + this.lo;
  }

  /** A non-zero uint64 as protobufjs gives it (Long), or undefined for zero. */
  long(): Long | undefined {
    return this.lo === 0 && this.hi === 0 ? undefined : new Long(this.lo | 0, this.hi | 0, true);
  }
}

/** A non-empty, valid UTF-8 string between pos and end, or undefined. */
function text(buf: Buffer, pos: number, end: number): string | undefined {
  if (end === pos) return undefined;
  for (let i = pos; i < end; i++) {
    if (buf[i]! >= 0x80) return isUtf8(buf.subarray(pos, end)) ? buf.toString('utf8', pos, end) : undefined;
  }
  return buf.toString('latin1', pos, end);
}

/** Decodes a MESSAGE_REQUEST or MESSAGE_ACK frame body; undefined for anything else. */
export function decodeChatMessage(body: Buffer, types: DecodedTypes): ImMessage | undefined {
  // type: the first field, one byte.
  if (body.length < 2 || body[0] !== 0x08) return undefined;
  const type = body[1];
  if (type !== HeadType.MESSAGE_REQUEST && type !== HeadType.MESSAGE_ACK) return undefined;
  const c = new Cursor(body, 2, body.length);
  const message = new types.message();
  message.type = type;
  let last = 1;
  while (c.pos < c.end) {
    const tag = c.tag();
    const field = tag >>> 3;
    if (tag < 0 || field <= last) return undefined;
    last = field;
    const wireType = tag & 7;
    if (field === 2 && wireType === VARINT) {
      if (!c.varint()) return undefined;
      const sequence = c.long();
      if (!sequence) return undefined;
      message.sequence = sequence;
    } else if (field === 3 && wireType === LENGTH_DELIMITED) {
      const end = c.length();
      const sessionId = end < 0 ? undefined : text(body, c.pos, end);
      if (sessionId === undefined) return undefined;
      message.sessionId = sessionId;
      c.pos = end;
    } else if (field === 6 && wireType === LENGTH_DELIMITED && type === HeadType.MESSAGE_REQUEST) {
      const end = c.length();
      const request = end < 0 ? undefined : decodeRequest(new Cursor(body, c.pos, end), types);
      if (!request) return undefined;
      message.messageRequest = request;
      c.pos = end;
    } else if (field === 16 && wireType === LENGTH_DELIMITED && type === HeadType.MESSAGE_ACK) {
      const end = c.length();
      const ack = end < 0 ? undefined : decodeAck(new Cursor(body, c.pos, end), types);
      if (!ack) return undefined;
      message.ack = ack;
      c.pos = end;
    } else {
      return declined(MESSAGE_WIRE, field, wireType, 'Message');
    }
  }
  return message;
}

/** MessageAck { seq (1) }. */
function decodeAck(c: Cursor, types: DecodedTypes): MessageAck | undefined {
  const ack = new types.messageAck();
  if (c.pos === c.end) return ack;
  const tag = c.tag();
  if (tag !== 0x08) return tag >>> 3 === 1 ? declined(ACK_WIRE, 1, tag & 7, 'MessageAck') : undefined;
  if (!c.varint() || c.pos !== c.end) return undefined;
  const seq = c.long();
  if (!seq) return undefined;
  ack.seq = seq;
  return ack;
}

/** MessageRequest, keeping its bytes minus `from` and `seq` as its RequestWire. */
function decodeRequest(c: Cursor, types: DecodedTypes): MessageRequest | undefined {
  const { buf } = c;
  const start = c.pos;
  const request: WithWire = new types.messageRequest();
  let last = 0;
  // The byte ranges of `from` and of `seq` and `stored_at`, cut out of the kept bytes; `from`
  // marks where it goes.
  let fromStart = -1;
  let fromEnd = -1;
  let seqStart = -1;
  while (c.pos < c.end) {
    const fieldStart = c.pos;
    const tag = c.tag();
    const field = tag >>> 3;
    if (tag < 0 || field <= last) return undefined;
    last = field;
    const wireType = tag & 7;
    if (wireType === VARINT && (field === 1 || field === 4 || field === 5 || field === 16 || field === 17)) {
      if (!c.varint() || (c.lo === 0 && c.hi === 0)) return undefined;
      if (field === 5) {
        // uint32: protobufjs keeps the low 32 bits of a wider varint; take only what fits.
        if (c.hi !== 0) return undefined;
        request.msgType = c.lo;
      } else if (field >= 16) {
        // seq or stored_at: set by the server, never by the sender; cut from the tail.
        if (field === 16) request.seq = c.long();
        else request.storedAt = c.long();
        if (seqStart < 0) seqStart = fieldStart;
      } else if (field === 1) {
        request.msgId = c.long();
      } else {
        request.time = c.long();
      }
    } else if (wireType === LENGTH_DELIMITED && field < 32 && ((STRING_FIELDS >>> field) & 1) === 1) {
      const end = c.length();
      const value = end < 0 ? undefined : text(buf, c.pos, end);
      if (value === undefined) return undefined;
      c.pos = end;
      switch (field) {
        case 2:
          request.from = value;
          fromStart = fieldStart;
          fromEnd = end;
          break;
        case 3:
          request.to = value;
          break;
        case 6:
          request.content = value;
          break;
        case 8:
          request.url = value;
          break;
        case 9:
          request.property = value;
          break;
        case 10:
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
    fromStart = start < c.end && buf[start] === 0x08 ? skipVarint(buf, start + 1) : start;
    fromEnd = fromStart;
  }
  const bytes = buf.subarray(start, c.end);
  request[REQUEST_WIRE] = { bytes, fromStart: fromStart - start, fromEnd: fromEnd - start, seqStart: (seqStart < 0 ? c.end : seqStart) - start };
  return request;
}

function skipVarint(buf: Buffer, pos: number): number {
  while (buf[pos++]! >= 0x80);
  return pos;
}
