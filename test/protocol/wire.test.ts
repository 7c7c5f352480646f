// The wire module every hand reader and writer builds on: hex fixtures, the boundaries of each
// varint length from 1 to 10 bytes, strict and lenient reading of the forms no encoder writes,
// truncation at every byte, and round trips against protobufjs' own Writer and Reader.

import t from 'tap';
import fc from 'fast-check';
import Long from 'long';
import protobuf from 'protobufjs';
import {
  WireReader,
  WireType,
  lengthDelimitedLength,
  oneByteTag,
  tag,
  tagBytes,
  varint64Length,
  varintLength,
  writeBytes,
  writeVarint,
  writeVarint64,
} from '../../src/protocol/wire.js';
import '../../src/protocol/codec.js'; // protobufjs configured with `long`, as the server runs it

const hex = (s: string): Buffer => Buffer.from(s.replace(/--.*$/gm, '').replace(/\s+/g, ''), 'hex');
const toHex = (b: Uint8Array): string => Buffer.from(b).toString('hex');

const halves = (n: bigint): [lo: number, hi: number] => [Number(n & 0xffff_ffffn), Number(n >> 32n)];
const MAX_U64 = (1n << 64n) - 1n;

/** Bytes of `n` as writeVarint64 writes them. */
function written64(n: bigint): string {
  const buf = Buffer.alloc(10);
  return toHex(buf.subarray(0, writeVarint64(buf, 0, ...halves(n))));
}

/** Bytes of `n` (< 2^53) as writeVarint writes them. */
function written(n: number): string {
  const buf = Buffer.alloc(10);
  return toHex(buf.subarray(0, writeVarint(buf, 0, n)));
}

/** What a reader of `strict`-ness makes of `bytes`: the value, or undefined, and where it stopped. */
function read(bytes: Buffer, strict: boolean): { value?: bigint; pos: number } {
  const r = new WireReader(bytes, 0, bytes.length, strict);
  if (!r.varint()) return { pos: r.pos };
  return { value: (BigInt(r.hi) << 32n) | BigInt(r.lo), pos: r.pos };
}

const protobufjsBytes = (n: bigint): string => toHex(protobuf.Writer.create().uint64(Long.fromString(n.toString(), true)).finish());

// Hex fixtures: value, bytes (PROTOCOL.md §2 has 300 = ac 02 and 2^64-1).
const FIXTURES: [bigint, string][] = [
  [0n, '00'],
  [1n, '01'],
  [127n, '7f'],
  [128n, '8001'],
  [300n, 'ac02'],
  [16_383n, 'ff7f'],
  [16_384n, '808001'],
  [1_767_225_600_000n, '80d0eab6b733'],
  [2n ** 53n - 1n, 'ffffffffffffff0f'],
  [MAX_U64, 'ffffffffffffffffff01'],
];

t.test('hex fixtures: written and read', async (t) => {
  for (const [n, bytes] of FIXTURES) {
    t.equal(written64(n), bytes, `writeVarint64 ${n}`);
    if (n < 2n ** 53n) t.equal(written(Number(n)), bytes, `writeVarint ${n}`);
    for (const strict of [true, false]) t.same(read(hex(bytes), strict), { value: n, pos: bytes.length / 2 }, `read ${bytes} (${strict ? 'strict' : 'lenient'})`);
  }
});

t.test('each varint length from 1 to 10 bytes, at its smallest and largest value', async (t) => {
  for (let length = 1; length <= 10; length++) {
    const smallest = length === 1 ? 0n : 1n << BigInt(7 * (length - 1));
    const largest = length === 10 ? MAX_U64 : (1n << BigInt(7 * length)) - 1n;
    for (const n of [smallest, largest]) {
      const [lo, hi] = halves(n);
      t.equal(varint64Length(lo, hi), length, `varint64Length(${n})`);
      t.equal(written64(n).length / 2, length, `writeVarint64 writes ${length} bytes for ${n}`);
      t.equal(written64(n), protobufjsBytes(n), `the bytes protobufjs writes for ${n}`);
      if (n < 2n ** 53n) {
        t.equal(varintLength(Number(n)), length, `varintLength(${n})`);
        t.equal(written(Number(n)), written64(n), `writeVarint(${n}) = writeVarint64`);
      }
      t.same(read(hex(written64(n)), true), { value: n, pos: length }, `read back ${n}`);
    }
  }
  // 2^53 - 1, the largest number writeVarint takes, is 8 bytes.
  t.equal(varintLength(Number.MAX_SAFE_INTEGER), 8);
});

