// The switchboard client SDK: one logged-in device. Used by the CLI, the tests and the bench.
// Connects and logs in, sends chat messages whose promises settle on the MESSAGE_RESPONSE,
// emits incoming messages, heartbeats, and reconnects with capped exponential backoff and
// jitter. Status changes go through one setStatus(); an epoch counter makes callbacks of a
// replaced socket harmless. Every lost connection and failed attempt says why ('disconnect'),
// and what would only be refused again (an oversized message, a protocol error, a wrong
// password) is refused or ends the client instead of being retried.
//
// Split by job, as ioredis is: this file is the public class (its status, the login, what the
// server sends, the inbox position and its acks); options.ts its options; transport.ts the
// connection, attempt after attempt; pending-requests.ts the requests waiting for an answer.

import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { SwitchboardError, isErrorCode, type ErrorCode } from '../errors.js';
import { silentLogger, type Logger } from '../log.js';
import { decodeMessage, encodeMessageFrame, storedRequestBody } from '../protocol/codec.js';
import { DELIVERY_OVERHEAD, deliveryFits } from '../protocol/chat-frames.js';
import { HEADER_LENGTH } from '../protocol/frame.js';
import { HeadType, NotificationType, PRE_LOGIN_SESSION_ID, type ImMessage, type MessageRequest } from '../protocol/types.js';
import { clientSettings, defaultRetryStrategy, type ClientSettings, type Endpoint, type ImClientOptions, type RetryStrategy } from './options.js';
import { PendingRequests } from './pending-requests.js';
import { Transport } from './transport.js';

export { defaultRetryStrategy, type Endpoint, type ImClientOptions, type RetryStrategy };

export type ClientStatus = 'idle' | 'connecting' | 'ready' | 'reconnecting' | 'closed';

export interface IncomingMessage {
  /** Position in the recipient's inbox (0 from a server without inboxes). */
  seq: number;
  from: string;
  to: string;
  content: string;
  /** The sender's message id, as a decimal string (uint64). */
  msgId: string;
  /** The sender's clock (ms) when it sent the message: not to be trusted for display. */
  time: number;
  /**
   * When the server stored the message (ms, the server's clock: MessageRequest.stored_at);
   * undefined from a server that does not send it.
   */
  storedAt: number | undefined;
  msgType: number;
  json: string;
  url: string;
  property: string;
  fromNick: string;
}

export interface SendOptions {
  msgType?: number;
  json?: string;
  url?: string;
  property?: string;
  fromNick?: string;
  /** Client-chosen uint64 message id (decimal string or number); unique per client by default. */
  msgId?: string | number;
}

export interface SendResult {
  msgId: string;
  /** The envelope sequence of the request. */
  sequence: number;
  /** Position in the recipient's inbox. */
  seq: number;
  /** The server had stored this msgId already (a retry); `seq` is the original. */
  duplicate: boolean;
}

export interface ServerNotification {
  type: number;
  data: unknown;
}

export interface ImClientEvents {
  status: [ClientStatus];
  login: [sessionId: string];
  message: [IncomingMessage];
  notification: [ServerNotification];
  /** The server announced it is closing this connection, and why. */
  closing: [{ code: string; reason: string }];
  /** Messages after `requested` were pruned from the inbox; the replay starts after `from`. */
  gap: [{ requested: number; from: number }];
  /**
   * The server's inbox lost messages or forked (a data loss, a failover): the position
   * `requested` (of `previousEpoch`) is void and forgotten, and the replay starts after `from`
   * in `epoch`. Messages shown before may be shown again; some sent before may be lost.
   */
  reset: [{ requested: number; previousEpoch: number; from: number; epoch: number }];
  /**
   * A connection was lost or an attempt to make one failed, and why (`reason.code`: the server's
   * CLOSING code, the gate's code, SB_ERR_CLIENT_CONNECT_FAILED for a socket that never
   * connected, SB_ERR_CLIENT_CONNECTION_LOST for one that broke). `retryInMs` is the wait before
   * the next attempt, or null when the client closes for good. Not emitted by close() or logout().
   */
  disconnect: [{ reason: SwitchboardError; retryInMs: number | null }];
  /**
   * The client closed for good on its own (a refusal or close by the server, a gate refusal,
   * retrying given up) with no connect() left to reject; only emitted when listened to.
   */
  error: [Error];
}

