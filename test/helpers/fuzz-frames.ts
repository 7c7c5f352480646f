// What the live-server fuzz (test/fuzz/live-server.test.ts) sends: a seeded PRNG, valid-but-random
// messages of every type a client may send (field values drawn from small pools, so that a recall
// names a message that exists, and from the edges: 0, 2^64-1, long and odd strings), the
// non-client types, and the mutations of a frame (bit flips, truncations, length changes, bad
// magic or version, oversized and negative lengths, garbage). Nothing here knows sockets.

import Long from 'long';
import { encodeMessage } from '../../src/protocol/codec.js';
import { FRAME_MAGIC, FRAME_VERSION, HEADER_LENGTH, writeHeader } from '../../src/protocol/frame.js';
import { HeadType, PRE_LOGIN_SESSION_ID, type ConversationRequest, type ImMessage, type LoginRequest, type MessageAck, type MessageHeartBeat, type MessageRequest } from '../../src/protocol/types.js';

/** sfc32: a small, fast PRNG with a 128-bit state, seeded from one 32-bit number. */
export class Rng {
  #a: number;
  #b: number;
  #c: number;
  #d: number;

  constructor(seed: number) {
    this.#a = 0x9e3779b9;
    this.#b = 0x243f6a88;
    this.#c = 0xb7e15162;
    this.#d = seed >>> 0;
    for (let i = 0; i < 15; i++) this.u32();
  }

  u32(): number {
    const t = (((this.#a + this.#b) | 0) + this.#d) | 0;
    this.#d = (this.#d + 1) | 0;
    this.#a = this.#b ^ (this.#b >>> 9);
    this.#b = (this.#c + (this.#c << 3)) | 0;
    this.#c = (this.#c << 21) | (this.#c >>> 11);
    this.#c = (this.#c + t) | 0;
    return t >>> 0;
  }

  /** [0, 1). */
  next(): number {
    return this.u32() / 4_294_967_296;
  }

  /** A whole number in [lo, hi]. */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }

  chance(p: number): boolean {
    return this.next() < p;
  }

  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.next() * items.length)]!;
  }

  /** A child generator: one per connection, so each one's frames follow from the seed alone. */
  fork(): Rng {
    return new Rng(this.u32());
  }
}

/** Who the fuzz's messages name: its own users, its groups (when it has any), a few strangers. */
export interface FuzzPools {
  /** The fuzz users (their logins are valid). */
  uids: readonly string[];
  devices: readonly string[];
  /** Existing group ids the fuzz users are members of (none: only made-up ones). */
  groups: readonly string[];
  /** Users a message may be sent to besides the fuzz users (e.g. the control recipient). */
  extraRecipients: readonly string[];
  /** Valid token for `uid` (any device). */
  token(uid: string): string;
}

const ODD_STRINGS = ['', ' ', '\0', 'a\u0000b', '😀🙂', 'é', '\u202e', '../../etc', '%s%n', '{"type":90}', 'null', '-1', 'x'.repeat(300)];

export function randomString(rng: Rng, max = 40): string {
  // Long strings are rare: each costs its bytes to encode and to parse, and a frame of several
  // does not fit (SB_ERR_FRAME_TOO_LONG), which ends the connection.
  if (rng.chance(0.005)) return 'y'.repeat(rng.pick([20_000, 60_000]));
  // A lone surrogate is not UTF-8 once encoded (protobufjs writes it as is): the server refuses
  // the frame as SB_ERR_BAD_PROTOBUF. Rare too, since it ends the connection.
  if (rng.chance(0.002)) return 'a\ud800b';
  switch (rng.int(0, 5)) {
    case 0:
      return rng.pick(ODD_STRINGS);
    case 1:
      return String.fromCharCode(...Array.from({ length: rng.int(0, max) }, () => rng.int(32, 126)));
    case 2:
      // Any code point but the surrogates (a lone one is above).
      return String.fromCodePoint(...Array.from({ length: rng.int(0, max) }, () => (rng.chance(0.5) ? rng.int(0, 0xd7ff) : rng.int(0xe000, 0x10ffff))));
    case 3:
      return 'y'.repeat(rng.int(100, 1_500));
    default:
      return `s${rng.int(0, 9)}`;
  }
}

/** A uint64: mostly small (so that it hits real sequences and msg_ids), sometimes an edge. */
export function randomU64(rng: Rng): Long | number {
  switch (rng.int(0, 9)) {
    case 0:
      return 0;
    case 1:
      return Long.MAX_UNSIGNED_VALUE;
    case 2:
      return Number.MAX_SAFE_INTEGER;
    case 3:
      return Long.fromBits(rng.u32() | 0, rng.u32() | 0, true);
    case 4:
      return 2 ** 53 + rng.int(0, 4);
    default:
      return rng.int(1, 60);
  }
}

