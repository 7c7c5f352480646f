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
import { Field, HeadType, type UInt64 } from './types.js';
import { WireType, lengthDelimitedLength, tag, varint64Length, varintFieldLength, varintLength, writeStringField, writeVarint, writeVarint64 } from './wire.js';

const { VARINT, LEN } = WireType;
const TYPE_TAG = tag(Field.Message.type, VARINT);
const SEQUENCE_TAG = tag(Field.Message.sequence, VARINT);
const SESSION_ID_TAG = tag(Field.Message.sessionId, LEN);
const REQUEST_TAG = tag(Field.Message.messageRequest, LEN);
const RESPONSE_TAG = tag(Field.Message.messageResponse, LEN);
const SEQ_TAG = tag(Field.MessageRequest.seq, VARINT);

/** The longest varint of a number below 2^53 (a seq, an epoch): 8 bytes. */
const MAX_VARINT_53 = 8;

/** A delivery's body before the request's length prefix, at the largest seq: type, sequence, the request's tag. */
const DELIVERY_HEAD = varintFieldLength(TYPE_TAG, HeadType.MESSAGE_REQUEST) + varintLength(SEQUENCE_TAG) + MAX_VARINT_53 + varintLength(REQUEST_TAG);
/** The seq appended to the stored request, at its largest. */
const SEQ_FIELD = varintLength(SEQ_TAG) + MAX_VARINT_53;

/**
 * Upper bound of the bytes a delivery frame's body adds to the stored request (type, sequence,
 * tag and length of the request, the appended seq); the 8-byte header is not part of the body.
 * The request's length prefix takes at most 3 bytes (a frame is below 2^21 bytes).
 */
export const DELIVERY_OVERHEAD = DELIVERY_HEAD + 3 + SEQ_FIELD;

// A forward to another worker: Message { type = PEER_DELIVER, peerDeliver { uid, seq, body, epoch } }.
const PEER_TYPE = varintFieldLength(TYPE_TAG, HeadType.PEER_DELIVER);
const PEER_DELIVER_TAG = tag(Field.Message.peerDeliver, LEN);
const PEER_UID_TAG = tag(Field.PeerDeliver.uid, LEN);
const PEER_BODY_TAG = tag(Field.PeerDeliver.body, LEN);
/** seq and epoch, at their largest. */
const PEER_NUMBERS = varintLength(tag(Field.PeerDeliver.seq, VARINT)) + MAX_VARINT_53 + varintLength(tag(Field.PeerDeliver.epoch, VARINT)) + MAX_VARINT_53;

/**
 * Whether a message whose stored request (storedRequestBody) is `storedLength` bytes, to a
 * recipient whose uid is `toBytes` bytes, may be accepted: its delivery (deliveryFrame) and its
 * forward to another worker (PEER_DELIVER, which adds the uid and the epoch) must both fit
 * `maxFrameLength` whatever its seq and epoch, so that a message accepted once fits every later
 * replay and every worker. The forward is the larger (PROTOCOL.md §5, "How large a message may be").
 */
export function deliveryFits(storedLength: number, toBytes: number, maxFrameLength: number): boolean {
  const request = storedLength + SEQ_FIELD;
  const delivery = DELIVERY_HEAD + varintLength(request) + request;
  const peer = lengthDelimitedLength(PEER_UID_TAG, toBytes) + lengthDelimitedLength(PEER_BODY_TAG, storedLength) + PEER_NUMBERS;
  return delivery <= maxFrameLength && PEER_TYPE + lengthDelimitedLength(PEER_DELIVER_TAG, peer) <= maxFrameLength;
}

