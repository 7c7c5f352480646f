// An ImClient's connection to a worker, attempt after attempt: where to dial (the fixed endpoint,
// or endpoint() asked before every attempt), the socket and its frames, why the connection went
// (its drop reason, or what was seen on the socket), and the next attempt after the retry
// strategy's delay. Each attempt has an epoch (see net/dial.ts): once the next one begins, or
// close(), the old one's callbacks are ignored. What is said on the connection (the login, the
// requests) is the client's, not this file's.

import type net from 'node:net';
import tls from 'node:tls';
import { SwitchboardError, isSwitchboardError } from '../errors.js';
import { isTlsError } from '../net/tls-errors.js';
import type { Logger } from '../log.js';
import { dialFramed } from '../net/dial.js';
import { writePerTick } from '../net/write-per-tick.js';
import type { ClientSettings, Endpoint, RetryStrategy } from './options.js';

/**
 * Gate refusals that another attempt would only repeat: a wrong password (each retry counts as
 * a failed login toward the gate's lock-out), a malformed request, a wrong gate URL.
 */
const FINAL_ENDPOINT_CODES: ReadonlySet<string> = new Set(['SB_ERR_LOGIN_FAILED', 'SB_ERR_BAD_REQUEST', 'SB_ERR_BAD_USERNAME', 'SB_ERR_BAD_PASSWORD', 'SB_ERR_NOT_FOUND', 'SB_ERR_REFRESH_INVALID', 'SB_ERR_REFRESH_REUSED']);

/** What the client hears of the current attempt. */
export interface TransportHandlers {
  /** The socket connected to `where`: the client logs in with its token. */
  connected(where: Endpoint): void;
  /** A frame from the server: a slice, valid until the handler returns. */
  frame(body: Buffer): void;
  /**
   * The attempt is over, and why: its socket closed, or endpoint() failed. `final`: a refusal
   * that another attempt would repeat (FINAL_ENDPOINT_CODES). `retryAfterMs`: the wait an
   * endpoint() rejection asked for (the gate's 429), else 0.
   */
  down(reason: SwitchboardError, retryAfterMs: number, final: boolean): void;
}

export class Transport {
  readonly #settings: ClientSettings;
  readonly #retry: RetryStrategy | false;
  readonly #log: Logger;
  readonly #on: TransportHandlers;
  #epoch = 0;
  /** Attempts since the last login. */
  #attempt = 0;
  #socket: net.Socket | undefined;
  #reconnectTimer: NodeJS.Timeout | undefined;
  /** When the current connection connected or last received a frame. */
  #lastInboundAt = 0;
  /** Why the current connection is going: a CLOSING from the server, a dead server. */
  #dropReason: SwitchboardError | undefined;
  /** The code the last connection ended with: endpoint()'s hint (a token refused as expired is refreshed). */
  #lastReason: string | undefined;
  /** The current socket's error, if it had one. */
  #socketError: Error | undefined;
  /** The current socket connected. */
  #connected = false;
  /** The CA of settings.tls, made once for every TLS attempt. */
  #tlsContext: tls.SecureContext | undefined;

  constructor(settings: ClientSettings, retry: RetryStrategy | false, log: Logger, on: TransportHandlers) {
    this.#settings = settings;
    this.#retry = retry;
    this.#log = log;
    this.#on = on;
    const ca = settings.tls?.ca;
    if (ca !== undefined) {
      try {
        this.#tlsContext = tls.createSecureContext({ ca });
      } catch (err) {
        throw new SwitchboardError('SB_ERR_TLS_FILES', `the tls.ca option is not a PEM certificate: ${(err as Error).message}`, { cause: err });
      }
    }
  }

  /** False with `retryStrategy: false`: a lost connection is the end. */
  get reconnects(): boolean {
    return this.#retry !== false;
  }

  get lastInboundAt(): number {
    return this.#lastInboundAt;
  }

