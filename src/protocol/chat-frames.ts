// The two frames every chat message costs, assembled by hand because they are the hot path
// (test/protocol/chat-frames.test.ts checks them against protobufjs):
//
// - the delivery, built from the stored MessageRequest bytes without decoding them: protobuf
//   lets a field be appended to an encoded message, so the inbox sequence (MessageRequest.seq,
//   field 16) is written after the stored body. Live delivery and replay use it alike.
//     Message { type = MESSAGE_REQUEST (1), sequence = seq (2),
//               messageRequest (6) = <stored body> + seq (16) }
// - the sender's success response:
//     Message { type = MESSAGE_RESPONSE (1), sequence (2), session_id (3),
//               messageResponse (7) = { result = true (1), info = "ok" (3), seq (17), duplicate (18) } }

import { HEADER_LENGTH, writeHeader } from './frame.js';
import { HeadType, type UInt64 } from './types.js';

const TYPE_TAG = 0x08; // field 1, varint
const SEQUENCE_TAG = 0x10; // field 2, varint
const REQUEST_TAG = 0x32; // field 6, length-delimited
const SEQ_TAG = [0x80, 0x01]; // field 16, varint

/**
 * Upper bound of the bytes a delivery frame's body adds to the stored request (type, sequence,
 * tag and length of the request, the appended seq); the 8-byte header is not part of the body.
 */
export const DELIVERY_OVERHEAD = 2 + 1 + 8 + 1 + 3 + 2 + 8;

/** The longest varint of a number below 2^53 (a seq, an epoch): 8 bytes. */
const MAX_VARINT_53 = 8;

/**
 * Whether a message whose stored request (storedRequestBody) is `storedLength` bytes, to a
 * recipient whose uid is `toBytes` bytes, may be accepted: its delivery (deliveryFrame) and its
 * forward to another worker (PEER_DELIVER, which adds the uid and the epoch) must both fit
 * `maxFrameLength` whatever its seq and epoch, so that a message accepted once fits every later
 * replay and every worker. The forward is the larger (PROTOCOL.md §5, "How large a message may be").
 */
export function deliveryFits(storedLength: number, toBytes: number, maxFrameLength: number): boolean {
  // Message { type (2), sequence (1 + 8), messageRequest (1 + length) { stored + seq (2 + 8) } }
  const request = storedLength + 2 + MAX_VARINT_53;
  const delivery = 2 + 1 + MAX_VARINT_53 + 1 + varintLength(request) + request;
  // Message { type (2), peerDeliver (2 + length) { uid (1 + length), seq (1 + 8), body (1 + length), epoch (1 + 8) } }
  const peer = 1 + varintLength(toBytes) + toBytes + 1 + MAX_VARINT_53 + 1 + varintLength(storedLength) + storedLength + 1 + MAX_VARINT_53;
  return delivery <= maxFrameLength && 2 + 2 + varintLength(peer) + peer <= maxFrameLength;
}

export function varintLength(n: number): number {
  let length = 1;
  while (n >= 0x80) {
    n = Math.floor(n / 128);
    length++;
  }
  return length;
}

/** Writes a non-negative integer below 2^53 as a varint; arithmetic, since bit operators are 32-bit. */
export function writeVarint(buf: Buffer, pos: number, n: number): number {
  while (n >= 0x80) {
    buf[pos++] = (n % 128) | 0x80;
    n = Math.floor(n / 128);
  }
  buf[pos++] = n;
  return pos;
}

export function deliveryFrame(storedRequest: Uint8Array, seq: number): Buffer {
  const seqLength = varintLength(seq);
  const requestLength = storedRequest.length + SEQ_TAG.length + seqLength;
  const bodyLength = 2 + 1 + seqLength + 1 + varintLength(requestLength) + requestLength;
  const frame = Buffer.allocUnsafe(HEADER_LENGTH + bodyLength);
  writeHeader(frame, 0, bodyLength);
  let pos = HEADER_LENGTH;
  frame[pos++] = TYPE_TAG;
  frame[pos++] = HeadType.MESSAGE_REQUEST;
  frame[pos++] = SEQUENCE_TAG;
  pos = writeVarint(frame, pos, seq);
  frame[pos++] = REQUEST_TAG;
  pos = writeVarint(frame, pos, requestLength);
  frame.set(storedRequest, pos);
  pos += storedRequest.length;
  frame[pos++] = SEQ_TAG[0]!;
  frame[pos++] = SEQ_TAG[1]!;
  writeVarint(frame, pos, seq);
  return frame;
}

