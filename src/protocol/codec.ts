// protobuf encoding of the `Message` envelope with protobufjs reflection. Reflection compiles
// the same specialised encode/decode functions that static code would contain; bench/src/codec-micro.ts
// measures both forms, and they run within a few percent of each other (bench/README.md), so
// the build needs no code-generation step.

import { fileURLToPath } from 'node:url';
import protobuf from 'protobufjs';
import Long from 'long';
import { SwitchboardError } from '../errors.js';
import { encodeFrame } from './frame.js';
import { REQUEST_WIRE, decodeChatMessage, type DecodedTypes, type WithWire } from './chat-decoder.js';
import { Field, type ImMessage, type MessageRequest, type UInt64 } from './types.js';
import { WireReader, WireType, bufferOf, oneByteTag, tag, tagBytes, varintLength, writeBytes, writeUtf8, writeVarint } from './wire.js';

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
  peerDeliver: root.lookupType('switchboard.PeerDeliver').ctor,
} as unknown as DecodedTypes;

/** The reflected protobufjs type of the envelope, for tools that need it (bench, tests). */
export const messageType: protobuf.Type = MessageType;

/**
 * Decodes a frame body. Throws SB_ERR_BAD_PROTOBUF on anything protobufjs cannot parse, and on
 * a known field sent with another wire type than its own. The two frames of every chat message
 * take the hand decoder (chat-decoder.ts) when they can.
 */
export function decodeMessage(body: Uint8Array): ImMessage {
  const buf = bufferOf(body);
  const chat = decodeChatMessage(buf, decodedTypes);
  if (chat) return chat;
  return decodeReflected(body);
}

/**
 * decodeMessage() without the hand decoder: protobufjs, then the wire-type check. protobufjs
 * skips a field whose wire type is not the declared one as if it were unknown, so a client's
 * `type` or `to` sent as the wrong kind of value would just vanish; it reports skipped fields
 * when told not to discard them, and a skipped field whose number the schema knows is refused.
 * Fields the schema does not know are skipped, whatever their wire type (proto3: a newer client
 * may send them), and dropped as before.
 */
export function decodeReflected(body: Uint8Array): ImMessage {
  let message: ImMessage;
  try {
    const reader = protobuf.Reader.create(body);
    reader.discardUnknown = false;
    message = MessageType.decode(reader) as unknown as ImMessage;
  } catch (err) {
    throw new SwitchboardError('SB_ERR_BAD_PROTOBUF', `frame body is not a valid Message: ${(err as Error).message}`, { cause: err });
  }
  refuseMistyped(ENVELOPE, message as unknown as Decoded);
  return message;
}

/** A message type and, for each of its fields that holds a message, that field's shape. */
interface Shape {
  type: protobuf.Type;
  children: [name: string, shape: Shape][];
}

function shapeOf(type: protobuf.Type): Shape {
  return { type, children: type.fieldsArray.filter((f) => f.resolve().resolvedType instanceof protobuf.Type).map((f) => [f.name, shapeOf(f.resolvedType as protobuf.Type)]) };
}

const ENVELOPE = shapeOf(MessageType);

type Decoded = Record<string, unknown> & { $unknowns?: Uint8Array[] };

function refuseMistyped(shape: Shape, message: Decoded): void {
  if (Object.hasOwn(message, '$unknowns')) {
    for (const raw of message.$unknowns ?? []) {
      const field = tagOf(raw) >>> 3;
      const known = shape.type.fieldsById[field];
      if (known) throw new SwitchboardError('SB_ERR_BAD_PROTOBUF', `frame body is not a valid Message: ${shape.type.name}.${known.name} (${field}) has wire type ${tagOf(raw) & 7}`);
    }
    delete message.$unknowns;
  }
  for (const [name, child] of shape.children) {
    const value = message[name];
    if (value == null) continue;
    if (Array.isArray(value)) for (const item of value) refuseMistyped(child, item as Decoded);
    else refuseMistyped(child, value as Decoded);
  }
}

/**
 * The tag a raw field starts with. protobufjs has read it (at most 5 bytes, within 32 bits), so
 * it reads here too.
 */
