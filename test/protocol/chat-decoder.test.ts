// The hand decoder of MESSAGE_REQUEST / MESSAGE_ACK / PEER_DELIVER against protobufjs: hex fixtures, the forms
// it must leave to protobufjs, random requests, and mutated and random bodies. Whatever it
// accepts must decode exactly as protobufjs decodes it, and the stored body it splices must be
// byte for byte what encoding the protobufjs-decoded request gives.

import t from 'tap';
import fc from 'fast-check';
import Long from 'long';
import { decodeChatMessage, type DecodedTypes } from '../../src/protocol/chat-decoder.js';
import { decodeMessage, decodeReflected, encodeMessage, encodeMessageRequest, messageType, storedRequestBody } from '../../src/protocol/codec.js';
import { HeadType, type ImMessage, type MessageRequest } from '../../src/protocol/types.js';
import { catchError } from '../helpers/catch-error.js';

const hex = (s: string): Buffer => Buffer.from(s.replace(/--.*$/gm, '').replace(/\s+/g, ''), 'hex');
const toHex = (b: Uint8Array): string => Buffer.from(b).toString('hex');

const types = {
  message: messageType.ctor,
  messageRequest: messageType.root.lookupType('switchboard.MessageRequest').ctor,
  messageAck: messageType.root.lookupType('switchboard.MessageAck').ctor,
  peerDeliver: messageType.root.lookupType('switchboard.PeerDeliver').ctor,
} as unknown as DecodedTypes;

const SENDER = 'alice';
/** The server's clock when it stores the message (stored_at): 1 700 000 000 000, varint 80d095ffbc31. */
const STORED_AT = 1_700_000_000_000;

/** protobufjs' own answer (with the wire-type check): the decoded message (or its error) and the stored body it leads to. */
function reference(body: Buffer): { message?: ImMessage; stored?: string; error?: unknown } {
  let message: ImMessage;
  try {
    message = decodeReflected(body);
  } catch (error) {
    return { error };
  }
  let stored: string | undefined;
  if (message.messageRequest) {
    const copy = decodeReflected(body);
    copy.messageRequest!.from = SENDER;
    delete copy.messageRequest!.seq;
    copy.messageRequest!.storedAt = STORED_AT;
    stored = toHex(encodeMessageRequest(copy.messageRequest!));
  }
  return { message, stored };
}

/** Own keys in order, Longs as "low,high,unsigned", recursively: the exact shape of a decoded object. */
function shape(value: unknown): unknown {
  if (value instanceof Long) return `${value.low},${value.high},${value.unsigned}`;
  if (value === null || typeof value !== 'object') return value;
  return [(Object.getPrototypeOf(value) as { constructor: { name: string } }).constructor.name, ...Object.keys(value).map((k) => [k, shape((value as Record<string, unknown>)[k])])];
}

interface Outcome {
  /** The hand decoder took the body (rather than leaving it to protobufjs). */
  taken: boolean;
  /** Where it and protobufjs disagree; undefined when they agree. */
  mismatch?: string;
}

/**
 * Runs one body through the hand decoder, decodeMessage and protobufjs: the hand decoder must
 * either decline it or agree with protobufjs exactly, and decodeMessage must agree either way.
 */
function check(body: Buffer): Outcome {
  const ref = reference(body);
  let fast: ImMessage | undefined;
  let refused: unknown;
  try {
    fast = decodeChatMessage(body, types);
  } catch (err) {
    refused = err;
  }
  const taken = fast !== undefined;
  if (refused !== undefined) {
    if ((refused as { code?: string }).code !== 'SB_ERR_BAD_PROTOBUF') return { taken, mismatch: `the hand decoder threw ${String(refused)}` };
    if (!ref.error) return { taken, mismatch: 'the hand decoder refuses what protobufjs takes' };
    return { taken };
  }
  if (ref.error) {
    if (taken) return { taken, mismatch: 'protobufjs refuses it, the hand decoder took it' };
    const code = (catchError(() => decodeMessage(body)) as { code?: string } | undefined)?.code;
    return { taken, mismatch: code === 'SB_ERR_BAD_PROTOBUF' ? undefined : `decodeMessage gave ${code}, not SB_ERR_BAD_PROTOBUF` };
  }
  const expected = JSON.stringify(shape(ref.message));
  if (taken && JSON.stringify(shape(fast)) !== expected) return { taken, mismatch: 'hand decoder decodes differently' };
  const decoded = decodeMessage(body);
  if (JSON.stringify(shape(decoded)) !== expected) return { taken, mismatch: 'decodeMessage decodes differently' };
  if (ref.stored !== undefined && toHex(storedRequestBody(decoded.messageRequest!, SENDER, STORED_AT)) !== ref.stored) return { taken, mismatch: 'stored body differs' };
  return { taken };
}

