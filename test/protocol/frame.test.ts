// FrameDecoder and encodeFrame: hex fixtures, every chunking of a stream, fail-fast header
// checks, zero-copy slices, stop(), and fuzzing with random bytes.

import t, { type Test } from 'tap';
import fc from 'fast-check';
import Long from 'long';
import {
  DEFAULT_MAX_FRAME_LENGTH,
  FrameDecoder,
  HEADER_LENGTH,
  encodeFrame,
  writeHeader,
  type FrameDecoderOptions,
} from '../../src/protocol/frame.js';
import { decodeMessage } from '../../src/protocol/codec.js';
import { HeadType } from '../../src/protocol/types.js';
import { SwitchboardError, type ErrorCode } from '../../src/errors.js';
import { catchError } from '../helpers/catch-error.js';

const hex = (s: string): Buffer => Buffer.from(s.replace(/\s+/g, ''), 'hex');
const toHex = (b: Uint8Array): string => Buffer.from(b).toString('hex');

const FRAME_ERRORS: ReadonlySet<string> = new Set([
  'SB_ERR_FRAME_BAD_MAGIC',
  'SB_ERR_FRAME_BAD_VERSION',
  'SB_ERR_FRAME_NEGATIVE_LENGTH',
  'SB_ERR_FRAME_TOO_LONG',
]);

/** A decoder that records copies of the bodies it hands on (a body is only valid during onFrame). */
function collector(options?: FrameDecoderOptions) {
  const frames: string[] = [];
  const decoder = new FrameDecoder((body) => frames.push(toHex(body)), options);
  return { decoder, frames };
}

/** Decodes `chunks` in order with a fresh decoder; returns the bodies as hex. */
function decodeChunks(chunks: Buffer[], options?: FrameDecoderOptions): string[] {
  const { decoder, frames } = collector(options);
  for (const chunk of chunks) decoder.push(chunk);
  return frames;
}

/** Cuts `buf` at the given sorted positions (no copy). */
function cut(buf: Buffer, positions: number[]): Buffer[] {
  const out: Buffer[] = [];
  let from = 0;
  for (const p of positions) {
    out.push(buf.subarray(from, p));
    from = p;
  }
  out.push(buf.subarray(from));
  return out;
}


/** Asserts `fn` throws a SwitchboardError with `code`. */
function throwsCode(t: Test, fn: () => void, code: ErrorCode, message?: string): void {
  const err = catchError(fn);
  t.ok(err instanceof SwitchboardError, message ?? `throws a SwitchboardError (${code})`);
  t.equal((err as SwitchboardError | undefined)?.code, code, message ?? `code is ${code}`);
}

t.test('encodeFrame writes the 8-byte big-endian header and the body', async (t) => {
  t.equal(toHex(encodeFrame(new Uint8Array(0))), '0086000100000000', 'empty body');
  t.equal(toHex(encodeFrame(Uint8Array.of(0xab, 0xcd))), '008600010000000' + '2abcd', 'plain Uint8Array body');
  const big = Buffer.alloc(0x012345, 7);
  const frame = encodeFrame(big);
  t.equal(toHex(frame.subarray(0, HEADER_LENGTH)), '0086000100012345', 'length is big-endian');
  t.equal(frame.length, HEADER_LENGTH + big.length);
  t.ok(frame.subarray(HEADER_LENGTH).equals(big), 'body follows the header');

  const buf = Buffer.alloc(12, 0xee);
  writeHeader(buf, 2, 0x0102, 3);
  t.equal(toHex(buf), 'eeee008600030000' + '0102eeee', 'writeHeader writes at pos with the given version');
});