/** A uint32 field's value (protobufjs writes a negative one as its two's complement). */
export function randomU32(rng: Rng, small = 8): number {
  switch (rng.int(0, 7)) {
    case 0:
      return 0xffff_ffff;
    case 1:
      return 2 ** 31;
    case 2:
      return rng.u32();
    default:
      return rng.int(0, small);
  }
}

/** Picks a pool member most of the time, something made up otherwise. */
function poolOr(rng: Rng, pool: readonly string[], p = 0.8): string {
  return pool.length > 0 && rng.chance(p) ? rng.pick(pool) : randomString(rng);
}

/** Each optional field present with probability `p`. */
function some<T extends object>(rng: Rng, fields: { [K in keyof T]: () => T[K] }, p = 0.5): T {
  const out: Partial<T> = {};
  for (const key of Object.keys(fields) as (keyof T)[]) if (rng.chance(p)) out[key] = fields[key]();
  return out as T;
}

export function randomLoginRequest(rng: Rng, pools: FuzzPools, uid = rng.pick(pools.uids)): LoginRequest {
  const acks = rng.chance(0.8);
  return {
    uid,
    deviceId: rng.chance(0.9) ? rng.pick(pools.devices) : randomString(rng),
    token: pools.token(uid),
    platform: randomU32(rng),
    appVersion: 'fuzz',
    acks,
    groups: acks && rng.chance(0.6),
    ownCopies: rng.chance(0.5),
    receipts: rng.chance(0.5),
    inboxEvents: rng.chance(0.5),
    noReplay: rng.chance(0.3),
    ...(rng.chance(0.3) ? { lastSeq: randomU64(rng) } : {}),
    ...(rng.chance(0.2) ? { inboxEpoch: randomU64(rng) } : {}),
  };
}

/** A login the server refuses: no token, a token of another user, a forged one, no uid, groups without acks. */
export function badLoginRequest(rng: Rng, pools: FuzzPools): LoginRequest {
  const uid = rng.pick(pools.uids);
  const other = pools.uids.find((u) => u !== uid) ?? `${uid}x`;
  switch (rng.int(0, 4)) {
    case 0:
      return { uid, deviceId: 'd0' };
    case 1:
      return { uid, deviceId: 'd0', token: pools.token(other) };
    case 2:
      return { uid, deviceId: 'd0', token: `${pools.token(uid).slice(0, -2)}xx` };
    case 3:
      return { uid: '', deviceId: 'd0', token: pools.token(uid) };
    default:
      return { uid, deviceId: 'd0', token: pools.token(uid), groups: true, acks: false };
  }
}

export function randomMessageRequest(rng: Rng, pools: FuzzPools, uid: string): MessageRequest {
  const request = some<MessageRequest>(rng, {
    msgId: () => randomU64(rng),
    time: () => randomU64(rng),
    msgType: () => randomU32(rng),
    url: () => randomString(rng),
    property: () => randomString(rng),
    fromNick: () => randomString(rng),
    json: () => randomString(rng),
    seq: () => randomU64(rng),
    storedAt: () => randomU64(rng),
  });
  request.content = rng.chance(0.9) ? `fuzz ${rng.u32()}` : randomString(rng);
  if (rng.chance(0.85)) request.to = poolOr(rng, [...pools.uids, ...pools.extraRecipients], 0.9);
  if (rng.chance(0.1)) request.from = rng.chance(0.5) ? uid : randomString(rng);
  if (rng.chance(0.15)) request.group = poolOr(rng, pools.groups, 0.7);
  // The server-set fields, which a client may not send.
  if (rng.chance(0.03)) request.originDevice = randomString(rng);
  if (rng.chance(0.02)) request.event = randomString(rng);
  if (rng.chance(0.02)) request.recalled = rng.chance(0.5);
  if (rng.chance(0.02)) request.edited = rng.chance(0.5);
  return request;
}

export function randomConversationRequest(rng: Rng, pools: FuzzPools): ConversationRequest {
  const request = some<ConversationRequest>(rng, {
    peer: () => poolOr(rng, pools.uids),
    before: () => randomU64(rng),
    limit: () => randomU32(rng, 120),
    seq: () => randomU64(rng),
    msgId: () => randomU64(rng),
    after: () => poolOr(rng, pools.uids, 0.5),
    content: () => randomString(rng),
    json: () => randomString(rng),
    cursor: () => randomString(rng),
    groups: () => rng.chance(0.5),
  });
  request.op = rng.chance(0.92) ? rng.int(1, 6) : randomU32(rng);
  if (rng.chance(0.3)) request.group = poolOr(rng, pools.groups, 0.8);
  return request;
}

