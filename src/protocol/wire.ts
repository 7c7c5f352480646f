// The protobuf wire format, written down once: varints, tags and length-delimited fields, for
// the code that reads or writes frames by hand because protobufjs would cost too much per
// message (chat-decoder.ts, chat-frames.ts, the stored body in codec.ts, the bench driver's
// frames and scanner). Field numbers are in types.ts (`Field`); protobufjs does the rest.
//
//   varint            7 bits a byte, low bits first, the high bit set on every byte but the
//                     last; at most 10 bytes (64 bits): 1 = 01, 300 = ac 02
//   tag               the varint  field << 3 | wire type:  field 1 varint = 08, field 16 = 80 01
//   length-delimited  tag, varint length, that many bytes:  field 2 "ab" = 12 02 61 62
//
// Numbers are JavaScript numbers below 2^53 (seqs, epochs, lengths, ms timestamps), or a uint64
// as its two 32-bit halves (lo, hi) where all 64 bits matter.

/** A view of bytes as a Buffer (no copy): what the readers and writers here take. */
export function bufferOf(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** The wire types switchboard's schema uses, and the two fixed-width ones a reader must skip. */
export const WireType = {
  VARINT: 0,
  I64: 1,
  LEN: 2,
  I32: 5,
} as const;
export type WireType = (typeof WireType)[keyof typeof WireType];
const { VARINT, I64, LEN, I32 } = WireType;

// Tags

/** A field's tag. Field numbers are below 2^29, so the tag fits 32 bits. */
export function tag(field: number, wireType: WireType): number {
  return field * 8 + wireType;
}

// A frame builder writes its constant tags as bytes it stores, not through writeVarint(): V8
// does not fold a module's constants into the code that reads them, so writeVarint(buf, pos,
// TAG) would test the tag's size on every frame, and call out for a two-byte one.

/**
 * The tag of a field numbered 1..15, which is one byte: a frame builder stores it as it is, as
 * fast as a literal. Throws for any other field (when the builder's module loads).
 */
export function oneByteTag(field: number, wireType: WireType): number {
  const value = tag(field, wireType);
  if (field < 1 || value >= 0x80) throw new RangeError(`the tag of field ${field} is not one byte`);
  return value;
}

/** A field's tag as the bytes it is written as: a longer one (fields 16 and up) for a frame builder to copy. */
export function tagBytes(field: number, wireType: WireType): readonly number[] {
  const bytes = Buffer.alloc(5);
  return [...bytes.subarray(0, writeVarint(bytes, 0, tag(field, wireType)))];
}

/** Strings up to this long are copied byte by byte when they are ASCII: ids and uids, per message. */
const SHORT_STRING = 64;

/**
 * Writes `s` as UTF-8 at `pos` (the caller sized `buf` with Buffer.byteLength); returns the
 * position after it. A short ASCII string (a uid, a device or session id) is stored char by char:
 * Buffer#write is a call into C++ that costs more than the loop.
 */
export function writeUtf8(buf: Buffer, pos: number, s: string): number {
  const n = s.length;
  if (n <= SHORT_STRING) {
    let i = 0;
    for (; i < n; i++) {
      const c = s.charCodeAt(i);
      if (c >= 0x80) break;
      buf[pos + i] = c;
    }
    if (i === n) return pos + n;
  }
  return pos + buf.write(s, pos, 'utf8');
}

/** Copies a few constant bytes (a tag, a field with a fixed value) to `pos`. Returns the position after them. */
export function writeBytes(buf: Buffer, pos: number, bytes: readonly number[]): number {
  for (let i = 0; i < bytes.length; i++) buf[pos++] = bytes[i]!;
  return pos;
}

// Writing

// varintLength() and writeVarint() are tiny so that V8 inlines them wherever they are called,
// however many calls a frame builder makes: a value below 128 costs a compare and one store;
// longer ones take a call.

/** The length of `n` (an integer, 0 <= n < 2^53) as a varint: 1 to 8 bytes. */
export function varintLength(n: number): number {
  return n < 0x80 ? 1 : longVarintLength(n);
}

function longVarintLength(n: number): number {
  if (n < 0x4000) return 2;
  if (n < 0x20_0000) return 3;
  if (n < 0x1000_0000) return 4;
  if (n < 0x8_0000_0000) return 5;
  if (n < 0x400_0000_0000) return 6;
  return n < 0x2_0000_0000_0000 ? 7 : 8;
}

/** Writes `n` (an integer, 0 <= n < 2^53) as a varint at `pos`. Returns the position after it. */
export function writeVarint(buf: Buffer, pos: number, n: number): number {
  if (n >= 0x80) return writeLongVarint(buf, pos, n);
  buf[pos] = n;
  return pos + 1;
}

function writeLongVarint(buf: Buffer, pos: number, n: number): number {
  // Arithmetic while past 32 bits, since bit operators are 32-bit.
  while (n > 0xffff_ffff) {
    buf[pos++] = (n % 128) | 0x80;
    n = Math.floor(n / 128);
  }
  while (n > 0x7f) {
    buf[pos++] = (n & 0x7f) | 0x80;
    n >>>= 7;
  }
  buf[pos++] = n;
  return pos;
}

/** The length of the uint64 `hi * 2^32 + lo` as a varint: 1 to 10 bytes. */
export function varint64Length(lo: number, hi: number): number {
  if (hi === 0) return varintLength(lo);
  let length = 5; // the low 35 bits
  hi >>>= 3;
  while (hi > 0) {
    length++;
    hi >>>= 7;
  }
  return length;
}

/** Writes the uint64 `hi * 2^32 + lo` (two uint32 halves) as a varint at `pos`. Returns the position after it. */
export function writeVarint64(buf: Buffer, pos: number, lo: number, hi: number): number {
  while (hi !== 0) {
    buf[pos++] = (lo & 0x7f) | 0x80;
    lo = ((lo >>> 7) | (hi << 25)) >>> 0;
    hi >>>= 7;
  }
  return writeVarint(buf, pos, lo);
}

/** The length of a length-delimited field whose content is `contentLength` bytes: tag, length prefix, content. */
export function lengthDelimitedLength(fieldTag: number, contentLength: number): number {
  return varintLength(fieldTag) + varintLength(contentLength) + contentLength;
}

// Reading

/**
 * A read position in buf[pos, limit), in two forms:
 *
 * - the primitives (varint, tag, length, skip) read a uint64 exactly, as lo/hi, for a decoder
 *   (chat-decoder.ts); they return false or -1 for what they cannot read and leave `pos` where
 *   it was. A `strict` reader takes only the form every protobuf encoder writes: a varint in its
 *   shortest form (no trailing 00 byte) and within 64 bits, which a decoder needs that keeps
 *   wire bytes as they came (they then equal a re-encoding). A lenient one reads any varint of
 *   at most 10 bytes, as protobuf decoders do.
 * - next() steps through whole fields for a scanner (the bench's wire-scan.ts), reading numbers
 *   as numbers (exact below 2^53), always leniently, and throws RangeError on what it cannot read.
 *
 * One class for every hand reader, every field initialised, so V8 sees one shape wherever it
 * is used.
 */
export class WireReader {
  /** The last varint read: its low and high 32 bits (uint32 each). */
  lo = 0;
  hi = 0;
  /** After next(): the field number, its wire type, a varint's value, and [start, end) the bytes of a length-delimited one. */
  field = 0;
  wireType = 0;
  value = 0;
  start = 0;
  end = 0;

  constructor(
    public buf: Buffer,
    public pos: number,
    public limit: number,
    readonly strict: boolean,
  ) {}

  /** Points the reader at buf[pos, limit): a scanner that reads every frame reuses its readers rather than allocate them. */
  reset(buf: Buffer, pos: number, limit: number): this {
    this.buf = buf;
    this.pos = pos;
    this.limit = limit;
    return this;
  }

  /** Reads a varint into lo/hi. False for a truncated one, one of more than 10 bytes, and (strict) one not in shortest form or wider than 64 bits. */
  varint(): boolean {
    // One byte (every tag but a few, and small values): the common case, kept small to inline.
    const pos = this.pos;
    if (pos < this.limit && this.buf[pos]! < 0x80) {
      this.lo = this.buf[pos]!;
      this.hi = 0;
      this.pos = pos + 1;
      return true;
    }
    return this.#longVarint();
  }

  /** varint() past its one-byte case. */
  #longVarint(): boolean {
    const { buf, limit } = this;
    const start = this.pos;
    let pos = start;
    let lo = 0;
    let hi = 0;
    let b = 0x80;
    // Bytes 1..4 hold bits 0..27; byte 5 bits 28..34 (four for lo, three for hi); bytes 6..10 the rest of hi.
    for (let shift = 0; shift < 28 && b >= 0x80; shift += 7) {
      if (pos >= limit) return false;
      b = buf[pos++]!;
      lo |= (b & 0x7f) << shift;
    }
    if (b >= 0x80) {
      if (pos >= limit) return false;
      b = buf[pos++]!;
      lo |= b << 28;
      hi = (b & 0x7f) >> 4;
      for (let shift = 3; shift < 32 && b >= 0x80; shift += 7) {
        if (pos >= limit) return false;
        b = buf[pos++]!;
        hi |= (b & 0x7f) << shift;
      }
      if (b >= 0x80) return false;
    }
    // Shortest form: no trailing 00 byte, and a 10th byte (bit 63 only) of 01.
    if (this.strict && ((b === 0 && pos - start > 1) || (pos - start === 10 && b > 1))) return false;
    this.pos = pos;
    this.lo = lo >>> 0;
    this.hi = hi >>> 0;
    return true;
  }

  /** Reads a tag; returns `field << 3 | wireType` (a uint32), or -1 (unreadable, or beyond 32 bits). */
  tag(): number {
    const start = this.pos;
    if (this.varint() && this.hi === 0) return this.lo;
    this.pos = start;
    return -1;
  }

  /** Reads a length prefix; returns the end of the bytes it announces, or -1 (unreadable, or past the limit). */
  length(): number {
    const start = this.pos;
    if (this.varint() && this.hi === 0 && this.lo <= this.limit - this.pos) return this.pos + this.lo;
    this.pos = start;
    return -1;
  }

  /** Skips a field's value of `wireType` (0, 1, 2 or 5). False if it is truncated or of another wire type. */
  skip(wireType: number): boolean {
    if (wireType === VARINT) return this.varint();
    const end = wireType === LEN ? this.length() : wireType === I64 ? this.pos + 8 : wireType === I32 ? this.pos + 4 : -1;
    if (end < 0 || end > this.limit) return false;
    this.pos = end;
    return true;
  }

  /**
   * Reads the next field, for a scanner: `field`, `wireType`, and its value: `value` for a
   * varint (exact below 2^53; else 0), [start, end) for a length-delimited one's bytes (else
   * empty, at the position after the field). False at the limit. Throws RangeError for a
   * truncated field, a varint of more than 10 bytes, or a wire type other than 0, 1, 2 and 5.
   */
  next(): boolean {
    if (this.pos >= this.limit) return false;
    const fieldTag = this.#number();
    const wireType = fieldTag % 8;
    this.field = Math.floor(fieldTag / 8);
    this.wireType = wireType;
    if (wireType === VARINT) {
      this.value = this.#number();
      this.start = this.end = this.pos;
      return true;
    }
    this.value = 0;
    if (wireType === LEN) {
      const length = this.#number();
      if (length > this.limit - this.pos) throw new RangeError('truncated field');
      this.start = this.pos;
      this.end = this.pos += length;
    } else if (wireType === I64 || wireType === I32) {
      const end = this.pos + (wireType === I64 ? 8 : 4);
      if (end > this.limit) throw new RangeError('truncated field');
      this.start = this.end = this.pos = end;
    } else {
      throw new RangeError(`unsupported wire type ${wireType}`);
    }
    return true;
  }

  /**
   * next()'s varint: the value as a number, added up in floating point (exact below 2^53). For
   * a scanner this is faster than assembling lo/hi and converting, and it wants a number.
   */
  #number(): number {
    const { buf, limit } = this;
    const start = this.pos;
    if (start >= limit) throw new RangeError('truncated varint');
    let b = buf[start]!;
    this.pos = start + 1;
    if (b < 0x80) return b;
    let value = b & 0x7f;
    let scale = 128;
    do {
      if (this.pos >= limit) throw new RangeError('truncated varint');
      b = buf[this.pos++]!;
      value += (b & 0x7f) * scale;
      scale *= 128;
    } while (b >= 0x80);
    if (this.pos - start > 10) throw new RangeError('varint of more than 10 bytes');
    return value;
  }
}
