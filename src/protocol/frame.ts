// Length-prefixed framing of the CrazyIM wire protocol: a streaming decoder that validates each
// header the moment it is complete, and the matching encoder. Knows bytes only, not protobuf.
//
//  0               2               4                               8
//  +---------------+---------------+-------------------------------+-------------------+
//  | magic  0x0086 | version       | body length (int32, body only)| body: `length` B  |
//  +---------------+---------------+-------------------------------+-------------------+
//  all integers big-endian

import { SwitchboardError } from '../errors.js';

export const FRAME_MAGIC = 0x0086;
export const FRAME_VERSION = 1;
export const HEADER_LENGTH = 8;
export const DEFAULT_MAX_FRAME_LENGTH = 64 * 1024;

/** Versions this decoder accepts. The original clients send 1; nothing else exists yet. */
const SUPPORTED_VERSIONS: ReadonlySet<number> = new Set([FRAME_VERSION]);
const EMPTY_BODY = Buffer.alloc(0);
/**
 * Where a header split across chunks is assembled. Shared by every decoder: it is read in the
 * same synchronous step that fills it. (Eight bytes per decoder would come from Buffer's pool,
 * and thousands of idle connections each keeping a sliver of a slab keep most slabs alive.)
 */
const HEADER_SCRATCH = Buffer.alloc(HEADER_LENGTH);

export interface FrameDecoderOptions {
  /** Largest accepted body length in bytes. */
  maxFrameLength?: number;
}

export type FrameHandler = (body: Buffer) => void;

/**
 * Streaming frame decoder. `push()` accepts any chunking of the byte stream and calls
 * `onFrame` once per complete frame body, in order.
 *
 * - Chunks are kept in a list; bytes are copied only for a body that spans chunks.
 *   A body lying inside one chunk is handed on as a slice of it (no copy): the consumer must
 *   finish with it before returning, or copy it.
 * - Between pushes, the unread rest of a chunk is kept as a copy when it is at most half of
 *   that chunk, so a connection waiting for the end of a frame does not pin the whole of a
 *   (up to 64 KiB) read buffer; copying only then keeps the copying below the bytes parsed.
 * - The header is checked as soon as its 8 bytes are present, before any body byte is
 *   buffered: a bad magic, an unsupported version, a negative length or one above
 *   `maxFrameLength` throws a SwitchboardError, and the decoder stays failed (the stream has
 *   no resynchronisation point, so the connection must be closed).
 */
export class FrameDecoder {
  readonly maxFrameLength: number;
  readonly #onFrame: FrameHandler;
  readonly #chunks: Buffer[] = [];
  /** Read offset into #chunks[0]. */
  #offset = 0;
  /** Unconsumed bytes across #chunks. */
  #buffered = 0;
  /** Body length of the frame whose header has been read, or -1 while waiting for a header. */
  #bodyLength = -1;
  #failure: SwitchboardError | undefined;
  #stopped = false;

  constructor(onFrame: FrameHandler, options: FrameDecoderOptions = {}) {
    this.maxFrameLength = options.maxFrameLength ?? DEFAULT_MAX_FRAME_LENGTH;
    this.#onFrame = onFrame;
  }

  /** Bytes received but not yet handed on. */
  get bufferedBytes(): number {
    return this.#buffered;
  }