t.test('fixtures the hand decoder takes', async (t) => {
  const taken: [string, string][] = [
    [
      'request: msg_id, to, content',
      `08 05  10 07  -- type MESSAGE_REQUEST, sequence 7
       32 0b  08 2a  1a 03 626f62  32 02 6869 -- messageRequest { msg_id 42, to "bob", content "hi" }`,
    ],
    [
      'request with from, session id, every field, and a seq to drop',
      `08 05  10 ffffffffffffffffff01  1a 02 7331 -- sequence 2^64-1, session_id "s1"
       32 36
         08 81808080808080808001 -- msg_id 2^63 + 1
         12 05 616c696365  1a 03 626f62 -- from "alice", to "bob"
         20 e807  28 ffffffff0f -- time 1000, msg_type 2^32-1
         32 04 68c3a978 -- content "héx"
         42 01 75  4a 01 70  52 01 6e  5a 02 7b7d -- url, property, from_nick, json
         8001 05 -- seq 5`,
    ],
    [
      'request with a seq and a stored_at of its own, both to drop',
      `08 05
       32 16  08 2a  1a 03 626f62  32 02 6869 -- msg_id 42, to "bob", content "hi"
         8001 05  8801 80d095ffbc31 -- seq 5, stored_at 1 700 000 000 000`,
    ],
    ['request with only a stored_at', '08 05 32 03 8801 07'],
    ['request without msg_id', '08 05 32 05 1a 03 626f62'],
    ['request with only from', '08 05 32 07 12 05 616c696365'],
    ['empty request', '08 05 32 00'],
    ['request without a body', '08 05 10 01'],
    ['ack', '08 08  10 03  8201 02 08 05 -- ack { seq 5 }'],
    ['empty ack', '08 08 8201 00'],
    ['ack of a group', '08 08  8201 11 08 05 12 0d 676b33763771326d786134627a -- ack { seq 5, group "gk3v7q2mxa4bz" }'],
    ['ack of a group without seq', '08 08 8201 03 12 01 67'],
    ['peer deliver', '08 17  a201 15  0a 03 626f62  10 05  1a 03 120161  20 ffffffffffffff0f -- peerDeliver { uid "bob", seq 5, body 120161, epoch 2^53-1 }'],
    ['peer deliver without an epoch (a worker of an older version)', '08 17  a201 0a  0a 03 626f62  10 05  1a 01 00'],
    ['empty peer deliver', '08 17 a201 00'],
  ];
  for (const [label, fixture] of taken) {
    t.same(check(hex(fixture)), { taken: true }, label);
  }
});

t.test('the stored body is spliced from the wire: from replaced, seq dropped, the server\'s stored_at last', async (t) => {
  const body = hex('08 05 32 16  08 2a  12 03 6d6f6c  1a 03 626f62  32 02 6869  8001 09  8801 01');
  const message = decodeChatMessage(body, types)!;
  t.equal(message.messageRequest!.from, 'mol');
  t.equal(toHex(storedRequestBody(message.messageRequest!, SENDER, STORED_AT)), toHex(hex('08 2a  12 05 616c696365  1a 03 626f62  32 02 6869  8801 80d095ffbc31')));
  // The request object itself is left alone.
  t.equal(message.messageRequest!.from, 'mol');
  t.equal(Number(message.messageRequest!.seq), 9);
});

t.test('the stored body is a copy: it does not change when the read buffer is reused', async (t) => {
  const body = hex('08 05 32 12  08 2a  12 05 616c696365  1a 03 626f62  32 02 6869');
  const stored = storedRequestBody(decodeChatMessage(body, types)!.messageRequest!, SENDER, STORED_AT) as Buffer;
  const before = toHex(stored);
  body.fill(0);
  t.equal(toHex(stored), before, 'unchanged when the read buffer is reused');
});

