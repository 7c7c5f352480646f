// The switchboard client SDK: one logged-in device. Used by the CLI, the tests and the bench.
// Connects and logs in, sends chat messages (to a user, to a group) whose promises settle on the
// MESSAGE_RESPONSE, asks for the chat list, history pages and read marks (conversations.ts),
// emits incoming messages, read events and group deliveries, heartbeats, and reconnects with capped exponential backoff and
// jitter. Status changes go through one setStatus(); an epoch counter makes callbacks of a
// replaced socket harmless. Every lost connection and failed attempt says why ('disconnect'),
// and what would only be refused again (an oversized message, a protocol error, a wrong
// password) is refused or ends the client instead of being retried.
//
// Split by job, as ioredis is: this file is the public class (its status, connect, send,
// logout and close, the one timer); options.ts its options; transport.ts the connection,
// attempt after attempt; event-handler.ts what happens when the transport reports (the login,
// what the server sends, the inbox position and its acks, reconnect or end) and the events;
// group-positions.ts each group's position (dedupe and acks); pending-requests.ts the requests
// waiting for an answer.

import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { SwitchboardError } from '../errors.js';
import { silentLogger, type Logger } from '../log.js';
import { encodeMessageFrame, ownCopyBody, storedRequestBody, uint64Number } from '../protocol/codec.js';
import { DELIVERY_OVERHEAD, deliveryFits } from '../protocol/chat-frames.js';
import { HEADER_LENGTH } from '../protocol/frame.js';
import { ConversationOp, HeadType, type ConversationRequest, type ConversationResponse, type ImMessage, type MessageRequest } from '../protocol/types.js';
import { conversationList, historyPage, readMark, type ConversationList, type ConversationSummary, type HistoryPage, type ReadMark } from './conversations.js';
import { chatList, groupHistory, groupReaders, type ChatList, type ChatListEntry, type GroupHistory, type GroupReaders } from './group-conversations.js';
import { EventHandler, serverError, type ClientInternals, type ClientStatus, type GroupEventMessage, type GroupMessage, type ImClientEvents, type IncomingMessage, type EditEvent, type ReadEvent, type RecallEvent, type ReceiptEvent, type ServerNotification } from './event-handler.js';
import { clientSettings, defaultRetryStrategy, type ClientSettings, type Endpoint, type ImClientOptions, type RetryStrategy } from './options.js';
import { PendingRequests } from './pending-requests.js';
import { Transport } from './transport.js';

export { defaultRetryStrategy, type ChatList, type ChatListEntry, type ClientStatus, type ConversationList, type GroupHistory, type GroupReaders, type ConversationSummary, type Endpoint, type GroupEventMessage, type GroupMessage, type HistoryPage, type ImClientEvents, type ImClientOptions, type IncomingMessage, type ReadEvent, type ReadMark, type RecallEvent, type EditEvent, type ReceiptEvent, type RetryStrategy, type ServerNotification };

/** A page of the chat list or of a conversation's history. */
export interface PageOptions {
  /** Older than this (the previous page's `nextBefore`); 0 or unset: from the newest. */
  before?: number;
  /** At most this many (default 50, the server's most 100). */
  limit?: number;
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
  /**
   * Position of the message's copy in the sender's own inbox, where this user's other devices
   * (ownCopies) get it; 0 when the server keeps no copy (`--no-own-copies`, a message to oneself,
   * an older server). This client's own position does not move to it: the server passes over
   * the copy for this device, and the deliveries after it move the position past it.
   */
  ownSeq: number;
}

export interface GroupSendResult {
  msgId: string;
  /** The envelope sequence of the request. */
  sequence: number;
  /** The group's sequence of the message: where every member sees it. */
  seq: number;
  /** The server had stored this msgId already (a retry); `seq` is the original. */
  duplicate: boolean;
}

/**
 * Bytes a chat message's fields other than its strings can take at most: the tags and length
 * prefixes of MessageRequest's fields, msg_id, time, stored_at and msg_type as 10-byte varints,
 * the envelope around it in the frame sent (type, sequence, tag and length of the request), and
 * what a forward to another worker adds beyond the delivery (its epoch and tags).
 */
