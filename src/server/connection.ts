// One client socket: frames in (decoded, handled one at a time in arrival order), frames out
// (batched per tick, bounded, with drain tracking), and one way to close with a reason.
// Timeouts are not kept here: the server's sweep reads `createdAt`, `lastInboundAt` and
// `drainingSince` and closes what is overdue, so no per-connection timer runs while open.
// An idle connection costs memory only: it holds no closures of its own (the socket listeners
// are shared functions) and no child logger until it has something to log.

import type { Socket } from 'node:net';
import type { Logger } from '../log.js';
import type { WorkerLimits } from '../config.js';
import { SwitchboardError, isSwitchboardError } from '../errors.js';
import { FrameDecoder } from '../protocol/frame.js';
import { decodeMessage, encodeMessageFrame } from '../protocol/codec.js';
import { closingNotification, type Failure } from '../protocol/messages.js';
import type { ImMessage } from '../protocol/types.js';
import type { LocalSession, Outbound } from '../session/local-session.js';
import { AttributeKey, attrs, type AttributeMap } from './attributes.js';
import { flushWrites, pendingBytes, writePerTick } from '../net/write-per-tick.js';

/** The LocalSession bound to a socket once it has logged in. */
export const SESSION = new AttributeKey<LocalSession>('session');

export type ConnectionState = 'open' | 'closing' | 'closed';

/** The Connection a socket carries, for the shared socket listeners. */
const CONNECTION = Symbol('switchboard.connection');
type WithConnection = Socket & { [CONNECTION]: Connection };

/**
 * What net.Socket knows about where its output is, in Node 20: `_bytesDispatched` counts the
 * bytes handed to libuv, and `_handle.writeQueueSize` those libuv still holds (not yet in the
 * kernel). `writableLength` is no substitute: it still counts a write request libuv has partly
 * handed on. Both are gone (the handle is null) from the moment destroy() is called, so they
 * are read before it, and their last reading is kept.
 */
type SocketInternals = Socket & { _bytesDispatched?: number; _handle?: { writeQueueSize?: number } | null };

/** Fields every log line about a connection carries (OPERATIONS.md, Logs). */
export type LogFields = Record<string, string | number | boolean>;

export interface ConnectionHandler {
  /**
   * Handles one decoded message. While a returned promise is pending, later frames of this
   * connection wait, so a client's frames are always handled in the order it sent them.
   * Throwing a SwitchboardError closes the connection with that error.
   */
  onMessage(conn: Connection, message: ImMessage): void | Promise<void>;
  /**
   * Called once, when the connection stops accepting output (close(), destroy(), or the peer
   * closing), possibly long before the socket has closed: from here on, frames sent to it are
   * dropped, so its session must no longer be reachable.
   */
  onClosing(conn: Connection): void;
  /** Called once, after the socket has closed (always after onClosing). */
  onClose(conn: Connection): void;
  /** Called once, when the connection becomes `authenticated`. */
  onAuthenticated?(conn: Connection): void;
}

export class Connection implements Outbound {
  readonly attrs: AttributeMap;
  /** When the socket was accepted (a TLS one before its handshake): the login timeout counts from it. */
  readonly createdAt: number;
  lastInboundAt: number;
  /** When the output buffer last filled up and has not drained since; 0 when it is drained. */
  drainingSince = 0;
  /** Why the server closed the connection; undefined when the client closed it. */
  closeReason: Failure | undefined;
  /** Closed by shed(): made room for a newer connection while it had not logged in. */
  wasShed = false;
  /** The client address this connection counts under (ConnectionCaps), when the per-address cap is on. */
  addressKey: string | undefined;

  readonly #limits: WorkerLimits;
  readonly #handler: ConnectionHandler;
  readonly #decoder: FrameDecoder;
  readonly #rootLog: Logger;
  /** Fields bound with bindLog(), besides connId. */
  #logFields: LogFields | undefined;
  /** The child logger, made on first use: most connections never log after accepting. */
  #log: Logger | undefined;
  readonly #queue: ImMessage[] = [];
  #state: ConnectionState = 'open';
  #busy = false;
  /** Asynchronous work started by handlers that has not finished (e.g. inbox appends). */
  #tasks = 0;
  #paused = false;
  /** Bytes of every frame queued (sendFrame), in output order. */
  #queuedBytes = 0;
  /** The most the kernel was known to have taken of them. */
  #handedOff = 0;
  #authenticated = false;