  /** Begins an attempt: asks endpoint() where to, when there is one, and dials. */
  open(): void {
    const epoch = ++this.#epoch;
    const endpoint = this.#settings.endpoint;
    if (!endpoint) {
      this.#dial(epoch, { host: this.#settings.host ?? '127.0.0.1', port: this.#settings.port ?? 9000, token: this.#settings.token ?? '', tls: this.#settings.tls !== undefined });
      return;
    }
    const hint = { reason: this.#lastReason };
    this.#lastReason = undefined;
    endpoint(hint).then(
      (where) => {
        if (epoch === this.#epoch) this.#dial(epoch, where);
      },
      (err: unknown) => {
        if (epoch !== this.#epoch) return;
        this.#log.warn({ err }, 'no endpoint');
        const reason = isSwitchboardError(err) ? err : new SwitchboardError('SB_ERR_CLIENT_CONNECT_FAILED', `no endpoint: ${String((err as Error)?.message ?? err)}`, { cause: err });
        const retryAfterMs = (err as { retryAfterMs?: unknown }).retryAfterMs;
        this.#on.down(reason, typeof retryAfterMs === 'number' ? retryAfterMs : 0, FINAL_ENDPOINT_CODES.has(reason.code));
      },
    );
  }

  /** Writes on the current connection (one write per tick); nothing while there is none. */
  write(frame: Buffer): void {
    if (this.#socket) writePerTick(this.#socket, frame);
  }

  /** Ends the current connection: the 'down' that follows gives `reason`. */
  drop(reason: SwitchboardError): void {
    this.#dropReason = reason;
    this.#socket?.destroy();
  }

  /** The server announced it closes the current connection (CLOSING): the 'down' that follows gives `reason`. */
  closingFor(reason: SwitchboardError): void {
    this.#dropReason = reason;
  }

  /** A login went through: the next loss starts the backoff from its first step. */
  loggedIn(): void {
    this.#attempt = 0;
  }

  /**
   * Counts an attempt and returns the retry strategy's delay before it, at least `retryAfterMs`,
   * or null when the strategy gives up (or there is none).
   */
  nextDelay(retryAfterMs: number): { attempt: number; delay: number | null } {
    const attempt = ++this.#attempt;
    const delay = this.#retry === false ? null : this.#retry(attempt);
    return { attempt, delay: delay === null ? null : Math.max(delay, retryAfterMs) };
  }

  /** Begins the next attempt in `delayMs`. */
  reconnectIn(delayMs: number): void {
    this.#reconnectTimer = setTimeout(() => this.open(), delayMs);
  }

  /** Ends the current attempt and any planned one: none of their callbacks runs again. */
  close(): void {
    this.#epoch++;
    clearTimeout(this.#reconnectTimer);
    this.#socket?.destroy();
    this.#socket = undefined;
  }

  #dial(epoch: number, where: Endpoint): void {
    this.#dropReason = undefined;
    this.#socketError = undefined;
    this.#connected = false;
    const target = { host: where.host, port: where.port, ...(where.tls ? { tls: { context: this.#tlsContext, servername: this.#settings.tls?.servername } } : {}) };
    const socket = dialFramed(target, this.#settings.maxFrameLength, () => epoch === this.#epoch, {
      connect: () => {
        this.#connected = true;
        this.#lastInboundAt = Date.now();
        this.#on.connected(where);
      },
      frame: (body) => {
        this.#lastInboundAt = Date.now();
        this.#on.frame(body);
      },
      pushFailed: (err) => {
        // A throwing 'message' listener is the application's bug, not a bad frame: let it surface.
        if (!isSwitchboardError(err)) throw err;
        this.#log.warn({ err }, 'bad frame from server');
        this.#dropReason = new SwitchboardError('SB_ERR_CLIENT_CONNECTION_LOST', `bad frame from the server: ${err.code} ${err.message}`, { cause: err });
        socket.destroy();
      },
      error: (err) => {
        this.#log.debug({ err }, 'socket error');
        this.#socketError = err;
      },
      close: () => {
        this.#socket = undefined;
        const reason = this.#closeReason(where);
        this.#lastReason = reason.code;
        this.#on.down(reason, 0, false);
      },
    });
    this.#socket = socket;
  }

  /** Why the current socket closed, from what was seen on it. */
  #closeReason(where: Endpoint): SwitchboardError {
    if (this.#dropReason) return this.#dropReason;
    const err = this.#socketError;
    // A certificate not verified, a wrong name, a server that does not speak TLS: said as such.
    if (where.tls && isTlsError(err)) return new SwitchboardError('SB_ERR_TLS_HANDSHAKE', `TLS with ${where.host}:${where.port} failed: ${err!.message}`, { cause: err });
    // Node's message names the address already: "connect ECONNREFUSED 127.0.0.1:9999".
    if (!this.#connected) return new SwitchboardError('SB_ERR_CLIENT_CONNECT_FAILED', err?.message ?? `could not connect to ${where.host}:${where.port}`, { cause: err });
    return new SwitchboardError('SB_ERR_CLIENT_CONNECTION_LOST', err ? `connection lost: ${err.message}` : 'the server closed the connection', { cause: err });
  }
}
