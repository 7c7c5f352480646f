// The frames every chat message costs, assembled by hand because they are the hot path
// (test/protocol/chat-frames.test.ts checks them against protobufjs):
//
// - the delivery, built from the stored MessageRequest bytes without decoding them: protobuf
//   lets a field be appended to an encoded message, so the inbox sequence (MessageRequest.seq,
//   field 16) is written after the stored body. Live delivery and replay use it alike.
//     Message { type = MESSAGE_REQUEST (1), sequence = seq (2),
//               messageRequest (6) = <stored body> + seq (16) }
// - the sender's success response:
//     Message { type = MESSAGE_RESPONSE (1), sequence (2), session_id (3),
//               messageResponse (7) = { result = true (1), info = "ok" (3), seq (17), duplicate (18), own_seq (19) } }
// - the forward to another worker that holds a session of the recipient:
//     Message { type = PEER_DELIVER (1), peerDeliver (20) = { uid (1), seq (2), body (3), epoch (4) } }

import { HEADER_LENGTH, writeHeader } from './frame.js';
import { Field, HeadType, type UInt64 } from './types.js';
import { WireType, lengthDelimitedLength, oneByteTag, tag, tagBytes, varint64Length, varintLength, writeBytes, writeVarint, writeUtf8, writeVarint64 } from './wire.js';

const { VARINT, LEN } = WireType;
// One byte each, stored as they are; MESSAGE_REQUEST and MESSAGE_RESPONSE are one-byte values too.
const TYPE_TAG = oneByteTag(Field.Message.type, VARINT);
const SEQUENCE_TAG = oneByteTag(Field.Message.sequence, VARINT);
const SESSION_ID_TAG = oneByteTag(Field.Message.sessionId, LEN);
const REQUEST_TAG = oneByteTag(Field.Message.messageRequest, LEN);
const RESPONSE_TAG = oneByteTag(Field.Message.messageResponse, LEN);
/** MessageRequest.seq: 80 01. */
const SEQ_TAG = tagBytes(Field.MessageRequest.seq, VARINT);

/** The longest varint of a number below 2^53 (a seq, an epoch): 8 bytes. */
const MAX_VARINT_53 = 8;

/**
 * Upper bound of the bytes a delivery frame's body adds to the stored request (type, sequence,
 * tag and length of the request, the appended seq); the 8-byte header is not part of the body.
 * The request's length prefix takes at most 3 bytes (a frame is below 2^21 bytes).
 */
export const DELIVERY_OVERHEAD = 2 + 1 + MAX_VARINT_53 + 1 + 3 + SEQ_TAG.length + MAX_VARINT_53;

// A forward to another worker: Message { type = PEER_DELIVER, peerDeliver { uid, seq, body, epoch } }.
const PEER_DELIVER_TAG = tag(Field.Message.peerDeliver, LEN);
const PEER_DELIVER_TAG_BYTES = tagBytes(Field.Message.peerDeliver, LEN);
const PEER_UID_TAG = tag(Field.PeerDeliver.uid, LEN);
const PEER_SEQ_TAG = tag(Field.PeerDeliver.seq, VARINT);
const PEER_BODY_TAG = tag(Field.PeerDeliver.body, LEN);
const PEER_EPOCH_TAG = tag(Field.PeerDeliver.epoch, VARINT);
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
  // Message { type (2), sequence (1 + 8), messageRequest (1 + length) { stored + seq (2 + 8) } }
  const request = storedLength + SEQ_TAG.length + MAX_VARINT_53;
  const delivery = 2 + 1 + MAX_VARINT_53 + 1 + varintLength(request) + request;
  const peer = lengthDelimitedLength(PEER_UID_TAG, toBytes) + lengthDelimitedLength(PEER_BODY_TAG, storedLength) + PEER_NUMBERS;
  return delivery <= maxFrameLength && 2 + lengthDelimitedLength(PEER_DELIVER_TAG, peer) <= maxFrameLength;
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
  pos = writeBytes(frame, pos + storedRequest.length, SEQ_TAG);
  writeVarint(frame, pos, seq);
  return frame;
}

/**
 * PEER_DELIVER of a stored message: what protobufjs writes for { uid, seq, body, epoch } (a
 * field at its default, 0 or empty, is left out as it would be).
 */
