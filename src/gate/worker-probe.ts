// WorkerProbe: which workers of the registry's view the gate can reach now. The gate never sees
// the TCP logins it sends, and a crashed worker's znode stays until its ZooKeeper session
// expires (seconds), so it asks each worker itself: connect, send a HEART_BEAT (answered before
// login), expect the echo. One timer drives every probe: each tick fails the probes that are
// overdue and starts one for every worker not being probed, at most `concurrency` at once,
// round robin. One failed probe (refused, reset, not answered within `timeoutMs`) makes the
// worker unreachable until a probe is answered again. A worker not probed yet counts as
// reachable: it registered after it started listening.
//
// A probe is one short connection that never logs in: the worker logs it at debug level only.
// A worker without a plain client port (port 0) is probed on its TLS port, over TLS but without
// verifying its certificate: the probe asks whether it answers, and sends nothing of anyone's.

import net from 'node:net';
import tls from 'node:tls';
import { SwitchboardError } from '../errors.js';
import type { Logger } from '../log.js';
import type { Registry } from '../registry/registry.js';
import type { ImNode } from '../registry/im-node.js';
import { FrameDecoder } from '../protocol/frame.js';
import { decodeMessage, encodeMessageFrame, uint64Number } from '../protocol/codec.js';
import { HeadType } from '../protocol/types.js';

export interface ProbeSettings {
  /** Time between two ticks: how often each worker is probed. */
  intervalMs: number;
  /** A probe not answered within this (checked at each tick) fails. */
  timeoutMs: number;
  /** Probes in flight at once. */
  concurrency: number;
}

/**
 * A refused connection (a crashed worker) fails a probe at once; the timeout only catches a
 * stalled worker or host, and is long enough that a busy but working one is not mistaken for it.
 */
export const DEFAULT_PROBE_SETTINGS: Readonly<ProbeSettings> = Object.freeze({ intervalMs: 1_000, timeoutMs: 2_000, concurrency: 32 });

export interface WorkerProbeOptions extends Partial<ProbeSettings> {
  registry: Registry;
  log: Logger;
}

/** The largest frame a probe accepts back: a heartbeat echo is a dozen bytes. */
const MAX_ECHO_LENGTH = 256;

interface Target {
  host: string;
  /** The port probed: the plain client port, or the TLS port when there is none. */
  port: number;
  tls: boolean;
  reachable: boolean;
  /** The probe in flight, if any. */
  probe: Probe | undefined;
}

interface Probe {
  socket: net.Socket;
  startedAt: number;
}

/** What WorkerProbe refuses (SB_ERR_CONFIG), for a caller that checks before building anything. */
export function checkProbeSettings(settings: ProbeSettings): void {
  if (!(settings.intervalMs >= 1) || !(settings.timeoutMs >= 1) || !(settings.concurrency >= 1)) {
    throw new SwitchboardError('SB_ERR_CONFIG', 'worker probes need an interval, a timeout and a concurrency of at least 1');
  }
}

export class WorkerProbe {
  readonly #registry: Registry;
  readonly #settings: ProbeSettings;
  readonly #log: Logger;
  /** By worker id, in probing order (a probed worker moves to the end). */
  readonly #targets = new Map<string, Target>();
  #active = 0;
  #sequence = 0;
  #timer: NodeJS.Timeout | undefined;
  #unsubscribe: (() => void) | undefined;

  constructor(options: WorkerProbeOptions) {
    this.#registry = options.registry;
    const settings = { ...DEFAULT_PROBE_SETTINGS, ...options };
    checkProbeSettings(settings);
    this.#settings = { intervalMs: settings.intervalMs, timeoutMs: settings.timeoutMs, concurrency: settings.concurrency };
    this.#log = options.log;
  }

  start(): void {
    this.#unsubscribe = this.#registry.onChange((workers) => this.#follow(workers));
    this.#follow(this.#registry.workers());
    // In the check phase, after the poll phase: when the gate's own loop was held up, echoes
    // that arrived meanwhile are read before their probes are judged overdue.
    this.#timer = setInterval(() => setImmediate(() => this.#tick()), this.#settings.intervalMs);
    this.#timer.unref();
  }