/**
 * CLOSING codes after which reconnecting would only repeat the refusal or fight another device,
 * and the protocol errors (PROTOCOL.md §9: "fix the client"): reconnecting would send the same
 * frame again and be closed again, each time a fresh login.
 */
const FINAL_CLOSE_CODES: ReadonlySet<string> = new Set([
  'SB_ERR_SESSION_REPLACED',
  'SB_ERR_TOO_MANY_DEVICES',
  'SB_ERR_FRAME_BAD_MAGIC',
  'SB_ERR_FRAME_BAD_VERSION',
  'SB_ERR_FRAME_NEGATIVE_LENGTH',
  'SB_ERR_FRAME_TOO_LONG',
  'SB_ERR_BAD_PROTOBUF',
  'SB_ERR_UNKNOWN_TYPE',
  'SB_ERR_NOT_LOGGED_IN',
  'SB_ERR_PRELOGIN_QUEUE_FULL',
]);

/**
 * Login refusals by a worker that pass: its stores did not answer (PROTOCOL.md §5: log in
 * again, through the gate, after a backoff). Every other refusal ends the client.
 */
const RETRIED_LOGIN_CODES: ReadonlySet<string> = new Set(['SB_ERR_STORE_UNAVAILABLE']);

/**
 * Bytes a chat message's fields other than its strings can take at most: the tags and length
 * prefixes of MessageRequest's fields, msg_id, time, stored_at and msg_type as 10-byte varints,
 * the envelope around it in the frame sent (type, sequence, tag and length of the request), and
 * what a forward to another worker adds beyond the delivery (its epoch and tags).
 */
const REQUEST_FIXED_BYTES = 128;

export class ImClient extends EventEmitter<ImClientEvents> {
  readonly uid: string;
  readonly deviceId: string;
  #status: ClientStatus = 'idle';
  #sessionId = '';
  readonly #options: ClientSettings;
  readonly #log: Logger;
  readonly #pending: PendingRequests;
  readonly #transport: Transport;
  #sequence = 0;
  /**
   * Default msgIds count up from a random 53-bit start: msgId is the server's dedupe key per
   * sender, so two clients of one user must not produce the same ids.
   */
  readonly #msgIdBase = randomBytes(6).readUIntBE(0, 6) * 16;
  #msgCount = 0;
  #timer: NodeJS.Timeout | undefined;
  #login: { resolve: () => void; reject: (err: Error) => void } | undefined;
  #loginSequence = -1;
  #final = false;
  /** logout() is under way: the connection ending is its expected end, not a disconnect. */
  #loggingOut = false;
  /** Highest inbox sequence processed; undefined until known. */
  #lastSeq: number | undefined;
  /** The inbox epoch #lastSeq counts in; 0 while unknown. */
  #inboxEpoch: number;
  #ackScheduled = false;
  readonly #acks: boolean;
  /** heartbeatIntervalMs as given; undefined: the server's. */
  readonly #explicitHeartbeat: number | undefined;
  /** The heartbeat interval in use: the option's, until a login tells the server's. */
  #heartbeatMs: number;