export function peerDeliverFrame(uid: string, seq: number, body: Uint8Array, epoch: number): Buffer {
  const uidBytes = Buffer.byteLength(uid);
  const peerLength =
    (uidBytes > 0 ? 1 + varintLength(uidBytes) + uidBytes : 0) +
    (seq > 0 ? 1 + varintLength(seq) : 0) +
    (body.length > 0 ? 1 + varintLength(body.length) + body.length : 0) +
    (epoch > 0 ? 1 + varintLength(epoch) : 0);
  const bodyLength = 2 + PEER_DELIVER_TAG_BYTES.length + varintLength(peerLength) + peerLength;
  const frame = Buffer.allocUnsafe(HEADER_LENGTH + bodyLength);
  writeHeader(frame, 0, bodyLength);
  let pos = HEADER_LENGTH;
  frame[pos++] = TYPE_TAG;
  frame[pos++] = HeadType.PEER_DELIVER;
  pos = writeBytes(frame, pos, PEER_DELIVER_TAG_BYTES);
  pos = writeVarint(frame, pos, peerLength);
  if (uidBytes > 0) {
    frame[pos++] = PEER_UID_TAG;
    pos = writeVarint(frame, pos, uidBytes);
    pos = writeUtf8(frame, pos, uid);
  }
  if (seq > 0) {
    frame[pos++] = PEER_SEQ_TAG;
    pos = writeVarint(frame, pos, seq);
  }
  if (body.length > 0) {
    frame[pos++] = PEER_BODY_TAG;
    pos = writeVarint(frame, pos, body.length);
    frame.set(body, pos);
    pos += body.length;
  }
  if (epoch > 0) {
    frame[pos++] = PEER_EPOCH_TAG;
    writeVarint(frame, pos, epoch);
  }
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
  pos = writeVarint(buf, pos, tag(R.info, LEN));
  pos = writeVarint(buf, pos, 2);
  pos += buf.write('ok', pos, 'latin1');
  return writeVarint(buf, pos, tag(R.seq, VARINT));
});
const DUPLICATE_TRUE = written((buf) => writeVarint(buf, writeVarint(buf, 0, tag(R.duplicate, VARINT)), 1));
const OWN_SEQ_TAG = tagBytes(R.ownSeq, VARINT);

/** A uint64's low 32 bits. */
function low32(value: UInt64): number {
  return typeof value === 'number' ? value >>> 0 : value.low >>> 0;
}

/** A uint64's high 32 bits. */
function high32(value: UInt64): number {
  return typeof value === 'number' ? Math.floor(value / 0x1_0000_0000) >>> 0 : value.high >>> 0;
}

/**
 * MESSAGE_RESPONSE result=true for a stored message, echoing the request's `sequence`; `ownSeq`
 * is the seq of its copy in the sender's own inbox (0: none kept, not written).
 */
export function storedResponseFrame(sequence: UInt64 | undefined, sessionId: string, seq: number, duplicate: boolean, ownSeq = 0): Buffer {
  const lo = sequence == null ? 0 : low32(sequence);
  const hi = sequence == null ? 0 : high32(sequence);
  const sequenceLength = lo === 0 && hi === 0 ? 0 : 1 + varint64Length(lo, hi);
  const idBytes = Buffer.byteLength(sessionId);
  const idLength = idBytes === 0 ? 0 : 1 + varintLength(idBytes) + idBytes;
  const responseLength = RESPONSE_HEAD.length + varintLength(seq) + (duplicate ? DUPLICATE_TRUE.length : 0) + (ownSeq > 0 ? OWN_SEQ_TAG.length + varintLength(ownSeq) : 0);
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
    pos = writeUtf8(frame, pos, sessionId);
  }
  frame[pos++] = RESPONSE_TAG;
  pos = writeVarint(frame, pos, responseLength);
  pos = writeBytes(frame, pos, RESPONSE_HEAD);
  pos = writeVarint(frame, pos, seq);
  if (duplicate) pos = writeBytes(frame, pos, DUPLICATE_TRUE);
  if (ownSeq > 0) writeVarint(frame, writeBytes(frame, pos, OWN_SEQ_TAG), ownSeq);
  return frame;
}
