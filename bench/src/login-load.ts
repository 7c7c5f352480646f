// The login load of `bench login-storm`. In a driver process: `loops` concurrent login cycles,
// each a fresh TCP connection to a worker (round-robin), a token LOGIN_REQUEST, its
// LOGIN_RESPONSE, then LOGOUT_REQUEST and the server's LOGOUT_RESPONSE and close: the path of
// every reconnecting client. In the coordinator: password logins through the HTTP gate, each
// followed by the same worker login with the token the gate issued.
//
// The server closes first (after the logout) so that TIME_WAIT lands on its side of each
// connection: at thousands of connects per second a client-side close would park every
// client port in TIME_WAIT for 60 s and use up a source address's ~28k ephemeral ports within
// seconds (EADDRNOTAVAIL). Source addresses are cycled as well (127.0.0.2-254, split between
// the drivers), so a 4-tuple in the server's TIME_WAIT comes round again only rarely.

import { loginRequestFrame } from './client-frames.js';
import { encodeMessageFrame } from '../../src/protocol/codec.js';
import { HeadType } from '../../src/protocol/types.js';
import { loginThroughGate, registerThroughGate } from '../../src/client/gate-login.js';
import { Latency } from './latency.js';
import { LoadClock, drain } from './timeline.js';
import { emptyScan, scanMessage } from './wire-scan.js';
import type { Endpoint } from './chat-load.js';
import type { TimelinePoint } from './report.js';
import { sleep } from '../../testkit/wait.js';
import { dialFrames } from '../../testkit/raw-client.js';

/** A login not answered and closed within this long is abandoned as TIMEOUT. */
export const ATTEMPT_TIMEOUT_MS = 10_000;
/** Uids each loop cycles through: ls<loop>, ls<loop + stride>, ... (tokens are minted once, up front). */
export const USERS_PER_LOOP = 16;
export const BENCH_DEVICE = 'bench';

export interface LoginAttempt {
  endpoint: Endpoint;
  uid: string;
  deviceId: string;
  token: string;
  localAddress?: string;
  timeoutMs: number;
}

export interface LoginOutcome {
  ok: boolean;
  /** Why the login failed: the SB_ERR_... of the LOGIN_RESPONSE, or the socket's error code. */
  code?: string;
  /** performance.now() when the LOGIN_RESPONSE arrived; 0 if it did not. */
  answeredAt: number;
  /** What went wrong after a successful login (during the logout), by code. */
  afterCode?: string;
}

const scan = emptyScan();

function errorCode(err: unknown): string {
  const e = err as { code?: unknown; cause?: { code?: unknown } };
  if (typeof e?.code === 'string') return e.code;
  if (typeof e?.cause?.code === 'string') return e.cause.code;
  return 'ERROR';
}

/**
 * One login cycle on a fresh connection: login, logout, and the server's close. Resolves (never
 * rejects) once the socket is closed, with what happened.
 */
export function loginOnce(a: LoginAttempt): Promise<LoginOutcome> {
  return new Promise((resolve) => {
    const out: LoginOutcome = { ok: false, answeredAt: 0 };
    let loggedOut = false;
    let socketCode: string | undefined;
    const socket = dialFrames(
      { ...a.endpoint, ...(a.localAddress ? { localAddress: a.localAddress } : {}) },
      {
        onFrame: (body) => {
          scanMessage(body, scan);
          if (scan.type === HeadType.LOGIN_RESPONSE && out.answeredAt === 0) {
            out.answeredAt = performance.now();
            out.ok = scan.result;
            if (!scan.result) out.code = scan.errorCode || 'SB_ERR_UNKNOWN';
            else socket.write(encodeMessageFrame({ type: HeadType.LOGOUT_REQUEST, sequence: 2 }));
          } else if (scan.type === HeadType.LOGOUT_RESPONSE) {
            loggedOut = true;
          }
        },
        onBadFrame: () => {
          socketCode ??= 'BAD_FRAME';
        },
      },
    );
    socket.on('error', (err) => {
      socketCode ??= errorCode(err);
    });
    const timer = setTimeout(() => {
      socketCode ??= 'TIMEOUT';
      socket.destroy();
    }, a.timeoutMs);
    socket.once('close', () => {
      clearTimeout(timer);
      if (out.answeredAt === 0) out.code = socketCode ?? 'CONNECTION_CLOSED';
      else if (out.ok && (socketCode || !loggedOut)) out.afterCode = socketCode ?? 'NO_LOGOUT_RESPONSE';
      resolve(out);
    });
    socket.write(loginRequestFrame(a.uid, a.token, { deviceId: a.deviceId }));
  });
}

