// The hand-assembled chat frames must decode exactly like what protobufjs would produce for the
// same envelope, for small and large numbers, so native clients cannot tell the difference.

import t from 'tap';
import fc from 'fast-check';
import Long from 'long';
import { decodeMessage, encodeMessage, encodeMessageFrame, encodeMessageRequest } from '../../src/protocol/codec.js';
import { deliveryFits, deliveryFrame, peerDeliverFrame, storedResponseFrame, DELIVERY_OVERHEAD } from '../../src/protocol/chat-frames.js';
import { messageResponse } from '../../src/protocol/messages.js';
import { FrameDecoder, HEADER_LENGTH } from '../../src/protocol/frame.js';
import { HeadType } from '../../src/protocol/types.js';

function decodeFrame(frame: Buffer) {
  const bodies: Buffer[] = [];
  new FrameDecoder((b) => bodies.push(Buffer.from(b)), { maxFrameLength: 1 << 24 }).push(frame);
  t.equal(bodies.length, 1, 'exactly one frame');
  return decodeMessage(bodies[0]!);
}

t.test('a stored request plus seq decodes as a MESSAGE_REQUEST carrying that seq', async (t) => {
  const stored = encodeMessageRequest({ msgId: 77, from: 'alice', to: 'bob', time: 1_700_000_000_000, msgType: 1, content: 'hello', json: '{}' });
  for (const seq of [1, 127, 128, 300, 16_384, 2 ** 31, 2 ** 32 + 5, Number.MAX_SAFE_INTEGER]) {
    const m = decodeFrame(deliveryFrame(stored, seq));
    t.equal(m.type, HeadType.MESSAGE_REQUEST, `type, seq ${seq}`);
    t.equal(m.sequence!.toString(), String(seq), `envelope sequence, seq ${seq}`);
    t.equal(m.messageRequest!.seq!.toString(), String(seq), `MessageRequest.seq, seq ${seq}`);
    t.match(m.messageRequest, { from: 'alice', to: 'bob', content: 'hello', json: '{}', msgType: 1 });
    t.equal(m.messageRequest!.msgId!.toString(), '77');
  }
});

t.test('the delivered body never exceeds the stored request + DELIVERY_OVERHEAD', async (t) => {
  fc.assert(
    fc.property(fc.string({ maxLength: 3000 }), fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }), (content, seq) => {
      const stored = encodeMessageRequest({ from: 'a', to: 'b', content });
      const frame = deliveryFrame(stored, seq);
      const m = decodeFrame(frame);
      return frame.length - HEADER_LENGTH <= stored.length + DELIVERY_OVERHEAD && frame.readInt32BE(4) === frame.length - HEADER_LENGTH && m.messageRequest!.content === content;
    }),
  );
});

t.test('deliveryFits is exact: the largest accepted message fits its delivery and its PEER_DELIVER at any seq and epoch, one byte more does not', async (t) => {
  const worst = Number.MAX_SAFE_INTEGER;
  const stored = (length: number, to: string) => {
    // from, to and stored_at as the server writes them; content pads to `length`.
    const base = encodeMessageRequest({ from: 'alice', to, storedAt: 1_767_225_600_000 }).length;
    const body = encodeMessageRequest({ from: 'alice', to, content: 'x'.repeat(length - base - 4), storedAt: 1_767_225_600_000 });
    t.equal(body.length, length, 'the stored body has the length wanted');
    return body;
  };
  for (const [max, to] of [[65_536, 'bob'], [65_536, 'b'.repeat(200)], [20_000, 'bob'], [1 << 20, 'carol']] as const) {
    let largest = max;
    while (!deliveryFits(largest, Buffer.byteLength(to), max)) largest--;
    const fits = stored(largest, to);
    const over = stored(largest + 1, to);
    const bodyOf = (frame: Buffer) => frame.length - HEADER_LENGTH;
    const peer = (body: Uint8Array) => encodeMessageFrame({ type: HeadType.PEER_DELIVER, peerDeliver: { uid: to, seq: worst, body, epoch: worst } });
    t.ok(bodyOf(deliveryFrame(fits, worst)) <= max, `max ${max}, to of ${to.length}: the largest (${largest}) is delivered at seq 2^53-1`);
    t.ok(bodyOf(peer(fits)) <= max, `max ${max}, to of ${to.length}: and forwarded at seq and epoch 2^53-1`);
    t.equal(bodyOf(peer(over)), max + 1, `max ${max}, to of ${to.length}: one byte more would make the forward one byte too long`);
    t.ok(largest + DELIVERY_OVERHEAD + Buffer.byteLength(to) <= max, 'never more than the old bound allowed');
  }
  t.ok(deliveryFits(65_505 - 3, 3, 65_536) && !deliveryFits(65_505 - 2, 3, 65_536), 'PROTOCOL.md §5: a stored request of at most 65 505 - len(to) bytes (to < 128 bytes)');
});

t.test('the hand-built success response decodes like the protobufjs-built one', async (t) => {
  const sequences: (number | Long)[] = [0, 1, 300, 2 ** 32 + 1, Long.fromString('18446744073709551615', true), Long.fromString('9007199254740993', true)];
  for (const sequence of sequences) {
    for (const [sessionId, seq, duplicate] of [['', 1, false], ['3f1b7c52-9a0e-4d1b-8f43-2a1c5e9b7d10', 99_999, true], ['ünï', 2 ** 40, false]] as const) {
      const fast = decodeFrame(storedResponseFrame(sequence, sessionId, seq, duplicate));
      const reference = decodeMessage(encodeMessage(messageResponse(sequence, sessionId, { seq, duplicate })));
      const json = (m: unknown) => (m as { toJSON(): unknown }).toJSON();
      t.same(json(fast), json(reference), `sequence ${String(sequence)}, ${sessionId || 'no session'}, seq ${seq}`);
    }
  }
});

t.test('the hand-built PEER_DELIVER is byte for byte what protobufjs writes, zero and empty fields left out alike', async (t) => {
  const cases: [string, number, Buffer, number][] = [
    ['bob', 5, Buffer.from('0801', 'hex'), 7],
    ['bøb', 2 ** 53 - 1, Buffer.alloc(300, 0x61), 2 ** 53 - 1],
    ['', 0, Buffer.alloc(0), 0],
    ['x', 1, Buffer.alloc(0), 0],
    ['a'.repeat(200), 128, Buffer.from([0]), 16_384],
  ];
  for (const [uid, seq, body, epoch] of cases) {
    const expected = encodeMessageFrame({ type: HeadType.PEER_DELIVER, peerDeliver: { uid, seq, body, epoch } });
    t.equal(peerDeliverFrame(uid, seq, body, epoch).toString('hex'), expected.toString('hex'), `uid of ${uid.length}, seq ${seq}, body of ${body.length}, epoch ${epoch}`);
  }
});