/** Types a client may not send: the server's own and the peers'. */
const NOT_CLIENT_TYPES = [
  HeadType.LOGIN_RESPONSE,
  HeadType.LOGOUT_RESPONSE,
  HeadType.MESSAGE_RESPONSE,
  HeadType.MESSAGE_NOTIFICATION,
  HeadType.CONVERSATION_RESPONSE,
  HeadType.RECEIPT,
  HeadType.PEER_HELLO,
  HeadType.PEER_CHALLENGE,
  HeadType.PEER_AUTH,
  HeadType.PEER_DELIVER,
  HeadType.PEER_NUDGE,
  HeadType.PEER_GROUP,
  HeadType.PEER_RECEIPT,
  99,
];

/** The kinds of frame a script is made of. Those marked fatal end the stream (the server closes). */
export type FrameKind =
  | 'chat'
  | 'conversation'
  | 'ack'
  | 'heartbeat'
  | 'login-again'
  | 'logout'
  | 'not-client-type'
  | 'bit-flip'
  | 'truncated'
  | 'extended'
  | 'empty-body'
  | 'length-changed'
  | 'bad-magic'
  | 'bad-version'
  | 'oversized-length'
  | 'negative-length'
  | 'garbage';

/** Kinds after which the server has no frame boundary left (or closes): only last in a script. */
export const FATAL_KINDS: ReadonlySet<FrameKind> = new Set(['logout', 'not-client-type', 'length-changed', 'bad-magic', 'bad-version', 'oversized-length', 'negative-length', 'garbage']);

export interface FuzzFrame {
  kind: FrameKind;
  bytes: Buffer;
  /** The envelope sequence, when the frame is a message the server answers with it. */
  sequence?: number;
}

function frameOf(body: Uint8Array): Buffer {
  const frame = Buffer.allocUnsafe(HEADER_LENGTH + body.length);
  writeHeader(frame, 0, body.length);
  frame.set(body, HEADER_LENGTH);
  return frame;
}

/** A random valid message of a client type, logged in as `uid` with `sessionId`. */
export function randomClientMessage(rng: Rng, pools: FuzzPools, uid: string, sessionId: string, sequence: number): { kind: FrameKind; message: ImMessage } {
  const envelope = { sequence: rng.chance(0.97) ? sequence : randomU64(rng), sessionId: rng.chance(0.9) ? sessionId : randomString(rng) };
  const roll = rng.next();
  if (roll < 0.42) return { kind: 'chat', message: { type: HeadType.MESSAGE_REQUEST, ...envelope, ...(rng.chance(0.98) ? { messageRequest: randomMessageRequest(rng, pools, uid) } : {}) } };
  if (roll < 0.82) return { kind: 'conversation', message: { type: HeadType.CONVERSATION_REQUEST, ...envelope, ...(rng.chance(0.98) ? { conversationRequest: randomConversationRequest(rng, pools) } : {}) } };
  if (roll < 0.92) return { kind: 'ack', message: { type: HeadType.MESSAGE_ACK, ...envelope, ack: some<MessageAck>(rng, { seq: () => randomU64(rng), group: () => poolOr(rng, pools.groups, 0.7) }, 0.7) } };
  if (roll < 0.98) return { kind: 'heartbeat', message: { type: HeadType.HEART_BEAT, ...envelope, heartBeat: some<MessageHeartBeat>(rng, { seq: () => randomU32(rng), uid: () => randomString(rng), json: () => randomString(rng) }) } };
  return { kind: 'login-again', message: { type: HeadType.LOGIN_REQUEST, ...envelope, loginRequest: randomLoginRequest(rng, pools) } };
}

/**
 * One frame of a script after login: a valid message, or with probability `mutate` its body
 * mutated (the frame boundary kept: the stream goes on, unless the server cannot parse the
 * body, about half the time), or a fatal one when `fatal` says so.
 */
export function randomFrame(rng: Rng, pools: FuzzPools, uid: string, sessionId: string, sequence: number, { fatal, mutate }: { fatal: boolean; mutate: number }): FuzzFrame {
  if (fatal) return fatalFrame(rng, pools, sessionId, sequence);
  const { kind, message } = randomClientMessage(rng, pools, uid, sessionId, sequence);
  const body = encodeMessage(message);
  const answered = kind !== 'ack' && message.sequence === sequence;
  if (!rng.chance(mutate)) return { kind, bytes: frameOf(body), ...(answered ? { sequence } : {}) };
  const roll = rng.next();
  if (roll < 0.5) {
    const flipped = Buffer.from(body);
    for (let i = rng.int(1, 6); i > 0 && flipped.length > 0; i--) flipped[rng.int(0, flipped.length - 1)]! ^= 1 << rng.int(0, 7);
    return { kind: 'bit-flip', bytes: frameOf(flipped) };
  }
  if (roll < 0.8) return { kind: 'truncated', bytes: frameOf(body.subarray(0, rng.int(0, Math.max(0, body.length - 1)))) };
  if (roll < 0.93) return { kind: 'extended', bytes: frameOf(Buffer.concat([body, randomBytes(rng, rng.int(1, 24))])) };
  return { kind: 'empty-body', bytes: frameOf(new Uint8Array(0)) };
}