t.test('valid hex fixtures decode to the expected bodies', async (t) => {
  const fixtures: { name: string; stream: string; bodies: string[]; options?: FrameDecoderOptions }[] = [
    { name: 'empty body', stream: '0086 0001 00000000', bodies: [''] },
    { name: 'one-byte body', stream: '0086 0001 00000001 2a', bodies: ['2a'] },
    { name: 'two frames', stream: '0086 0001 00000002 0102  0086 0001 00000003 030405', bodies: ['0102', '030405'] },
    { name: 'empty between non-empty', stream: '0086 0001 00000001 aa  0086 0001 00000000  0086 0001 00000001 bb', bodies: ['aa', '', 'bb'] },
    { name: 'three empty bodies', stream: '0086000100000000'.repeat(3), bodies: ['', '', ''] },
    { name: 'body that looks like a header', stream: '0086 0001 00000008 0086000100000000', bodies: ['0086000100000000'] },
    { name: 'length exactly maxFrameLength', stream: '0086 0001 00000004 deadbeef', bodies: ['deadbeef'], options: { maxFrameLength: 4 } },
    { name: 'maxFrameLength 0 accepts empty bodies', stream: '0086 0001 00000000', bodies: [''], options: { maxFrameLength: 0 } },
    { name: 'incomplete header is held back', stream: '0086 0001 0000', bodies: [] },
    { name: 'incomplete body is held back', stream: '0086 0001 00000001 aa  0086 0001 00000004 0102', bodies: ['aa'] },
  ];
  for (const f of fixtures) {
    t.strictSame(decodeChunks([hex(f.stream)], f.options), f.bodies, `${f.name}: in one chunk`);
    t.strictSame(decodeChunks([...hex(f.stream)].map((b) => Buffer.of(b)), f.options), f.bodies, `${f.name}: byte by byte`);
  }
});

t.test('malformed hex fixtures fail with the right code', async (t) => {
  const fixtures: { name: string; stream: string; code: ErrorCode; options?: FrameDecoderOptions; before?: string[] }[] = [
    { name: 'magic 0x0087', stream: '0087 0001 00000000', code: 'SB_ERR_FRAME_BAD_MAGIC' },
    { name: 'little-endian magic', stream: '8600 0001 00000000', code: 'SB_ERR_FRAME_BAD_MAGIC' },
    { name: 'zero magic', stream: '0000 0001 00000000', code: 'SB_ERR_FRAME_BAD_MAGIC' },
    { name: 'text instead of a frame', stream: Buffer.from('GET / HTTP/1.1\r\n').toString('hex'), code: 'SB_ERR_FRAME_BAD_MAGIC' },
    { name: 'version 0', stream: '0086 0000 00000000', code: 'SB_ERR_FRAME_BAD_VERSION' },
    { name: 'version 2', stream: '0086 0002 00000000', code: 'SB_ERR_FRAME_BAD_VERSION' },
    { name: 'little-endian version 1', stream: '0086 0100 00000000', code: 'SB_ERR_FRAME_BAD_VERSION' },
    { name: 'length -1', stream: '0086 0001 ffffffff', code: 'SB_ERR_FRAME_NEGATIVE_LENGTH' },
    { name: 'length -2^31', stream: '0086 0001 80000000', code: 'SB_ERR_FRAME_NEGATIVE_LENGTH' },
    { name: 'length max+1', stream: '0086 0001 00010001', code: 'SB_ERR_FRAME_TOO_LONG' },
    { name: 'length 2^31-1', stream: '0086 0001 7fffffff', code: 'SB_ERR_FRAME_TOO_LONG' },
    { name: 'custom max 16, length 17', stream: '0086 0001 00000011', code: 'SB_ERR_FRAME_TOO_LONG', options: { maxFrameLength: 16 } },
    { name: 'custom max 0, length 1', stream: '0086 0001 00000001', code: 'SB_ERR_FRAME_TOO_LONG', options: { maxFrameLength: 0 } },
    { name: 'bad second frame', stream: '0086 0001 00000001 aa  0087 0001 00000000', code: 'SB_ERR_FRAME_BAD_MAGIC', before: ['aa'] },
    { name: 'too long after an empty frame', stream: '0086 0001 00000000  0086 0001 00100000', code: 'SB_ERR_FRAME_TOO_LONG', before: [''] },
  ];
  for (const f of fixtures) {
    for (const [how, chunks] of [
      ['one chunk', [hex(f.stream)]],
      ['byte by byte', [...hex(f.stream)].map((b) => Buffer.of(b))],
    ] as const) {
      const { decoder, frames } = collector(f.options);
      throwsCode(t, () => chunks.forEach((c) => decoder.push(c)), f.code, `${f.name} (${how}): ${f.code}`);
      t.strictSame(frames, f.before ?? [], `${f.name} (${how}): frames before the bad header were delivered`);
    }
  }
  t.equal(DEFAULT_MAX_FRAME_LENGTH, 0x10000, 'the fixtures above assume a 64 KiB default maximum');
});

