// The frames a bench client sends: its login, and the two per message, assembled by hand like the server's hot
// frames (src/protocol/chat-frames.ts): encoding them with protobufjs made the driver, not the
// server, the bottleneck. test/bench/client-frames.test.ts checks them against protobufjs.
//   Message { type = MESSAGE_REQUEST (1), sequence = msg_id (2),
//             messageRequest (6) = { msg_id (1), from (2), to (3), time (4), msg_type = 1 (5), content (6) } }
//   Message { type = MESSAGE_ACK (1), ack (16) = { seq (1) } }

import { HEADER_LENGTH, writeHeader } from '../../src/protocol/frame.js';
import { varintLength, writeVarint } from '../../src/protocol/chat-frames.js';
import { HeadType } from '../../src/protocol/types.js';
import { encodeMessageFrame } from '../../src/protocol/codec.js';

/**
 * A bench client's LOGIN_REQUEST: a token login as an acks device. `lastSeq` above any inbox
 * head starts the device at the head, so what earlier runs left is not replayed.
 */
export function loginRequestFrame(uid: string, token: string, options: { deviceId?: string; lastSeq?: number } = {}): Buffer {
  const { deviceId = 'bench', lastSeq } = options;
  return encodeMessageFrame({ type: HeadType.LOGIN_REQUEST, sequence: 1, loginRequest: { uid, deviceId, token, acks: true, ...(lastSeq === undefined ? {} : { lastSeq }) } });
}

/** A MESSAGE_REQUEST from `from` to `to`; `from` and `to` are latin1 (bench user ids), `content` too. */
export function messageRequestFrame(msgId: number, from: string, to: string, time: number, content: string): Buffer {
  const request =
    1 + varintLength(msgId) + 1 + varintLength(from.length) + from.length + 1 + varintLength(to.length) + to.length + 1 + varintLength(time) + 2 + 1 + varintLength(content.length) + content.length;
  const body = 2 + 1 + varintLength(msgId) + 1 + varintLength(request) + request;
  const frame = Buffer.allocUnsafe(HEADER_LENGTH + body);
  writeHeader(frame, 0, body);
  let pos = HEADER_LENGTH;
  frame[pos++] = 0x08;
  frame[pos++] = HeadType.MESSAGE_REQUEST;
  frame[pos++] = 0x10;
  pos = writeVarint(frame, pos, msgId);
  frame[pos++] = 0x32;
  pos = writeVarint(frame, pos, request);
  frame[pos++] = 0x08;
  pos = writeVarint(frame, pos, msgId);
  pos = latin1Field(frame, pos, 0x12, from);
  pos = latin1Field(frame, pos, 0x1a, to);
  frame[pos++] = 0x20;
  pos = writeVarint(frame, pos, time);
  frame[pos++] = 0x28;
  frame[pos++] = 1;
  latin1Field(frame, pos, 0x32, content);
  return frame;
}

function latin1Field(frame: Buffer, pos: number, tag: number, value: string): number {
  frame[pos++] = tag;
  pos = writeVarint(frame, pos, value.length);
  return pos + frame.write(value, pos, 'latin1');
}

/** A cumulative MESSAGE_ACK up to inbox sequence `seq`. */
export function ackFrame(seq: number): Buffer {
  const ack = 1 + varintLength(seq);
  const body = 2 + 2 + 1 + ack;
  const frame = Buffer.allocUnsafe(HEADER_LENGTH + body);
  writeHeader(frame, 0, body);
  let pos = HEADER_LENGTH;
  frame[pos++] = 0x08;
  frame[pos++] = HeadType.MESSAGE_ACK;
  frame[pos++] = 0x82; // field 16, length-delimited: two-byte tag
  frame[pos++] = 0x01;
  frame[pos++] = ack;
  frame[pos++] = 0x08;
  writeVarint(frame, pos, seq);
  return frame;
}