export interface LoginLoadOptions {
  /** The workers: attempts go round-robin over them. */
  endpoints: Endpoint[];
  /** Source addresses, cycled per connection (none: the system's choice). */
  localAddresses?: string[];
  /** Concurrent login loops in this driver (open loop: attempts in flight at most). */
  loops: number;
  /** Global index of this driver's first loop, and the number of loops of all drivers: uids stay disjoint. */
  loopOffset: number;
  loopStride: number;
  /** Open loop: login attempts per second over this driver's loops. */
  rate?: number;
  warmupMs: number;
  durationMs: number;
  /** A login token for a uid. */
  token: (uid: string) => string;
  ready?: () => Promise<void>;
  onSecond?: (second: LoginSecond) => void;
}

/** One second of a run, as a driver saw it. */
export interface LoginSecond {
  t: number;
  phase: 'warmup' | 'measure' | 'drain';
  attempts: number;
  logins: number;
  failures: number;
  inFlight: number;
  /** Login latency of this second's successful logins, encoded. */
  latency: string;
}

export interface LoginLoadResult {
  mode: 'closed' | 'open';
  /** Successful logins answered within the measured interval. */
  logins: number;
  seconds: number;
  /** Over the whole run, warm-up included. */
  attempts: number;
  failures: number;
  /** connect → LOGIN_RESPONSE of the measured logins (open loop: from the intended start). */
  latency: string;
  /** Open loop: how late attempts started, after their intended time. */
  startLag: string;
  /** Failed logins by code, and errors after a successful login as "<code> after login". */
  errors: Record<string, number>;
}

interface Slot {
  uids: string[];
  tokens: string[];
  iteration: number;
}

export async function runLoginLoad(o: LoginLoadOptions): Promise<LoginLoadResult> {
  const open = o.rate !== undefined;
  if (open && !(o.rate! > 0)) throw new Error('rate must be positive');
  if (o.endpoints.length === 0) throw new Error('no worker endpoints');
  // Tokens are minted before the start so the loops measure the server, not the driver's HMAC.
  const slots: Slot[] = Array.from({ length: o.loops }, (_, i) => {
    const uids = Array.from({ length: USERS_PER_LOOP }, (_, k) => `ls${o.loopOffset + i + k * o.loopStride}`);
    return { uids, tokens: uids.map((uid) => o.token(uid)), iteration: 0 };
  });
  await o.ready?.();

  const run = new LoginRun(o);
  const ticker = open ? run.openLoop(slots, o.rate!) : run.closedLoop(slots);
  run.clock.start();
  const { from, to } = await run.clock.measure(o.warmupMs, o.durationMs, () => (run.measureFrom = performance.now()));
  run.measureTo = to;
  run.clock.enter('drain');
  run.running = false;
  clearInterval(ticker);
  // Attempts in flight finish (each is bounded by its timeout): their answers may still count.
  await drain(() => run.inFlight > 0, ATTEMPT_TIMEOUT_MS + 1000, 10);
  run.clock.end();
  return {
    mode: open ? 'open' : 'closed',
    logins: run.logins,
    seconds: (to - from) / 1000,
    attempts: run.attempts,
    failures: run.failures,
    latency: run.latency.encode(),
    startLag: run.startLag.encode(),
    errors: run.errors,
  };
}

/** One driver's login load while it runs: its loops' attempts and what they counted. */
class LoginRun {
  readonly clock: LoadClock<LoginSecond['phase']>;
  running = true;
  measureFrom = Infinity;
  measureTo = Infinity;
  attempts = 0;
  failures = 0;
  logins = 0;
  inFlight = 0;
  readonly errors: Record<string, number> = {};
  readonly latency = new Latency();
  readonly startLag = new Latency();
  readonly #secondLatency = new Latency();
  readonly #second = { attempts: 0, logins: 0, failures: 0 };
  #endpointTurn = 0;
  #addressTurn = 0;