t.test('a LOGIN_REQUEST frame assembled by hand from PROTOCOL.md §2-§4', async (t) => {
  // What an original client sends before login: type LOGIN_REQUEST (0, the proto3 default,
  // so a Java client leaves it out), sequence 2^64-1, session_id "-1".
  const frame = hex(`
    0086                          -- magic 0x0086 (uint16 BE)
    0001                          -- version 1 (uint16 BE)
    00000024                      -- body length 36 (int32 BE, body only)
    10 ffffffffffffffffff01       -- field 2 sequence, wire type 0 (varint): 2^64-1 in 10 bytes
    1a 02 2d31                    -- field 3 session_id, wire type 2, length 2: "-1"
    22 13                         -- field 4 loginRequest, wire type 2, length 19:
      0a 02 7531                  --   field 1 uid, length 2: "u1"
      12 02 6431                  --   field 2 deviceId, length 2: "d1"
      1a 02 746b                  --   field 3 token, length 2: "tk"
      20 01                       --   field 4 platform, varint: 1
      2a 03 312e30                --   field 5 app_version, length 3: "1.0"
  `.replace(/--.*$/gm, ''));
  t.equal(frame.length, HEADER_LENGTH + 0x24, 'the hand count of the body length is right');

  const bodies: Buffer[] = [];
  new FrameDecoder((body) => bodies.push(Buffer.from(body))).push(frame);
  t.equal(bodies.length, 1, 'one frame');
  const msg = decodeMessage(bodies[0]!);
  t.equal(msg.type, HeadType.LOGIN_REQUEST);
  t.ok(Long.isLong(msg.sequence), 'sequence decodes as a Long');
  t.equal(msg.sequence!.toString(), '18446744073709551615', 'sequence is exactly 2^64-1');
  t.equal(msg.sessionId, '-1');
  t.match(msg.loginRequest, { uid: 'u1', deviceId: 'd1', token: 'tk', platform: 1, appVersion: '1.0' });
  t.equal(msg.loginResponse, null, 'absent sub-messages decode as null');
});

// A stream with empty, tiny and multi-chunk-sized bodies, and bodies that contain header bytes.
const STREAM_BODIES = [
  Buffer.alloc(0),
  Buffer.from('0086000100000000', 'hex'),
  Buffer.from('hello'),
  Buffer.alloc(0),
  Buffer.alloc(0),
  Buffer.from([...Array(23).keys()]),
  Buffer.from('x'),
  Buffer.alloc(0),
];
const STREAM = Buffer.concat(STREAM_BODIES.map(encodeFrame));
const STREAM_HEX = STREAM_BODIES.map(toHex);

t.test('a stream split at every position yields the same frames', async (t) => {
  let failures = 0;
  for (let i = 0; i <= STREAM.length; i++) {
    const got = decodeChunks(cut(STREAM, [i]));
    if (JSON.stringify(got) !== JSON.stringify(STREAM_HEX)) {
      failures++;
      t.strictSame(got, STREAM_HEX, `split at ${i}`);
    }
  }
  t.equal(failures, 0, `all ${STREAM.length + 1} two-way splits decode identically`);
});

t.test('a stream split at every pair of positions yields the same frames', async (t) => {
  let failures = 0;
  let runs = 0;
  for (let i = 0; i <= STREAM.length; i++) {
    for (let j = i; j <= STREAM.length; j++) {
      runs++;
      const got = decodeChunks(cut(STREAM, [i, j]));
      if (JSON.stringify(got) !== JSON.stringify(STREAM_HEX)) {
        failures++;
        if (failures <= 3) t.strictSame(got, STREAM_HEX, `split at ${i} and ${j}`);
      }
    }
  }
  t.equal(failures, 0, `all ${runs} three-way splits decode identically`);
});

t.test('a stream fed one byte at a time yields the same frames', async (t) => {
  const { decoder, frames } = collector();
  const seenAfter: number[] = [];
  for (let i = 0; i < STREAM.length; i++) {
    decoder.push(STREAM.subarray(i, i + 1));
    seenAfter.push(frames.length);
  }
  t.strictSame(frames, STREAM_HEX);
  t.equal(decoder.bufferedBytes, 0, 'nothing left over');
  // Each frame is delivered by the push of its last byte, not later.
  let end = 0;
  STREAM_BODIES.forEach((body, k) => {
    end += HEADER_LENGTH + body.length;
    t.equal(seenAfter[end - 1], k + 1, `frame ${k} delivered on its last byte`);
    if (end >= 2) t.equal(seenAfter[end - 2], k, `frame ${k} not delivered before its last byte`);
  });
});

