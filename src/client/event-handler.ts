// What an ImClient does when its transport reports something, as ioredis's event_handler: a
// socket connected (log in, with the position to resume from), a frame came (the login's answer,
// request answers, deliveries and their acks, notifications), the connection went (reconnect
// after the retry strategy's delay, or end). It keeps the inbox position and the heartbeat
// interval in use, and with groups each group's position (group-positions.ts); the rest of its
// client it reaches through ClientInternals. The events the client emits are declared here, with
// the code that emits most of them.

import type { EventEmitter } from 'node:events';
import { SwitchboardError, isErrorCode, type ErrorCode } from '../errors.js';
import type { GroupEvent } from '../groups/group-store.js';
import type { Logger } from '../log.js';
import { decodeMessage, encodeMessageFrame, uint64Number } from '../protocol/codec.js';
import { HeadType, NotificationType, PRE_LOGIN_SESSION_ID, type ImMessage } from '../protocol/types.js';
import { incomingMessage, parseInboxEvent, receiptEvent, type EditEvent, type IncomingMessage, type ReadEvent, type RecallEvent, type ReceiptEvent } from './incoming.js';
import { GroupPositions } from './group-positions.js';
import { groupEntryOf, type GroupEventMessage, type GroupMessage } from './group-conversations.js';

export type { GroupEventMessage, GroupMessage };
import type { ClientSettings, Endpoint, ImClientOptions } from './options.js';
import type { PendingRequests } from './pending-requests.js';
import type { Transport, TransportHandlers } from './transport.js';

export type { EditEvent, IncomingMessage, ReadEvent, RecallEvent, ReceiptEvent };

export type ClientStatus = 'idle' | 'connecting' | 'ready' | 'reconnecting' | 'closed';


export interface ServerNotification {
  type: number;
  data: unknown;
}

export interface ImClientEvents {
  status: [ClientStatus];
  login: [sessionId: string];
  message: [IncomingMessage];
  /** A group message (login with `groups`); each (group, seq) once, in the group's order. */
  groupMessage: [GroupMessage];
  /** A group's membership event (login with `groups`); in the group's order with its messages. */
  groupEvent: [GroupEventMessage];
  notification: [ServerNotification];
  /**
   * Another device of this user marked a conversation read (login with `ownCopies`): set its
   * read position to `seq` if higher and recount its unread messages. In the inbox's order, once.
   */
  read: [ReadEvent];
  /** A message was recalled by its sender (login with `inboxEvents`; with `ownCopies` also this user's own, from another device). */
  recall: [RecallEvent];
  /** A message was edited by its sender (login with `inboxEvents`; with `ownCopies` also this user's own, from another device). */
  edit: [EditEvent];
  /** "delivered" / "read" for messages this user sent (login with `receipts`); cumulative, at most once per acknowledging device and mark: keep the highest `seq` per kind and peer. */
  receipt: [ReceiptEvent];
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
 * Login refusals of the token that pass when the endpoint can get another one (gateEndpoint
 * refreshes it, told the code as its hint); with a fixed token they end the client.
 */
const REFRESHED_LOGIN_CODES: ReadonlySet<string> = new Set(['SB_ERR_TOKEN_EXPIRED', 'SB_ERR_TOKEN_REVOKED']);

/** What the event handler reads and changes of its ImClient (its private state and steps). */
export interface ClientInternals {
  readonly status: ClientStatus;
  /** The current login's session id; '' when not logged in. */
  sessionId: string;
  /** Set: no attempt follows the current connection. */
  final: boolean;
  /** logout() is under way: the connection ending is its expected end, not a disconnect. */
  readonly loggingOut: boolean;
  /** The next envelope sequence of this client. */
  nextSequence(): number;
  emit: EventEmitter<ImClientEvents>['emit'];
  setStatus(status: ClientStatus): void;
  /** The one timer (heartbeats, deadlines), at the heartbeat interval in use; no-op when it runs. */
  startTimer(): void;
  stopTimer(): void;
  /** The login went through: a connect() waiting for it resolves. */
  loggedIn(): void;
  /** close(), with the reason the client gives up, if any. */
  close(cause: SwitchboardError | undefined): void;
  /** Closes; a connect() still waiting rejects with `reason`, else an 'error' event, if listened to. */
  giveUp(reason: SwitchboardError): void;
}

/** The ImClient's transport handlers, and the state only they change. */
export class EventHandler implements TransportHandlers {
  readonly #client: ClientInternals;
  readonly #uid: string;
  readonly #deviceId: string;
  readonly #settings: ClientSettings;
  /** The deadline of the login under way (connected). */
  #loginTimer: NodeJS.Timeout | undefined;
  readonly #log: Logger;
  readonly #pending: PendingRequests;
  readonly #transport: Transport;
  readonly #acks: boolean;
  readonly #groups: boolean;
  readonly #ownCopies: boolean;
  readonly #noReplay: boolean;
  readonly #receipts: boolean;
  readonly #inboxEvents: boolean;
  readonly #groupPositions: GroupPositions;
  #groupAckScheduled = false;
  #loginSequence = -1;
  /** Token refusals since the last login that went through: a second in a row ends the client (the endpoint could not get a better token). */
  #tokenRefusals = 0;
  /** Highest inbox sequence processed; undefined until known. */
  #lastSeq: number | undefined;
  /** The inbox epoch #lastSeq counts in; 0 while unknown. */
  #inboxEpoch: number;
  #ackScheduled = false;
  /** heartbeatIntervalMs as given; undefined: the server's. */
  readonly #explicitHeartbeat: number | undefined;
  /** The heartbeat interval in use: the option's, until a login tells the server's. */
  #heartbeatMs: number;