function randomBytes(rng: Rng, n: number): Buffer {
  const out = Buffer.allocUnsafe(n);
  for (let i = 0; i < n; i++) out[i] = rng.int(0, 255);
  return out;
}

function header(length: number, magic = FRAME_MAGIC, version = FRAME_VERSION): Buffer {
  const out = Buffer.alloc(HEADER_LENGTH);
  out.writeUInt16BE(magic, 0);
  out.writeUInt16BE(version, 2);
  out.writeInt32BE(length, 4);
  return out;
}

/** A frame after which the stream cannot go on: the server closes (or waits for bytes that never come). */
export function fatalFrame(rng: Rng, pools: FuzzPools, sessionId: string, sequence: number, maxFrameLength = 65_536): FuzzFrame {
  const body = Buffer.from(encodeMessage({ type: HeadType.HEART_BEAT, sequence, sessionId, heartBeat: { seq: 1 } }));
  switch (rng.int(0, 7)) {
    case 0:
      return { kind: 'logout', bytes: frameOf(encodeMessage({ type: HeadType.LOGOUT_REQUEST, sequence, sessionId })), sequence };
    case 1:
      return { kind: 'not-client-type', bytes: frameOf(encodeMessage({ type: rng.pick(NOT_CLIENT_TYPES), sequence, sessionId, ...(rng.chance(0.5) ? { loginRequest: randomLoginRequest(rng, pools) } : {}) })) };
    case 2: {
      // The length says more or less than the body: the next header is read out of place.
      const length = Math.max(0, body.length + rng.pick([-3, -1, 1, 2, 7, 200]));
      return { kind: 'length-changed', bytes: Buffer.concat([header(length), body, randomBytes(rng, rng.int(0, 16))]) };
    }
    case 3:
      return { kind: 'bad-magic', bytes: Buffer.concat([header(body.length, rng.pick([0, 0x0087, 0x8600, 0xffff, rng.int(0, 0xffff)])), body]) };
    case 4:
      return { kind: 'bad-version', bytes: Buffer.concat([header(body.length, FRAME_MAGIC, rng.pick([0, 2, 0xffff, rng.int(2, 0xffff)])), body]) };
    case 5:
      return { kind: 'oversized-length', bytes: Buffer.concat([header(rng.pick([maxFrameLength + 1, 0x7fff_ffff, rng.int(maxFrameLength + 1, 0x7fff_ffff)])), body]) };
    case 6:
      return { kind: 'negative-length', bytes: Buffer.concat([header(rng.pick([-1, -0x8000_0000, -rng.int(1, 0x7fff_ffff)])), body]) };
    default:
      return { kind: 'garbage', bytes: randomBytes(rng, rng.int(8, 200)) };
  }
}

/** The LOGIN_REQUEST a fuzz connection opens with (pre-login sequence and session id, as a native client). */
export function loginFrame(request: LoginRequest): Buffer {
  return frameOf(encodeMessage({ type: HeadType.LOGIN_REQUEST, sequence: Long.MAX_UNSIGNED_VALUE, sessionId: PRE_LOGIN_SESSION_ID, loginRequest: request }));
}

/** Frames a connection sends before logging in, or instead: these must be refused (NOT_LOGGED_IN) or tolerated (heartbeats). */
export function preLoginFrame(rng: Rng, pools: FuzzPools, sequence: number): FuzzFrame {
  if (rng.chance(0.3)) return fatalFrame(rng, pools, PRE_LOGIN_SESSION_ID, sequence);
  const { kind, message } = randomClientMessage(rng, pools, rng.pick(pools.uids), PRE_LOGIN_SESSION_ID, sequence);
  return { kind, bytes: frameOf(encodeMessage(message)) };
}

/** `bytes` cut into the writes a client makes: one, a few, or many small ones (split headers too). */
export function splitWrites(rng: Rng, bytes: Buffer): Buffer[] {
  const mode = rng.int(0, 3);
  if (mode === 0 || bytes.length < 2) return [bytes];
  const out: Buffer[] = [];
  const most = mode === 1 ? 3 : mode === 2 ? 64 : 4096;
  for (let pos = 0; pos < bytes.length; ) {
    // Byte by byte through the first frames only: a long script so cut would be mostly syscalls.
    const n = mode === 1 && pos >= 512 ? bytes.length - pos : Math.min(bytes.length - pos, rng.int(1, most));
    out.push(bytes.subarray(pos, pos + n));
    pos += n;
  }
  return out;
}