  constructor(readonly o: LoginLoadOptions) {
    this.clock = new LoadClock<LoginSecond['phase']>('warmup', (phase, t) => {
      o.onSecond?.({ t, phase, ...this.#second, inFlight: this.inFlight, latency: this.#secondLatency.encode() });
      this.#secondLatency.reset();
      this.#second.attempts = this.#second.logins = this.#second.failures = 0;
    });
  }

  /** Closed loop: every slot logs in again as soon as its last attempt ended. */
  closedLoop(slots: Slot[]): undefined {
    // attempt() never rejects: loginOnce resolves with what went wrong.
    for (const slot of slots) {
      void (async () => {
        while (this.running) await this.#attempt(slot, performance.now());
      })();
    }
    return undefined;
  }

  /**
   * Open loop: attempt n is due at t0 + n * interval; it takes a free loop, or waits for one
   * (then its latency, measured from the intended start, shows the wait). Returns the 1 ms timer.
   */
  openLoop(slots: Slot[], rate: number): NodeJS.Timeout {
    const t0 = performance.now();
    const interval = 1000 / rate;
    const free = [...slots];
    let started = 0;
    const tick = () => {
      const now = performance.now();
      const due = Math.floor((now - t0) / interval) + 1;
      while (this.running && started < due && free.length > 0) {
        const at = t0 + started * interval;
        if (this.clock.current === 'measure') this.startLag.add(now - at);
        started++;
        const slot = free.pop()!;
        void this.#attempt(slot, at).then(() => free.push(slot));
      }
    };
    tick();
    return setInterval(tick, 1);
  }

  #count(code: string): void {
    this.errors[code] = (this.errors[code] ?? 0) + 1;
  }

  async #attempt(slot: Slot, startedAt: number): Promise<void> {
    const { o } = this;
    const addresses = o.localAddresses ?? [];
    const k = slot.iteration++ % USERS_PER_LOOP;
    this.inFlight++;
    this.attempts++;
    this.#second.attempts++;
    const outcome = await loginOnce({
      endpoint: o.endpoints[this.#endpointTurn++ % o.endpoints.length]!,
      uid: slot.uids[k]!,
      deviceId: BENCH_DEVICE,
      token: slot.tokens[k]!,
      ...(addresses.length ? { localAddress: addresses[this.#addressTurn++ % addresses.length]! } : {}),
      timeoutMs: ATTEMPT_TIMEOUT_MS,
    });
    this.inFlight--;
    if (outcome.ok) {
      const ms = outcome.answeredAt - startedAt;
      this.#second.logins++;
      this.#secondLatency.add(ms);
      if (outcome.answeredAt >= this.measureFrom && outcome.answeredAt < this.measureTo) {
        this.logins++;
        this.latency.add(ms);
      }
      if (outcome.afterCode) this.#count(`${outcome.afterCode} after login`);
    } else {
      this.failures++;
      this.#second.failures++;
      this.#count(outcome.code!);
    }
  }
}

export interface GateUser {
  username: string;
  password: string;
}

export interface RegisterResult {
  registered: number;
  /** Already there (409): an earlier run's user, whose password is assumed to be the bench's. */
  existing: number;
  seconds: number;
  errors: Record<string, number>;
}

/** Registers users `concurrency` at a time (the gate hashes at most 4 passwords at once by default). */
export async function registerUsers(gateUrl: string, users: GateUser[], concurrency: number): Promise<RegisterResult> {
  const result: RegisterResult = { registered: 0, existing: 0, seconds: 0, errors: {} };
  const t0 = performance.now();
  let next = 0;
  const worker = async () => {
    while (next < users.length) {
      const user = users[next++]!;
      for (let tries = 0; ; tries++) {
        try {
          await registerThroughGate(gateUrl, user.username, user.password);
          result.registered++;
        } catch (err) {
          const code = errorCode(err);
          if (code === 'SB_ERR_USERNAME_TAKEN') result.existing++;
          else if (code === 'SB_ERR_RATE_LIMITED' && tries < 30) {
            await sleep(1000);
            continue;
          } else result.errors[code] = (result.errors[code] ?? 0) + 1;
        }
        break;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, users.length) }, worker));
  result.seconds = (performance.now() - t0) / 1000;
  return result;
}

export interface GateLoadOptions {
  gateUrl: string;
  users: GateUser[];
  /** Concurrent loops; loop i logs in users i, i + loops, ... in turn. */
  loops: number;
  warmupMs: number;
  durationMs: number;
  onSecond?: (point: TimelinePoint) => void;
}

export interface GateLoadResult {
  /** Password login at the gate and worker login, both successful, within the measured interval. */
  logins: number;
  seconds: number;
  attempts: number;
  failures: number;
  /** Answers 429 (SB_ERR_RATE_LIMITED), also counted in errors. */
  rateLimited: number;
  /** POST /api/login → its answer, and POST /api/login → the worker's LOGIN_RESPONSE. */
  http: Latency;
  login: Latency;
  errors: Record<string, number>;
  timeline: TimelinePoint[];
}

/** Password logins through the gate, each followed by the worker login with the gate's token. */
export async function runGateLoginLoad(o: GateLoadOptions): Promise<GateLoadResult> {
  const result: GateLoadResult = { logins: 0, seconds: 0, attempts: 0, failures: 0, rateLimited: 0, http: new Latency(), login: new Latency(), errors: {}, timeline: [] };
  let running = true;
  const second = { logins: 0, failures: 0, rateLimited: 0, latency: new Latency() };
  const clock = new LoadClock<'warmup' | 'measure' | 'drain'>('warmup', (phase, t) => {
    const p = second.latency.percentiles();
    const point: TimelinePoint = { t, phase, logins: second.logins, failures: second.failures, rateLimited: second.rateLimited, p50Ms: p.p50, p99Ms: p.p99 };
    result.timeline.push(point);
    o.onSecond?.(point);
    second.logins = second.failures = second.rateLimited = 0;
    second.latency.reset();
  });
  clock.start();
  const fail = (code: string) => {
    result.failures++;
    second.failures++;
    result.errors[code] = (result.errors[code] ?? 0) + 1;
  };
  const loop = async (first: number) => {
    for (let i = first; running; i += o.loops) {
      const user = o.users[i % o.users.length]!;
      const startedAt = performance.now();
      const measuring = clock.current === 'measure';
      result.attempts++;
      let login;
      try {
        login = await loginThroughGate(o.gateUrl, { username: user.username, password: user.password, deviceId: BENCH_DEVICE });
      } catch (err) {
        const code = errorCode(err);
        fail(code);
        if (code === 'SB_ERR_RATE_LIMITED') {
          result.rateLimited++;
          second.rateLimited++;
          await sleep(1000);
        }
        continue;
      }
      const httpMs = performance.now() - startedAt;
      const outcome = await loginOnce({ endpoint: login.worker, uid: login.uid, deviceId: BENCH_DEVICE, token: login.token, timeoutMs: ATTEMPT_TIMEOUT_MS });
      if (!outcome.ok) {
        fail(outcome.code!);
        continue;
      }
      if (outcome.afterCode) result.errors[`${outcome.afterCode} after login`] = (result.errors[`${outcome.afterCode} after login`] ?? 0) + 1;
      second.logins++;
      second.latency.add(outcome.answeredAt - startedAt);
      // Counted when it started within the measured interval: at a few logins per second, an
      // attempt straddling the boundary is a visible share of the total.
      if (measuring) {
        result.logins++;
        result.http.add(httpMs);
        result.login.add(outcome.answeredAt - startedAt);
      }
    }
  };
  const loops = Array.from({ length: o.loops }, (_, i) => loop(i));
  const { from, to } = await clock.measure(o.warmupMs, o.durationMs);
  result.seconds = (to - from) / 1000;
  clock.enter('drain');
  running = false;
  await Promise.all(loops);
  clock.end(false);
  return result;
}
