// The frame that delivers a stored chat message, assembled from the stored MessageRequest bytes
// without decoding them: protobuf lets a field be appended to an encoded message, so the inbox
// sequence (MessageRequest.seq, field 16) is written after the stored body. Used for live
// delivery and replay alike, so both produce byte-identical frames.
//
//   Message { type = MESSAGE_REQUEST (field 1), sequence = seq (field 2),
//             messageRequest (field 6) = <stored body> + seq (field 16) }

import { HEADER_LENGTH, writeHeader } from './frame.js';
import { HeadType } from './types.js';

const TYPE_TAG = 0x08; // field 1, varint
const SEQUENCE_TAG = 0x10; // field 2, varint
const REQUEST_TAG = 0x32; // field 6, length-delimited
const SEQ_TAG = [0x80, 0x01]; // field 16, varint

/** Upper bound of the bytes a delivery frame adds to the stored body (header, tags, two seqs, length). */
export const DELIVERY_OVERHEAD = 8 + 2 + 1 + 8 + 1 + 3 + 2 + 8;

function varintLength(n: number): number {
  let length = 1;
  while (n >= 0x80) {
    n = Math.floor(n / 128);
    length++;
  }
  return length;
}

/** Writes a non-negative integer below 2^53 as a varint; arithmetic, since bit operators are 32-bit. */
function writeVarint(buf: Buffer, pos: number, n: number): number {
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