  constructor(client: ClientInternals, options: ImClientOptions, settings: ClientSettings, log: Logger, pending: PendingRequests, transport: Transport) {
    this.#client = client;
    this.#uid = options.uid;
    this.#deviceId = options.deviceId ?? '';
    this.#settings = settings;
    this.#log = log;
    this.#pending = pending;
    this.#transport = transport;
    // Group deliveries are acknowledged per group: groups need acks (ImClient refuses groups without).
    this.#groups = options.groups === true;
    this.#acks = (options.acks ?? true) || this.#groups;
    this.#ownCopies = options.ownCopies === true;
    this.#noReplay = options.noReplay === true;
    this.#receipts = options.receipts === true;
    this.#inboxEvents = options.inboxEvents === true;
    this.#groupPositions = new GroupPositions(options.groupPositions);
    this.#explicitHeartbeat = options.heartbeatIntervalMs;
    this.#heartbeatMs = settings.heartbeatIntervalMs;
    this.#lastSeq = options.lastSeq;
    this.#inboxEpoch = options.lastSeq !== undefined ? (options.inboxEpoch ?? 0) : 0;
  }

  get acks(): boolean {
    return this.#acks;
  }

  get lastSeq(): number | undefined {
    return this.#lastSeq;
  }

  get groups(): boolean {
    return this.#groups;
  }

  get groupPositions(): GroupPositions {
    return this.#groupPositions;
  }

  get inboxEpoch(): number {
    return this.#inboxEpoch;
  }

  get heartbeatMs(): number {
    return this.#heartbeatMs;
  }

