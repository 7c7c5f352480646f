// The driver side of `bench idle`: opens `connections` connections, logs each in, then holds
// them doing nothing but heartbeat, so the coordinator can read what an idle session costs the
// worker. One timer spreads the heartbeats evenly over the interval (a timer per connection
// would make the driver, not the server, the thing that grows with the connection count).

import type net from 'node:net';
import { decodeMessage, encodeMessageFrame } from '../../src/protocol/codec.js';
import { loginRequestFrame } from './client-frames.js';
import { HeadType } from '../../src/protocol/types.js';
import type { Endpoint } from './chat-load.js';
import { Latency } from './latency.js';
import { LoadClock } from './timeline.js';
import { emptyScan, scanMessage } from './wire-scan.js';
import { dialFrames } from '../../testkit/raw-client.js';

export interface IdleLoadOptions {
  /** The workers: connection N uses endpoint N mod count. */
  endpoints: Endpoint[];
  /**
   * Local addresses the driver's sockets bind to, round-robin (each driver its own, for its own
   * ports). Several for many sockets: bind() with port 0 searches the address's ports and slows
   * as they fill up (the odd half of the range first, then the rest).
   */
  localAddresses?: string[];
  connections: number;
  /** Users are idle<N> for N from this offset (drivers of one run use disjoint ranges). */
  uidOffset?: number;
  /** Connections being opened and logged in at once (default 200): more overruns the accept backlog. */
  concurrency?: number;
  /** Every connection sends a HEART_BEAT this often once all are logged in. */
  heartbeatMs: number;
  warmupMs: number;
  durationMs: number;
  /** A login unanswered for this long counts as failed with LOGIN_TIMEOUT (default 30000). */
  loginTimeoutMs?: number;
  /** A login token for a user id. */
  token: (uid: string) => string;
  /** Called once every connection is logged in (or failed); holding starts when it resolves. */
  ready?: () => Promise<void>;
  /** Called about once a second, from the first connect on. */
  onSecond?: (second: IdleSecond) => void;
}

/** One second of a run, as a driver saw it. */
export interface IdleSecond {
  /** Seconds since the driver started connecting: 1, 2, ... (one of them cut short when all are logged in) */
  t: number;
  phase: 'connect' | 'warmup' | 'measure';
  /** Connections open at the end of the second. */
  connections: number;
  /** Heartbeat echoes received in the second. */
  heartbeats: number;
  /** Failed connects or logins, and held connections the server closed, in the second. */
  errors: number;
}

/** What one driver measured; histograms encoded so they can be merged across drivers. */
export interface IdleLoadResult {
  /** TCP connections established. */
  connected: number;
  loggedIn: number;
  /** Connections that did not end up logged in, by code: the refusal's SB_ERR_..., a socket error code, LOGIN_TIMEOUT or CONNECTION_CLOSED. */
  failedLogins: Record<string, number>;
  /** Logged-in connections the server closed before the end of the run... */
  closedByServer: number;
  /** ...by the code of its CLOSING notification (CONNECTION_CLOSED without one). */
  closedCodes: Record<string, number>;
  /** Seconds from the first connect to the last login settled. */
  connectSeconds: number;
  heartbeatsSent: number;
  heartbeatReplies: number;
  /** Echoes received while measuring, and how long that was. */
  measuredReplies: number;
  measuredSeconds: number;
  /** LOGIN_REQUEST → LOGIN_RESPONSE, and HEART_BEAT → its echo (encoded, see Latency.decode). */
  loginLatency: string;
  heartbeatLatency: string;
}

/** CLOSING notifications carry this `type` in their JSON (PROTOCOL.md §7). */
const CLOSING = 90;
/** Heartbeat timer period: fine enough that a 15k-connection cycle stays smooth. */
const TICK_MS = 10;