  constructor(
    readonly id: number,
    readonly socket: Socket,
    limits: WorkerLimits,
    handler: ConnectionHandler,
    log: Logger,
    createdAt = Date.now(),
  ) {
    this.createdAt = createdAt;
    this.lastInboundAt = createdAt;
    this.attrs = attrs(socket);
    this.#limits = limits;
    this.#handler = handler;
    this.#rootLog = log;
    this.#decoder = new FrameDecoder((body) => this.#onFrame(body), { maxFrameLength: limits.maxFrameLength });
    (socket as WithConnection)[CONNECTION] = this;
    socket.setNoDelay(true);
    socket.on('data', Connection.#onSocketData);
    socket.on('drain', Connection.#onSocketDrain);
    socket.on('error', Connection.#onSocketError);
    socket.on('close', Connection.#onSocketClose);
  }

  // One set of listener functions serves every socket (`this` is the socket, which carries its
  // Connection), instead of four closures per connection.
  static #onSocketData(this: WithConnection, chunk: Buffer): void {
    this[CONNECTION].#onData(chunk);
  }

  static #onSocketDrain(this: WithConnection): void {
    const conn = this[CONNECTION];
    conn.drainingSince = 0;
    // Drained: every write has completed, so the kernel has taken all of it (not what this tick still holds).
    conn.#handedOff = conn.#queuedBytes - pendingBytes(this);
  }

  static #onSocketError(this: WithConnection, err: Error): void {
    this[CONNECTION].log.debug({ err }, 'socket error');
  }

  static #onSocketClose(this: WithConnection): void {
    const conn = this[CONNECTION];
    conn.#enterClosing();
    conn.#state = 'closed';
    conn.#queue.length = 0;
    conn.#handler.onClose(conn);
  }