t.test('bufferedBytes counts received bytes not yet handed on', async (t) => {
  const { decoder, frames } = collector();
  const frame = encodeFrame(Buffer.from('abcdef'));
  decoder.push(frame.subarray(0, 5));
  t.equal(decoder.bufferedBytes, 5, 'partial header');
  decoder.push(frame.subarray(5, 10));
  t.equal(decoder.bufferedBytes, 2, 'header consumed, two body bytes buffered');
  decoder.push(frame.subarray(10));
  t.equal(decoder.bufferedBytes, 0);
  t.strictSame(frames, [Buffer.from('abcdef').toString('hex')]);
  decoder.push(Buffer.alloc(0));
  t.equal(decoder.bufferedBytes, 0, 'an empty chunk changes nothing');
  t.equal(frames.length, 1);
});

t.test('property: any chunking of any frames yields the frames in order', async (t) => {
  const bodies = fc.array(
    fc.oneof(
      { weight: 1, arbitrary: fc.constant(new Uint8Array(0)) },
      { weight: 4, arbitrary: fc.uint8Array({ minLength: 0, maxLength: 64 }) },
      { weight: 1, arbitrary: fc.uint8Array({ minLength: 100, maxLength: 3000 }) },
    ),
    { maxLength: 25 },
  );
  const cuts = fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { maxLength: 40 });
  fc.assert(
    fc.property(bodies, cuts, (bodies, cuts) => {
      const stream = Buffer.concat(bodies.map(encodeFrame));
      const positions = cuts.map((c) => Math.floor(c * stream.length)).sort((a, b) => a - b);
      const { decoder, frames } = collector();
      for (const chunk of cut(stream, positions)) decoder.push(chunk);
      return JSON.stringify(frames) === JSON.stringify(bodies.map(toHex)) && decoder.bufferedBytes === 0;
    }),
    { numRuns: 500 },
  );
  t.pass('frames out equal frames in for every generated chunking');
});

t.test('many frames in one chunk are handed on as slices of that chunk', async (t) => {
  const bodies = [Buffer.from('first'), Buffer.alloc(0), Buffer.from('second body'), Buffer.from([1, 2, 3])];
  // An unpooled chunk at a non-zero offset of its ArrayBuffer, so byteOffset is meaningful.
  const backing = Buffer.alloc(5 + bodies.reduce((n, b) => n + HEADER_LENGTH + b.length, 0));
  Buffer.concat(bodies.map(encodeFrame)).copy(backing, 5);
  const chunk = backing.subarray(5);

  const seen: { hex: string; sameBuffer: boolean; byteOffset: number }[] = [];
  new FrameDecoder((body) => seen.push({ hex: toHex(body), sameBuffer: body.buffer === chunk.buffer, byteOffset: body.byteOffset })).push(chunk);

  t.strictSame(seen.map((s) => s.hex), bodies.map(toHex), 'all frames, in order');
  let pos = 0;
  bodies.forEach((body, i) => {
    pos += HEADER_LENGTH;
    if (body.length > 0) {
      t.ok(seen[i]!.sameBuffer, `frame ${i} shares the chunk's memory`);
      t.equal(seen[i]!.byteOffset, chunk.byteOffset + pos, `frame ${i} is the slice at its offset`);
    }
    pos += body.length;
  });
});

