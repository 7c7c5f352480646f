// protobuf encoding of the `Message` envelope with protobufjs reflection. Reflection compiles
// the same specialised encode/decode functions that static code would contain; bench/codec.ts
// measures both forms, and they run within a few percent of each other (bench/README.md), so
// the build needs no code-generation step.

import { fileURLToPath } from 'node:url';
import protobuf from 'protobufjs';
import Long from 'long';
import { SwitchboardError } from '../errors.js';
import { encodeFrame } from './frame.js';
import { REQUEST_WIRE, decodeChatMessage, type DecodedTypes, type WithWire } from './chat-decoder.js';
import type { ImMessage, MessageRequest, UInt64 } from './types.js';

// protobufjs picks up `long` itself when it can require it; make that explicit so uint64
// fields always decode exactly.
protobuf.util.Long = Long;
protobuf.configure();

export const PROTO_PATH = fileURLToPath(new URL('../../proto/im.proto', import.meta.url));

const root = protobuf.loadSync(PROTO_PATH);
const MessageType = root.lookupType('switchboard.Message');
const MessageRequestType = root.lookupType('switchboard.MessageRequest');
const decodedTypes = {
  message: MessageType.ctor,
  messageRequest: MessageRequestType.ctor,
  messageAck: root.lookupType('switchboard.MessageAck').ctor,
} as unknown as DecodedTypes;

/** The reflected protobufjs type of the envelope, for tools that need it (bench, tests). */
export const messageType: protobuf.Type = MessageType;

/**
 * Decodes a frame body. Throws SB_ERR_BAD_PROTOBUF on anything protobufjs cannot parse. The two
 * frames of every chat message take the hand decoder (chat-decoder.ts) when they can.
 */
export function decodeMessage(body: Uint8Array): ImMessage {
  const buf = Buffer.isBuffer(body) ? body : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  const chat = decodeChatMessage(buf, decodedTypes);
  if (chat) return chat;
  try {
    return MessageType.decode(body) as unknown as ImMessage;
  } catch (err) {
    throw new SwitchboardError('SB_ERR_BAD_PROTOBUF', `frame body is not a valid Message: ${(err as Error).message}`, { cause: err });
  }
}

/** Encodes a message body without the frame header. */
export function encodeMessage(message: ImMessage): Uint8Array {
  return MessageType.encode(message as unknown as protobuf.Message).finish();
}

/** Encodes a message into a complete frame (header + body). */
export function encodeMessageFrame(message: ImMessage): Buffer {
  return encodeFrame(encodeMessage(message));
}

/** Encodes a MessageRequest alone: the form a chat message is stored in. */
export function encodeMessageRequest(request: MessageRequest): Uint8Array {
  return MessageRequestType.encode(request as unknown as protobuf.Message).finish();
}

/**
 * A received request as stored: `from` set to the sender, `seq` left out (the inbox assigns
 * it), byte for byte what encodeMessageRequest() writes for it. A request the hand decoder read
 * is spliced from its wire bytes; any other is changed in place (`from`, `seq`) and encoded.
 * `to`, when given and different, replaces the recipient as written (its normalised form), and
 * the request is encoded afresh.
 */
export function storedRequestBody(request: MessageRequest, from: string, to?: string): Uint8Array {
  const wire = (request as WithWire)[REQUEST_WIRE];
  if (!wire || from === '' || (to !== undefined && to !== request.to)) {
    request.from = from;
    if (to !== undefined) request.to = to;
    delete request.seq;
    return encodeMessageRequest(request);
  }
  const { bytes, fromStart, fromEnd, seqStart } = wire;
  const fromLength = Buffer.byteLength(from);
  let lengthBytes = 1;
  for (let n = fromLength; n >= 0x80; n >>>= 7) lengthBytes++;
  const out = Buffer.allocUnsafe(fromStart + 1 + lengthBytes + fromLength + seqStart - fromEnd);
  bytes.copy(out, 0, 0, fromStart);
  let pos = fromStart;
  out[pos++] = 0x12; // field 2, length-delimited
  for (let n = fromLength; ; n >>>= 7) {
    if (n < 0x80) {
      out[pos++] = n;
      break;
    }
    out[pos++] = (n & 0x7f) | 0x80;
  }
  pos += out.write(from, pos, 'utf8');
  bytes.copy(out, pos, fromEnd, seqStart);
  return out;
}

/** Decimal form of a uint64 field; the common case (below 2^32) avoids Long's slow toString. */
export function uint64String(value: UInt64 | null | undefined): string {
  if (value == null) return '0';
  if (typeof value === 'number') return String(value);
  if (value.high === 0) return String(value.low >>> 0);
  const high = value.high >>> 0;
  // Below 2^53 a double holds the value exactly, and String() is far cheaper than Long's
  // division loop (msg_ids are often timestamps, past 2^32).
  if (high < 0x20_0000) return String(high * 0x1_0000_0000 + (value.low >>> 0));
  return value.toString();
}
