// The bench driver's field scanner reads what protobufjs encodes: the fields it knows, at any
// value, whatever other fields surround them; and it refuses truncated input.

import t from 'tap';
import fc from 'fast-check';
import { encodeMessage, encodeMessageRequest } from '../../src/protocol/codec.js';
import { deliveryFrame } from '../../src/protocol/chat-frames.js';
import { HEADER_LENGTH } from '../../src/protocol/frame.js';
import { HeadType } from '../../src/protocol/types.js';
import { emptyScan, leadingNumber, scanMessage } from '../../bench/src/wire-scan.js';

const uint = fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER });
const text = fc.string({ maxLength: 40 });

t.test('a delivery: type, sequence, msg_id, seq and content', async (t) => {
  fc.assert(
    fc.property(uint, uint, uint, text, text, (sequence, msgId, seq, content, from) => {
      const body = Buffer.from(
        encodeMessage({ type: HeadType.MESSAGE_REQUEST, sequence, sessionId: 'abc', messageRequest: { msgId, from, to: 'r1', time: Date.now(), msgType: 1, content, seq, json: '{}' } }),
      );
      const s = scanMessage(body, emptyScan());
      return s.type === HeadType.MESSAGE_REQUEST && s.sequence === sequence && s.msgId === msgId && s.seq === seq && body.toString('utf8', s.contentStart, s.contentEnd) === content;
    }),
  );
});

t.test('a delivery as the worker writes it: stored_at (17) in the stored body, seq (16) appended after it', async (t) => {
  const stored = encodeMessageRequest({ msgId: 42, from: 'alice', to: 'bob', content: '1234.5|x', storedAt: 1_767_225_600_000 });
  const frame = deliveryFrame(stored, 300);
  const s = scanMessage(frame.subarray(HEADER_LENGTH), emptyScan());
  t.match(s, { type: HeadType.MESSAGE_REQUEST, sequence: 300, msgId: 42, seq: 300 });
  t.equal(frame.toString('utf8', HEADER_LENGTH + s.contentStart, HEADER_LENGTH + s.contentEnd), '1234.5|x');
});

t.test('a response: result, seq and error code', async (t) => {
  fc.assert(
    fc.property(fc.boolean(), uint, fc.constantFrom('', 'SB_ERR_SENDER_MISMATCH', 'SB_ERR_MESSAGE_TOO_LARGE'), (result, seq, errorCode) => {
      const body = Buffer.from(encodeMessage({ type: HeadType.MESSAGE_RESPONSE, sequence: 7, messageResponse: { result, code: 1, info: 'x', errorCode, seq, duplicate: true } }));
      const s = scanMessage(body, emptyScan());
      return s.type === HeadType.MESSAGE_RESPONSE && s.sequence === 7 && s.result === result && s.responseSeq === seq && s.errorCode === errorCode;
    }),
  );
  const login = Buffer.from(encodeMessage({ type: HeadType.LOGIN_RESPONSE, loginResponse: { result: false, code: 3, info: 'no', errorCode: 'SB_ERR_TOKEN_INVALID' } }));
  t.match(scanMessage(login, emptyScan()), { type: HeadType.LOGIN_RESPONSE, result: false, errorCode: 'SB_ERR_TOKEN_INVALID' });
});

t.test('a reused result object is reset between frames', async (t) => {
  const out = emptyScan();
  scanMessage(Buffer.from(encodeMessage({ type: HeadType.MESSAGE_REQUEST, messageRequest: { msgId: 5, seq: 9, content: 'hi' } })), out);
  scanMessage(Buffer.from(encodeMessage({ type: HeadType.HEART_BEAT, heartBeat: { seq: 1 } })), out);
  t.match(out, { type: HeadType.HEART_BEAT, msgId: 0, seq: 0, contentStart: 0, contentEnd: 0 });
});

t.test('truncated input is refused, never misread', async (t) => {
  const body = Buffer.from(encodeMessage({ type: HeadType.MESSAGE_REQUEST, sequence: 300, messageRequest: { msgId: 123456, content: 'hello', seq: 42 } }));
  for (let cut = 1; cut < body.length; cut++) {
    let scanned: ReturnType<typeof emptyScan> | undefined;
    try {
      scanned = scanMessage(body.subarray(0, cut), emptyScan());
    } catch (err) {
      t.type(err, RangeError);
      continue;
    }
    // A cut at a field boundary is a shorter valid message: what it holds must be right.
    t.ok(scanned.msgId === 0 || scanned.msgId === 123456);
    t.ok(scanned.seq === 0 || scanned.seq === 42);
  }
});

t.test('the send time stamped in a content', async (t) => {
  const read = (s: string) => leadingNumber(Buffer.from(s, 'latin1'), 0, s.length);
  t.equal(read('1234.567|xxxx'), 1234.567);
  t.equal(read('0.5|'), 0.5);
  t.equal(read('42|'), 42);
  t.equal(read('42.'), 42);
  t.equal(read('x'), 0);
  fc.assert(fc.property(fc.double({ min: 0, max: 1e9, noNaN: true }), (v) => Math.abs(read(`${v.toFixed(3)}|pad`) - Number(v.toFixed(3))) < 1e-6));
  // Only the given range is read.
  t.equal(leadingNumber(Buffer.from('99123'), 0, 2), 99);
});

t.test('a group delivery: group and event are seen', async (t) => {
  const message = deliveryFrame(encodeMessageRequest({ msgId: 42, from: 'alice', to: 'gabcdefghijkl', content: '1.5|x', storedAt: 1, group: 'gabcdefghijkl' }), 12);
  t.match(scanMessage(message.subarray(HEADER_LENGTH), emptyScan()), { type: HeadType.MESSAGE_REQUEST, msgId: 42, seq: 12, group: true, event: false });
  const event = deliveryFrame(encodeMessageRequest({ from: 'alice', to: 'gabcdefghijkl', storedAt: 1, group: 'gabcdefghijkl', event: '{"type":"created","actor":"alice"}' }), 1);
  t.match(scanMessage(event.subarray(HEADER_LENGTH), emptyScan()), { seq: 1, group: true, event: true });
  const inbox = deliveryFrame(encodeMessageRequest({ msgId: 1, from: 'a', to: 'b', content: 'x' }), 3);
  t.match(scanMessage(inbox.subarray(HEADER_LENGTH), emptyScan()), { group: false, event: false });
});