t.test('forms left to protobufjs, which decodes or refuses them as before', async (t) => {
  const declined: [string, string][] = [
    ['another type', '08 04 10 01'],
    ['type not first', '10 01 08 05'],
    ['type 5 as a two-byte varint', '08 85 00'],
    ['fields out of order', '08 05 32 00 10 01'],
    ['a field twice', '08 05 10 01 10 02'],
    ['sequence 0 written out', '08 05 10 00'],
    ['empty session id written out', '08 05 1a 00'],
    ['an ack on a MESSAGE_REQUEST', '08 05 8201 02 08 05'],
    ['a request on a MESSAGE_ACK', '08 08 32 00'],
    ['another body beside', '08 05 22 00 32 00'],
    ['unknown envelope field', '08 05 f801 01'],
    ['request fields out of order', '08 05 32 07 1a 03 626f62 08 01'],
    ['request field twice', '08 05 32 0a 1a 03 626f62 1a 03 626f62'],
    ['unknown request field', '08 05 32 08 1a 03 626f62 3a 01 78'],
    ['msg_id 0 written out', '08 05 32 02 08 00'],
    ['empty to written out', '08 05 32 02 1a 00'],
    ['overlong msg_id', '08 05 32 03 08 81 00'],
    ['overlong length', '08 05 32 06 1a 83 00 626f62'],
    ['msg_type above 32 bits', '08 05 32 06 28 8080808010'],
    ['msg_id above 64 bits', '08 05 32 0b 08 ffffffffffffffffff03'],
    ['ack seq 0 written out', '08 08 8201 02 08 00'],
    ['ack with another field', '08 08 8201 02 18 01'],
    ['ack group before seq', '08 08 8201 05 12 01 67 08 05'],
    ['ack with an empty group written out', '08 08 8201 04 08 05 12 00'],
    ['ack group with invalid UTF-8', '08 08 8201 05 08 05 12 01 ff'],
    ['invalid UTF-8 in to', '08 05 32 04 1a 02 c328'],
    ['invalid UTF-8 in session id', '08 05 1a 01 ff'],
    ['surrogate encoded in UTF-8', '08 05 32 05 1a 03 eda080'],
    ['request length past the end', '08 05 32 09 1a 03 626f62'],
    ['string length past the request', '08 05 32 03 1a 05 62 6f62 6f62'],
    ['truncated varint', '08 05 10 80'],
    ['truncated tag', '08 05 32 01 80'],
  ];
  for (const [label, fixture] of declined) {
    t.same(check(hex(fixture)), { taken: false }, label);
  }
});

t.test('a known field with another wire type is refused by both decoders; an unknown field is skipped, whatever its wire type', async (t) => {
  const mistyped: [string, string][] = [
    // What the hand decoder looks at: it refuses these itself.
    ['Message.sequence as a string', '08 05 12 01 07'],
    ['Message.session_id as a varint', '08 05 18 01'],
    ['Message.messageRequest as a varint', '08 05 30 01'],
    ['Message.ack as a fixed32', '08 08 8501 01020304'],
    ['MessageRequest.to as a varint', '08 05 32 02 18 01'],
    ['MessageRequest.msg_id as a string', '08 05 32 03 0a 01 31'],
    ['MessageRequest.seq as a fixed64', '08 05 32 0d 1a 01 62 8101 0100000000000000'],
    ['MessageRequest.stored_at as a string', '08 05 32 04 8a01 01 31'],
    ['MessageRequest.content as a fixed32', '08 05 32 05 35 01020304'],
    ['MessageAck.seq as a string', '08 08 8201 03 0a 01 05'],
    ['MessageAck.group as a varint', '08 08 8201 04 08 05 10 01'],
    // What only protobufjs decodes: the same rule after it.
    ['Message.type as a string', '0a 01 05'],
    ['LoginRequest.uid as a varint', '22 02 08 01'],
    ['LoginRequest.last_seq as a string', '22 03 8a01 00'],
    ['LoginRequest.acks as a fixed64', '22 0a 8101 0100000000000000'],
    ['MessageHeartBeat.seq as a string', '08 04 4a 03 0a 01 31'],
    ['Message.heartBeat as a fixed32', '08 04 4d 01020304'],
    ['PeerDeliver.seq as a string', '08 17 a201 03 12 01 31'],
    ['PeerNudge.uids as a varint', '08 18 aa01 02 08 01'],
  ];
  for (const [label, fixture] of mistyped) {
    const body = hex(fixture);
    const err = catchError(() => decodeMessage(body)) as { code?: string; message?: string } | undefined;
    t.equal(err?.code, 'SB_ERR_BAD_PROTOBUF', `${label}: refused`);
    t.match(err?.message, /wire type/, `${label}: for its wire type`);
    const slow = catchError(() => decodeReflected(body)) as { code?: string; message?: string } | undefined;
    t.equal(slow?.code, 'SB_ERR_BAD_PROTOBUF', `${label}: refused by the protobufjs path too`);
    t.match(slow?.message, /wire type/);
    t.same(check(body), { taken: false }, `${label}: the two decoders agree`);
  }
  const unknown: [string, string][] = [
    ['envelope field 31 as a varint', '08 04 f801 07'],
    ['envelope field 31 as a string', '08 04 fa01 01 78'],
    ['envelope field 31 as a fixed32', '08 04 fd01 01020304'],
    ['envelope field 31 as a fixed64', '08 04 f901 0102030405060708'],
    ['MessageRequest field 7 (unused) as a string', '08 05 32 08 1a 03 626f62 3a 01 78'],
  ];
  for (const [label, fixture] of unknown) {
    const decoded = decodeMessage(hex(fixture));
    t.ok(decoded.type === 4 || decoded.messageRequest?.to === 'bob', `${label}: decoded, the field skipped`);
    t.notOk(Object.hasOwn(decoded, '$unknowns') || Object.hasOwn(decoded.messageRequest ?? {}, '$unknowns'), `${label}: and not kept`);
  }
});