const SESSION_ID_TAG = 0x1a; // field 3, length-delimited
const RESPONSE_TAG = 0x3a; // field 7, length-delimited
const RESULT_TRUE = [0x08, 0x01]; // field 1 = true
const INFO_OK = [0x1a, 0x02, 0x6f, 0x6b]; // field 3 = "ok"
const RESPONSE_SEQ_TAG = [0x88, 0x01]; // field 17, varint
const DUPLICATE_TRUE = [0x90, 0x01, 0x01]; // field 18 = true

/** A uint64 as 32-bit halves. */
function halves(value: UInt64): [number, number] {
  if (typeof value === 'number') return [value >>> 0, Math.floor(value / 0x1_0000_0000) >>> 0];
  return [value.low >>> 0, value.high >>> 0];
}

function varint64Length(lo: number, hi: number): number {
  if (hi === 0) return varintLength(lo);
  let length = 5; // the low 35 bits
  hi >>>= 3;
  while (hi > 0) {
    length++;
    hi >>>= 7;
  }
  return length;
}

function writeVarint64(buf: Buffer, pos: number, lo: number, hi: number): number {
  while (hi !== 0) {
    buf[pos++] = (lo & 0x7f) | 0x80;
    lo = ((lo >>> 7) | (hi << 25)) >>> 0;
    hi >>>= 7;
  }
  return writeVarint(buf, pos, lo);
}

function writeBytes(buf: Buffer, pos: number, bytes: readonly number[]): number {
  for (const b of bytes) buf[pos++] = b;
  return pos;
}

/** MESSAGE_RESPONSE result=true for a stored message, echoing the request's `sequence`. */
export function storedResponseFrame(sequence: UInt64 | undefined, sessionId: string, seq: number, duplicate: boolean): Buffer {
  const [lo, hi] = halves(sequence ?? 0);
  const sequenceLength = lo === 0 && hi === 0 ? 0 : 1 + varint64Length(lo, hi);
  const idBytes = Buffer.byteLength(sessionId);
  const idLength = idBytes === 0 ? 0 : 1 + varintLength(idBytes) + idBytes;
  const responseLength = RESULT_TRUE.length + INFO_OK.length + RESPONSE_SEQ_TAG.length + varintLength(seq) + (duplicate ? DUPLICATE_TRUE.length : 0);
  const bodyLength = 2 + sequenceLength + idLength + 1 + varintLength(responseLength) + responseLength;
  const frame = Buffer.allocUnsafe(HEADER_LENGTH + bodyLength);
  writeHeader(frame, 0, bodyLength);
  let pos = HEADER_LENGTH;
  frame[pos++] = TYPE_TAG;
  frame[pos++] = HeadType.MESSAGE_RESPONSE;
  if (sequenceLength > 0) {
    frame[pos++] = SEQUENCE_TAG;
    pos = writeVarint64(frame, pos, lo, hi);
  }
  if (idLength > 0) {
    frame[pos++] = SESSION_ID_TAG;
    pos = writeVarint(frame, pos, idBytes);
    pos += frame.write(sessionId, pos, 'utf8');
  }
  frame[pos++] = RESPONSE_TAG;
  pos = writeVarint(frame, pos, responseLength);
  pos = writeBytes(frame, pos, RESULT_TRUE);
  pos = writeBytes(frame, pos, INFO_OK);
  pos = writeBytes(frame, pos, RESPONSE_SEQ_TAG);
  pos = writeVarint(frame, pos, seq);
  if (duplicate) writeBytes(frame, pos, DUPLICATE_TRUE);
  return frame;
}