t.test('after a partial frame, a frame lying wholly in the next chunk is still a slice', async (t) => {
  const a = encodeFrame(Buffer.from('aaaa'));
  const b = encodeFrame(Buffer.from('bbbbbb'));
  const tail = Buffer.alloc(a.length - 3 + b.length);
  a.copy(tail, 0, 3);
  b.copy(tail, a.length - 3);

  const seen: { hex: string; sameBuffer: boolean; byteOffset: number }[] = [];
  const decoder = new FrameDecoder((body) => seen.push({ hex: toHex(body), sameBuffer: body.buffer === tail.buffer, byteOffset: body.byteOffset }));
  decoder.push(a.subarray(0, 3)); // part of the header: the decoder now buffers
  decoder.push(tail);

  t.strictSame(seen.map((s) => s.hex), [Buffer.from('aaaa').toString('hex'), Buffer.from('bbbbbb').toString('hex')]);
  t.ok(seen[0]!.sameBuffer, "frame A's body lies in the second chunk: a slice of it");
  t.equal(seen[0]!.byteOffset, tail.byteOffset + HEADER_LENGTH - 3);
  t.ok(seen[1]!.sameBuffer, 'frame B lies in the second chunk: a slice of it');
  t.equal(seen[1]!.byteOffset, tail.byteOffset + a.length - 3 + HEADER_LENGTH);
});

t.test('an unfinished frame at the end of a chunk is kept as a copy when it is at most half the chunk', async (t) => {
  // A socket's read buffer is up to 64 KiB: a connection waiting for the rest of a frame must
  // not keep all of it alive for a few bytes.
  const a = encodeFrame(Buffer.alloc(1000, 0x61));
  const b = encodeFrame(Buffer.from('the next frame'));
  const chunk = Buffer.concat([a, b.subarray(0, 5)]);
  const { decoder, frames } = collector();
  decoder.push(chunk);
  t.equal(frames.length, 1);
  t.equal(decoder.retainedChunks.length, 1);
  const kept = decoder.retainedChunks[0]!;
  t.equal(kept.length, 5, 'only the unread bytes');
  t.not(kept.buffer, chunk.buffer, 'a copy, not a view of the chunk');
  t.equal(kept.buffer.byteLength, 5, "not a slice of Buffer's shared pool either");
  decoder.push(b.subarray(5));
  t.strictSame(frames, [toHex(a.subarray(HEADER_LENGTH)), Buffer.from('the next frame').toString('hex')]);
  t.equal(decoder.retainedChunks.length, 0, 'nothing kept once the frame is complete');
});

t.test('an unfinished frame that is most of its chunk is kept without a copy', async (t) => {
  const a = encodeFrame(Buffer.from('a'));
  const b = encodeFrame(Buffer.alloc(1000, 0x62));
  const chunk = Buffer.concat([a, b.subarray(0, 500)]);
  const { decoder, frames } = collector();
  decoder.push(chunk);
  t.equal(frames.length, 1);
  t.equal(decoder.retainedChunks[0], chunk, 'the chunk itself: copying it would cost more than it frees');
  decoder.push(b.subarray(500));
  t.equal(frames[1], toHex(b.subarray(HEADER_LENGTH)));
});

t.test('the unread rest is copied after buffered input is drained too', async (t) => {
  const a = encodeFrame(Buffer.alloc(200, 0x61));
  const b = encodeFrame(Buffer.from('bb'));
  const { decoder, frames } = collector();
  decoder.push(a.subarray(0, 3)); // part of a header: from here on the decoder buffers
  const chunk = Buffer.concat([a.subarray(3), b.subarray(0, 4)]);
  decoder.push(chunk);
  t.equal(frames.length, 1);
  const kept = decoder.retainedChunks;
  t.equal(kept.length, 1);
  t.equal(kept[0]!.length, 4);
  t.not(kept[0]!.buffer, chunk.buffer);
  decoder.push(b.subarray(4));
  t.strictSame(frames, [toHex(a.subarray(HEADER_LENGTH)), toHex(Buffer.from('bb'))]);
});

t.test('decoders assembling split headers at the same time do not mix them up', async (t) => {
  // Headers split across chunks are assembled in one buffer shared by all decoders.
  const one = collector();
  const two = collector();
  const a = encodeFrame(Buffer.from('from one'));
  const b = encodeFrame(Buffer.alloc(300, 0x32));
  one.decoder.push(a.subarray(0, 5));
  two.decoder.push(b.subarray(0, 3));
  one.decoder.push(a.subarray(5, 10));
  two.decoder.push(b.subarray(3, 9));
  one.decoder.push(a.subarray(10));
  two.decoder.push(b.subarray(9));
  t.strictSame(one.frames, [toHex(Buffer.from('from one'))]);
  t.strictSame(two.frames, [toHex(b.subarray(HEADER_LENGTH))]);
});

