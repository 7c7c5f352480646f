// The live-server fuzz's load (test/fuzz/live-server.test.ts): many raw connections at once, each
// a short script of fuzz-frames.ts frames (most of them after a real login), reconnecting as the
// server closes them; a control pair of SDK clients chatting throughout with acknowledged
// messages; and the worker's resident memory sampled from /proc. Everything a run saw is counted,
// so that the test can assert it and print it.

import net from 'node:net';
import { readFileSync } from 'node:fs';
import { decodeMessage, encodeMessageFrame } from '../../src/protocol/codec.js';
import { HeadType, type ImMessage } from '../../src/protocol/types.js';
import { ImClient, type IncomingMessage } from '../../src/client/im-client.js';
import { CLIENT_MAX_FRAME_LENGTH, closingOf, readFrames, u64 } from '../../testkit/raw-client.js';
import { sleep } from '../../testkit/wait.js';
import { FATAL_KINDS, badLoginRequest, loginFrame, preLoginFrame, randomFrame, randomLoginRequest, splitWrites, type FuzzFrame, type FuzzPools, type Rng } from './fuzz-frames.js';

export interface FuzzSettings {
  port: number;
  /** Connections open at once. */
  connections: number;
  /** Stop opening connections once this many frames have been sent... */
  frames: number;
  /** ...or once this long has passed. */
  maxMs: number;
  /** Frames per logged-in script: from 1 to this. */
  scriptFrames: number;
  /** Share of scripts that end with a fatal frame (default 0.3). */
  fatalShare?: number;
  /** Share of scripts that mutate some of their frames' bodies (default 0.4). */
  mutateShare?: number;
  /** Stop early once this is false (the worker has exited: nothing more to learn). */
  going?: () => boolean;
}

/** What the fuzz connections saw. */
export class FuzzStats {
  connections = 0;
  /** Frames handed to an open socket. */
  framesSent = 0;
  /** Frames the server is known to have handled: everything up to the last one it answered, on each connection. */
  framesReached = 0;
  logins = 0;
  loginsRefused = 0;
  responses = 0;
  /** Frames the fuzz client could not decode: the server sent garbage. */
  undecodable = 0;
  /** Answers or closes with SB_ERR_INTERNAL: the server's own failures. */
  internal: string[] = [];
  /** The errorCode of every refusal, and of every CLOSING, counted. */
  readonly answers = new Map<string, number>();
  readonly closes = new Map<string, number>();
  readonly kinds = new Map<string, number>();

  count(map: Map<string, number>, key: string): void {
    map.set(key, (map.get(key) ?? 0) + 1);
  }

  summary(): Record<string, unknown> {
    const sorted = (m: Map<string, number>) => Object.fromEntries([...m].sort((a, b) => b[1] - a[1]));
    return {
      connections: this.connections,
      framesSent: this.framesSent,
      framesReached: this.framesReached,
      logins: this.logins,
      loginsRefused: this.loginsRefused,
      responses: this.responses,
      undecodable: this.undecodable,
      internal: this.internal.length,
      kinds: sorted(this.kinds),
      answers: sorted(this.answers),
      closes: sorted(this.closes),
    };
  }
}

/** The errorCode a server frame carries, if it is a refusal. */
function refusalOf(message: ImMessage): string | undefined {
  const body = message.loginResponse ?? message.messageResponse ?? message.conversationResponse;
  return body && body.result === false ? body.errorCode || `code ${body.code}` : undefined;
}

/** One connection: what it was answered, and whether the server has closed it. */
class FuzzConnection {
  readonly socket: net.Socket;
  readonly answered = new Set<string>();
  loginResponse: ImMessage | undefined;
  closed = false;
  readonly #stats: FuzzStats;
  #waiter: (() => void) | undefined;

  constructor(port: number, stats: FuzzStats) {
    this.#stats = stats;
    this.socket = net.connect({ host: '127.0.0.1', port, noDelay: true });
    this.socket.on('error', () => {});
    this.socket.once('close', () => {
      this.closed = true;
      this.#wake();
    });
    readFrames(this.socket, {
      maxFrameLength: CLIENT_MAX_FRAME_LENGTH,
      onFrame: (body) => this.#onFrame(body),
      onBadFrame: () => void stats.undecodable++,
    });
  }

