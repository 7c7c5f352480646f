// A bare TCP client written from the wire protocol alone (it does not use src/client), so it
// behaves like a native CrazyIM client: it sends exactly the frames it is asked to and records
// everything the server sends back. Under it, the one way a raw connection here meets the frame
// decoder (readFrames, dialFrames), which the bench's load clients, the tests' frame proxy and
// the bare relay use too.

import net from 'node:net';
import tls from 'node:tls';
import { once } from 'node:events';
import Long from 'long';
import { FrameDecoder, FRAME_MAGIC, FRAME_VERSION, HEADER_LENGTH } from '../src/protocol/frame.js';
import { decodeMessage, encodeMessageFrame } from '../src/protocol/codec.js';
import { HeadType, NotificationType, PRE_LOGIN_SESSION_ID, type ConversationRequest, type ImMessage, type LoginResponse, type MessageRequest } from '../src/protocol/types.js';

/** What a client allows the server's frames: bounded by what clients may send, with headroom. */
export const CLIENT_MAX_FRAME_LENGTH = 1024 * 1024;

export interface FrameReader {
  /** Each frame's body, in order, as a slice (copy it to keep it). */
  onFrame(body: Buffer): void;
  /** After the frames of one read were handed on (a receiver acknowledges there, once per read). */
  afterRead?(): void;
  /** The bytes are not a frame stream (bad magic or version, too long): the socket is destroyed next. */
  onBadFrame?(err: Error): void;
  /** Default: the decoder's own (the server's limit). */
  maxFrameLength?: number;
}

/**
 * Hands the frames `socket` receives to `reader` (its hooks are looked up at each call, so they
 * can change); a broken stream destroys the socket. `maxFrameLength`: unless the reader says.
 */
export function readFrames(socket: net.Socket, reader: FrameReader, maxFrameLength?: number): void {
  const max = reader.maxFrameLength ?? maxFrameLength;
  const decoder = new FrameDecoder((body) => reader.onFrame(body), max === undefined ? {} : { maxFrameLength: max });
  socket.on('data', (chunk: Buffer) => {
    try {
      decoder.push(chunk);
    } catch (err) {
      reader.onBadFrame?.(err as Error);
      socket.destroy();
      return;
    }
    reader.afterRead?.();
  });
}

export interface DialOptions {
  /** Default 127.0.0.1. */
  host?: string;
  port: number;
  /** The source address, e.g. another loopback address (127.0.0.2) to appear as another host. */
  localAddress?: string;
  allowHalfOpen?: boolean;
  /** Dial TLS with these options (CA, certificate, servername); 'connect' is then the end of the handshake. */
  tls?: tls.ConnectionOptions;
}

/**
 * A TCP connection to a worker, Nagle off, its frames read by `reader` (at most
 * CLIENT_MAX_FRAME_LENGTH unless it says otherwise). Errors are the caller's to listen for.
 */
export function dialFrames(o: DialOptions, reader: FrameReader): net.Socket {
  const { host = '127.0.0.1', port, localAddress, allowHalfOpen = false } = o;
  const socket = o.tls
    ? tls.connect({ host, port, ...(localAddress ? { localAddress } : {}), ...o.tls }).setNoDelay(true)
    : net.connect({ host, port, noDelay: true, allowHalfOpen, ...(localAddress ? { localAddress } : {}) });
  readFrames(socket, reader, CLIENT_MAX_FRAME_LENGTH);
  return socket;
}

/** The `sequence` an original client sends before login. */
export const PRE_LOGIN_SEQUENCE = Long.MAX_UNSIGNED_VALUE;

/** How long next() waits by default before rejecting, so a test never hangs. */
export const DEFAULT_TIMEOUT_MS = 5_000;

/** What a CLOSING notification (MESSAGE_NOTIFICATION with json {type: 90, data}) says. */
export interface Closing {
  code: string;
  reason: string;
}

export type Predicate = (message: ImMessage) => boolean;