t.test('forms no encoder writes: strict refuses them, lenient reads them, neither reads past 10 bytes', async (t) => {
  const cases: [bytes: string, lenient: bigint | undefined, why: string][] = [
    ['8000', 0n, 'overlong 0'],
    ['8100', 1n, 'overlong 1'],
    ['ff80808000', 127n, 'a trailing 00 after four bytes'],
    ['ffffffffffffffffff7f', MAX_U64, 'a 10th byte above 01 (wider than 64 bits): the extra bits dropped'],
    ['ffffffffffffffffff00', (1n << 63n) - 1n, 'a 10th byte of 00'],
    ['ffffffffffffffffffff01', undefined, 'eleven bytes'],
  ];
  for (const [bytes, lenient, why] of cases) {
    t.same(read(hex(bytes), true), { pos: 0 }, `strict: ${why}`);
    t.same(read(hex(bytes), false), lenient === undefined ? { pos: 0 } : { value: lenient, pos: bytes.length / 2 }, `lenient: ${why}`);
  }
});

t.test('a truncated varint is refused at every cut, and pos stays', async (t) => {
  for (const [n, bytes] of FIXTURES) {
    const full = hex(bytes);
    for (let cut = 0; cut < full.length; cut++) {
      // The limit, not the buffer's end, bounds the read.
      const r = new WireReader(full, 0, cut, false);
      t.notOk(r.varint(), `${n} cut at ${cut}`);
      t.equal(r.pos, 0);
    }
  }
});

t.test('tags: made and read', async (t) => {
  const tags: [field: number, wireType: WireType, bytes: string][] = [
    [1, WireType.VARINT, '08'],
    [2, WireType.LEN, '12'],
    [15, WireType.LEN, '7a'],
    [16, WireType.VARINT, '8001'],
    [16, WireType.LEN, '8201'],
    [17, WireType.VARINT, '8801'],
    [1, WireType.I64, '09'],
    [1, WireType.I32, '0d'],
    [2 ** 29 - 1, WireType.I32, 'fdffffff0f'],
  ];
  for (const [field, wireType, bytes] of tags) {
    const value = tag(field, wireType);
    t.equal(written(value), bytes, `tag(${field}, ${wireType})`);
    const r = new WireReader(hex(bytes), 0, bytes.length / 2, true);
    t.equal(r.tag(), value, `read ${bytes}`);
    t.equal(value >>> 3, field);
    t.equal(value & 7, wireType);
  }
  const wide = new WireReader(hex('808080808001'), 0, 6, false);
  t.equal(wide.tag(), -1, 'beyond 32 bits: no tag');
  t.equal(wide.pos, 0, 'and pos stays');
  t.equal(new WireReader(hex('80'), 0, 1, false).tag(), -1, 'truncated: no tag');
});

t.test('constant tags for frame builders: one byte stored as it is, longer ones as bytes', async (t) => {
  t.equal(oneByteTag(1, WireType.VARINT), 0x08);
  t.equal(oneByteTag(15, WireType.LEN), 0x7a);
  t.throws(() => oneByteTag(16, WireType.VARINT), RangeError, 'field 16 takes two bytes');
  t.throws(() => oneByteTag(0, WireType.VARINT), RangeError, 'there is no field 0');
  t.same(tagBytes(16, WireType.VARINT), [0x80, 0x01]);
  t.same(tagBytes(17, WireType.VARINT), [0x88, 0x01]);
  t.same(tagBytes(16, WireType.LEN), [0x82, 0x01]);
  t.same(tagBytes(1, WireType.VARINT), [0x08]);
  const buf = Buffer.alloc(4);
  t.equal(writeBytes(buf, 1, tagBytes(17, WireType.VARINT)), 3);
  t.equal(toHex(buf), '00880100');
});

t.test('length-delimited fields: measured, read and skipped', async (t) => {
  t.equal(lengthDelimitedLength(tag(2, WireType.LEN), 5), 7, 'from "alice": 12 05 + five bytes');
  t.equal(lengthDelimitedLength(tag(16, WireType.LEN), 200), 204, 'a two-byte tag and a two-byte length');
  t.equal(lengthDelimitedLength(tag(1, WireType.LEN), 0), 2, 'empty');

  const r = new WireReader(hex('1205616c696365'), 0, 7, true);
  t.equal(r.tag(), 0x12);
  t.equal(r.length(), 7, 'the end of the content');
  t.equal(r.pos, 2, 'at the content');
  const past = new WireReader(hex('1206616c696365'), 1, 7, true);
  t.equal(past.length(), -1, 'a length past the limit');
  t.equal(past.pos, 1, 'and pos stays');
  t.equal(new WireReader(hex('1205616c696365'), 1, 6, true).length(), -1, 'past a limit before the buffer end');

  // skip() for each wire type, then truncated.
  const skips: [wireType: number, bytes: string][] = [
    [WireType.VARINT, 'ac02'],
    [WireType.LEN, '03616263'],
    [WireType.I64, '0102030405060708'],
    [WireType.I32, '01020304'],
  ];
  for (const [wireType, bytes] of skips) {
    const full = hex(bytes);
    const whole = new WireReader(full, 0, full.length, true);
    t.ok(whole.skip(wireType), `skip wire type ${wireType}`);
    t.equal(whole.pos, full.length);
    const cut = new WireReader(full, 0, full.length - 1, true);
    t.notOk(cut.skip(wireType), `truncated wire type ${wireType}`);
    t.equal(cut.pos, 0);
  }
  t.notOk(new WireReader(hex('00'), 0, 1, true).skip(3), 'groups are not skipped');
  t.notOk(new WireReader(hex('00'), 0, 1, true).skip(7), 'nor invalid wire types');
});