t.test('a body spanning chunks is assembled correctly and does not alias either chunk', async (t) => {
  const body = Buffer.from('spanning three chunks');
  const frame = encodeFrame(body);
  const parts = cut(Buffer.from(frame), [10, 20]);
  let got: Buffer | undefined;
  const decoder = new FrameDecoder((b) => {
    got = b;
  });
  for (const p of parts) decoder.push(p);
  t.ok(got?.equals(body), 'body content');
  t.ok(parts.every((p) => p.buffer !== got!.buffer || got!.byteOffset + got!.length <= p.byteOffset || got!.byteOffset >= p.byteOffset + p.length), 'assembled body does not overlap any chunk');
});

t.test('header errors are raised as soon as the 8 header bytes arrive, before any body byte', async (t) => {
  const cases: { name: string; header: string; code: ErrorCode; options?: FrameDecoderOptions }[] = [
    { name: '2 GB length', header: '0086 0001 7fffffff', code: 'SB_ERR_FRAME_TOO_LONG' },
    { name: '1 MB length, custom max 1 KB', header: '0086 0001 00100000', code: 'SB_ERR_FRAME_TOO_LONG', options: { maxFrameLength: 1024 } },
    { name: 'negative length', header: '0086 0001 fffffff0', code: 'SB_ERR_FRAME_NEGATIVE_LENGTH' },
    { name: 'bad magic with a plausible length', header: 'cafe 0001 00000010', code: 'SB_ERR_FRAME_BAD_MAGIC' },
    { name: 'bad version with a plausible length', header: '0086 0009 00000010', code: 'SB_ERR_FRAME_BAD_VERSION' },
  ];
  for (const c of cases) {
    const header = hex(c.header);

    // Header alone, in one chunk: throws on that push.
    const whole = collector(c.options);
    throwsCode(t, () => whole.decoder.push(header), c.code, `${c.name}: the header alone throws ${c.code}`);
    t.equal(whole.decoder.bufferedBytes, 0, `${c.name}: nothing stays buffered`);

    // Byte by byte: the first 7 bytes are accepted, the 8th throws.
    const bytewise = collector(c.options);
    for (let i = 0; i < HEADER_LENGTH - 1; i++) bytewise.decoder.push(header.subarray(i, i + 1));
    t.equal(bytewise.decoder.bufferedBytes, HEADER_LENGTH - 1, `${c.name}: 7 header bytes are buffered, no verdict yet`);
    throwsCode(t, () => bytewise.decoder.push(header.subarray(HEADER_LENGTH - 1)), c.code, `${c.name}: the 8th byte throws`);

    // Header split across chunks after a valid frame.
    const after = collector(c.options);
    after.decoder.push(Buffer.concat([encodeFrame(Buffer.from('ok')), header.subarray(0, 3)]));
    t.strictSame(after.frames, ['6f6b'], `${c.name}: the preceding frame was delivered`);
    throwsCode(t, () => after.decoder.push(header.subarray(3)), c.code, `${c.name}: header completed in a later chunk throws`);
  }
});

t.test('a large accepted length buffers only body bytes as they arrive', async (t) => {
  const { decoder, frames } = collector({ maxFrameLength: 0x7fffffff });
  decoder.push(hex('0086 0001 7fffffff'));
  t.equal(decoder.bufferedBytes, 0, 'header consumed, no body byte yet');
  decoder.push(Buffer.alloc(100));
  t.equal(decoder.bufferedBytes, 100);
  t.equal(frames.length, 0);
});

t.test('after a failure every push throws the same error and delivers nothing', async (t) => {
  const { decoder, frames } = collector();
  const first = catchError(() => decoder.push(hex('0086 0002 00000000')));
  t.ok(first instanceof SwitchboardError);
  t.equal((first as SwitchboardError).code, 'SB_ERR_FRAME_BAD_VERSION');
  for (const chunk of [encodeFrame(Buffer.from('valid')), Buffer.alloc(0), hex('0087')]) {
    const again = catchError(() => decoder.push(chunk));
    t.equal(again, first, `push of ${chunk.length} bytes rethrows the original error`);
  }
  t.strictSame(frames, [], 'no frame after the failure');
  t.equal(decoder.bufferedBytes, 0);
});

