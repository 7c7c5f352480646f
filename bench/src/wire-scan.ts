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
  const fields = new FieldReader(body, 0, body.length);
  while (fields.next()) {
    if (fields.field === TYPE) out.type = fields.value;
    else if (fields.field === SEQUENCE) out.sequence = fields.value;
    else if (fields.field === MESSAGE_REQUEST) scanRequest(body, fields.start, fields.end, out);
    else if (fields.field === MESSAGE_RESPONSE || fields.field === LOGIN_RESPONSE) scanResponse(body, fields.start, fields.end, out);
  }
  return out;
}

function scanRequest(body: Buffer, from: number, to: number, out: Scanned): void {
  const fields = new FieldReader(body, from, to);
  while (fields.next()) {
    if (fields.field === 1) out.msgId = fields.value;
    else if (fields.field === 6) {
      out.contentStart = fields.start;
      out.contentEnd = fields.end;
    } else if (fields.field === 16) out.seq = fields.value;
  }
}

function scanResponse(body: Buffer, from: number, to: number, out: Scanned): void {
  // MessageResponse and LoginResponse share result=1 and error_code=16; 17 is MessageResponse.seq and LoginResponse.inbox_head.
  const fields = new FieldReader(body, from, to);
  while (fields.next()) {
    if (fields.field === 1) out.result = fields.value !== 0;
    else if (fields.field === 16) out.errorCode = body.toString('utf8', fields.start, fields.end);
    else if (fields.field === 17) out.responseSeq = fields.value;
  }
}

/**
 * Steps through the fields in [from, to): after next(), `field` is the field number, and
 * `value` a varint's value (exact up to 2^53) or [start, end) a length-delimited field's bytes.
 * Throws on a truncated field or an unsupported wire type. (A small object rather than a
 * callback per field: V8 keeps it on the stack, and the driver scans every frame it receives.)
 */
class FieldReader {
  field = 0;
  value = 0;
  start = 0;
  end = 0;
  #pos: number;
  readonly #buf: Buffer;
  readonly #to: number;

  constructor(buf: Buffer, from: number, to: number) {
    this.#buf = buf;
    this.#pos = from;
    this.#to = to;
  }

  next(): boolean {
    if (this.#pos >= this.#to) return false;
    const key = this.#varint();
    this.field = Math.floor(key / 8);
    switch (key % 8) {
      case 0:
        this.value = this.#varint();
        this.start = this.end = this.#pos;
        return true;
      case 2: {
        const length = this.#varint();
        if (this.#pos + length > this.#to) throw new RangeError('truncated field');
        this.value = 0;
        this.start = this.#pos;
        this.end = this.#pos += length;
        return true;
      }
      case 1:
        return this.#skip(8);
      case 5:
        return this.#skip(4);
      default:
        throw new RangeError(`unsupported wire type ${key % 8}`);
    }
  }

  #skip(n: number): boolean {
    if (this.#pos + n > this.#to) throw new RangeError('truncated field');
    this.value = 0;
    this.start = this.end = this.#pos += n;
    return true;
  }

  #varint(): number {
    const buf = this.#buf;
    if (this.#pos >= this.#to) throw new RangeError('truncated varint');
    let b = buf[this.#pos++]!;
    if (b < 0x80) return b;
    // Past one byte: arithmetic, since bit operators are 32-bit.
    let value = b & 0x7f;
    let scale = 128;
    do {
      if (this.#pos >= this.#to) throw new RangeError('truncated varint');
      b = buf[this.#pos++]!;
      value += (b & 0x7f) * scale;
      scale *= 128;
    } while (b & 0x80);
    return value;
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
