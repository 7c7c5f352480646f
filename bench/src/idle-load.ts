// The driver side of `bench idle`: opens `connections` connections, logs each in, then holds
// them doing nothing but heartbeat, so the coordinator can read what an idle session costs the
// worker. One timer spreads the heartbeats evenly over the interval (a timer per connection
// would make the driver, not the server, the thing that grows with the connection count).

import net from 'node:net';
import { decodeMessage, encodeMessageFrame } from '../../src/protocol/codec.js';
import { FrameDecoder } from '../../src/protocol/frame.js';
import { loginRequestFrame } from './client-frames.js';
import { HeadType } from '../../src/protocol/types.js';
import type { Endpoint } from './chat-load.js';
import { Latency } from './latency.js';
import { PhaseClock } from './timeline.js';
import { emptyScan, scanMessage } from './wire-scan.js';
import { sleep } from '../../testkit/wait.js';

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
  const offset = o.uidOffset ?? 0;
  const loginTimeoutMs = o.loginTimeoutMs ?? 30_000;
  const n = o.endpoints.length;

  const phases = new PhaseClock<IdleSecond['phase']>('connect');
  /** False once the run ends: closes from then on are ours. */
  let holding = true;
  let open = 0;
  let connected = 0;
  let replies = 0;
  let measuredReplies = 0;
  let errors = 0;
  let closedByServer = 0;
  const failedLogins: Record<string, number> = {};
  const closedCodes: Record<string, number> = {};
  const count = (into: Record<string, number>, code: string) => {
    into[code] = (into[code] ?? 0) + 1;
    errors++;
  };
  const loginLatency = new Latency();
  const heartbeatLatency = new Latency();
  const scan = emptyScan();

  const onFrame = (conn: Held, body: Buffer) => {
    scanMessage(body, scan);
    if (scan.type === HeadType.HEART_BEAT) {
      replies++;
      if (phases.current === 'measure') measuredReplies++;
      if (conn.pingAt) heartbeatLatency.add(performance.now() - conn.pingAt);
      conn.pingAt = 0;
    } else if (scan.type === HeadType.LOGIN_RESPONSE) {
      conn.onLogin?.(scan.result, scan.errorCode);
    } else if (scan.type === HeadType.MESSAGE_NOTIFICATION) {
      // Rare (the last frame before a close): a full decode is affordable here.
      const json = decodeMessage(body).notification?.json;
      const parsed = json ? (JSON.parse(json) as { type?: number; data?: { code?: string } }) : undefined;
      if (parsed?.type === CLOSING) conn.closing = parsed.data?.code ?? 'CLOSING';
    }
  };

  /** Connects and logs in connection `i`; resolves with it held, or undefined (counted as failed). */
  const openOne = (i: number): Promise<Held | undefined> =>
    new Promise((resolve) => {
      const uid = `idle${offset + i}`;
      const { host, port } = o.endpoints[i % n]!;
      const localAddress = o.localAddresses?.length ? o.localAddresses[i % o.localAddresses.length] : undefined;
      const socket = net.connect({ host, port, noDelay: true, ...(localAddress ? { localAddress } : {}) });
      const conn: Held = { socket, pingAt: 0, closing: '', onLogin: undefined };
      const decoder = new FrameDecoder((body) => onFrame(conn, body), { maxFrameLength: 1 << 20 });
      let state: 'connecting' | 'login' | 'held' | 'failed' = 'connecting';
      let socketError = '';
      let timer: NodeJS.Timeout | undefined;
      const settle = (failure: string | undefined) => {
        if (state === 'held' || state === 'failed') return;
        clearTimeout(timer);
        conn.onLogin = undefined;
        if (failure === undefined) {
          state = 'held';
          resolve(conn);
        } else {
          state = 'failed';
          count(failedLogins, failure);
          socket.destroy();
          resolve(undefined);
        }
      };
      socket.on('data', (chunk: Buffer) => {
        try {
          decoder.push(chunk);
        } catch (err) {
          conn.closing ||= (err as { code?: string }).code ?? 'BAD_FRAME';
          socket.destroy();
        }
      });
      socket.on('error', (err: NodeJS.ErrnoException) => {
        socketError ||= err.code ?? 'SOCKET_ERROR';
      });
      socket.once('connect', () => {
        connected++;
        open++;
        state = 'login';
        const sentAt = performance.now();
        conn.onLogin = (ok, code) => {
          loginLatency.add(performance.now() - sentAt);
          settle(ok ? undefined : code || 'SB_ERR_UNKNOWN');
        };
        timer = setTimeout(() => settle('LOGIN_TIMEOUT'), loginTimeoutMs);
        socket.write(loginRequestFrame(uid, o.token(uid)));
      });
      socket.once('close', () => {
        if (state !== 'connecting') open--;
        if (state === 'held') {
          if (!holding) return;
          closedByServer++;
          count(closedCodes, conn.closing || socketError || 'CONNECTION_CLOSED');
        } else {
          settle(conn.closing || socketError || 'CONNECTION_CLOSED');
        }
      });
    });

  let seconds = 0;
  let lastReplies = 0;
  let lastErrors = 0;
  const reportSecond = () => {
    o.onSecond?.({ t: ++seconds, phase: phases.second(), connections: open, heartbeats: replies - lastReplies, errors: errors - lastErrors });
    lastReplies = replies;
    lastErrors = errors;
  };
  const secondTimer = setInterval(reportSecond, 1000);

  const held: Held[] = [];
  const connectStart = performance.now();
  let next = 0;
  const worker = async () => {
    while (next < o.connections) {
      const conn = await openOne(next++);
      if (conn) held.push(conn);
    }
  };
  await Promise.all(Array.from({ length: Math.min(o.concurrency ?? 200, o.connections) }, worker));
  const connectSeconds = (performance.now() - connectStart) / 1000;
  const loggedIn = held.length;
  // The coordinator learns the final count before the barrier, not up to a second after it.
  reportSecond();
  secondTimer.refresh();
  await o.ready?.();

  // The k-th heartbeat (from 0) is due at t0 + k * spacing and goes to connection k mod N.
  phases.enter(o.warmupMs > 0 ? 'warmup' : 'measure');
  const heartbeat = encodeMessageFrame({ type: HeadType.HEART_BEAT, sequence: 1, heartBeat: { seq: 1 } });
  const spacing = o.heartbeatMs / Math.max(1, loggedIn);
  const t0 = performance.now();
  let sent = 0;
  let heartbeatsSent = 0;
  const ticker = setInterval(
    () => {
      const due = Math.floor((performance.now() - t0) / spacing) + 1;
      for (; sent < due; sent++) {
        const conn = held[sent % loggedIn]!;
        if (conn.socket.destroyed) continue;
        conn.pingAt ||= performance.now();
        conn.socket.write(heartbeat);
        heartbeatsSent++;
      }
    },
    Math.min(TICK_MS, o.heartbeatMs),
  );
  if (loggedIn === 0) clearInterval(ticker);

  await sleep(o.warmupMs);
  phases.enter('measure');
  const measureStart = performance.now();
  const startReplies = measuredReplies;
  await sleep(o.durationMs);
  const measuredSeconds = (performance.now() - measureStart) / 1000;
  const result: IdleLoadResult = {
    connected,
    loggedIn,
    failedLogins,
    closedByServer,
    closedCodes,
    connectSeconds,
    heartbeatsSent,
    heartbeatReplies: replies,
    measuredReplies: measuredReplies - startReplies,
    measuredSeconds,
    loginLatency: loginLatency.encode(),
    heartbeatLatency: heartbeatLatency.encode(),
  };
  holding = false;
  clearInterval(ticker);
  clearInterval(secondTimer);
  // A reset leaves no TIME_WAIT behind: the next run finds the driver's ports free.
  for (const conn of held) conn.socket.resetAndDestroy();
  return result;
}