  /** This connection's logger: a child of the worker's carrying logFields. */
  get log(): Logger {
    return (this.#log ??= this.#rootLog.child(this.logFields));
  }

  /** `connId` and whatever bindLog() added: for a line logged through another logger. */
  get logFields(): LogFields {
    return { connId: this.id, ...this.#logFields };
  }

  /** Adds fields to every later log line about this connection (after login: uid, deviceId, sessionId). */
  bindLog(fields: LogFields): void {
    this.#logFields = { ...this.#logFields, ...fields };
    // Made again from the worker's logger when next needed: a child of a child would turn the
    // first into a prototype, which V8 gives a map of its own.
    this.#log = undefined;
  }

  /** Logged in as a client, or proven a peer: exempt from the login timeout and the cap on connections not logged in. */
  get authenticated(): boolean {
    return this.#authenticated;
  }

  set authenticated(value: boolean) {
    if (!value || this.#authenticated) return;
    this.#authenticated = true;
    this.#handler.onAuthenticated?.(this);
  }

  get state(): ConnectionState {
    return this.#state;
  }

  get session(): LocalSession | undefined {
    return this.attrs.get(SESSION);
  }

  get congested(): boolean {
    return this.drainingSince !== 0;
  }

  get queuedBytes(): number {
    return this.#queuedBytes;
  }

  get handedOffBytes(): number {
    const socket = this.socket as SocketInternals;
    const handle = socket._handle;
    if (handle) {
      const pending = handle.writeQueueSize ?? 0;
      // Without _bytesDispatched, a lower bound: writableLength counts a partly handed-on write whole.
      const handed = typeof socket._bytesDispatched === 'number' ? socket._bytesDispatched - pending : this.#queuedBytes - pendingBytes(socket) - socket.writableLength - pending;
      if (handed > this.#handedOff) this.#handedOff = handed;
    } else if (socket.writableFinished) {
      this.#handedOff = this.#queuedBytes - pendingBytes(socket);
    }
    return this.#handedOff;
  }

  drained(): Promise<void> {
    if (this.drainingSince === 0 || this.#state === 'closed') return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        this.socket.off('drain', done);
        this.socket.off('close', done);
        resolve();
      };
      this.socket.once('drain', done);
      this.socket.once('close', done);
    });
  }

  /**
   * A handler started work that finishes later without holding up the next frame (an inbox
   * append whose response follows). Too many at once pause reading, like a full queue.
   */
  startTask(): void {
    if (++this.#tasks >= this.#limits.inboundQueueLimit) this.#pause();
  }

  endTask(): void {
    this.#tasks--;
    this.#maybeResume();
  }

  /** Encodes and queues a message. */
  send(message: ImMessage): void {
    this.sendFrame(encodeMessageFrame(message));
  }

  /**
   * Queues a complete frame. Frames of one tick go out together, as one buffer (writePerTick). Output above
   * `maxOutboundBytes` destroys the connection as a slow consumer.
   */
  sendFrame(frame: Buffer): void {
    if (this.#state !== 'open') return;
    const socket = this.socket;
    const flushed = writePerTick(socket, frame);
    this.#queuedBytes += frame.length;
    if (socket.writableLength + pendingBytes(socket) > this.#limits.maxOutboundBytes) {
      this.destroy({ code: 'SB_ERR_SLOW_CONSUMER', reason: `more than ${this.#limits.maxOutboundBytes} bytes of output waiting` });
      return;
    }
    if (!flushed && this.drainingSince === 0) this.drainingSince = Date.now();
  }

  /**
   * Closes gracefully: with a failure, first a CLOSING notification saying why (unless
   * `notify` is false because a response already said it). Unread input is discarded; the
   * socket is destroyed if the last frame has not flushed within `closeGraceMs`.
   */
  close(failure?: Failure, { notify = true }: { notify?: boolean } = {}): void {
    if (this.#state !== 'open') return;
    this.#recordReason(failure);
    if (failure && notify) this.sendFrame(encodeMessageFrame(closingNotification(failure, this.session?.sessionId)));
    this.#enterClosing();
    this.#decoder.stop();
    this.#queue.length = 0;
    // What this tick wrote goes before the end.
    flushWrites(this.socket);
    this.socket.end();
    this.socket.resume();
    const timer = setTimeout(() => this.socket.destroy(), this.#limits.closeGraceMs);
    timer.unref();
    this.socket.once('close', () => clearTimeout(timer));
  }

  /**
   * Closes at once and quietly, `frame` (a cached CLOSING) being the last output: for
   * connections shed under load, which are counted and summarised, not logged one by one. As
   * with close(), a socket whose output does not flush within `closeGraceMs` (a client that
   * never reads) is destroyed: the sweep no longer looks at a connection once it is closing.
   */
  shed(failure: Failure, frame: Buffer): void {
    if (this.#state !== 'open') return;
    this.wasShed = true;
    this.closeReason ??= failure;
    this.#enterClosing();
    this.#decoder.stop();
    this.#queue.length = 0;
    this.socket.once('finish', () => this.socket.destroy());
    flushWrites(this.socket);
    this.socket.end(frame);
    const timer = setTimeout(() => this.socket.destroy(), this.#limits.closeGraceMs);
    timer.unref();
    this.socket.once('close', () => clearTimeout(timer));
  }

  /** Closes at once, without a final frame (used when output cannot be flushed anyway). */
  destroy(failure: Failure): void {
    if (this.#state === 'closed') return;
    this.#recordReason(failure);
    this.#enterClosing();
    this.#decoder.stop();
    this.#queue.length = 0;
    this.socket.destroy();
  }

  #enterClosing(): void {
    if (this.#state !== 'open') return;
    this.#state = 'closing';
    this.#handler.onClosing(this);
  }

  #recordReason(failure: Failure | undefined): void {
    if (!failure || this.closeReason) return;
    this.closeReason = failure;
    this.log.info({ code: failure.code, reason: failure.reason }, 'closing connection');
  }

  #onData(chunk: Buffer): void {
    try {
      this.#decoder.push(chunk);
    } catch (err) {
      this.#fail(err);
    }
  }

  #onFrame(body: Buffer): void {
    this.lastInboundAt = Date.now();
    let message: ImMessage;
    try {
      message = decodeMessage(body);
    } catch (err) {
      this.#fail(err);
      return;
    }
    if (this.#busy) this.#enqueue(message);
    else this.#handle(message);
  }

  #enqueue(message: ImMessage): void {
    const queue = this.#queue;
    if (!this.session) {
      if (queue.length >= this.#limits.preLoginQueueLimit) {
        this.close({ code: 'SB_ERR_PRELOGIN_QUEUE_FULL', reason: `more than ${this.#limits.preLoginQueueLimit} frames sent during login` });
        return;
      }
    } else if (queue.length + 1 >= this.#limits.inboundQueueLimit) {
      this.#pause();
    }
    queue.push(message);
  }

  #handle(message: ImMessage): void {
    let result: void | Promise<void>;
    try {
      result = this.#handler.onMessage(this, message);
    } catch (err) {
      this.#fail(err);
      return;
    }
    if (result) {
      this.#busy = true;
      result.then(
        () => this.#resume(),
        (err) => this.#fail(err),
      );
    }
  }

  #resume(): void {
    this.#busy = false;
    const queue = this.#queue;
    while (queue.length > 0 && !this.#busy && this.#state === 'open') this.#handle(queue.shift()!);
    this.#maybeResume();
  }

  #pause(): void {
    if (this.#paused) return;
    this.#paused = true;
    this.socket.pause();
  }

  /** Reading resumes once queued frames and unfinished tasks are both below half the limit. */
  #maybeResume(): void {
    const half = this.#limits.inboundQueueLimit / 2;
    if (!this.#paused || this.#state !== 'open' || this.#queue.length >= half || this.#tasks >= half) return;
    this.#paused = false;
    this.socket.resume();
  }

  /** A frame or handler failed: a SwitchboardError closes with its code, anything else is a bug. */
  #fail(err: unknown): void {
    if (isSwitchboardError(err)) {
      this.close({ code: err.code, reason: err.message });
      return;
    }
    this.log.error({ err }, 'handler failed');
    const internal = new SwitchboardError('SB_ERR_INTERNAL', undefined, { cause: err });
    this.close({ code: internal.code, reason: internal.message });
  }
}