/** A held connection. Kept small: the driver holds tens of thousands. */
interface Held {
  socket: net.Socket;
  /** When the heartbeat awaiting its echo was sent (performance.now()), else 0. */
  pingAt: number;
  /** The code of a CLOSING notification the server sent, if any. */
  closing: string;
  /** Set while logging in: the LOGIN_RESPONSE's result. */
  onLogin: ((ok: boolean, code: string) => void) | undefined;
}

export async function runIdleLoad(o: IdleLoadOptions): Promise<IdleLoadResult> {
  if (!(o.heartbeatMs > 0)) throw new Error('heartbeatMs must be positive');
  const run = new IdleRun(o);
  run.clock.start();
  const connectStart = performance.now();
  const held = await run.openAll();
  const connectSeconds = (performance.now() - connectStart) / 1000;
  // The coordinator learns the final count before the barrier, not up to a second after it.
  run.clock.reportNow();
  await o.ready?.();

  run.clock.enter(o.warmupMs > 0 ? 'warmup' : 'measure');
  const ticker = run.heartbeat(held);
  let startReplies = 0;
  const { from, to } = await run.clock.measure(o.warmupMs, o.durationMs, () => (startReplies = run.measuredReplies));
  const result: IdleLoadResult = {
    connected: run.connected,
    loggedIn: held.length,
    failedLogins: run.failedLogins,
    closedByServer: run.closedByServer,
    closedCodes: run.closedCodes,
    connectSeconds,
    heartbeatsSent: run.heartbeatsSent,
    heartbeatReplies: run.replies,
    measuredReplies: run.measuredReplies - startReplies,
    measuredSeconds: (to - from) / 1000,
    loginLatency: run.loginLatency.encode(),
    heartbeatLatency: run.heartbeatLatency.encode(),
  };
  run.holding = false;
  clearInterval(ticker);
  run.clock.end(false);
  // A reset leaves no TIME_WAIT behind: the next run finds the driver's ports free.
  for (const conn of held) conn.socket.resetAndDestroy();
  return result;
}

/** One driver's idle load while it runs: its connections and what they counted. */
class IdleRun {
  readonly clock: LoadClock<IdleSecond['phase']>;
  /** False once the run ends: closes from then on are ours. */
  holding = true;
  open = 0;
  connected = 0;
  replies = 0;
  measuredReplies = 0;
  errors = 0;
  closedByServer = 0;
  heartbeatsSent = 0;
  readonly failedLogins: Record<string, number> = {};
  readonly closedCodes: Record<string, number> = {};
  readonly loginLatency = new Latency();
  readonly heartbeatLatency = new Latency();
  readonly #scan = emptyScan();

  constructor(readonly o: IdleLoadOptions) {
    let lastReplies = 0;
    let lastErrors = 0;
    this.clock = new LoadClock<IdleSecond['phase']>('connect', (phase, t) => {
      o.onSecond?.({ t, phase, connections: this.open, heartbeats: this.replies - lastReplies, errors: this.errors - lastErrors });
      lastReplies = this.replies;
      lastErrors = this.errors;
    });
  }

  count(into: Record<string, number>, code: string): void {
    into[code] = (into[code] ?? 0) + 1;
    this.errors++;
  }

  /** Opens and logs in every connection, `concurrency` at a time; resolves those held. */
  async openAll(): Promise<Held[]> {
    const { o } = this;
    const held: Held[] = [];
    let next = 0;
    const worker = async () => {
      while (next < o.connections) {
        const conn = await this.#openOne(next++);
        if (conn) held.push(conn);
      }
    };
    await Promise.all(Array.from({ length: Math.min(o.concurrency ?? 200, o.connections) }, worker));
    return held;
  }