const u64 = fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }).map((n) => Long.fromString(n.toString(), true));
const text = fc.oneof(fc.string({ maxLength: 20 }), fc.string({ unit: 'grapheme', maxLength: 300 }));
const requestArb = fc.record(
  { msgId: u64, from: text, to: text, time: u64, msgType: fc.nat({ max: 2 ** 32 - 1 }), content: text, url: text, property: text, fromNick: text, json: text, seq: u64 },
  { requiredKeys: [] },
);
const envelopeArb = fc.record({ sequence: fc.option(u64, { nil: undefined }), sessionId: fc.option(text, { nil: undefined }) });

t.test('every request protobufjs encodes is taken and decodes alike', async (t) => {
  fc.assert(
    fc.property(envelopeArb, requestArb, (envelope, request: MessageRequest) => {
      const body = Buffer.from(encodeMessage({ type: HeadType.MESSAGE_REQUEST, ...envelope, messageRequest: request }));
      t.same(check(body), { taken: true });
    }),
    { numRuns: 500 },
  );
  fc.assert(
    fc.property(envelopeArb, u64, (envelope, seq) => {
      const body = Buffer.from(encodeMessage({ type: HeadType.MESSAGE_ACK, ...envelope, ack: { seq } }));
      t.same(check(body), { taken: true });
    }),
    { numRuns: 200 },
  );
  const peerDeliverArb = fc.record({ uid: text, seq: u64, body: fc.uint8Array({ maxLength: 200 }).map((b) => Buffer.from(b)), epoch: u64 }, { requiredKeys: [] });
  fc.assert(
    fc.property(peerDeliverArb, (peerDeliver) => {
      const body = Buffer.from(encodeMessage({ type: HeadType.PEER_DELIVER, peerDeliver }));
      t.same(check(body), { taken: true });
    }),
    { numRuns: 300 },
  );
});

t.test('mutated and random bodies: declined or decoded exactly as protobufjs does', async (t) => {
  const seed = (request: MessageRequest) => Buffer.from(encodeMessage({ type: HeadType.MESSAGE_REQUEST, sequence: 3, sessionId: 's', messageRequest: request }));
  const seeds = [
    seed({ msgId: 1, from: 'alice', to: 'bob', time: 1700000000000, msgType: 1, content: 'hello' }),
    seed({ msgId: Long.MAX_UNSIGNED_VALUE, to: 'bøb', content: 'x'.repeat(200), json: '{}', seq: 7 }),
    Buffer.from(encodeMessage({ type: HeadType.MESSAGE_ACK, sequence: 9, ack: { seq: 300 } })),
    Buffer.from(encodeMessage({ type: HeadType.PEER_DELIVER, peerDeliver: { uid: 'bøb', seq: 300, body: Buffer.from('0801120161', 'hex'), epoch: 2 ** 40 } })),
  ];
  const mutation = fc.record({
    seed: fc.nat({ max: seeds.length - 1 }),
    edits: fc.array(fc.tuple(fc.constantFrom('set', 'insert', 'delete', 'cut'), fc.nat(), fc.integer({ min: 0, max: 255 })), { minLength: 1, maxLength: 4 }),
  });
  fc.assert(
    fc.property(mutation, ({ seed: i, edits }) => {
      let bytes = [...seeds[i]!];
      for (const [op, at, value] of edits) {
        // Keep the two type bytes most of the time, so the hand decoder gets to look further.
        const pos = 2 + (at % Math.max(1, bytes.length - 1));
        if (op === 'set') bytes[pos] = value;
        else if (op === 'insert') bytes.splice(pos, 0, value);
        else if (op === 'delete') bytes.splice(pos, 1);
        else bytes = bytes.slice(0, pos);
      }
      t.equal(check(Buffer.from(bytes.filter((b) => b !== undefined))).mismatch, undefined);
    }),
    { numRuns: 3000 },
  );
  fc.assert(
    fc.property(fc.constantFrom('0805', '0808', '0817'), fc.uint8Array({ maxLength: 40 }), (prefix, tail) => {
      t.equal(check(Buffer.concat([Buffer.from(prefix, 'hex'), tail])).mismatch, undefined);
    }),
    { numRuns: 3000 },
  );
});