function tagOf(raw: Uint8Array): number {
  const buf = bufferOf(raw);
  return new WireReader(buf, 0, buf.length, false).tag();
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

/** A stored body (storedRequestBody's, or an own copy) as the MessageRequest it holds. */
export function decodeStoredRequest(body: Uint8Array): MessageRequest {
  return MessageRequestType.decode(body) as unknown as MessageRequest;
}

/**
 * A received request as stored: `from` set to the sender, `seq` left out (the inbox assigns
 * it), `stored_at` set to `storedAt` (ms; whatever the sender put there), byte for byte what
 * encodeMessageRequest() writes for it. A request the hand decoder read is spliced from its wire
 * bytes, `stored_at` written last, as protobufjs does; any other is changed in place (`from`,
 * `seq`, `storedAt`) and encoded. `to`, when given and different, replaces the recipient as
 * written (its normalised form), and the request is encoded afresh.
 */
export function storedRequestBody(request: MessageRequest, from: string, storedAt: number, to?: string): Uint8Array {
  const wire = (request as WithWire)[REQUEST_WIRE];
  if (!wire || from === '' || storedAt <= 0 || (to !== undefined && to !== request.to)) {
    request.from = from;
    if (to !== undefined) request.to = to;
    delete request.seq;
    request.storedAt = storedAt;
    return encodeMessageRequest(request);
  }
  const { bytes, start, fromStart, fromEnd, seqStart } = wire;
  const fromLength = Buffer.byteLength(from);
  const out = Buffer.allocUnsafe(fromStart - start + 1 + varintLength(fromLength) + fromLength + seqStart - fromEnd + STORED_AT_TAG.length + varintLength(storedAt));
  let pos = bytes.copy(out, 0, start, fromStart);
  out[pos++] = FROM_TAG;
  pos = writeVarint(out, pos, fromLength);
  pos = writeUtf8(out, pos, from);
  pos += bytes.copy(out, pos, fromEnd, seqStart);
  pos = writeBytes(out, pos, STORED_AT_TAG);
  writeVarint(out, pos, storedAt);
  return out;
}

/**
 * Whether a received request sets a field only the server sets (origin_device, event, recalled,
 * edited). The hand decoder declines every one of them, leaving the request to protobufjs, so
 * one it read sets none: one property read instead of four own-property checks per message.
 */
export function setsServerFields(request: MessageRequest): boolean {
  if ((request as WithWire)[REQUEST_WIRE] !== undefined) return false;
  return Object.hasOwn(request, 'originDevice') || Object.hasOwn(request, 'event') || Object.hasOwn(request, 'recalled') || Object.hasOwn(request, 'edited');
}

const FROM_TAG = oneByteTag(Field.MessageRequest.from, WireType.LEN);
/**
 * MessageRequest.origin_device: a2 01. The copy of a message kept in its sender's own inbox
 * starts with it (protobuf takes fields in any order), so a delivery tells an own copy by its
 * first two bytes without decoding it: no chat request's stored body can start so (a request
 * carrying origin_device is refused, and storedRequestBody writes msg_id or from first).
 */
const ORIGIN_TAG = tagBytes(Field.MessageRequest.originDevice, WireType.LEN);

/** The own copy of a stored body (storedRequestBody's): origin_device = `deviceId`, then the body as the recipient has it. */
export function ownCopyBody(body: Uint8Array, deviceId: string): Uint8Array {
  const idLength = Buffer.byteLength(deviceId);
  const out = Buffer.allocUnsafe(ORIGIN_TAG.length + varintLength(idLength) + idLength + body.length);
  let pos = writeBytes(out, 0, ORIGIN_TAG);
  pos = writeVarint(out, pos, idLength);
  pos = writeUtf8(out, pos, deviceId);
  out.set(body, pos);
  return out;
}

/** True when a stored body is an own copy (ownCopyBody). */
export function isOwnCopy(body: Uint8Array): boolean {
  return body[0] === ORIGIN_TAG[0] && body[1] === ORIGIN_TAG[1];
}

/** Whether an own copy (isOwnCopy) was sent by the device whose id is `deviceId` (its UTF-8 bytes). */
export function ownCopyFrom(body: Uint8Array, deviceId: Buffer): boolean {
  let pos = ORIGIN_TAG.length;
  let length = 0;
  for (let shift = 0; pos < body.length && shift < 35; shift += 7) {
    const byte = body[pos++]!;
    length += (byte & 0x7f) * 2 ** shift;
    if (byte < 0x80) break;
  }
  return length === deviceId.length && pos + length <= body.length && deviceId.equals(body.subarray(pos, pos + length));
}

const MSG_ID_TAG = oneByteTag(Field.MessageRequest.msgId, WireType.VARINT);
const TO_TAG = oneByteTag(Field.MessageRequest.to, WireType.LEN);
const ORIGIN_FIELD_TAG = tag(Field.MessageRequest.originDevice, WireType.LEN);

/**
 * Which message a stored body is, as a 32-bit number: what tells two messages that claim one
 * inbox seq apart (Delivery: a failover to a lagging replica hands out seqs again). Every body a
 * worker holds for one message gives the same number: its live delivery and what a read returns,
 * its tombstone or edited form, and the body a resend delivers when it finds the message stored
 * (another stored_at and time): a hash of msg_id, from and to, which PROTOCOL.md §5 makes unique
 * per message. A body without msg_id (an inbox event, a message of a client that sets none) is
 * hashed whole, and so is one that does not parse. An own copy gives its message's number either
 * way: its origin_device is left out (so a message's identity serves its copy too). Two
 * messages give the same number only by a hash collision (1 in 2^32), or when a client reused a
 * msg_id for the same recipient.
 *
 * Per delivery: a walk over the fields' tags and lengths (msg_id's varint is hashed as written:
 * every encoder, and the strict chat decoder, take its shortest form), nothing decoded.
 */
export function bodyIdentity(body: Uint8Array): number {
  const n = body.length;
  let pos = 0;
  let idStart = 0;
  let idEnd = 0;
  let fromStart = 0;
  let fromEnd = 0;
  let toStart = 0;
  let toEnd = 0;
  // Where the body is hashed whole from: after an own copy's origin_device.
  let wholeStart = 0;
  while (pos < n) {
    const fieldStart = pos;
    let fieldTag = body[pos++]!;
    if (fieldTag >= 0x80) {
      // Fields 16 to 2047: a two-byte tag; none longer in this schema.
      const high = pos < n ? body[pos++]! : 0x80;
      if (high >= 0x80) return fnv(body, 0, n, FNV_OFFSET);
      fieldTag = (fieldTag & 0x7f) | (high << 7);
    }
    const wireType = fieldTag & 7;
    if (wireType === WireType.VARINT) {
      const start = pos;
      while (pos < n && body[pos]! >= 0x80) pos++;
      if (++pos > n || pos - start > 10) return fnv(body, 0, n, FNV_OFFSET);
      if (fieldTag === MSG_ID_TAG) {
        idStart = start;
        idEnd = pos;
      }
    } else if (wireType === WireType.LEN) {
      let length = 0;
      let b = 0x80;
      for (let shift = 0; b >= 0x80; shift += 7) {
        if (pos >= n || shift > 21) return fnv(body, 0, n, FNV_OFFSET);
        b = body[pos++]!;
        length |= (b & 0x7f) << shift;
      }
      if (length > n - pos) return fnv(body, 0, n, FNV_OFFSET);
      if (fieldTag === FROM_TAG) {
        fromStart = pos;
        fromEnd = pos + length;
      } else if (fieldTag === TO_TAG) {
        toStart = pos;
        toEnd = pos + length;
      } else if (fieldTag === ORIGIN_FIELD_TAG && fieldStart === 0) {
        wholeStart = pos + length;
      }
      pos += length;
    } else if (wireType === WireType.I64 || wireType === WireType.I32) {
      pos += wireType === WireType.I64 ? 8 : 4;
      if (pos > n) return fnv(body, 0, n, FNV_OFFSET);
    } else {
      return fnv(body, 0, n, FNV_OFFSET);
    }
  }
  // No msg_id, or 0 (one byte, 00).
  if (idEnd - idStart <= 1 && (idEnd === idStart || body[idStart] === 0)) return fnv(body, wholeStart, n, FNV_OFFSET);
  // Each part after its length, so that no two (msg_id, from, to) run together alike.
  let h = fnv(body, idStart, idEnd, FNV_OFFSET);
  h = fnv(body, fromStart, fromEnd, Math.imul(h ^ (fromEnd - fromStart), FNV_PRIME));
  return fnv(body, toStart, toEnd, Math.imul(h ^ (toEnd - toStart), FNV_PRIME));
}

const FNV_OFFSET = 0x811c9dc5;
const FNV_PRIME = 0x01000193;

/** FNV-1a over body[start, end), from `h`; a uint32. */
function fnv(body: Uint8Array, start: number, end: number, h: number): number {
  for (let i = start; i < end; i++) h = Math.imul(h ^ body[i]!, FNV_PRIME);
  return h >>> 0;
}

/** MessageRequest.stored_at: 88 01. */
const STORED_AT_TAG = tagBytes(Field.MessageRequest.storedAt, WireType.VARINT);

/**
 * A uint64 field as a number (exact below 2^53), 0 when absent. Number() of a Long goes through
 * its decimal toString (~0.5 µs): this is per ack and per delivery.
 */
export function uint64Number(value: UInt64 | null | undefined): number {
  if (value == null) return 0;
  if (typeof value === 'number') return value;
  return (value.high >>> 0) * 0x1_0000_0000 + (value.low >>> 0);
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
