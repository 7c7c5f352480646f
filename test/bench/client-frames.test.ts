// The bench client's hand-built frames decode with protobufjs to exactly what they claim.

import t from 'tap';
import fc from 'fast-check';
import { decodeMessage } from '../../src/protocol/codec.js';
import { HEADER_LENGTH } from '../../src/protocol/frame.js';
import { HeadType } from '../../src/protocol/types.js';
import { ackFrame, groupAckFrame, groupMessageFrame, loginRequestFrame, messageRequestFrame } from '../../bench/src/client-frames.js';

const num = (v: unknown) => (typeof v === 'number' ? v : Number(String(v)));
const uint = fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER });
// Bench user ids and contents are ASCII: latin1 and UTF-8 agree there.
const ascii = fc.string({ maxLength: 300 }).map((s) => s.replace(/[^\x00-\x7f]/g, '?'));

t.test('MESSAGE_REQUEST', async () => {
  fc.assert(
    fc.property(fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }), ascii, ascii, uint, ascii, (msgId, from, to, time, content) => {
      const frame = messageRequestFrame(msgId, from, to, time, content);
      if (frame.readUInt32BE(4) !== frame.length - HEADER_LENGTH) return false;
      const m = decodeMessage(frame.subarray(HEADER_LENGTH));
      const r = m.messageRequest!;
      return m.type === HeadType.MESSAGE_REQUEST && num(m.sequence) === msgId && num(r.msgId) === msgId && num(r.time) === time && r.msgType === 1 && r.from === from && r.to === to && r.content === content;
    }),
  );
});

t.test('MESSAGE_ACK', async () => {
  fc.assert(
    fc.property(uint, (seq) => {
      const frame = ackFrame(seq);
      const m = decodeMessage(frame.subarray(HEADER_LENGTH));
      return frame.readUInt32BE(4) === frame.length - HEADER_LENGTH && m.type === HeadType.MESSAGE_ACK && num(m.ack?.seq) === seq;
    }),
  );
});

t.test('group MESSAGE_REQUEST', async () => {
  fc.assert(
    fc.property(fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }), ascii, ascii, uint, ascii, (msgId, from, group, time, content) => {
      const frame = groupMessageFrame(msgId, from, group, time, content);
      if (frame.readUInt32BE(4) !== frame.length - HEADER_LENGTH) return false;
      const m = decodeMessage(frame.subarray(HEADER_LENGTH));
      const r = m.messageRequest!;
      return m.type === HeadType.MESSAGE_REQUEST && num(m.sequence) === msgId && num(r.msgId) === msgId && num(r.time) === time && r.msgType === 1 && r.from === from && !r.to && (r.group ?? '') === group && r.content === content;
    }),
  );
});

t.test('group MESSAGE_ACK', async () => {
  fc.assert(
    fc.property(uint, ascii, (seq, group) => {
      const frame = groupAckFrame(group, seq);
      const m = decodeMessage(frame.subarray(HEADER_LENGTH));
      return frame.readUInt32BE(4) === frame.length - HEADER_LENGTH && m.type === HeadType.MESSAGE_ACK && num(m.ack?.seq) === seq && (m.ack?.group ?? '') === group;
    }),
  );
});

t.test('LOGIN_REQUEST with groups', async (t) => {
  const m = decodeMessage(loginRequestFrame('u1', 'token', { groups: true }).subarray(HEADER_LENGTH));
  t.match(m.loginRequest, { uid: 'u1', acks: true, groups: true });
  t.notOk(decodeMessage(loginRequestFrame('u1', 'token').subarray(HEADER_LENGTH)).loginRequest!.groups, 'not without it');
});

t.test('LOGIN_REQUEST with receipts: field 22 as PROTOCOL.md §14 spells it', async (t) => {
  // §14's worked login of alice's phone (acks, receipts, token "T"), without its session_id, which the bench does not send.
  const fixture = '00860001 0000001b 1001 2217 0a05616c696365 120570686f6e65 1a0154 800101 b00101'.replace(/ /g, '');
  const frame = loginRequestFrame('alice', 'T', { deviceId: 'phone', receipts: true });
  t.equal(frame.toString('hex'), fixture);
  t.match(decodeMessage(frame.subarray(HEADER_LENGTH)).loginRequest, { uid: 'alice', deviceId: 'phone', token: 'T', acks: true, receipts: true });
  // Without it, the same frame less the field's three bytes.
  t.equal(loginRequestFrame('alice', 'T', { deviceId: 'phone' }).toString('hex'), fixture.replace('0000001b', '00000018').replace('2217', '2214').slice(0, -6));
});