export function deliveryFrame(storedRequest: Uint8Array, seq: number): Buffer {
  const seqLength = varintLength(seq);
  const requestLength = storedRequest.length + varintLength(SEQ_TAG) + seqLength;
  const bodyLength = varintFieldLength(TYPE_TAG, HeadType.MESSAGE_REQUEST) + varintLength(SEQUENCE_TAG) + seqLength + lengthDelimitedLength(REQUEST_TAG, requestLength);
  const frame = Buffer.allocUnsafe(HEADER_LENGTH + bodyLength);
  writeHeader(frame, 0, bodyLength);
  let pos = writeVarint(frame, HEADER_LENGTH, TYPE_TAG);
  pos = writeVarint(frame, pos, HeadType.MESSAGE_REQUEST);
  pos = writeVarint(frame, pos, SEQUENCE_TAG);
  pos = writeVarint(frame, pos, seq);
  pos = writeVarint(frame, pos, REQUEST_TAG);
  pos = writeVarint(frame, pos, requestLength);
  frame.set(storedRequest, pos);
  pos = writeVarint(frame, pos + storedRequest.length, SEQ_TAG);
  writeVarint(frame, pos, seq);
  return frame;
}

/** The bytes `write` puts at the start of a buffer (it returns where it stopped): constants made with the writers, at load time. */
function written(write: (buf: Buffer) => number): readonly number[] {
  const scratch = Buffer.alloc(32);
  return [...scratch.subarray(0, write(scratch))];
}

const R = Field.MessageResponse;
/** MessageResponse { result = true, info = "ok" } and the tag of seq: the same bytes in every success response. */
const RESPONSE_HEAD = written((buf) => {
  let pos = writeVarint(buf, 0, tag(R.result, VARINT));
  pos = writeVarint(buf, pos, 1);
  pos = writeStringField(buf, pos, tag(R.info, LEN), 'ok', 2, 'utf8');
  return writeVarint(buf, pos, tag(R.seq, VARINT));
});
const DUPLICATE_TRUE = written((buf) => writeVarint(buf, writeVarint(buf, 0, tag(R.duplicate, VARINT)), 1));

/** A uint64 as 32-bit halves. */
function halves(value: UInt64): [number, number] {
  if (typeof value === 'number') return [value >>> 0, Math.floor(value / 0x1_0000_0000) >>> 0];
  return [value.low >>> 0, value.high >>> 0];
}

function writeBytes(buf: Buffer, pos: number, bytes: readonly number[]): number {
  for (let i = 0; i < bytes.length; i++) buf[pos++] = bytes[i]!;
  return pos;
}

/** MESSAGE_RESPONSE result=true for a stored message, echoing the request's `sequence`. */
export function storedResponseFrame(sequence: UInt64 | undefined, sessionId: string, seq: number, duplicate: boolean): Buffer {
  const [lo, hi] = halves(sequence ?? 0);
  const sequenceLength = lo === 0 && hi === 0 ? 0 : varintLength(SEQUENCE_TAG) + varint64Length(lo, hi);
  const idBytes = Buffer.byteLength(sessionId);
  const idLength = idBytes === 0 ? 0 : lengthDelimitedLength(SESSION_ID_TAG, idBytes);
  const responseLength = RESPONSE_HEAD.length + varintLength(seq) + (duplicate ? DUPLICATE_TRUE.length : 0);
  const bodyLength = varintFieldLength(TYPE_TAG, HeadType.MESSAGE_RESPONSE) + sequenceLength + idLength + lengthDelimitedLength(RESPONSE_TAG, responseLength);
  const frame = Buffer.allocUnsafe(HEADER_LENGTH + bodyLength);
  writeHeader(frame, 0, bodyLength);
  let pos = writeVarint(frame, HEADER_LENGTH, TYPE_TAG);
  pos = writeVarint(frame, pos, HeadType.MESSAGE_RESPONSE);
  if (sequenceLength > 0) {
    pos = writeVarint(frame, pos, SEQUENCE_TAG);
    pos = writeVarint64(frame, pos, lo, hi);
  }
  if (idLength > 0) pos = writeStringField(frame, pos, SESSION_ID_TAG, sessionId, idBytes, 'utf8');
  pos = writeVarint(frame, pos, RESPONSE_TAG);
  pos = writeVarint(frame, pos, responseLength);
  pos = writeBytes(frame, pos, RESPONSE_HEAD);
  pos = writeVarint(frame, pos, seq);
  if (duplicate) writeBytes(frame, pos, DUPLICATE_TRUE);
  return frame;
}