  /** False when the last probe of this worker failed. */
  reachable(worker: ImNode): boolean {
    const target = this.#targets.get(worker.id);
    return target === undefined || target.host !== worker.host || target.port !== probedPort(worker) || target.reachable;
  }

  close(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
    this.#unsubscribe?.();
    for (const target of this.#targets.values()) target.probe?.socket.destroy();
    this.#targets.clear();
  }

  #follow(workers: readonly ImNode[]): void {
    const live = new Set<string>();
    for (const w of workers) {
      live.add(w.id);
      const target = this.#targets.get(w.id);
      const port = probedPort(w);
      if (target && target.host === w.host && target.port === port) continue;
      target?.probe?.socket.destroy();
      this.#targets.set(w.id, { host: w.host, port, tls: w.port === 0, reachable: true, probe: undefined });
    }
    for (const [id, target] of this.#targets) {
      if (live.has(id)) continue;
      target.probe?.socket.destroy();
      this.#targets.delete(id);
    }
  }

  #tick(): void {
    if (this.#timer === undefined) return; // closed
    const now = Date.now();
    const due: [string, Target][] = [];
    for (const entry of this.#targets) {
      const probe = entry[1].probe;
      if (probe && now - probe.startedAt >= this.#settings.timeoutMs) {
        this.#finish(entry[0], entry[1], probe, new Error(`no heartbeat echo within ${this.#settings.timeoutMs} ms`));
      }
      if (!entry[1].probe) due.push(entry);
    }
    for (const [id, target] of due) {
      if (this.#active >= this.#settings.concurrency) break;
      // To the end of the order: with more workers than `concurrency`, the others go first next time.
      this.#targets.delete(id);
      this.#targets.set(id, target);
      this.#probe(id, target);
    }
  }

  #probe(id: string, target: Target): void {
    this.#sequence = (this.#sequence % 0x7fff_ffff) + 1;
    const sequence = this.#sequence;
    const socket = target.tls
      ? tls.connect({ host: target.host, port: target.port, rejectUnauthorized: false }).setNoDelay(true)
      : net.connect({ host: target.host, port: target.port, noDelay: true });
    const probe: Probe = { socket, startedAt: Date.now() };
    target.probe = probe;
    this.#active++;
    const decoder = new FrameDecoder(
      (body) => {
        const message = decodeMessage(body);
        if (message.type === HeadType.HEART_BEAT && uint64Number(message.sequence) === sequence) this.#finish(id, target, probe, undefined);
      },
      { maxFrameLength: MAX_ECHO_LENGTH },
    );
    socket.once(target.tls ? 'secureConnect' : 'connect', () => socket.write(encodeMessageFrame({ type: HeadType.HEART_BEAT, sequence })));
    socket.on('data', (chunk: Buffer) => {
      try {
        decoder.push(chunk);
      } catch (err) {
        this.#finish(id, target, probe, err as Error);
      }
    });
    socket.on('error', (err) => this.#finish(id, target, probe, err));
    socket.on('close', () => this.#finish(id, target, probe, new Error('connection closed before the heartbeat echo')));
  }

  /** Records the outcome of `probe` (once; later calls for it are ignored). */
  #finish(id: string, target: Target, probe: Probe, err: Error | undefined): void {
    if (target.probe !== probe) return;
    target.probe = undefined;
    this.#active--;
    probe.socket.destroy();
    if (this.#targets.get(id) !== target) return; // left the view meanwhile
    const reachable = err === undefined;
    if (target.reachable === reachable) return;
    target.reachable = reachable;
    if (reachable) this.#log.info({ worker: id, host: target.host, port: target.port }, 'worker probe answered again');
    else this.#log.warn({ worker: id, host: target.host, port: target.port, err }, 'worker probe failed: not handed out');
  }
}

/** The plain client port, or the TLS port of a worker without one. */
function probedPort(w: ImNode): number {
  return w.port === 0 && w.tlsPort !== undefined ? w.tlsPort : w.port;
}
