// What an ImClient is given: where to connect and with which token, who it is, its timeouts and
// bounds, how it reconnects, where its inbox and group positions are kept, and whether it takes
// group deliveries and the copies of what its user sends from other devices. The defaults are applied in one place, clientSettings().

import { DEFAULT_MAX_FRAME_LENGTH } from '../protocol/frame.js';
import type { Logger } from '../log.js';

/** Returns the delay before reconnect attempt `attempt` (1, 2, ...), or null to give up. */
export type RetryStrategy = (attempt: number) => number | null;

/** Where to connect and with which token. */
export interface Endpoint {
  host: string;
  port: number;
  token: string;
  /** A TLS port (the gate said so): dialed over TLS with the client's `tls` settings. */
  tls?: boolean;
}

/** How the client checks a worker's TLS certificate. */
export interface ClientTls {
  /** PEM of the CA(s) the worker's certificate must be issued by; unset: Node's CA list. */
  ca?: string | Buffer;
  /** The name the certificate must carry; default the host dialed (an IP address is checked as one). */
  servername?: string;
}

/** What endpoint() is told of the attempt before: `reason`, the code the last connection ended (or its login was refused) with. */
export interface EndpointHint {
  reason?: string;
}

export interface ImClientOptions {
  /** Fixed endpoint; or give `endpoint` instead. */
  host?: string;
  port?: number;
  token?: string;
  /**
   * TLS: with the fixed endpoint, `port` is a TLS port; with `endpoint`, used for the endpoints
   * it marks `tls` (gateEndpoint: a worker's TLS port), which are dialed over TLS without it too.
   */
  tls?: ClientTls;
  /**
   * Asked before every connection attempt (e.g. gateEndpoint(): a login at the gate, which names
   * the least-loaded live worker): a client whose worker went away moves to another one.
   */
  endpoint?: (hint?: EndpointHint) => Promise<Endpoint>;
  uid: string;
  deviceId?: string;
  platform?: number;
  appVersion?: string;
  /**
   * How often to heartbeat. Default: the interval the server tells at login (50 s, as the
   * original clients, from a server that tells none), so a server whose operator shortened it
   * does not close this client as idle. Given, it is used as is. The connection is dropped
   * after 3 silent intervals.
   */
  heartbeatIntervalMs?: number;
  /** How long send(), login and logout wait for the server (a login unanswered that long drops the connection and is retried as after a lost one). Default 10 s. */
  requestTimeoutMs?: number;
  /** Sends waiting for a response or for the connection, together. Default 1000. */
  maxPendingRequests?: number;
  /**
   * The server's maximum frame length (`--max-frame-length`, default 65536): frames received are
   * checked against it, and a message that would not fit once sent or delivered is refused by
   * send() with SB_ERR_MESSAGE_TOO_LARGE before anything is written. Set it to the server's.
   */
  maxFrameLength?: number;
  /**
   * Default: capped exponential backoff with jitter, never giving up. False: no reconnect. An
   * `endpoint()` rejection carrying a numeric `retryAfterMs` (the gate's 429) is waited out.
   */
  retryStrategy?: RetryStrategy | false;
  /**
   * Acknowledge deliveries (MESSAGE_ACK) and replay from the last processed one; also what makes
   * the server deduplicate msg_ids, so that sends cut off by a reconnect can be resent. Default true.
   */
  acks?: boolean;
  /** Highest inbox sequence this device processed before (e.g. loaded from disk). */
  lastSeq?: number;
  /** The inbox epoch `lastSeq` belongs to, as savePosition gave it (0 or unset: unknown). */
  inboxEpoch?: number;
  /**
   * Called with the new position and the inbox epoch it belongs to after each processed
   * delivery, and when a login moves it (a gap, a reset) or tells a new epoch: persist both, and
   * pass them back as `lastSeq` and `inboxEpoch` to resume there.
   */
  savePosition?: (seq: number, epoch: number) => void;
  /**
   * Take group deliveries ('groupMessage', 'groupEvent'), acknowledged per group (the login's
   * `groups`). Implies `acks` (`acks: false` with it is refused, SB_ERR_CONFIG); sendToGroup()
   * needs it (the server takes group messages only from a login with groups). Default false:
   * the server sends this device nothing of its groups, as to an original client.
   */
  groups?: boolean;
  /**
   * Highest group seq this device processed per group before (e.g. loaded from disk), so that
   * what the server replays at or below it is dropped. The server keeps each device's position
   * too (its acks); this covers the acks lost with the last connection.
   */
  groupPositions?: Readonly<Record<string, number>>;
  /** Called with a group and its new position after each processed group delivery: persist it for `groupPositions`. */
  saveGroupPosition?: (group: string, seq: number) => void;
  /**
   * Take the copies of the messages this user sends from its other devices (the login's
   * `own_copies`): they are 'message' events with `own` set, `from` this user and `to` the peer,
   * in the inbox's order with the rest. Default false: the server passes over them for this
   * device, as for an original client. The copy of what this device sends never comes back.
   */
  ownCopies?: boolean;
  /**
   * A device with no position (no `lastSeq`) skips the replay of the inbox at its first login
   * (the login's `no_replay`): the server sets its position to the inbox head and sends only
   * what comes after. The app draws the chat list (conversations()) and pages history instead.
   * Later logins of this client replay from its position as usual. Default false.
   */
  noReplay?: boolean;
  /**
   * Take receipts ('receipt' events: "delivered" and "read") for the messages this user sends,
   * from any of its devices (the login's `receipts`). Sent only while the user's receipts
   * setting is on (the gate's /api/settings). Default false.
   */
  receipts?: boolean;
  /**
   * Take inbox events: 'recall' and 'edit' when a sender recalls or edits a message to this
   * user (the login's `inbox_events`). Without it the server passes over them for this device,
   * which still shows recalled messages as tombstones, and edited ones as edited, in later replays
   * and history pages. Default false.
   */
  inboxEvents?: boolean;
  log?: Logger;
}

/** The options with their defaults applied. */
export type ClientSettings = Required<Pick<ImClientOptions, 'heartbeatIntervalMs' | 'requestTimeoutMs' | 'maxPendingRequests' | 'maxFrameLength'>> & ImClientOptions;

export function clientSettings(options: ImClientOptions): ClientSettings {
  return {
    heartbeatIntervalMs: 50_000,
    requestTimeoutMs: 10_000,
    maxPendingRequests: 1000,
    maxFrameLength: DEFAULT_MAX_FRAME_LENGTH,
    ...options,
  };
}

/** Capped exponential backoff with jitter: attempt n waits between half and all of min(maxMs, baseMs·2^(n-1)). */
export function defaultRetryStrategy({ baseMs = 200, maxMs = 30_000 } = {}): RetryStrategy {
  return (attempt) => {
    const cap = Math.min(maxMs, baseMs * 2 ** Math.min(attempt - 1, 20));
    return Math.round(cap / 2 + Math.random() * (cap / 2));
  };
}