interface Waiter {
  predicate: Predicate;
  resolve: (message: ImMessage) => void;
  reject: (err: Error) => void;
  timer: NodeJS.Timeout;
}

/** The CLOSING notification carried by `message`, or undefined when it is something else. */
export function closingOf(message: ImMessage): Closing | undefined {
  if (message.type !== HeadType.MESSAGE_NOTIFICATION || !message.notification?.json) return undefined;
  let parsed: { type?: unknown; data?: { code?: unknown; reason?: unknown } };
  try {
    parsed = JSON.parse(message.notification.json);
  } catch {
    return undefined;
  }
  if (parsed.type !== NotificationType.CLOSING || typeof parsed.data?.code !== 'string') return undefined;
  return { code: parsed.data.code, reason: String(parsed.data.reason ?? '') };
}

export const isType =
  (type: number): Predicate =>
  (m) =>
    m.type === type;

/** A delivered chat message (the server's MESSAGE_REQUEST). */
export const isDelivery: Predicate = isType(HeadType.MESSAGE_REQUEST);

/** The inbox sequence a delivery carries (MessageRequest.seq); 0 when it carries none. */
export function seqOf(message: ImMessage): number {
  return Number(u64(message.messageRequest?.seq) || 0);
}

/** The switchboard sync options of a LOGIN_REQUEST. */
export interface SyncOptions {
  /** Announce that this client sends MESSAGE_ACK (LoginRequest.acks). */
  acks?: boolean;
  /** Replay after this sequence (LoginRequest.last_seq); left out when undefined. */
  lastSeq?: number;
  /** The inbox epoch lastSeq belongs to (LoginRequest.inbox_epoch); left out when undefined. */
  inboxEpoch?: number;
  /** Take group deliveries (LoginRequest.groups; needs acks). */
  groups?: boolean;
  /** Take the copies of what the user sends from other devices (LoginRequest.own_copies). */
  ownCopies?: boolean;
  /** Replay nothing: the position becomes the inbox head (LoginRequest.no_replay). */
  noReplay?: boolean;
  /** Take RECEIPTs for what this user sends (LoginRequest.receipts). */
  receipts?: boolean;
  /** Take inbox events, recalls (LoginRequest.inbox_events). */
  inboxEvents?: boolean;
}

/** A frame header with arbitrary (possibly invalid) fields. */
export function frameHeader(length: number, { magic = FRAME_MAGIC, version = FRAME_VERSION } = {}): Buffer {
  const header = Buffer.alloc(HEADER_LENGTH);
  header.writeUInt16BE(magic, 0);
  header.writeUInt16BE(version, 2);
  header.writeInt32BE(length, 4);
  return header;
}

/** A uint64 field as a decimal string, whether it decoded as a Long or was set as a number. */
export function u64(value: Long | number | undefined | null): string {
  return value === undefined || value === null ? '' : Long.fromValue(value, true).toString();
}

/** Where a client connects from, and how (the port is connect()'s first argument). */
export type ConnectOptions = Omit<DialOptions, 'port'>;

export class RawClient {
  readonly socket: net.Socket;
  /** Every decoded message, in arrival order (including the ones next() consumed). */
  readonly received: ImMessage[] = [];
  /** Resolves when the socket has closed, for whatever reason; never rejects. */
  readonly closed: Promise<void>;
  /** Resolves when the server has ended its side (FIN) or the socket has closed. */
  readonly ended: Promise<void>;
  /** The CLOSING notification received, if any. */
  closing: Closing | undefined;
  /** Session id from a successful login. */
  sessionId = PRE_LOGIN_SESSION_ID;
  /** The body of the last LOGIN_RESPONSE received through login(). */
  loginResponse: LoginResponse | undefined;
  /** A socket error (ECONNRESET and the like), recorded rather than thrown. */
  socketError: Error | undefined;
  /** Set when the server sent bytes this client could not decode. */
  decodeError: Error | undefined;