t.test('the failed frame stops delivery of later frames in the same chunk', async (t) => {
  const { decoder, frames } = collector({ maxFrameLength: 4 });
  const chunk = Buffer.concat([encodeFrame(Buffer.from('ab')), encodeFrame(Buffer.from('toolong')), encodeFrame(Buffer.from('cd'))]);
  throwsCode(t, () => decoder.push(chunk), 'SB_ERR_FRAME_TOO_LONG');
  t.strictSame(frames, [Buffer.from('ab').toString('hex')]);
});

t.test('stop() from inside onFrame drops the rest of the chunk and all later input', async (t) => {
  for (const [how, prefix] of [
    ['fast path (nothing buffered)', 0],
    ['buffered path (chunk completes a partial frame)', 5],
  ] as const) {
    const frames: string[] = [];
    const stream = Buffer.concat([encodeFrame(Buffer.from('one')), encodeFrame(Buffer.from('two')), encodeFrame(Buffer.from('three'))]);
    const decoder = new FrameDecoder((body) => {
      frames.push(body.toString());
      decoder.stop();
    });
    if (prefix > 0) decoder.push(stream.subarray(0, prefix));
    decoder.push(stream.subarray(prefix));
    t.strictSame(frames, ['one'], `${how}: only the frame that called stop() was delivered`);
    t.equal(decoder.bufferedBytes, 0, `${how}: buffers dropped`);

    decoder.push(encodeFrame(Buffer.from('four')));
    t.doesNotThrow(() => decoder.push(hex('deadbeef deadbeef')), `${how}: garbage after stop() is ignored, not an error`);
    t.strictSame(frames, ['one'], `${how}: nothing delivered after stop()`);
    t.equal(decoder.bufferedBytes, 0, `${how}: nothing buffered after stop()`);
  }
});

t.test('stop() from outside drops buffered bytes and ignores later pushes', async (t) => {
  const { decoder, frames } = collector();
  const frame = encodeFrame(Buffer.from('partial'));
  decoder.push(frame.subarray(0, 10));
  t.equal(decoder.bufferedBytes, 2, 'header consumed, two body bytes buffered');
  decoder.stop();
  t.equal(decoder.bufferedBytes, 0);
  decoder.push(frame.subarray(10));
  decoder.push(encodeFrame(Buffer.from('next')));
  t.strictSame(frames, []);
});

t.test('fuzz: arbitrary input yields frames or a frame SwitchboardError, nothing else', async (t) => {
  const validStream = fc.array(fc.uint8Array({ maxLength: 40 }), { maxLength: 6 }).map((bodies) => Buffer.concat(bodies.map(encodeFrame)));
  // Random bytes, valid frames followed by random bytes, and valid streams with a few bytes overwritten.
  const input = fc.oneof(
    fc.uint8Array({ maxLength: 200 }).map((b) => Buffer.from(b)),
    fc.tuple(validStream, fc.uint8Array({ maxLength: 40 })).map(([s, junk]) => Buffer.concat([s, junk])),
    fc
      .tuple(validStream, fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { maxLength: 4 }))
      .map(([s, edits]) => {
        const out = Buffer.from(s);
        if (out.length > 0) for (const [at, v] of edits) out[at % out.length] = v;
        return out;
      }),
  );
  const cuts = fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { maxLength: 10 });
  const maxFrameLength = fc.constantFrom(undefined, 0, 7, 64);
  let failures = 0;
  fc.assert(
    fc.property(input, cuts, maxFrameLength, (stream, cuts, max) => {
      const positions = cuts.map((c) => Math.floor(c * stream.length)).sort((a, b) => a - b);
      const options = max === undefined ? {} : { maxFrameLength: max };
      const { decoder, frames } = collector(options);
      let delivered = 0;
      for (const chunk of cut(stream, positions)) {
        try {
          decoder.push(chunk);
        } catch (err) {
          if (!(err instanceof SwitchboardError) || !FRAME_ERRORS.has(err.code)) return false;
          failures++;
          return true;
        }
        // Every delivered body respects the maximum.
        for (; delivered < frames.length; delivered++) {
          if (frames[delivered]!.length / 2 > (max ?? DEFAULT_MAX_FRAME_LENGTH)) return false;
        }
      }
      return true;
    }),
    { numRuns: 2000 },
  );
  t.ok(failures > 0, 'the generator reached the error paths');
});
