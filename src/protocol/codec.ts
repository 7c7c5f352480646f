// protobuf encoding of the `Message` envelope with protobufjs reflection. Reflection compiles
// the same specialised encode/decode functions that static code would contain; bench/codec.ts
// measures both forms, and they run within a few percent of each other (bench/README.md), so
// the build needs no code-generation step.

import { fileURLToPath } from 'node:url';
import protobuf from 'protobufjs';
import Long from 'long';
import { SwitchboardError } from '../errors.js';
import { encodeFrame } from './frame.js';
import type { ImMessage, MessageRequest, UInt64 } from './types.js';

// protobufjs picks up `long` itself when it can require it; make that explicit so uint64
// fields always decode exactly.
protobuf.util.Long = Long;
protobuf.configure();

export const PROTO_PATH = fileURLToPath(new URL('../../proto/im.proto', import.meta.url));

const root = protobuf.loadSync(PROTO_PATH);
const MessageType = root.lookupType('switchboard.Message');
const MessageRequestType = root.lookupType('switchboard.MessageRequest');

/** The reflected protobufjs type of the envelope, for tools that need it (bench, tests). */
export const messageType: protobuf.Type = MessageType;

/** Decodes a frame body. Throws SB_ERR_BAD_PROTOBUF on anything protobufjs cannot parse. */
export function decodeMessage(body: Uint8Array): ImMessage {
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

/** Decimal form of a uint64 field; the common case (below 2^32) avoids Long's slow toString. */
export function uint64String(value: UInt64 | null | undefined): string {
  if (value == null) return '0';
  if (typeof value === 'number') return String(value);
  return value.high === 0 ? String(value.low >>> 0) : value.toString();
}
