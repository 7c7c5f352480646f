// ReceiptMarks against a model (an array of marks): any deliveries from a few senders and any
// acks give the same receipts, the newest of each sender covered; through the ring's growth and
// past its bound, where the oldest is forgotten. And what no receipt is about is not remembered.

import t from 'tap';
import fc from 'fast-check';
import Long from 'long';
import { ReceiptMarks, MAX_MARKS, type ReceiptMark } from '../../src/session/receipt-marks.js';
import { encodeMessageRequest, storedRequestBody } from '../../src/protocol/codec.js';
import { uint64Number } from '../../src/protocol/codec.js';

const body = (from: string, msgId: number | Long, to = 'bob'): Uint8Array => storedRequestBody({ msgId, to, content: 'hi' }, from, 1_800_000_000_000, to);
const plain = (marks: ReceiptMark[]) => marks.map((m) => ({ seq: m.seq, from: m.from, msgId: uint64Number(m.msgId) })).sort((a, b) => a.seq - b.seq);

t.test('any deliveries and acks: the newest covered mark of each sender, as a model gives it', async (t) => {
  const senders = ['alice', 'carol', 'dave', 'émile'];
  const op = fc.oneof(
    { weight: 8, arbitrary: fc.record({ deliver: fc.integer({ min: 0, max: senders.length - 1 }), count: fc.integer({ min: 1, max: 40 }) }) },
    { weight: 2, arbitrary: fc.record({ ack: fc.integer({ min: -5, max: 60 }) }) },
  );
  fc.assert(
    fc.property(fc.array(op, { maxLength: 120 }), (ops) => {
      const marks = new ReceiptMarks();
      let model: { seq: number; from: string; msgId: number }[] = [];
      let seq = 0;
      for (const o of ops) {
        if ('deliver' in o) {
          for (let k = 0; k < o.count; k++) {
            const from = senders[(o.deliver + k) % senders.length]!;
            seq++;
            marks.add(seq, body(from, seq * 7), 'bob');
            model.push({ seq, from, msgId: seq * 7 });
            if (model.length > MAX_MARKS) model.shift();
          }
        } else {
          // Acks up to somewhere around the newest delivery.
          const upTo = seq - o.ack;
          const covered = model.filter((m) => m.seq <= upTo);
          model = model.filter((m) => m.seq > upTo);
          const newest = new Map(covered.map((m) => [m.from, m]));
          const expected = [...newest.values()].sort((a, b) => a.seq - b.seq);
          if (JSON.stringify(plain(marks.take(upTo))) !== JSON.stringify(expected)) return false;
        }
        if (marks.length !== model.length) return false;
      }
      return true;
    }),
    { numRuns: 300 },
  );
  t.pass('300 random histories');
});

t.test('past MAX_MARKS the oldest is forgotten; a msg_id past 2^53 comes back whole', async (t) => {
  const marks = new ReceiptMarks();
  const big = Long.fromString('18446744073709551615', true);
  marks.add(1, body('alice', big), 'bob');
  t.same(marks.take(1).map((m) => [m.seq, m.from, String(m.msgId)]), [[1, 'alice', '18446744073709551615']]);
  for (let seq = 2; seq <= MAX_MARKS + 11; seq++) marks.add(seq, body('alice', seq), 'bob');
  t.equal(marks.length, MAX_MARKS);
  t.equal(marks.oldestSeq, 12, 'the ten oldest forgotten');
  t.same(plain(marks.take(100)), [{ seq: 100, from: 'alice', msgId: 100 }]);
  t.equal(marks.oldestSeq, 101);
  marks.clear();
  t.equal(marks.length, 0);
  t.equal(marks.oldestSeq, Number.POSITIVE_INFINITY);
});

t.test('not remembered: an own message, an inbox event, a body without a sender, bytes that do not parse', async (t) => {
  const marks = new ReceiptMarks();
  marks.add(1, body('bob', 1), 'bob');
  marks.add(2, encodeMessageRequest({ to: 'bob', event: '{"type":"recalled"}' }), 'bob');
  marks.add(3, encodeMessageRequest({ to: 'bob', msgId: 3, content: 'x' }), 'bob');
  marks.add(4, Buffer.from([0x0a, 0xff]), 'bob');
  t.equal(marks.length, 0, 'none of the four');
  marks.add(5, body('alice', 5), 'bob');
  t.same(plain(marks.take(5)), [{ seq: 5, from: 'alice', msgId: 5 }]);
});