  readonly #inbox: ImMessage[] = [];
  readonly #waiters = new Set<Waiter>();
  #isClosed = false;
  #sequence = 0;

  private constructor(port: number, options: ConnectOptions) {
    const socket = dialFrames({ ...options, port }, {
      onFrame: (body) => this.#onFrame(body),
      onBadFrame: (err) => {
        this.decodeError = err;
      },
    });
    this.socket = socket;
    socket.on('error', (err) => {
      this.socketError = err;
    });
    this.ended = new Promise((resolve) => {
      socket.once('end', resolve);
      socket.once('close', resolve);
    });
    this.closed = new Promise((resolve) => {
      socket.once('close', () => {
        this.#isClosed = true;
        for (const waiter of this.#waiters) {
          clearTimeout(waiter.timer);
          waiter.reject(new Error(`connection closed while waiting for a message (received ${this.#describe()})`));
        }
        this.#waiters.clear();
        resolve();
      });
    });
  }

  /**
   * `allowHalfOpen` keeps this side writable after the server's FIN, as a client that is slow to
   * notice the close would, so the server's socket stays half-open until it gives up.
   */
  static async connect(port: number, options: ConnectOptions = {}): Promise<RawClient> {
    const client = new RawClient(port, options);
    await once(client.socket, options.tls ? 'secureConnect' : 'connect');
    return client;
  }

  get isClosed(): boolean {
    return this.#isClosed;
  }

  /** The next sequence number for a request sent after login (1, 2, ...). */
  nextSequence(): number {
    return ++this.#sequence;
  }

  send(message: ImMessage): void {
    this.socket.write(encodeMessageFrame(message));
  }

  sendRaw(bytes: Uint8Array): void {
    this.socket.write(bytes);
  }

  /**
   * The LOGIN_REQUEST frame a native client sends: pre-login sequence and session id "-1". An
   * original client sets neither `acks` nor `last_seq`; a switchboard-aware one may.
   */
  static loginMessage(
    uid: string,
    token: string | undefined,
    deviceId: string,
    sequence: Long | number = PRE_LOGIN_SEQUENCE,
    { acks, lastSeq, inboxEpoch, groups, ownCopies, noReplay, receipts, inboxEvents }: SyncOptions = {},
  ): ImMessage {
    return {
      type: HeadType.LOGIN_REQUEST,
      sequence,
      sessionId: PRE_LOGIN_SESSION_ID,
      loginRequest: {
        uid,
        deviceId,
        token,
        platform: 1,
        appVersion: 'raw-test',
        ...(acks !== undefined ? { acks } : {}),
        ...(lastSeq !== undefined ? { lastSeq } : {}),
        ...(inboxEpoch !== undefined ? { inboxEpoch } : {}),
        ...(groups !== undefined ? { groups } : {}),
        ...(ownCopies !== undefined ? { ownCopies } : {}),
        ...(noReplay !== undefined ? { noReplay } : {}),
        ...(receipts !== undefined ? { receipts } : {}),
        ...(inboxEvents !== undefined ? { inboxEvents } : {}),
      },
    };
  }

  /** Sends a LOGIN_REQUEST and resolves the LOGIN_RESPONSE envelope (successful or not). */
  async login(uid: string, token: string | undefined, deviceId: string, sync: SyncOptions = {}): Promise<ImMessage> {
    this.send(RawClient.loginMessage(uid, token, deviceId, PRE_LOGIN_SEQUENCE, sync));
    const response = await this.next(isType(HeadType.LOGIN_RESPONSE));
    this.loginResponse = response.loginResponse ?? undefined;
    if (response.loginResponse?.result) this.sessionId = response.sessionId ?? '';
    return response;
  }

  /** Sends a cumulative MESSAGE_ACK: every inbox message up to `seq` is processed. */
  ack(seq: number): void {
    this.send({ type: HeadType.MESSAGE_ACK, sessionId: this.sessionId, ack: { seq } });
  }