const REQUEST_FIXED_BYTES = 128;
/** What an own copy adds beyond its device id: the tag of origin_device (2) and its length (at most 3). */
const OWN_COPY_FIXED_BYTES = 5;

export class ImClient extends EventEmitter<ImClientEvents> {
  readonly uid: string;
  readonly deviceId: string;
  #status: ClientStatus = 'idle';
  #sessionId = '';
  readonly #options: ClientSettings;
  readonly #log: Logger;
  readonly #pending: PendingRequests;
  readonly #transport: Transport;
  readonly #events: EventHandler;
  #sequence = 0;
  /**
   * Default msgIds count up from a random 53-bit start: msgId is the server's dedupe key per
   * sender, so two clients of one user must not produce the same ids.
   */
  readonly #msgIdBase = randomBytes(6).readUIntBE(0, 6) * 16;
  #msgCount = 0;
  #timer: NodeJS.Timeout | undefined;
  #login: { resolve: () => void; reject: (err: Error) => void } | undefined;
  #final = false;
  /** logout() is under way: the connection ending is its expected end, not a disconnect. */
  #loggingOut = false;

  constructor(options: ImClientOptions) {
    super();
    if (options.groups === true && options.acks === false) {
      throw new SwitchboardError('SB_ERR_CONFIG', 'groups needs acks: group deliveries are acknowledged per group');
    }
    this.#options = clientSettings(options);
    this.uid = options.uid;
    this.deviceId = options.deviceId ?? '';
    this.#log = (options.log ?? silentLogger()).child({ uid: this.uid, deviceId: this.deviceId });
    this.#pending = new PendingRequests(this.#options.maxPendingRequests, this.#options.requestTimeoutMs);
    const retry = options.retryStrategy === false ? false : (options.retryStrategy ?? defaultRetryStrategy());
    // The transport reports to the event handler, made next: nothing reports before open().
    this.#transport = new Transport(this.#options, retry, this.#log, {
      connected: (where) => this.#events.connected(where),
      frame: (body) => this.#events.frame(body),
      down: (reason, retryAfterMs, final) => this.#events.down(reason, retryAfterMs, final),
    });
    this.#events = new EventHandler(this.#internals(), options, this.#options, this.#log, this.#pending, this.#transport);
  }

  /** What the event handler may read and change of this client. */
  #internals(): ClientInternals {
    const client = this; // for the accessors, which are not arrows
    return {
      get status() {
        return client.#status;
      },
      get sessionId() {
        return client.#sessionId;
      },
      set sessionId(id: string) {
        client.#sessionId = id;
      },
      get final() {
        return client.#final;
      },
      set final(final: boolean) {
        client.#final = final;
      },
      get loggingOut() {
        return client.#loggingOut;
      },
      nextSequence: () => ++this.#sequence,
      emit: this.emit.bind(this),
      setStatus: (status) => this.#setStatus(status),
      startTimer: () => this.#startTimer(),
      stopTimer: () => {
        clearInterval(this.#timer);
        this.#timer = undefined;
      },
      loggedIn: () => {
        const login = this.#login;
        this.#login = undefined;
        login?.resolve();
      },
      close: (cause) => this.#close(cause),
      giveUp: (reason) => this.#giveUp(reason),
    };
  }

  get status(): ClientStatus {
    return this.#status;
  }

  /** Highest inbox sequence processed by this client; undefined before the first login. */
  get lastSeq(): number | undefined {
    return this.#events.lastSeq;
  }

  /** Highest seq of `group` processed by this client (delivered, or its own message); undefined while unknown. */
  groupSeq(group: string): number | undefined {
    return this.#events.groupPositions.seq(group);
  }

  /** The inbox epoch `lastSeq` belongs to; 0 while unknown (before the first login, or an older server). */
  get inboxEpoch(): number {
    return this.#events.inboxEpoch;
  }

  /** The heartbeat interval in use (ms): unless one was given, the server's since a login told one. */
  get heartbeatIntervalMs(): number {
    return this.#events.heartbeatMs;
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
   * Sends a chat message. Resolves once the server has stored it in the recipient's inbox (and
   * its copy in this user's, for the other devices: SendResult.ownSeq);
   * rejects with the server's error code or a client one (SB_ERR_CLIENT_*). While the client
   * is reconnecting the message waits, within `maxPendingRequests`; a message whose answer was
   * lost with the connection is sent again with the same msgId (the server stores it once).
   * Only with `acks`: the server deduplicates msg_ids of ack clients only, so without acks such
   * a message rejects with SB_ERR_CLIENT_CONNECTION_LOST (it may have been stored).
   */
  async send(to: string, content: string, options: SendOptions = {}): Promise<SendResult> {
    const { msgId, request } = this.#chatRequest(to, content, options);
    const tooLarge = this.#sizeCheck(request, to);
    if (tooLarge) throw tooLarge;
    const response = await this.#request(HeadType.MESSAGE_REQUEST, { messageRequest: request }, this.#events.acks);
    const body = response.messageResponse;
    if (!body?.result) throw serverError(body?.errorCode, body?.info, 'message refused');
    return { msgId, sequence: uint64Number(response.sequence), seq: uint64Number(body.seq), duplicate: body.duplicate === true, ownSeq: uint64Number(body.ownSeq) };
  }

  /**
   * Sends a message to a group this user is a member of. Resolves once the server has stored it
   * in the group's log, with its group seq; rejects with the server's code
   * (SB_ERR_GROUP_NOT_FOUND, SB_ERR_GROUP_NOT_MEMBER, SB_ERR_GROUP_DISSOLVED, SB_ERR_BAD_GROUP,
   * SB_ERR_MESSAGE_TOO_LARGE, SB_ERR_RATE_LIMITED, SB_ERR_STORE_UNAVAILABLE) or a client one,
   * as send() does; resent after a lost answer with the same msgId, as send() is. The message is
   * processed as this device's own: a replay of it after a reconnect is not shown. Needs the
   * `groups` option (SB_ERR_BAD_REQUEST otherwise, as the server would answer).
   */
  async sendToGroup(group: string, content: string, options: SendOptions = {}): Promise<GroupSendResult> {
    // The server's refusal, without the round trip.
    if (!this.#events.groups) throw new SwitchboardError('SB_ERR_BAD_REQUEST', 'group messages need a client made with groups: true');
    // `to` left empty: a server without groups refuses it (no recipient) instead of taking the
    // group id for a user's.
    const { msgId, request } = this.#chatRequest('', content, options);
    request.group = group;
    const tooLarge = this.#sizeCheck(request, group, group);
    if (tooLarge) throw tooLarge;
    const response = await this.#request(HeadType.MESSAGE_REQUEST, { messageRequest: request }, this.#events.acks);
    const body = response.messageResponse;
    if (!body?.result) throw serverError(body?.errorCode, body?.info, 'group message refused');
    const seq = uint64Number(body.seq);
    if (seq > 0) this.#events.sentToGroup(group, seq);
    return { msgId, sequence: uint64Number(response.sequence), seq, duplicate: body.duplicate === true };
  }

  /**
   * One page of this user's chat list, most recent first (PROTOCOL.md §14): `limit` entries at
   * most (default 50, at most 100), older than `before` (a `nextBefore` of the page before).
   * Rejects with the server's code (SB_ERR_RATE_LIMITED, SB_ERR_STORE_UNAVAILABLE) or a client
   * one; asked again after a lost connection (a read changes nothing).
   */
  async conversations(options: PageOptions = {}): Promise<ConversationList> {
    return conversationList(await this.#conversationRequest({ op: ConversationOp.LIST, before: options.before ?? 0, limit: options.limit ?? 0 }), this.uid);
  }

  /**
   * One page of the conversation with `peer`, newest first: the messages before `before` (0:
   * the newest), ascending, `limit` at most (default 50, at most 100). Own messages come with
   * `own` set. A conversation this user does not have is an empty page.
   */
  async history(peer: string, options: PageOptions = {}): Promise<HistoryPage> {
    return historyPage(await this.#conversationRequest({ op: ConversationOp.HISTORY, peer, before: options.before ?? 0, limit: options.limit ?? 0 }), this.uid);
  }

  /**
   * Marks the conversation with `peer` read up to inbox seq `seq` (e.g. the seq of the last
   * message shown). The user's other devices get a 'read' event; this one only the answer.
   * Rejects with SB_ERR_NO_CONVERSATION when there is no such conversation. Safe to repeat: a
   * mark never moves the position back.
   */
  async markRead(peer: string, seq: number): Promise<ReadMark> {
    if (!Number.isSafeInteger(seq) || seq <= 0) throw new SwitchboardError('SB_ERR_BAD_REQUEST', `seq must be a positive integer, got ${seq}`);
    return readMark(await this.#conversationRequest({ op: ConversationOp.READ, peer, seq }));
  }

  /**
   * One page of the chat list with this user's groups merged in, most recent activity first
   * (PROTOCOL.md §14, "Groups in the chat list"): pass the page's `nextCursor` as `cursor` for
   * the next one ('' when it was the last). A group's entry has `group` and `name` set, `peer`
   * empty, its seqs the group's and its last entry in `lastGroupEntry`.
   */
  async chatList(options: { cursor?: string; limit?: number } = {}): Promise<ChatList> {
    return chatList(await this.#conversationRequest({ op: ConversationOp.LIST, groups: true, cursor: options.cursor ?? '', limit: options.limit ?? 0 }), this.uid);
  }

  /** One page back through a group this user is (or was) a member of: its entries before `before` (a group seq; 0: the newest), ascending. */
  async groupHistory(group: string, options: PageOptions = {}): Promise<GroupHistory> {
    return groupHistory(await this.#conversationRequest({ op: ConversationOp.HISTORY, group, before: options.before ?? 0, limit: options.limit ?? 0 }), group);
  }

  /**
   * Marks the group read up to its seq `seq` (e.g. the last entry shown). The user's other
   * devices get a 'read' event with `group` set; the members see the position (READERS) unless
   * the user's receipts are off. Safe to repeat.
   */
  async markGroupRead(group: string, seq: number): Promise<ReadMark> {
    if (!Number.isSafeInteger(seq) || seq <= 0) throw new SwitchboardError('SB_ERR_BAD_REQUEST', `seq must be a positive integer, got ${seq}`);
    return readMark(await this.#conversationRequest({ op: ConversationOp.READ, group, seq }));
  }

  /**
   * The group's members' read positions, a page by uid, and with `seq` how many other members
   * read up to it ("read by 3 of 9" for a message this user sent: its GroupSendResult.seq).
   * Rejects with SB_ERR_RECEIPTS_OFF when this user turned receipts off.
   */
  async groupReaders(group: string, options: { seq?: number; after?: string; limit?: number } = {}): Promise<GroupReaders> {
    return groupReaders(await this.#conversationRequest({ op: ConversationOp.READERS, group, seq: options.seq ?? 0, after: options.after ?? '', limit: options.limit ?? 0 }));
  }

  /**
   * Recalls the message `msgId` (SendResult.msgId) this user sent `peer`, within the server's
   * recall window: it becomes a tombstone in both inboxes, and the peer's devices (and this
   * user's other ones) get a 'recall' event. Resolves with the message's seq in the peer's inbox;
   * rejects with SB_ERR_NO_MESSAGE (not one of this user's to `peer`) or SB_ERR_RECALL_EXPIRED.
   * Safe to repeat.
   */
  async recall(peer: string, msgId: string | number): Promise<{ seq: number }> {
    const body = await this.#conversationRequest({ op: ConversationOp.RECALL, peer, msgId: String(msgId) as unknown as number });
    return { seq: uint64Number(body.seq) };
  }

  /**
   * Edits the message `msgId` (SendResult.msgId) this user sent `peer`, within the server's edit
   * window (counted from when the message was stored): its content becomes `content` and its
   * json `json` (an edit replaces both: without `json`, it has none), in both inboxes, and the
   * peer's devices (and this user's other ones) get an 'edit' event carrying them. Resolves with
   * the message's seq in the peer's inbox; rejects with SB_ERR_NO_MESSAGE (not one of this
   * user's to `peer`, or recalled), SB_ERR_EDIT_EXPIRED or SB_ERR_MESSAGE_TOO_LARGE. Safe to
   * repeat: an edit to what the message says already stores nothing.
   */
  async edit(peer: string, msgId: string | number, content: string, json = ''): Promise<{ seq: number }> {
    const body = await this.#conversationRequest({ op: ConversationOp.EDIT, peer, msgId: String(msgId) as unknown as number, content, json });
    return { seq: uint64Number(body.seq) };
  }

  async #conversationRequest(conversationRequest: ConversationRequest): Promise<ConversationResponse> {
    // A read, or a mark that only moves forward: safe to send again after a lost connection.
    const response = await this.#request(HeadType.CONVERSATION_REQUEST, { conversationRequest }, true);
    const body = response.conversationResponse;
    if (!body?.result) throw serverError(body?.errorCode, body?.info, 'conversation request refused');
    return body;
  }

  #chatRequest(to: string, content: string, options: SendOptions): { msgId: string; request: MessageRequest } {
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
    return { msgId, request };
  }

  /**
   * A message the server would refuse for its size (SB_ERR_MESSAGE_TOO_LARGE: the delivered form,
   * which adds the inbox seq and the envelope, would exceed the frame limit) or close the
   * connection for (SB_ERR_FRAME_TOO_LONG) is refused here, before it is written: otherwise it
   * is sent again after each reconnect. The strings' lengths bound the size without encoding in
   * the usual case; near the limit the request is encoded to know. A group message (`group`
   * given) is delivered with `to` set to the group, and forwarded to other workers with the
   * group id beside it: `to` is the group then.
   *
   * A 1:1 message to another user also has its own copy to fit (PROTOCOL.md §14): the stored
   * body with this device's id in front, delivered and forwarded under this user's uid. Whether
   * the server keeps copies (`--no-own-copies`) this client cannot know: it counts the copy.
   */
  #sizeCheck(request: MessageRequest, to: string, group = ''): SwitchboardError | undefined {
    const max = this.#options.maxFrameLength;
    const own = group === '' && to !== this.uid;
    let chars = this.uid.length + to.length * 2 + group.length + this.#sessionId.length;
    for (const field of [request.content, request.json, request.url, request.property, request.fromNick]) chars += field?.length ?? 0;
    // The copy is the body and more, forwarded under this uid instead of `to`.
    if (own) chars += this.uid.length + this.deviceId.length;
    // A UTF-16 unit is at most 3 bytes of UTF-8 (a surrogate pair, two units, is 4).
    if (chars * 3 + REQUEST_FIXED_BYTES + DELIVERY_OVERHEAD + (own ? OWN_COPY_FIXED_BYTES : 0) <= max) return undefined;
    // Near the limit, the server's own rule on the bodies it would store (a copy: it sets fields).
    const stored = storedRequestBody({ ...request }, this.uid, Date.now(), to);
    const copy = own ? ownCopyBody(stored, this.deviceId).length : 0;
    if (deliveryFits(stored.length, Buffer.byteLength(to), max) && (!own || deliveryFits(copy, Buffer.byteLength(this.uid), max))) return undefined;
    const what = own ? `, its copy in your own inbox ${copy}` : '';
    return new SwitchboardError('SB_ERR_MESSAGE_TOO_LARGE', `the message takes ${stored.length} bytes once stored${what}; with its delivery it would exceed the frame limit of ${max}`);
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
    const heartbeatMs = this.#events.heartbeatMs;
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

  /** Closes; a connect() still waiting rejects with `reason`, else it is an 'error' event, if anyone listens. */
  #giveUp(reason: SwitchboardError): void {
    const login = this.#login;
    this.#login = undefined;
    this.#close(reason);
    if (login) login.reject(reason);
    else if (this.listenerCount('error') > 0) this.emit('error', reason);
  }
}