  /**
   * Connected: the login, with the position to resume from. Unanswered within requestTimeoutMs,
   * the connection is dropped and the login tried again as after any lost connection (a server
   * that accepts and never answers would otherwise hold connect() forever).
   */
  connected(where: Endpoint): void {
    clearTimeout(this.#loginTimer);
    const timeoutMs = this.#settings.requestTimeoutMs;
    this.#loginTimer = setTimeout(() => this.#transport.drop(new SwitchboardError('SB_ERR_CLIENT_CONNECTION_LOST', `no answer to the login within ${timeoutMs} ms`)), timeoutMs);
    this.#loginTimer.unref();
    this.#loginSequence = this.#client.nextSequence();
    this.#transport.write(
      encodeMessageFrame({
        type: HeadType.LOGIN_REQUEST,
        sequence: this.#loginSequence,
        sessionId: PRE_LOGIN_SESSION_ID,
        loginRequest: {
          uid: this.#uid,
          deviceId: this.#deviceId,
          token: where.token,
          platform: this.#settings.platform ?? 0,
          appVersion: this.#settings.appVersion ?? '',
          acks: this.#acks,
          ...(this.#groups ? { groups: true } : {}),
          ...(this.#ownCopies ? { ownCopies: true } : {}),
          // Only while this device has no position: after its first login it has one, and a reconnect replays from it.
          ...(this.#noReplay && this.#lastSeq === undefined ? { noReplay: true } : {}),
          ...(this.#receipts ? { receipts: true } : {}),
          ...(this.#inboxEvents ? { inboxEvents: true } : {}),
          ...(this.#lastSeq !== undefined ? { lastSeq: this.#lastSeq } : {}),
          ...(this.#lastSeq !== undefined && this.#inboxEpoch !== 0 ? { inboxEpoch: this.#inboxEpoch } : {}),
        },
      }),
    );
  }

  frame(body: Buffer): void {
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
      case HeadType.CONVERSATION_RESPONSE:
        this.#pending.settle(message);
        return;
      case HeadType.MESSAGE_REQUEST:
        this.#onIncoming(message);
        return;
      case HeadType.MESSAGE_NOTIFICATION:
        this.#onNotification(message);
        return;
      case HeadType.RECEIPT: {
        const receipt = message.receipt && receiptEvent(message.receipt);
        if (receipt) this.#client.emit('receipt', receipt);
        return;
      }
      case HeadType.HEART_BEAT:
        return;
      default:
        this.#log.debug({ type: message.type }, 'ignoring unknown message type');
    }
  }

  /**
   * The connection (or the attempt to make one) is gone, for `reason`: reconnect, or end.
   * `final`: the transport knows another attempt would be refused again.
   */
  down(reason: SwitchboardError, retryAfterMs: number, final: boolean): void {
    clearTimeout(this.#loginTimer);
    const client = this.#client;
    if (final) client.final = true;
    client.sessionId = '';
    client.stopTimer();
    const ends = client.final || !this.#transport.reconnects;
    // Sent but unanswered: the server may or may not have taken them. An ack client's chat
    // messages go again after the reconnect (deduplicated by msg_id); anything else cannot be
    // known. When the server ends the client for good (a protocol error: one of them is the
    // frame at fault), they fail with the server's reason.
    const closedBy = ends && FINAL_CLOSE_CODES.has(reason.code);
    this.#pending.connectionLost(ends, () => (closedBy ? reason : new SwitchboardError('SB_ERR_CLIENT_CONNECTION_LOST', undefined, { cause: reason })));
    if (client.loggingOut) {
      client.close(undefined);
      return;
    }
    if (ends) {
      this.#finalDisconnect(reason);
      return;
    }
    const { attempt, delay } = this.#transport.nextDelay(retryAfterMs);
    this.#log.info({ attempt, delay, code: reason.code, reason: reason.message }, delay === null ? 'giving up' : 'reconnecting');
    client.emit('disconnect', { reason, retryInMs: delay });
    // A listener may have closed the client: closed is final.
    if (client.status === 'closed') return;
    if (delay === null) {
      client.giveUp(reason);
      return;
    }
    client.setStatus('reconnecting');
    this.#transport.reconnectIn(delay);
    if (this.#pending.size > 0) client.startTimer();
  }

  /** Ends the client for `reason`, after which no attempt is made. */
  #finalDisconnect(reason: SwitchboardError): void {
    this.#client.emit('disconnect', { reason, retryInMs: null });
    this.#client.giveUp(reason);
  }

  #onLoginResponse(message: ImMessage): void {
    const client = this.#client;
    const body = message.loginResponse;
    if (uint64Number(message.sequence) !== this.#loginSequence) return;
    clearTimeout(this.#loginTimer);
    if (!body?.result) {
      const err = serverError(body?.errorCode, body?.info, 'login refused', 'SB_ERR_CLIENT_LOGIN_FAILED');
      this.#log.warn({ code: err.code, reason: err.message }, 'login refused');
      const refreshable = this.#settings.endpoint !== undefined && REFRESHED_LOGIN_CODES.has(err.code) && ++this.#tokenRefusals === 1;
      if (RETRIED_LOGIN_CODES.has(err.code) || refreshable) {
        // The server closes the connection behind the refusal: the reconnect, after a backoff,
        // logs in again (through the gate, when there is one, which hands out workers that can serve).
        this.#transport.drop(err);
        return;
      }
      this.#finalDisconnect(err);
      return;
    }
    client.sessionId = message.sessionId ?? '';
    this.#tokenRefusals = 0;
    this.#transport.loggedIn();
    const serverHeartbeat = body.heartbeatIntervalMs ?? 0;
    if (serverHeartbeat > 0 && this.#explicitHeartbeat === undefined) this.#heartbeatMs = serverHeartbeat;
    const syncFrom = uint64Number(body.syncFrom);
    const epoch = uint64Number(body.inboxEpoch);
    const requested = this.#lastSeq ?? 0;
    const previousEpoch = this.#inboxEpoch;
    // The replay starts after syncFrom, whatever we asked for: past a gap it is higher, and
    // after a reset (an inbox that lost its messages or forked) it is lower. Keeping the old
    // position, which is also what drops resent messages, would drop the new seq 1, 2, ... as
    // already processed: it is forgotten.
    // A device that had a position is told where it is now (a new epoch included, e.g. the first
    // one a server tells it); one without a position gets it with its first delivery.
    // A first login with noReplay starts at the head: saved at once, or an app restarted before its
    // first delivery would ask for no replay again and skip what came in between.
    const moved = this.#lastSeq !== undefined ? this.#lastSeq !== syncFrom || (epoch !== 0 && epoch !== previousEpoch) : this.#noReplay;
    this.#lastSeq = syncFrom;
    if (epoch !== 0) this.#inboxEpoch = epoch;
    if (moved) this.#settings.savePosition?.(syncFrom, this.#inboxEpoch);
    if (body.reset) {
      this.#log.warn({ requested, previousEpoch, from: syncFrom, epoch }, 'inbox reset: position forgotten');
      client.emit('reset', { requested, previousEpoch, from: syncFrom, epoch });
    } else if (body.gap) {
      client.emit('gap', { requested, from: syncFrom });
    }
    client.setStatus('ready');
    // A request made before the login started the timer at the interval then known: restart it
    // at the one just told, or the server closes the connection for idleness.
    client.stopTimer();
    client.startTimer();
    this.#pending.flushUnsent((frame) => this.#transport.write(frame));
    client.emit('login', client.sessionId);
    client.loggedIn();
  }

  #onIncoming(message: ImMessage): void {
    const m = message.messageRequest;
    if (!m) return;
    if (m.group) {
      this.#onGroupIncoming(m.group, m);
      return;
    }
    const seq = uint64Number(m.seq);
    if (seq > 0) {
      // A resend of something already processed: acknowledge again, show nothing.
      if (this.#lastSeq !== undefined && seq <= this.#lastSeq) {
        this.#scheduleAck();
        return;
      }
    }
    if (m.event) {
      // An event of this user's inbox (a read mark made on another device, a recall, an edit): never a message.
      const event = parseInboxEvent(m.event);
      if (event?.type === 'read') this.#client.emit('read', { peer: event.peer, group: event.group, seq: event.seq, originDevice: m.originDevice ?? '', eventSeq: seq, storedAt: m.storedAt ? uint64Number(m.storedAt) : undefined });
      else if (event?.type === 'recall') this.#client.emit('recall', { peer: event.peer, seq: event.seq, msgId: event.msgId, from: m.from ?? '', eventSeq: seq });
      else if (event?.type === 'edit') this.#client.emit('edit', { peer: event.peer, seq: event.seq, msgId: event.msgId, from: m.from ?? '', content: m.content ?? '', json: m.json ?? '', editedAt: m.storedAt ? uint64Number(m.storedAt) : undefined, eventSeq: seq });
      else this.#log.debug({ seq }, 'ignoring an inbox event of a kind this client does not know');
    } else {
      this.#client.emit('message', incomingMessage(m, this.#uid));
    }
    // Processed once the listeners returned: that is the position to acknowledge and keep.
    if (seq > 0) {
      this.#lastSeq = seq;
      this.#settings.savePosition?.(seq, this.#inboxEpoch);
      this.#scheduleAck();
    }
  }

  /** One cumulative MESSAGE_ACK per tick, for the highest sequence processed. */
  #scheduleAck(): void {
    if (!this.#acks || this.#ackScheduled) return;
    this.#ackScheduled = true;
    process.nextTick(() => {
      this.#ackScheduled = false;
      if (this.#client.status !== 'ready' || this.#lastSeq === undefined) return;
      this.#transport.write(encodeMessageFrame({ type: HeadType.MESSAGE_ACK, sessionId: this.#client.sessionId, ack: { seq: this.#lastSeq } }));
    });
  }

  /**
   * A group delivery: dropped when its (group, seq) was processed (a replay, this client's own
   * message), else emitted; either way acknowledged per group once the listeners returned.
   */
  #onGroupIncoming(group: string, m: NonNullable<ImMessage['messageRequest']>): void {
    const seq = uint64Number(m.seq);
    const positions = this.#groupPositions;
    if (seq > 0 && positions.seen(group, seq)) {
      // Own messages above the position move it; below it, the ack may have been lost: again.
      if (positions.seq(group) !== undefined && seq <= positions.seq(group)!) positions.reack(group);
      else this.#groupProcessed(group, seq);
      this.#scheduleGroupAcks();
      return;
    }
    const entry = groupEntryOf(group, m);
    if (entry === undefined) this.#log.warn({ group, seq }, 'ignoring a group event that is not an event object');
    else if ('event' in entry) this.#client.emit('groupEvent', entry);
    else this.#client.emit('groupMessage', entry);
    if (seq > 0) this.#groupProcessed(group, seq);
  }

  /** Processed: the group's position moves (and is saved), and its ack goes with the next batch. */
  #groupProcessed(group: string, seq: number): void {
    const position = this.#groupPositions.processed(group, seq);
    this.#settings.saveGroupPosition?.(group, position);
    this.#scheduleGroupAcks();
  }

  /** This client's own message is `seq` of `group` (its response): processed, never shown. */
  sentToGroup(group: string, seq: number): void {
    const moved = this.#groupPositions.sent(group, seq);
    if (moved === undefined) return;
    this.#settings.saveGroupPosition?.(group, moved);
    this.#scheduleGroupAcks();
  }

  /**
   * One MESSAGE_ACK per group whose position moved, per tick: cumulative, for the highest seq
   * processed. Only after a login with groups (an ack with `group` means nothing to the server otherwise).
   */
  #scheduleGroupAcks(): void {
    if (!this.#groups || this.#groupAckScheduled) return;
    this.#groupAckScheduled = true;
    process.nextTick(() => {
      this.#groupAckScheduled = false;
      // Not logged in: they wait, and go with the next acks (the login's replay brings some).
      if (this.#client.status !== 'ready') return;
      for (const [group, seq] of this.#groupPositions.takeAcks()) {
        this.#transport.write(encodeMessageFrame({ type: HeadType.MESSAGE_ACK, sessionId: this.#client.sessionId, ack: { seq, group } }));
      }
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
      if (FINAL_CLOSE_CODES.has(closing.code)) this.#client.final = true;
      this.#transport.closingFor(serverError(closing.code, closing.reason, 'the server closed the connection'));
      this.#client.emit('closing', closing);
      return;
    }
    this.#client.emit('notification', parsed);
  }
}

/** The server's error code as a SwitchboardError (`otherwise` for a code this client does not know). */
export function serverError(errorCode: string | undefined, info: string | undefined, fallback: string, otherwise: ErrorCode = 'SB_ERR_INTERNAL'): SwitchboardError {
  const code = errorCode && isErrorCode(errorCode) ? errorCode : otherwise;
  return new SwitchboardError(code, info || fallback);
}