  /** Sends a cumulative MESSAGE_ACK of a group: every entry of `group` up to `seq` is processed. */
  groupAck(group: string, seq: number): void {
    this.send({ type: HeadType.MESSAGE_ACK, sessionId: this.sessionId, ack: { seq, group } });
  }

  /** Sends a MESSAGE_REQUEST to a group (MessageRequest.group) and returns its sequence. */
  groupChat(group: string, content: string, fields: MessageRequest = {}): number {
    return this.chat('', content, { group, ...fields });
  }

  /**
   * A MESSAGE_REQUEST envelope with a fresh sequence. msg_id defaults to that sequence, which
   * restarts at 1 on every connection: the server deduplicates (sender, msg_id), so a sender
   * that reconnects and writes to the same user again must pass explicit, unused msgIds.
   */
  chatMessage(to: string, content: string, fields: MessageRequest = {}): ImMessage {
    const sequence = this.nextSequence();
    return {
      type: HeadType.MESSAGE_REQUEST,
      sequence,
      sessionId: this.sessionId,
      messageRequest: { msgId: sequence, to, content, time: Date.now(), msgType: 1, ...fields },
    };
  }

  /** Sends a MESSAGE_REQUEST and returns its sequence. */
  chat(to: string, content: string, fields: MessageRequest = {}): number {
    const message = this.chatMessage(to, content, fields);
    this.send(message);
    return message.sequence as number;
  }

  /** Resolves the MESSAGE_RESPONSE whose sequence is `sequence`. */
  response(sequence: number, timeoutMs?: number): Promise<ImMessage> {
    return this.next((m) => m.type === HeadType.MESSAGE_RESPONSE && u64(m.sequence) === String(sequence), timeoutMs);
  }

  /** Sends a CONVERSATION_REQUEST and resolves its CONVERSATION_RESPONSE. */
  async conversation(request: ConversationRequest, timeoutMs?: number): Promise<ImMessage> {
    const sequence = this.nextSequence();
    this.send({ type: HeadType.CONVERSATION_REQUEST, sequence, sessionId: this.sessionId, conversationRequest: request });
    return this.next((m) => m.type === HeadType.CONVERSATION_RESPONSE && u64(m.sequence) === String(sequence), timeoutMs);
  }

  /** Sends a chat message and resolves its MESSAGE_RESPONSE. */
  async chatAndWait(to: string, content: string, fields: MessageRequest = {}): Promise<ImMessage> {
    return this.response(this.chat(to, content, fields));
  }

  heartbeat(seq = this.nextSequence()): ImMessage {
    const message: ImMessage = {
      type: HeadType.HEART_BEAT,
      sequence: seq,
      sessionId: this.sessionId,
      heartBeat: { seq, uid: 'raw', json: '{"ping":true}' },
    };
    this.send(message);
    return message;
  }

