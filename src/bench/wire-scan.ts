// The few fields the bench driver reads from a frame body, found by walking the protobuf wire
// format instead of decoding the whole Message: at hundreds of thousands of frames per second
// a full decode would make the driver, not the server, the bottleneck. Field numbers are
// those of proto/im.proto.

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
  /** MessageResponse.result, .seq and .error_code; LoginResponse.result, .inbox_head (as responseSeq) and .error_code */
  result: boolean;
  responseSeq: number;
  errorCode: string;
}

export function emptyScan(): Scanned {
  return { type: 0, sequence: 0, msgId: 0, seq: 0, contentStart: 0, contentEnd: 0, result: false, responseSeq: 0, errorCode: '' };
}

// Message fields
const TYPE = 1;
const SEQUENCE = 2;
const LOGIN_RESPONSE = 5;
const MESSAGE_REQUEST = 6;
const MESSAGE_RESPONSE = 7;

/** Fills `out` from a Message body (reusing the object: no allocation per frame). */
export function scanMessage(body: Buffer, out: Scanned): Scanned {
  out.type = out.sequence = out.msgId = out.seq = out.responseSeq = out.contentStart = out.contentEnd = 0;
  out.errorCode = '';
  out.result = false;
  walk(body, 0, body.length, (field, value, start, end) => {
    if (field === TYPE) out.type = value;
    else if (field === SEQUENCE) out.sequence = value;
    else if (field === MESSAGE_REQUEST) scanRequest(body, start, end, out);
    else if (field === MESSAGE_RESPONSE || field === LOGIN_RESPONSE) scanResponse(body, start, end, out);
  });
  return out;
}

function scanRequest(body: Buffer, from: number, to: number, out: Scanned): void {
  walk(body, from, to, (field, value, start, end) => {
    if (field === 1) out.msgId = value;
    else if (field === 6) {
      out.contentStart = start;
      out.contentEnd = end;
    }
    else if (field === 16) out.seq = value;
  });
}

function scanResponse(body: Buffer, from: number, to: number, out: Scanned): void {
  // MessageResponse and LoginResponse share result=1 and error_code=16; 17 is MessageResponse.seq and LoginResponse.inbox_head.
  walk(body, from, to, (field, value, start, end) => {
    if (field === 1) out.result = value !== 0;
    else if (field === 16) out.errorCode = body.toString('utf8', start, end);
    else if (field === 17) out.responseSeq = value;
  });
}

type Visit = (field: number, value: number, start: number, end: number) => void;

/**
 * Calls `visit` for each field in [from, to): varints with their value (exact up to 2^53),
 * length-delimited fields with their byte range. Throws on a truncated or unknown wire type.
 */
function walk(buf: Buffer, from: number, to: number, visit: Visit): void {
  let i = from;
  while (i < to) {
    let key = 0;
    let shift = 0;
    let b: number;
    do {
      if (i >= to) throw new RangeError('truncated field key');
      b = buf[i++]!;
      key += (b & 0x7f) * 2 ** shift;
      shift += 7;
    } while (b & 0x80);
    const field = Math.floor(key / 8);
    switch (key & 7) {
      case 0: {
        let value = 0;
        shift = 0;
        do {
          if (i >= to) throw new RangeError('truncated varint');
          b = buf[i++]!;
          value += (b & 0x7f) * 2 ** shift;
          shift += 7;
        } while (b & 0x80);
        visit(field, value, i, i);
        break;
      }
      case 2: {
        let length = 0;
        shift = 0;
        do {
          if (i >= to) throw new RangeError('truncated length');
          b = buf[i++]!;
          length += (b & 0x7f) * 2 ** shift;
          shift += 7;
        } while (b & 0x80);
        if (i + length > to) throw new RangeError('truncated field');
        visit(field, 0, i, i + length);
        i += length;
        break;
      }
      case 1:
        i += 8;
        break;
      case 5:
        i += 4;
        break;
      default:
        throw new RangeError(`unsupported wire type ${key & 7}`);
    }
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