  #onFrame(body: Buffer): void {
    let message: ImMessage;
    try {
      message = decodeMessage(body);
    } catch {
      this.#stats.undecodable++;
      return;
    }
    const stats = this.#stats;
    stats.responses++;
    if (message.type === HeadType.LOGIN_RESPONSE && !this.loginResponse) this.loginResponse = message;
    const refusal = refusalOf(message);
    if (refusal) stats.count(stats.answers, refusal);
    const closing = closingOf(message);
    if (closing) stats.count(stats.closes, closing.code);
    if (refusal === 'SB_ERR_INTERNAL' || closing?.code === 'SB_ERR_INTERNAL') stats.internal.push(JSON.stringify(message));
    if (message.type !== HeadType.MESSAGE_REQUEST && message.sequence !== undefined) this.answered.add(u64(message.sequence));
    this.#wake();
  }

  #wake(): void {
    const waiter = this.#waiter;
    this.#waiter = undefined;
    waiter?.();
  }

  /** Waits until `done()` holds, the socket closes, or `ms` pass. */
  async wait(done: () => boolean, ms: number): Promise<void> {
    const deadline = Date.now() + ms;
    while (!done() && !this.closed && Date.now() < deadline) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.max(1, deadline - Date.now()));
        this.#waiter = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
  }

  /** Writes `writes` in order, waiting for drains; false once the socket has closed. */
  async write(writes: Buffer[]): Promise<boolean> {
    for (let i = 0; i < writes.length; i++) {
      if (this.closed) return false;
      if (!this.socket.write(writes[i]!)) await this.#drained();
      // Several small writes go out as segments of their own, not coalesced by one tick's writes.
      if (writes.length > 1 && i % 16 === 15) await new Promise((resolve) => setImmediate(resolve));
    }
    return !this.closed;
  }

  /** Resolves on 'drain' or 'close' (an error is followed by 'close'); never rejects. */
  #drained(): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        this.socket.off('drain', done);
        this.socket.off('close', done);
        resolve();
      };
      this.socket.on('drain', done);
      this.socket.on('close', done);
    });
  }

  close(): void {
    this.socket.destroy();
  }
}

/** How a connection's script ends when it has no fatal frame: this heartbeat's echo says every earlier frame was handled. */
const PROBE_SEQUENCE = 4_000_000_000;

async function fuzzConnection(settings: FuzzSettings, rng: Rng, pools: FuzzPools, stats: FuzzStats): Promise<void> {
  const conn = new FuzzConnection(settings.port, stats);
  stats.connections++;
  try {
    await new Promise<void>((resolve) => {
      conn.socket.once('connect', resolve);
      conn.socket.once('close', resolve);
    });
    if (conn.closed) return;
    const plan = rng.next();
    if (plan < 0.06) {
      // Never logs in: frames a client may not send yet, heartbeats, junk.
      await send(conn, rng, rng.int(0, 5), (i) => preLoginFrame(rng, pools, i + 1), [], stats);
      await conn.wait(() => false, 300);
      return;
    }
    const login = plan < 0.1 ? badLoginRequest(rng, pools) : randomLoginRequest(rng, pools);
    if (!(await conn.write(splitWrites(rng, loginFrame(login))))) return;
    stats.framesSent++;
    await conn.wait(() => conn.loginResponse !== undefined, 10_000);
    if (!conn.loginResponse) return;
    stats.framesReached++;
    if (!conn.loginResponse.loginResponse?.result) {
      stats.loginsRefused++;
      return;
    }
    stats.logins++;
    const sessionId = conn.loginResponse.sessionId ?? '';
    const count = rng.int(1, settings.scriptFrames);
    const fatal = rng.chance(settings.fatalShare ?? 0.3);
    // Most scripts send valid messages only, so that they go on long enough to reach the
    // handlers' deeper paths; the rest mutate some of their frames' bodies.
    const mutate = rng.chance(settings.mutateShare ?? 0.4) ? rng.pick([0.02, 0.05, 0.2]) : 0;
    const frames: FuzzFrame[] = [];
    const next = (i: number): FuzzFrame => {
      if (i < count) return randomFrame(rng, pools, login.uid!, sessionId, i + 1, { fatal: fatal && i === count - 1, mutate });
      return { kind: 'heartbeat', bytes: probeFrame(sessionId), sequence: PROBE_SEQUENCE };
    };
    const endsFatal = await send(conn, rng, count, next, frames, stats);
    if (endsFatal) await conn.wait(() => false, 1_000);
    else await conn.wait(() => conn.answered.has(String(PROBE_SEQUENCE)), 10_000);
    // Frames are handled in order: all up to the last one answered reached their handler.
    let reached = 0;
    frames.forEach((f, i) => {
      if (f.sequence !== undefined && conn.answered.has(String(f.sequence))) reached = i + 1;
    });
    stats.framesReached += reached;
  } finally {
    conn.close();
  }
}

function probeFrame(sessionId: string): Buffer {
  return encodeMessageFrame({ type: HeadType.HEART_BEAT, sequence: PROBE_SEQUENCE, sessionId, heartBeat: { seq: 1 } });
}