  /**
   * Resolves (and consumes) the first received message matching `predicate`, waiting for it if
   * needed. Messages that do not match stay queued for later calls. Rejects after `timeoutMs`,
   * or as soon as the connection closes without a match.
   */
  next(predicate: Predicate = () => true, timeoutMs = DEFAULT_TIMEOUT_MS): Promise<ImMessage> {
    const i = this.#inbox.findIndex(predicate);
    if (i >= 0) return Promise.resolve(this.#inbox.splice(i, 1)[0]!);
    if (this.#isClosed) return Promise.reject(new Error(`connection is closed (received ${this.#describe()})`));
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        predicate,
        resolve,
        reject,
        timer: setTimeout(() => {
          this.#waiters.delete(waiter);
          reject(new Error(`no matching message within ${timeoutMs} ms (received ${this.#describe()})`));
        }, timeoutMs),
      };
      this.#waiters.add(waiter);
    });
  }

  /**
   * A heartbeat round trip. The server handles a connection's frames in order and writes in
   * order, so once the echo is here, every frame sent before it has been handled and everything
   * the server wrote before handling it has arrived: a barrier, not a delay.
   */
  async roundTrip(): Promise<void> {
    const seq = this.nextSequence();
    this.heartbeat(seq);
    await this.next((m) => m.type === HeadType.HEART_BEAT && u64(m.sequence) === String(seq));
  }

  /** Resolves the next `count` deliveries, in arrival order. */
  async deliveries(count: number, timeoutMs?: number): Promise<ImMessage[]> {
    const out: ImMessage[] = [];
    while (out.length < count) out.push(await this.next(isDelivery, timeoutMs));
    return out;
  }

  /** Removes and returns the deliveries received but not yet consumed. */
  takeDeliveries(): ImMessage[] {
    const taken = this.#inbox.filter(isDelivery);
    for (let i = this.#inbox.length - 1; i >= 0; i--) if (isDelivery(this.#inbox[i]!)) this.#inbox.splice(i, 1);
    return taken;
  }

  /** Removes and returns the MESSAGE_RESPONSEs received but not yet consumed. */
  takeResponses(): ImMessage[] {
    const isResponse = isType(HeadType.MESSAGE_RESPONSE);
    const taken = this.#inbox.filter(isResponse);
    for (let i = this.#inbox.length - 1; i >= 0; i--) if (isResponse(this.#inbox[i]!)) this.#inbox.splice(i, 1);
    return taken;
  }

  /** Resolves the CLOSING notification (waiting for it if needed). */
  async nextClosing(timeoutMs?: number): Promise<Closing> {
    return closingOf(await this.next((m) => closingOf(m) !== undefined, timeoutMs))!;
  }

  /** Messages received and not yet consumed by next(). */
  get pending(): readonly ImMessage[] {
    return this.#inbox;
  }

  /** Resolves once the socket has closed; rejects after `timeoutMs`. */
  async waitClosed(timeoutMs = DEFAULT_TIMEOUT_MS): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`connection still open after ${timeoutMs} ms`)), timeoutMs);
    });
    try {
      await Promise.race([this.closed, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Stops reading: the server's output piles up in the kernel buffers and then in its own. */
  pause(): void {
    this.socket.pause();
  }

  resume(): void {
    this.socket.resume();
  }

  /** Drops the connection without a logout, as a crashing client would. */
  destroy(): void {
    this.socket.destroy();
  }

  #onFrame(body: Buffer): void {
    let message: ImMessage;
    try {
      message = decodeMessage(body);
    } catch (err) {
      this.decodeError = err as Error;
      this.socket.destroy();
      return;
    }
    this.received.push(message);
    const closing = closingOf(message);
    if (closing) this.closing ??= closing;
    for (const waiter of this.#waiters) {
      if (waiter.predicate(message)) {
        this.#waiters.delete(waiter);
        clearTimeout(waiter.timer);
        waiter.resolve(message);
        return;
      }
    }
    this.#inbox.push(message);
  }

  #describe(): string {
    const types = this.received.map((m) => {
      const closing = closingOf(m);
      return closing ? `CLOSING(${closing.code})` : String(m.type);
    });
    return types.length > 20 ? `${types.length} messages, last ${types.slice(-20).join(',')}` : `[${types.join(',')}]`;
  }
}

/** The inbox sequences of `messages`, and their contents, for assertions. */
export const seqs = (messages: ImMessage[]): number[] => messages.map(seqOf);
export const contents = (messages: ImMessage[]): string[] => messages.map((m) => m.messageRequest?.content ?? '');

/** Sends `texts` to `to` in one burst and resolves the sequences the responses assigned, in order. */
export async function sendAll(sender: RawClient, to: string, texts: string[]): Promise<number[]> {
  const sequences = texts.map((text) => sender.chat(to, text));
  const assigned: number[] = [];
  for (const sequence of sequences) {
    const r = await sender.response(sequence);
    if (!r.messageResponse?.result) throw new Error(`message refused: ${JSON.stringify(r.messageResponse)}`);
    assigned.push(Number(u64(r.messageResponse.seq)));
  }
  return assigned;
}