  constructor(options: ImClientOptions) {
    super();
    this.#options = clientSettings(options);
    this.uid = options.uid;
    this.deviceId = options.deviceId ?? '';
    this.#acks = options.acks ?? true;
    this.#explicitHeartbeat = options.heartbeatIntervalMs;
    this.#heartbeatMs = this.#options.heartbeatIntervalMs;
    this.#lastSeq = options.lastSeq;
    this.#inboxEpoch = options.lastSeq !== undefined ? (options.inboxEpoch ?? 0) : 0;
    this.#log = (options.log ?? silentLogger()).child({ uid: this.uid, deviceId: this.deviceId });
    this.#pending = new PendingRequests(this.#options.maxPendingRequests, this.#options.requestTimeoutMs);
    const retry = options.retryStrategy === false ? false : (options.retryStrategy ?? defaultRetryStrategy());
    this.#transport = new Transport(this.#options, retry, this.#log, {
      connected: (where) => this.#sendLogin(where),
      frame: (body) => this.#onFrame(body),
      down: (reason, retryAfterMs, final) => {
        if (final) this.#final = true;
        this.#onDisconnect(reason, retryAfterMs);
      },
    });
  }

  get status(): ClientStatus {
    return this.#status;
  }

  /** Highest inbox sequence processed by this client; undefined before the first login. */
  get lastSeq(): number | undefined {
    return this.#lastSeq;
  }

  /** The inbox epoch `lastSeq` belongs to; 0 while unknown (before the first login, or an older server). */
  get inboxEpoch(): number {
    return this.#inboxEpoch;
  }

  /** The heartbeat interval in use (ms): unless one was given, the server's since a login told one. */
  get heartbeatIntervalMs(): number {
    return this.#heartbeatMs;
  }

  /** The server's session id of the current login; '' when not logged in. */
  get sessionId(): string {
    return this.#sessionId;
  }

  /** Connects and logs in. Rejects when the server refuses the login or retrying gives up. */
  connect(): Promise<void> {
    if (this.#status !== 'idle') return Promise.reject(new SwitchboardError('SB_ERR_CLIENT_CLOSED', `client is ${this.#status}`));
    const loggedIn = new Promise<void>((resolve, reject) => (this.#login = { resolve, reject }));
    this.#setStatus('connecting');
    // Unless a 'status' listener closed the client already.
    if (this.status === 'connecting') this.#transport.open();
    return loggedIn;
  }

  /**
   * Sends a chat message. Resolves once the server has stored it in the recipient's inbox;
   * rejects with the server's error code or a client one (SB_ERR_CLIENT_*). While the client
   * is reconnecting the message waits, within `maxPendingRequests`; a message whose answer was
   * lost with the connection is sent again with the same msgId (the server stores it once).
   * Only with `acks`: the server deduplicates msg_ids of ack clients only, so without acks such
   * a message rejects with SB_ERR_CLIENT_CONNECTION_LOST (it may have been stored).
   */
  async send(to: string, content: string, options: SendOptions = {}): Promise<SendResult> {
    const msgId = String(options.msgId ?? this.#msgIdBase + ++this.#msgCount);
    const request: MessageRequest = {
      msgId: msgId as unknown as number,
      from: this.uid,
      to,
      time: Date.now(),
      msgType: options.msgType ?? 1,
      content,
      json: options.json,
      url: options.url,
      property: options.property,
      fromNick: options.fromNick,
    };
    const tooLarge = this.#sizeCheck(request);
    if (tooLarge) throw tooLarge;
    const response = await this.#request(HeadType.MESSAGE_REQUEST, { messageRequest: request }, this.#acks);
    const body = response.messageResponse;
    if (!body?.result) throw serverError(body?.errorCode, body?.info, 'message refused');
    return { msgId, sequence: Number(response.sequence), seq: Number(body.seq ?? 0), duplicate: body.duplicate === true };
  }

  /**
   * A message the server would refuse for its size (SB_ERR_MESSAGE_TOO_LARGE: the delivered form,
   * which adds the inbox seq and the envelope, would exceed the frame limit) or close the
   * connection for (SB_ERR_FRAME_TOO_LONG) is refused here, before it is written: otherwise it
   * is sent again after each reconnect. The strings' lengths bound the size without encoding in
   * the usual case; near the limit the request is encoded to know.
   */
  #sizeCheck(request: MessageRequest): SwitchboardError | undefined {
    const max = this.#options.maxFrameLength;
    const to = request.to ?? '';
    let chars = this.uid.length + to.length * 2 + this.#sessionId.length;
    for (const field of [request.content, request.json, request.url, request.property, request.fromNick]) chars += field?.length ?? 0;
    // A UTF-16 unit is at most 3 bytes of UTF-8 (a surrogate pair, two units, is 4).
    if (chars * 3 + REQUEST_FIXED_BYTES + DELIVERY_OVERHEAD <= max) return undefined;
    // Near the limit, the server's own rule on the body it would store.
    const stored = storedRequestBody(request, this.uid, Date.now(), to).length;
    if (deliveryFits(stored, Buffer.byteLength(to), max)) return undefined;
    return new SwitchboardError('SB_ERR_MESSAGE_TOO_LARGE', `the message takes ${stored} bytes once stored; with its delivery it would exceed the frame limit of ${max}`);
  }

  /** Logs out and closes. Resolves once the server confirmed or the connection ended. */
  async logout(): Promise<void> {
    if (this.#status !== 'ready') {
      this.close();
      return;
    }
    this.#final = true;
    this.#loggingOut = true;
    try {
      await this.#request(HeadType.LOGOUT_REQUEST, {}, false);
    } catch {
      // The connection ending before the answer is as good as the answer.
    } finally {
      this.close();
    }
  }

  /** Closes at once without logging out; everything waiting is rejected with SB_ERR_CLIENT_CLOSED. */
  close(): void {
    this.#close(undefined);
  }

  /** close(), with the reason the client gives up (the cause of the rejections), if any. */
  #close(cause: SwitchboardError | undefined): void {
    if (this.#status === 'closed') return;
    this.#final = true;
    this.#transport.close();
    clearInterval(this.#timer);
    this.#sessionId = '';
    this.#pending.rejectAll(new SwitchboardError('SB_ERR_CLIENT_CLOSED', cause ? `client closed: ${cause.code} ${cause.message}` : undefined, { cause }));
    // A connect() still waiting for its first login would otherwise never settle.
    const login = this.#login;
    this.#login = undefined;
    this.#setStatus('closed');
    login?.reject(new SwitchboardError('SB_ERR_CLIENT_CLOSED', 'client was closed before the login completed'));
  }

  #setStatus(status: ClientStatus): void {
    if (this.#status === status) return;
    this.#log.debug({ from: this.#status, to: status }, 'client status');
    this.#status = status;
    this.emit('status', status);
  }

  /** Connected: the login, with the position to resume from. */
  #sendLogin(where: Endpoint): void {
    this.#loginSequence = ++this.#sequence;
    this.#transport.write(
      encodeMessageFrame({
        type: HeadType.LOGIN_REQUEST,
        sequence: this.#loginSequence,
        sessionId: PRE_LOGIN_SESSION_ID,
        loginRequest: {
          uid: this.uid,
          deviceId: this.deviceId,
          token: where.token,
          platform: this.#options.platform ?? 0,
          appVersion: this.#options.appVersion ?? '',
          acks: this.#acks,
          ...(this.#lastSeq !== undefined ? { lastSeq: this.#lastSeq } : {}),
          ...(this.#lastSeq !== undefined && this.#inboxEpoch !== 0 ? { inboxEpoch: this.#inboxEpoch } : {}),
        },
      }),
    );
  }

  #onFrame(body: Buffer): void {
    let message: ImMessage;
    try {
      message = decodeMessage(body);
    } catch (err) {
      this.#log.warn({ err }, 'undecodable frame from server');
      this.#transport.drop(new SwitchboardError('SB_ERR_CLIENT_CONNECTION_LOST', 'undecodable frame from the server', { cause: err }));
      return;
    }
    switch (message.type) {
      case HeadType.LOGIN_RESPONSE:
        this.#onLoginResponse(message);
        return;
      case HeadType.MESSAGE_RESPONSE:
      case HeadType.LOGOUT_RESPONSE:
        this.#pending.settle(message);
        return;
      case HeadType.MESSAGE_REQUEST:
        this.#onIncoming(message);
        return;
      case HeadType.MESSAGE_NOTIFICATION:
        this.#onNotification(message);
        return;
      case HeadType.HEART_BEAT:
        return;
      default:
        this.#log.debug({ type: message.type }, 'ignoring unknown message type');
    }
  }

  #onLoginResponse(message: ImMessage): void {
    const body = message.loginResponse;
    if (Number(message.sequence) !== this.#loginSequence) return;
    if (!body?.result) {
      const err = serverError(body?.errorCode, body?.info, 'login refused', 'SB_ERR_CLIENT_LOGIN_FAILED');
      this.#log.warn({ code: err.code, reason: err.message }, 'login refused');
      if (RETRIED_LOGIN_CODES.has(err.code)) {
        // The server closes the connection behind the refusal: the reconnect, after a backoff,
        // logs in again (through the gate, when there is one, which hands out workers that can serve).
        this.#transport.drop(err);
        return;
      }
      this.#finalDisconnect(err);
      return;
    }
    this.#sessionId = message.sessionId ?? '';
    this.#transport.loggedIn();
    const serverHeartbeat = body.heartbeatIntervalMs ?? 0;
    if (serverHeartbeat > 0 && this.#explicitHeartbeat === undefined) this.#heartbeatMs = serverHeartbeat;
    const syncFrom = Number(body.syncFrom ?? 0);
    const epoch = Number(body.inboxEpoch ?? 0);
    const requested = this.#lastSeq ?? 0;
    const previousEpoch = this.#inboxEpoch;
    // The replay starts after syncFrom, whatever we asked for: past a gap it is higher, and
    // after a reset (an inbox that lost its messages or forked) it is lower. Keeping the old
    // position, which is also what drops resent messages, would drop the new seq 1, 2, ... as
    // already processed: it is forgotten.
    // A device that had a position is told where it is now (a new epoch included, e.g. the first
    // one a server tells it); one without a position gets it with its first delivery.
    const moved = this.#lastSeq !== undefined && (this.#lastSeq !== syncFrom || (epoch !== 0 && epoch !== previousEpoch));
    this.#lastSeq = syncFrom;
    if (epoch !== 0) this.#inboxEpoch = epoch;
    if (moved) this.#options.savePosition?.(syncFrom, this.#inboxEpoch);
    if (body.reset) {
      this.#log.warn({ requested, previousEpoch, from: syncFrom, epoch }, 'inbox reset: position forgotten');
      this.emit('reset', { requested, previousEpoch, from: syncFrom, epoch });
    } else if (body.gap) {
      this.emit('gap', { requested, from: syncFrom });
    }
    this.#setStatus('ready');
    // A request made before the login started the timer at the interval then known: restart it
    // at the one just told, or the server closes the connection for idleness.
    clearInterval(this.#timer);
    this.#timer = undefined;
    this.#startTimer();
    this.#pending.flushUnsent((frame) => this.#transport.write(frame));
    this.emit('login', this.#sessionId);
    const login = this.#login;
    this.#login = undefined;
    login?.resolve();
  }

  #onIncoming(message: ImMessage): void {
    const m = message.messageRequest;
    if (!m) return;
    const seq = Number(m.seq ?? 0);
    if (seq > 0) {
      // A resend of something already processed: acknowledge again, show nothing.
      if (this.#lastSeq !== undefined && seq <= this.#lastSeq) {
        this.#scheduleAck();
        return;
      }
    }
    this.emit('message', {
      seq,
      from: m.from ?? '',
      to: m.to ?? '',
      content: m.content ?? '',
      msgId: String(m.msgId ?? 0),
      time: Number(m.time ?? 0),
      storedAt: m.storedAt ? Number(m.storedAt) : undefined,
      msgType: m.msgType ?? 0,
      json: m.json ?? '',
      url: m.url ?? '',
      property: m.property ?? '',
      fromNick: m.fromNick ?? '',
    });
    // Processed once the listeners returned: that is the position to acknowledge and keep.
    if (seq > 0) {
      this.#lastSeq = seq;
      this.#options.savePosition?.(seq, this.#inboxEpoch);
      this.#scheduleAck();
    }
  }

  /** One cumulative MESSAGE_ACK per tick, for the highest sequence processed. */
  #scheduleAck(): void {
    if (!this.#acks || this.#ackScheduled) return;
    this.#ackScheduled = true;
    process.nextTick(() => {
      this.#ackScheduled = false;
      if (this.#status !== 'ready' || this.#lastSeq === undefined) return;
      this.#transport.write(encodeMessageFrame({ type: HeadType.MESSAGE_ACK, sessionId: this.#sessionId, ack: { seq: this.#lastSeq } }));
    });
  }

  #onNotification(message: ImMessage): void {
    let parsed: ServerNotification;
    try {
      parsed = JSON.parse(message.notification?.json ?? '') as ServerNotification;
    } catch {
      this.#log.debug('ignoring notification that is not JSON');
      return;
    }
    if (parsed.type === NotificationType.CLOSING) {
      const data = (parsed.data ?? {}) as { code?: string; reason?: string };
      const closing = { code: data.code ?? 'SB_ERR_INTERNAL', reason: data.reason ?? '' };
      if (FINAL_CLOSE_CODES.has(closing.code)) this.#final = true;
      this.#transport.closingFor(serverError(closing.code, closing.reason, 'the server closed the connection'));
      this.emit('closing', closing);
      return;
    }
    this.emit('notification', parsed);
  }

  #request(type: number, body: Partial<ImMessage>, retry: boolean): Promise<ImMessage> {
    const sequence = ++this.#sequence;
    if (this.#status === 'closed') return Promise.reject(new SwitchboardError('SB_ERR_CLIENT_CLOSED'));
    const full = this.#pending.full();
    if (full) return Promise.reject(full);
    const frame = encodeMessageFrame({ ...body, type, sequence, sessionId: this.#sessionId });
    if (frame.length - HEADER_LENGTH > this.#options.maxFrameLength) {
      return Promise.reject(new SwitchboardError('SB_ERR_MESSAGE_TOO_LARGE', `the frame takes ${frame.length - HEADER_LENGTH} bytes; the limit is ${this.#options.maxFrameLength}`));
    }
    const ready = this.#status === 'ready';
    const answer = this.#pending.add(sequence, frame, ready, retry);
    if (ready) this.#transport.write(frame);
    this.#startTimer();
    return answer;
  }

  /** One timer serves heartbeats, request deadlines and the dead-server check. */
  #startTimer(): void {
    if (this.#timer) return;
    const heartbeatMs = this.#heartbeatMs;
    const period = Math.min(heartbeatMs, Math.max(10, Math.floor(this.#options.requestTimeoutMs / 4)));
    let sinceHeartbeat = 0;
    this.#timer = setInterval(() => {
      const now = Date.now();
      this.#pending.expire(now);
      if (this.#status !== 'ready') return;
      if (now - this.#transport.lastInboundAt > 3 * heartbeatMs) {
        this.#log.warn('server silent for 3 heartbeat intervals, reconnecting');
        this.#transport.drop(new SwitchboardError('SB_ERR_CLIENT_CONNECTION_LOST', `the server was silent for ${3 * heartbeatMs} ms`));
        return;
      }
      sinceHeartbeat += period;
      if (sinceHeartbeat >= heartbeatMs) {
        sinceHeartbeat = 0;
        this.#transport.write(encodeMessageFrame({ type: HeadType.HEART_BEAT, sequence: ++this.#sequence, sessionId: this.#sessionId, heartBeat: { uid: this.uid } }));
      }
    }, period);
    this.#timer.unref();
  }

  /** The connection (or the attempt to make one) is gone, for `reason`: reconnect, or end. */
  #onDisconnect(reason: SwitchboardError, retryAfterMs: number): void {
    this.#sessionId = '';
    clearInterval(this.#timer);
    this.#timer = undefined;
    const final = this.#final || !this.#transport.reconnects;
    // Sent but unanswered: the server may or may not have taken them. An ack client's chat
    // messages go again after the reconnect (deduplicated by msg_id); anything else cannot be
    // known. When the server ends the client for good (a protocol error: one of them is the
    // frame at fault), they fail with the server's reason.
    const closedBy = final && FINAL_CLOSE_CODES.has(reason.code);
    this.#pending.connectionLost(final, () => (closedBy ? reason : new SwitchboardError('SB_ERR_CLIENT_CONNECTION_LOST', undefined, { cause: reason })));
    if (this.#loggingOut) {
      this.#close(undefined);
      return;
    }
    if (final) {
      this.#finalDisconnect(reason);
      return;
    }
    const { attempt, delay } = this.#transport.nextDelay(retryAfterMs);
    this.#log.info({ attempt, delay, code: reason.code, reason: reason.message }, delay === null ? 'giving up' : 'reconnecting');
    this.emit('disconnect', { reason, retryInMs: delay });
    if (delay === null) {
      this.#giveUp(reason);
      return;
    }
    this.#setStatus('reconnecting');
    this.#transport.reconnectIn(delay);
    if (this.#pending.size > 0) this.#startTimer();
  }

  /** Ends the client for `reason`, after which no attempt is made. */
  #finalDisconnect(reason: SwitchboardError): void {
    this.emit('disconnect', { reason, retryInMs: null });
    this.#giveUp(reason);
  }

  /** Closes; a connect() still waiting rejects with `reason`, else it is an 'error' event, if anyone listens. */
  #giveUp(reason: SwitchboardError): void {
    const login = this.#login;
    this.#login = undefined;
    this.#close(reason);
    if (login) login.reject(reason);
    else if (this.listenerCount('error') > 0) this.emit('error', reason);
  }
}

function serverError(errorCode: string | undefined, info: string | undefined, fallback: string, otherwise: ErrorCode = 'SB_ERR_INTERNAL'): SwitchboardError {
  const code = errorCode && isErrorCode(errorCode) ? errorCode : otherwise;
  return new SwitchboardError(code, info || fallback);
}