/**
 * Sends frames 0..count-1 of a script, then (unless the last was fatal) the probe, `next(i)`
 * making each: in batches, each cut into writes its own way, made only as they are written (the
 * server often closes long before the end). Those written are pushed to `frames` and counted;
 * resolves whether the script ended with a fatal frame.
 */
async function send(conn: FuzzConnection, rng: Rng, count: number, next: (i: number) => FuzzFrame, frames: FuzzFrame[], stats: FuzzStats): Promise<boolean> {
  let endsFatal = false;
  for (let i = 0; i <= count && !endsFatal; ) {
    const batch: FuzzFrame[] = [];
    for (let n = rng.int(1, 64); n > 0 && i <= count && !endsFatal; n--, i++) {
      const frame = next(i);
      batch.push(frame);
      endsFatal = FATAL_KINDS.has(frame.kind);
    }
    if (!(await conn.write(splitWrites(rng, Buffer.concat(batch.map((f) => f.bytes)))))) break;
    for (const f of batch) stats.count(stats.kinds, f.kind);
    frames.push(...batch);
    stats.framesSent += batch.length;
  }
  return endsFatal;
}

/** Runs `settings.connections` fuzz connections at once until the frame budget or the time is spent. */
export async function runFuzz(settings: FuzzSettings, rng: Rng, pools: FuzzPools, stats = new FuzzStats()): Promise<FuzzStats> {
  const deadline = Date.now() + settings.maxMs;
  const slot = async (slotRng: Rng) => {
    while (stats.framesSent < settings.frames && Date.now() < deadline && (settings.going?.() ?? true)) await fuzzConnection(settings, slotRng, pools, stats);
  };
  await Promise.all(Array.from({ length: settings.connections }, () => slot(rng.fork())));
  return stats;
}

/** Two SDK clients sending each other acknowledged messages, one at a time each way, until stopped. */
export class ControlPair {
  /** Contents each side got an ack for, in send order, by sender. */
  readonly acked = new Map<string, string[]>();
  /** Contents each side was shown from the other, in arrival order, by recipient. */
  readonly shown = new Map<string, string[]>();
  /** Send failures (a control message must never fail). */
  readonly failures: string[] = [];
  #running = true;
  #loops: Promise<void>[] = [];

  constructor(
    readonly a: ImClient,
    readonly b: ImClient,
    /** The pause between one side's sends: under the worker's message rate when it has one. */
    readonly pauseMs = 2,
  ) {
    for (const [me, peer] of [
      [a, b],
      [b, a],
    ] as const) {
      this.acked.set(me.uid, []);
      const shown: string[] = [];
      this.shown.set(me.uid, shown);
      me.on('message', (m: IncomingMessage) => {
        if (m.from === peer.uid && !m.own) shown.push(m.content);
      });
    }
  }

  start(): void {
    this.#loops = [this.#loop(this.a, this.b), this.#loop(this.b, this.a)];
  }

  async #loop(me: ImClient, peer: ImClient): Promise<void> {
    const acked = this.acked.get(me.uid)!;
    for (let i = 1; this.#running; i++) {
      const content = `control ${me.uid} ${i}`;
      try {
        await me.send(peer.uid, content);
        acked.push(content);
      } catch (err) {
        this.failures.push(`${content}: ${(err as Error).message}`);
        return;
      }
      await sleep(this.pauseMs);
    }
  }

  async stop(): Promise<void> {
    this.#running = false;
    await Promise.all(this.#loops);
  }

  get sent(): number {
    return [...this.acked.values()].reduce((n, list) => n + list.length, 0);
  }
}

/** The resident set size of process `pid`, bytes (from /proc/<pid>/status). */
export function rssOf(pid: number): number {
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!match) throw new Error(`no VmRSS for ${pid}`);
  return Number(match[1]) * 1024;
}

/** Samples `pid`'s RSS every `everyMs` until stopped; `peak` and `samples` in bytes. */
export class RssSampler {
  readonly samples: number[] = [];
  peak = 0;
  readonly #timer: NodeJS.Timeout;

  constructor(readonly pid: number, everyMs = 200) {
    this.#sample();
    this.#timer = setInterval(() => this.#sample(), everyMs);
  }

  #sample(): void {
    try {
      const rss = rssOf(this.pid);
      this.samples.push(rss);
      if (rss > this.peak) this.peak = rss;
    } catch {
      // The process has exited: the test's liveness check says so.
    }
  }

  stop(): void {
    clearInterval(this.#timer);
  }
}

export const MiB = 1024 * 1024;