  push(chunk: Buffer): void {
    if (this.#failure) throw this.#failure;
    if (this.#stopped || chunk.length === 0) return;
    if (this.#buffered === 0 && this.#bodyLength < 0) {
      this.#pushFast(chunk);
      return;
    }
    this.#chunks.push(chunk);
    this.#buffered += chunk.length;
    this.#drain();
    if (!this.#stopped) this.#compact();
  }

  /** Nothing is buffered: parse straight out of the chunk, keep only the incomplete tail. */
  #pushFast(chunk: Buffer): void {
    let pos = 0;
    const end = chunk.length;
    while (end - pos >= HEADER_LENGTH) {
      const length = this.#checkHeader(chunk, pos);
      if (end - pos - HEADER_LENGTH < length) {
        this.#bodyLength = length;
        pos += HEADER_LENGTH;
        break;
      }
      const start = pos + HEADER_LENGTH;
      pos = start + length;
      this.#onFrame(chunk.subarray(start, pos));
      if (this.#stopped) return;
    }
    if (pos < end) {
      this.#chunks.push(chunk);
      this.#offset = pos;
      this.#buffered = end - pos;
      this.#compact();
    }
  }

  /** Replaces the first chunk by a copy of its unread rest when that is at most half of it. */
  #compact(): void {
    const first = this.#chunks[0];
    if (!first || this.#offset === 0 || first.length - this.#offset > this.#offset) return;
    // Not from Buffer's pool: a small copy there would pin a shared slab instead.
    const rest = Buffer.allocUnsafeSlow(first.length - this.#offset);
    first.copy(rest, 0, this.#offset);
    this.#chunks[0] = rest;
    this.#offset = 0;
  }

  /** The buffers the decoder holds on to between pushes (for tests of what it retains). */
  get retainedChunks(): readonly Buffer[] {
    return this.#chunks;
  }

  #drain(): void {
    for (;;) {
      if (this.#bodyLength < 0) {
        if (this.#buffered < HEADER_LENGTH) return;
        this.#bodyLength = this.#checkHeader(this.#read(HEADER_LENGTH, HEADER_SCRATCH), 0);
      }
      if (this.#buffered < this.#bodyLength) return;
      const body = this.#read(this.#bodyLength);
      this.#bodyLength = -1;
      this.#onFrame(body);
      if (this.#stopped) return;
    }
  }

  /** Validates the header at `pos` and returns its body length. */
  #checkHeader(buf: Buffer, pos: number): number {
    const magic = buf.readUInt16BE(pos);
    if (magic !== FRAME_MAGIC) {
      this.#fail('SB_ERR_FRAME_BAD_MAGIC', `frame magic is 0x${magic.toString(16).padStart(4, '0')}, expected 0x0086`);
    }
    const version = buf.readUInt16BE(pos + 2);
    if (!SUPPORTED_VERSIONS.has(version)) {
      this.#fail('SB_ERR_FRAME_BAD_VERSION', `frame version ${version} is not supported (supported: ${[...SUPPORTED_VERSIONS].join(', ')})`);
    }
    const length = buf.readInt32BE(pos + 4);
    if (length < 0) this.#fail('SB_ERR_FRAME_NEGATIVE_LENGTH', `frame body length ${length} is negative`);
    if (length > this.maxFrameLength) {
      this.#fail('SB_ERR_FRAME_TOO_LONG', `frame body length ${length} exceeds the maximum of ${this.maxFrameLength}`);
    }
    return length;
  }

  /** Drops buffered bytes and ignores all further input, including the rest of the chunk being parsed. */
  stop(): void {
    this.#stopped = true;
    this.#chunks.length = 0;
    this.#buffered = 0;
  }

  #fail(code: SwitchboardError['code'], message: string): never {
    this.#failure = new SwitchboardError(code, message);
    this.#chunks.length = 0;
    this.#buffered = 0;
    throw this.#failure;
  }

  /**
   * Consumes `n` buffered bytes. Returns a slice when they lie in the first chunk, otherwise
   * copies them into `into` (or a new buffer).
   */
  #read(n: number, into?: Buffer): Buffer {
    // An empty body may follow a header that used up the last buffered chunk.
    if (n === 0) return EMPTY_BODY;
    const first = this.#chunks[0]!;
    const available = first.length - this.#offset;
    if (n <= available && !into) {
      const out = first.subarray(this.#offset, this.#offset + n);
      this.#advance(n);
      return out;
    }
    const out = into ?? Buffer.allocUnsafe(n);
    let copied = 0;
    while (copied < n) {
      const chunk = this.#chunks[0]!;
      const take = Math.min(n - copied, chunk.length - this.#offset);
      chunk.copy(out, copied, this.#offset, this.#offset + take);
      copied += take;
      this.#advance(take);
    }
    return out;
  }

  #advance(n: number): void {
    this.#offset += n;
    this.#buffered -= n;
    if (this.#offset === this.#chunks[0]!.length) {
      this.#chunks.shift();
      this.#offset = 0;
    }
  }
}

/** Writes a frame header for a body of `bodyLength` bytes into `buf` at `pos`. */
export function writeHeader(buf: Buffer, pos: number, bodyLength: number, version = FRAME_VERSION): void {
  buf.writeUInt16BE(FRAME_MAGIC, pos);
  buf.writeUInt16BE(version, pos + 2);
  buf.writeInt32BE(bodyLength, pos + 4);
}

/** Frames `body`: one allocation holding header and body. */
export function encodeFrame(body: Uint8Array): Buffer {
  const frame = Buffer.allocUnsafe(HEADER_LENGTH + body.length);
  writeHeader(frame, 0, body.length);
  frame.set(body, HEADER_LENGTH);
  return frame;
}