  /** The k-th heartbeat (from 0) is due at t0 + k * spacing and goes to connection k mod N. Returns the timer. */
  heartbeat(held: Held[]): NodeJS.Timeout {
    const heartbeat = encodeMessageFrame({ type: HeadType.HEART_BEAT, sequence: 1, heartBeat: { seq: 1 } });
    const spacing = this.o.heartbeatMs / Math.max(1, held.length);
    const t0 = performance.now();
    let sent = 0;
    const ticker = setInterval(
      () => {
        const due = Math.floor((performance.now() - t0) / spacing) + 1;
        for (; sent < due; sent++) {
          const conn = held[sent % held.length]!;
          if (conn.socket.destroyed) continue;
          conn.pingAt ||= performance.now();
          conn.socket.write(heartbeat);
          this.heartbeatsSent++;
        }
      },
      Math.min(TICK_MS, this.o.heartbeatMs),
    );
    if (held.length === 0) clearInterval(ticker);
    return ticker;
  }

  #onFrame(conn: Held, body: Buffer): void {
    const scan = this.#scan;
    scanMessage(body, scan);
    if (scan.type === HeadType.HEART_BEAT) {
      this.replies++;
      if (this.clock.current === 'measure') this.measuredReplies++;
      if (conn.pingAt) this.heartbeatLatency.add(performance.now() - conn.pingAt);
      conn.pingAt = 0;
    } else if (scan.type === HeadType.LOGIN_RESPONSE) {
      conn.onLogin?.(scan.result, scan.errorCode);
    } else if (scan.type === HeadType.MESSAGE_NOTIFICATION) {
      // Rare (the last frame before a close): a full decode is affordable here.
      const json = decodeMessage(body).notification?.json;
      const parsed = json ? (JSON.parse(json) as { type?: number; data?: { code?: string } }) : undefined;
      if (parsed?.type === CLOSING) conn.closing = parsed.data?.code ?? 'CLOSING';
    }
  }

  /** Connects and logs in connection `i`; resolves with it held, or undefined (counted as failed). */
  #openOne(i: number): Promise<Held | undefined> {
    const { o } = this;
    return new Promise((resolve) => {
      const uid = `idle${(o.uidOffset ?? 0) + i}`;
      const localAddress = o.localAddresses?.length ? o.localAddresses[i % o.localAddresses.length] : undefined;
      const socket = dialFrames(
        { ...o.endpoints[i % o.endpoints.length]!, ...(localAddress ? { localAddress } : {}) },
        {
          onFrame: (body) => this.#onFrame(conn, body),
          onBadFrame: (err) => {
            conn.closing ||= (err as { code?: string }).code ?? 'BAD_FRAME';
          },
        },
      );
      const conn: Held = { socket, pingAt: 0, closing: '', onLogin: undefined };
      let state: 'connecting' | 'login' | 'held' | 'failed' = 'connecting';
      let socketError = '';
      let timer: NodeJS.Timeout | undefined;
      const settle = (failure: string | undefined) => {
        if (state === 'held' || state === 'failed') return;
        clearTimeout(timer);
        conn.onLogin = undefined;
        state = failure === undefined ? 'held' : 'failed';
        if (failure !== undefined) {
          this.count(this.failedLogins, failure);
          socket.destroy();
        }
        resolve(failure === undefined ? conn : undefined);
      };
      socket.on('error', (err: NodeJS.ErrnoException) => {
        socketError ||= err.code ?? 'SOCKET_ERROR';
      });
      socket.once('connect', () => {
        this.connected++;
        this.open++;
        state = 'login';
        const sentAt = performance.now();
        conn.onLogin = (ok, code) => {
          this.loginLatency.add(performance.now() - sentAt);
          settle(ok ? undefined : code || 'SB_ERR_UNKNOWN');
        };
        timer = setTimeout(() => settle('LOGIN_TIMEOUT'), o.loginTimeoutMs ?? 30_000);
        socket.write(loginRequestFrame(uid, o.token(uid)));
      });
      socket.once('close', () => {
        if (state !== 'connecting') this.open--;
        if (state !== 'held') return settle(conn.closing || socketError || 'CONNECTION_CLOSED');
        if (!this.holding) return;
        this.closedByServer++;
        this.count(this.closedCodes, conn.closing || socketError || 'CONNECTION_CLOSED');
      });
    });
  }
}
