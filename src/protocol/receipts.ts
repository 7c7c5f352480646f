// Receipts on the wire (PROTOCOL.md §14): the RECEIPT frame a sender's devices get, and what a
// receipt needs of a stored message — its sender and msg_id — read from the stored body without
// decoding it (per delivery written to a device that sends receipts: the hot path).

import Long from 'long';
import { encodeMessageFrame } from './codec.js';
import { Field, HeadType, type Receipt, type UInt64 } from './types.js';
import { WireReader, WireType, bufferOf } from './wire.js';

const MSG_ID = Field.MessageRequest.msgId;
const FROM = Field.MessageRequest.from;
const EVENT = Field.MessageRequest.event;

export interface MessageOrigin {
  from: string;
  msgId: UInt64;
}

/** Where a stored body's sender is ([fromStart, fromEnd) of its bytes), and its msg_id (0: none). */
export interface OriginBytes {
  fromStart: number;
  fromEnd: number;
  msgId: UInt64;
}

/**
 * The sender and msg_id of a stored 1:1 message body; undefined for what no receipt is about (an
 * event, a body without a sender, one that does not parse).
 */
export function originOf(body: Uint8Array): MessageOrigin | undefined {
  const buf = bufferOf(body);
  const origin: OriginBytes = { fromStart: 0, fromEnd: 0, msgId: 0 };
  if (!readOrigin(new WireReader(buf, 0, buf.length, false), origin)) return undefined;
  return { from: buf.toString('utf8', origin.fromStart, origin.fromEnd), msgId: origin.msgId };
}

/**
 * originOf without a string or an object, for a caller that keeps its reader and result (per
 * delivery): reads the body `r` is reset to into `into`; false for what no receipt is about. The
 * stored form writes msg_id and from first, so this reads two fields in the usual case.
 */
export function readOrigin(r: WireReader, into: OriginBytes): boolean {
  into.msgId = 0;
  while (r.pos < r.limit) {
    const tag = r.tag();
    if (tag < 0) return false;
    const field = tag >>> 3;
    const wireType = tag & 7;
    if (field === MSG_ID && wireType === WireType.VARINT) {
      if (!r.varint()) return false;
      into.msgId = r.hi < 0x20_0000 ? r.hi * 0x1_0000_0000 + r.lo : Long.fromBits(r.lo | 0, r.hi | 0, true);
    } else if (field === FROM && wireType === WireType.LEN) {
      const end = r.length();
      if (end < 0 || end === r.pos) return false;
      into.fromStart = r.pos;
      into.fromEnd = end;
      // msg_id comes first when there is one: nothing more is needed.
      return true;
    } else if (field === EVENT) {
      return false;
    } else if (!r.skip(wireType)) {
      return false;
    }
  }
  return false;
}

/** A RECEIPT frame (no sequence: nothing answers it). */
export function receiptFrame(receipt: Receipt): Buffer {
  return encodeMessageFrame({ type: HeadType.RECEIPT, receipt });
}
