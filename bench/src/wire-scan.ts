// The few fields the bench driver reads from a frame body, found by walking the protobuf wire
// format (src/protocol/wire.ts) instead of decoding the whole Message: at hundreds of thousands
// of frames per second a full decode would make the driver, not the server, the bottleneck.

import { WireReader } from '../../src/protocol/wire.js';
import { Field } from '../../src/protocol/types.js';

/** What a scan found; fields absent from the frame stay 0 / empty. */
export interface Scanned {
  /** Message.type */
  type: number;
  /** Message.sequence (the client's request sequence, echoed in responses) */
  sequence: number;
  /** MessageRequest.msg_id and .seq (deliveries), and where its content lies in the body */
  msgId: number;
  seq: number;
  contentStart: number;
  contentEnd: number;
  /** MessageRequest.group is set (a group delivery), and .event (a membership event, no content) */
  group: boolean;
  event: boolean;
  /** MessageResponse.result, .seq and .error_code; LoginResponse.result, .inbox_head (as responseSeq) and .error_code */
  result: boolean;
  responseSeq: number;
  errorCode: string;
}

export function emptyScan(): Scanned {
  return { type: 0, sequence: 0, msgId: 0, seq: 0, contentStart: 0, contentEnd: 0, group: false, event: false, result: false, responseSeq: 0, errorCode: '' };
}

const M = Field.Message;
const R = Field.MessageRequest;
// MessageResponse and LoginResponse share result and error_code; MessageResponse.seq is where LoginResponse.inbox_head is.
const S = Field.MessageResponse;

/**
 * The readers of every scan, one for the Message and one for the message inside it: a scan runs
 * in one synchronous step and needs no more at once, and the driver scans every frame it
 * receives, so it allocates none.
 */
const MESSAGE_FIELDS = new WireReader(Buffer.alloc(0), 0, 0, false);
const INNER_FIELDS = new WireReader(Buffer.alloc(0), 0, 0, false);

/**
 * Fills `out` from a Message body (reusing the object: no allocation per frame). Throws
 * RangeError on a truncated field or an unsupported wire type.
 */
export function scanMessage(body: Buffer, out: Scanned): Scanned {
  out.type = out.sequence = out.msgId = out.seq = out.responseSeq = out.contentStart = out.contentEnd = 0;
  out.errorCode = '';
  out.result = out.group = out.event = false;
  const fields = MESSAGE_FIELDS.reset(body, 0, body.length);
  while (fields.next()) {
    if (fields.field === M.type) out.type = fields.value;
    else if (fields.field === M.sequence) out.sequence = fields.value;
    else if (fields.field === M.messageRequest) scanRequest(body, fields.start, fields.end, out);
    else if (fields.field === M.messageResponse || fields.field === M.loginResponse) scanResponse(body, fields.start, fields.end, out);
  }
  return out;
}

function scanRequest(body: Buffer, from: number, to: number, out: Scanned): void {
  const fields = INNER_FIELDS.reset(body, from, to);
  while (fields.next()) {
    if (fields.field === R.msgId) out.msgId = fields.value;
    else if (fields.field === R.content) {
      out.contentStart = fields.start;
      out.contentEnd = fields.end;
    } else if (fields.field === R.seq) out.seq = fields.value;
    else if (fields.field === R.group) out.group = true;
    else if (fields.field === R.event) out.event = true;
  }
}

function scanResponse(body: Buffer, from: number, to: number, out: Scanned): void {
  const fields = INNER_FIELDS.reset(body, from, to);
  while (fields.next()) {
    if (fields.field === S.result) out.result = fields.value !== 0;
    else if (fields.field === S.errorCode) out.errorCode = body.toString('utf8', fields.start, fields.end);
    else if (fields.field === S.seq) out.responseSeq = fields.value;
  }
}

/**
 * The decimal number at the start of body[start, end) ("1234.567|..."), read from the bytes
 * without making a string: how the bench reads the send time stamped in a message's content.
 */
export function leadingNumber(body: Buffer, start: number, end: number): number {
  let whole = 0;
  let i = start;
  for (; i < end; i++) {
    const c = body[i]! - 48;
    if (c < 0 || c > 9) break;
    whole = whole * 10 + c;
  }
  if (body[i] !== 46) return whole;
  let fraction = 0;
  let scale = 1;
  for (i++; i < end; i++) {
    const c = body[i]! - 48;
    if (c < 0 || c > 9) break;
    fraction = fraction * 10 + c;
    scale *= 10;
  }
  return whole + fraction / scale;
}