t.test('next(): field by field, for a scanner', async (t) => {
  // Message { type = 5, sequence = 300, session_id "ab", a fixed64 (field 14), a fixed32 (field 15), messageRequest { msg_id 1 } }
  const body = hex(`
    08 05            -- type 5
    10 ac02          -- sequence 300
    1a 02 6162       -- session_id "ab"
    71 0102030405060708  -- field 14, fixed64
    7d 01020304      -- field 15, fixed32
    32 02 0801       -- messageRequest { msg_id 1 }
  `);
  const r = new WireReader(body, 0, body.length, false);
  const seen: unknown[] = [];
  while (r.next()) seen.push([r.field, r.wireType, r.value, r.start, r.end]);
  t.same(seen, [
    [1, 0, 5, 2, 2],
    [2, 0, 300, 5, 5],
    [3, 2, 0, 7, 9],
    [14, 1, 0, 18, 18],
    [15, 5, 0, 23, 23],
    [6, 2, 0, 25, 27],
  ]);
  for (let cut = 1; cut < body.length; cut++) {
    const fields = new WireReader(body, 0, cut, false);
    try {
      while (fields.next());
      // A cut at a field boundary is a shorter valid body.
      t.ok([2, 5, 9, 18, 23, 27].includes(cut), `cut ${cut} is a field boundary`);
    } catch (err) {
      t.type(err, RangeError, `cut ${cut}`);
    }
  }
  t.throws(() => new WireReader(hex('0b00'), 0, 2, false).next(), RangeError, 'a group');
  // A reader pointed elsewhere reads from there, as new.
  const again = r.reset(hex('aa 10 07'), 1, 3);
  t.equal(again, r);
  t.ok(again.next());
  t.same([again.field, again.value, again.pos], [2, 7, 3]);
  t.notOk(again.next());
  const widest = new WireReader(hex('08ffffffffffffffffff01'), 0, 11, false);
  t.ok(widest.next(), 'a 10-byte value');
  t.same([widest.field, widest.value, widest.pos], [1, 2 ** 64, 11], 'read as a number (exact below 2^53)');
  t.throws(() => new WireReader(hex('08ffffffffffffffffffff01'), 0, 12, false).next(), RangeError, 'an 11-byte value');
});

t.test('next() reads values as numbers, exact below 2^53, as varint() reads them as halves', async (t) => {
  for (const n of [0, 1, 127, 128, 2 ** 31, 2 ** 32 - 1, 2 ** 32, 1_767_225_600_000, Number.MAX_SAFE_INTEGER]) {
    const buf = Buffer.alloc(11);
    buf[0] = 0x08;
    const end = writeVarint(buf, 1, n);
    const fields = new WireReader(buf, 0, end, false);
    t.ok(fields.next());
    t.equal(fields.value, n, `next() ${n}`);
    const halves = new WireReader(buf, 1, end, true);
    t.ok(halves.varint());
    t.equal(halves.hi * 2 ** 32 + halves.lo, n, `varint() ${n}`);
  }
});

t.test('round trips: any uint64, any number below 2^53, bytes as protobufjs writes and reads them', async () => {
  fc.assert(
    fc.property(fc.bigInt({ min: 0n, max: MAX_U64 }), (n) => {
      const bytes = written64(n);
      const [lo, hi] = halves(n);
      const back = read(hex(bytes), true);
      const theirs = protobuf.Reader.create(hex(bytes)).uint64() as unknown as Long;
      return bytes === protobufjsBytes(n) && bytes.length / 2 === varint64Length(lo, hi) && back.value === n && back.pos === bytes.length / 2 && BigInt(theirs.toString()) === n;
    }),
    { numRuns: 2000 },
  );
  fc.assert(
    fc.property(fc.maxSafeNat(), fc.integer({ min: 0, max: 5 }), (n, at) => {
      const buf = Buffer.alloc(at + 8);
      const end = writeVarint(buf, at, n);
      const r = new WireReader(buf, at, end, true);
      return end - at === varintLength(n) && toHex(buf.subarray(at, end)) === written64(BigInt(n)) && r.varint() && r.hi * 2 ** 32 + r.lo === n && r.pos === end;
    }),
    { numRuns: 2000 },
  );
});

t.test('random bytes: strict reads a subset of what lenient reads, and both agree on it', async () => {
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 12 }), (bytes) => {
      const buf = Buffer.from(bytes);
      const strict = read(buf, true);
      const lenient = read(buf, false);
      if (strict.value === undefined) return true;
      // What strict takes is the shortest form: writing the value again gives the same bytes.
      return lenient.value === strict.value && lenient.pos === strict.pos && written64(strict.value) === toHex(buf.subarray(0, strict.pos));
    }),
    { numRuns: 5000 },
  );
});
