// `bench idle`: what a logged-in connection that only heartbeats costs the worker. Reads the
// worker's RSS once it has settled, before any connection, then holds N logged-in connections
// and samples the RSS again: (loaded − baseline) / logged-in connections is the figure.

import type { ScenarioOptions } from './options.js';
import { readFileSync } from 'node:fs';
import { SwitchboardError } from '../../../src/errors.js';
import { SOCKETS_PER_ADDRESS, driverAddresses, runDrivers, share } from '../drivers.js';
import type { IdleLoadResult, IdleSecond } from '../idle-load.js';
import { Latency } from '../latency.js';
import { ProcessSampler, rssBytes } from '../processes.js';
import { noProgress, type ProgressSink } from '../progress.js';
import { driverWarnings, fmt, machineInfo, sliceProcesses, sumCounts, type BenchReport, type LatencyReport, type RunReport, type TimelinePoint } from '../report.js';
import { startTarget, type RunningTarget } from '../targets.js';
import { sleep } from '../../../testkit/wait.js';

export interface IdleScenarioOptions extends ScenarioOptions {
  inbox: 'memory' | 'redis';
  /** Logged-in connections in total, spread over the drivers and round-robin over the workers. */
  connections: number;
  /** Every connection heartbeats this often. */
  heartbeatMs: number;
  /** Seconds between the target's start and the baseline reading (default 3): startup garbage settles. */
  settleS?: number;
}

/** File descriptors a driver keeps for itself (IPC, stdio, the loader's files). */
const DRIVER_SPARE_FDS = 100;

export async function idleScenario(o: IdleScenarioOptions): Promise<BenchReport> {
  const drivers = checkOptions(o);
  const sampler = new ProcessSampler();
  sampler.start();
  const warnings: string[] = [];
  const target = await startTarget({ kind: o.target, workers: o.workers, inbox: o.inbox, fsync: o.fsync, secret: o.secret, workerEndpoints: o.workerEndpoints, sampler });
  let run: RunReport;
  try {
    run = await measureIdle(o, target, { drivers, sampler, warnings });
  } finally {
    await target.stop();
    sampler.stop();
  }
  const m = run.metrics;
  const bytes = (v: number | undefined) => (v === undefined ? '-' : fmt.bytes(v));
  return {
    scenario: 'idle',
    title: `idle: ${o.connections} logged-in connections heartbeating every ${o.heartbeatMs / 1000} s, worker RSS over ${o.durationS} s after ${o.warmupS} s warm-up, ${drivers} driver${drivers > 1 ? 's' : ''}, ${target.label}`,
    date: new Date().toISOString(),
    command: o.command,
    machine: machineInfo(),
    options: { ...o, progress: undefined },
    target: target.label,
    runs: [run],
    table: {
      columns: ['run', 'connections', 'failed', 'closed', 'logins/s', 'login p99 ms', 'heartbeats/s', 'baseline rss', 'loaded rss', 'rss/conn'],
      rows: [[run.label, m.connections!, m.failedLogins!, m.closedByServer!, fmt.rate(m.loginsPerSec!), fmt.ms(run.latency.login!.p99), fmt.rate(m.heartbeatsPerSec!), bytes(m.baselineRss), bytes(m.loadedRss), bytes(m.rssPerConnection)]],
    },
    warnings,
  };
}

/** Refuses what cannot work; resolves the number of drivers. */
function checkOptions(o: IdleScenarioOptions): number {
  if (!(o.connections >= 1)) throw new SwitchboardError('SB_ERR_CONFIG', '--connections must be at least 1');
  if (!(o.durationS >= 1)) throw new SwitchboardError('SB_ERR_CONFIG', '--duration must be at least 1 s (the RSS is sampled once a second)');
  if (!(o.heartbeatMs > 0)) throw new SwitchboardError('SB_ERR_CONFIG', '--heartbeat-ms must be positive');
  const drivers = Math.max(1, Math.min(o.drivers, o.connections));
  // Drivers inherit this process's file limit: one socket each, so a share above it cannot work.
  const limit = openFileLimit();
  const perDriver = share(o.connections, drivers, 0);
  if (limit !== undefined && perDriver > limit - DRIVER_SPARE_FDS) {
    const needed = Math.ceil(o.connections / (limit - DRIVER_SPARE_FDS));
    throw new SwitchboardError('SB_ERR_CONFIG', `${perDriver} connections per driver exceed the open-file limit (${limit}): use --drivers ${needed} or more`);
  }
  return drivers;
}

interface IdleContext {
  drivers: number;
  sampler: ProcessSampler;
  warnings: string[];
}

/** The server's RSS before any connection (once it settled), then the drivers' run while the coordinator samples it. */
async function measureIdle(o: IdleScenarioOptions, target: RunningTarget, { drivers, sampler, warnings }: IdleContext): Promise<RunReport> {
  const progress = o.progress ?? noProgress;
  const notes: string[] = [];
  const pids = target.workers.flatMap((w) => (w.process?.child.pid === undefined ? [] : [w.process.child.pid]));
  const measurable = pids.length > 0;
  const serverRss = (): number | undefined => {
    if (!measurable) return undefined;
    try {
      return pids.reduce((sum, pid) => sum + rssBytes(pid), 0);
    } catch {
      return undefined;
    }
  };
  let baselineRss: number | undefined;
  if (measurable) {
    // Nothing but the sampler's /proc reads touches the worker meanwhile.
    await sleep((o.settleS ?? 3) * 1000);
    baselineRss = serverRss();
    progress(`[idle] baseline RSS ${fmt.bytes(baselineRss ?? 0)} (${target.workers.length} server process${target.workers.length > 1 ? 'es' : ''})`);
  } else {
    notes.push('external target: the worker processes are not the bench\'s, so their RSS is not measured (use --target embedded or cluster)');
  }
  const timeline = new IdleTimeline(o, drivers, sampler, serverRss, progress);
  let results: IdleLoadResult[];
  try {
    results = await runDrivers({
      task: 'idle',
      drivers,
      sampler,
      onReady: () => timeline.ready(),
      onTick: (index, tick) => timeline.add(index, tick as IdleSecond),
      options: (index) => ({
        endpoints: target.workers.map(({ host, port }) => ({ host, port })),
        localAddresses: driverAddresses(index, target.workers[0]!.host, Math.ceil(share(o.connections, drivers, index) / SOCKETS_PER_ADDRESS)),
        connections: share(o.connections, drivers, index),
        uidOffset: Array.from({ length: index }, (_, j) => share(o.connections, drivers, j)).reduce((a, b) => a + b, 0),
        heartbeatMs: o.heartbeatMs,
        warmupMs: o.warmupS * 1000,
        durationMs: o.durationS * 1000,
        secret: o.secret,
      }),
    });
  } finally {
    timeline.stop();
  }
  const from = (timeline.readyAt ?? timeline.launchedAt) + o.warmupS;
  const run = summarize(target.label, results, timeline.points, baselineRss, sliceProcesses(sampler.series, timeline.launchedAt, sampler.now()));
  run.notes.unshift(...notes);
  warnings.push(...driverWarnings(sampler.series, from, from + o.durationS));
  const failed = run.metrics.failedLogins!;
  if (failed > 0) warnings.push(`${failed} of ${o.connections} connections failed to log in (${codes(results.map((r) => r.failedLogins))}): rssPerConnection counts only the ${run.metrics.connections} that did`);
  const closed = run.metrics.closedByServer!;
  if (closed > 0) warnings.push(`the server closed ${closed} logged-in connections while they were held (${codes(results.map((r) => r.closedCodes))})`);
  if (measurable && run.metrics.loadedRss === undefined) warnings.push('no RSS sample of the server while measuring: it exited, or the run ended early');
  return run;
}

/**
 * The coordinator's own clock drives the idle timeline (the drivers' ticks only update its
 * view): once a second, the connections held, the heartbeats and errors since, and the
 * server's RSS.
 */
class IdleTimeline {
  readonly points: TimelinePoint[] = [];
  readonly launchedAt: number;
  readyAt: number | undefined;
  readonly #latest: { connections: number }[];
  #heartbeats = 0;
  #errors = 0;
  readonly #timer: NodeJS.Timeout;

  constructor(
    readonly o: IdleScenarioOptions,
    drivers: number,
    readonly sampler: ProcessSampler,
    readonly serverRss: () => number | undefined,
    readonly progress: ProgressSink,
  ) {
    this.#latest = Array.from({ length: drivers }, () => ({ connections: 0 }));
    this.launchedAt = sampler.now();
    this.#timer = setInterval(() => this.#second(), 1000);
  }

  ready(): void {
    this.readyAt = this.sampler.now();
  }

  add(index: number, second: IdleSecond): void {
    this.#latest[index]!.connections = second.connections;
    this.#heartbeats += second.heartbeats;
    this.#errors += second.errors;
  }

  stop(): void {
    clearInterval(this.#timer);
  }

  #phaseAt(now: number): string {
    if (this.readyAt === undefined) return 'connect';
    const elapsed = now - this.readyAt;
    return elapsed < this.o.warmupS ? 'warmup' : elapsed < this.o.warmupS + this.o.durationS ? 'measure' : 'end';
  }

  #second(): void {
    const now = this.sampler.now();
    const point: TimelinePoint = {
      t: Math.round((now - this.launchedAt) * 10) / 10,
      phase: this.#phaseAt(now),
      connections: this.#latest.reduce((sum, d) => sum + d.connections, 0),
      heartbeats: this.#heartbeats,
      errors: this.#errors,
    };
    const rss = this.serverRss();
    if (rss !== undefined) point.workerRss = rss;
    this.#heartbeats = this.#errors = 0;
    this.points.push(point);
    this.progress(
      `[idle] ${String(Math.round(point.t)).padStart(3)} s ${String(point.phase).padEnd(7)} connections ${String(point.connections).padStart(6)}  heartbeats ${fmt.rate(Number(point.heartbeats)).padStart(6)}/s  errors ${point.errors}` +
        (rss === undefined ? '' : `  worker RSS ${fmt.bytes(rss)}`),
    );
  }
}

function summarize(label: string, results: IdleLoadResult[], timeline: TimelinePoint[], baselineRss: number | undefined, processes: RunReport['processes']): RunReport {
  const merged = (key: 'loginLatency' | 'heartbeatLatency'): LatencyReport => Latency.merged(results.map((r) => r[key])).report();
  const sum = (f: (r: IdleLoadResult) => number) => results.reduce((total, r) => total + f(r), 0);
  const count = (f: (r: IdleLoadResult) => Record<string, number>) => sum((r) => Object.values(f(r)).reduce((a, b) => a + b, 0));
  const loggedIn = sum((r) => r.loggedIn);
  const metrics: Record<string, number> = {
    connections: loggedIn,
    failedLogins: count((r) => r.failedLogins),
    closedByServer: sum((r) => r.closedByServer),
    // The drivers connect side by side: the slowest one's connect phase is the run's.
    loginsPerSec: loggedIn / Math.max(...results.map((r) => r.connectSeconds)),
    heartbeatsPerSec: sum((r) => r.measuredReplies) / Math.max(...results.map((r) => r.measuredSeconds)),
    heartbeatsSent: sum((r) => r.heartbeatsSent),
    heartbeatReplies: sum((r) => r.heartbeatReplies),
  };
  const loaded = timeline.filter((p) => p.phase === 'measure' && typeof p.workerRss === 'number').map((p) => p.workerRss as number);
  if (baselineRss !== undefined) metrics.baselineRss = baselineRss;
  if (baselineRss !== undefined && loaded.length > 0) {
    metrics.loadedRss = loaded.reduce((a, b) => a + b, 0) / loaded.length;
    metrics.peakRss = Math.max(...loaded);
    metrics.rssPerConnection = loggedIn > 0 ? (metrics.loadedRss - baselineRss) / loggedIn : Number.NaN;
  }
  const latency = { login: merged('loginLatency'), heartbeat: merged('heartbeatLatency') };
  const notes: string[] = [];
  if (metrics.rssPerConnection !== undefined) {
    notes.push(
      `rss/conn = (mean server RSS while measuring ${fmt.bytes(metrics.loadedRss!)} − RSS before any connection ${fmt.bytes(baselineRss!)}) / ${loggedIn} logged-in connections = ${fmt.bytes(metrics.rssPerConnection)}; the heap is not reported (the server exposes no heap figure)`,
    );
  }
  notes.push(`heartbeat echo p50 ${fmt.ms(latency.heartbeat.p50)} ms, p99 ${fmt.ms(latency.heartbeat.p99)} ms (${metrics.heartbeatReplies} of ${metrics.heartbeatsSent} answered)`);
  const errors = sumCounts(results.flatMap((r) => [r.failedLogins, r.closedCodes]));
  return { label, metrics, latency, timeline, processes: processes.filter((p) => p.samples.length > 0), errors, notes };
}

/** "CODE=n CODE=n" over several drivers' counts. */
function codes(parts: Record<string, number>[]): string {
  return Object.entries(sumCounts(parts))
    .map(([code, n]) => `${code}=${n}`)
    .join(' ');
}

/** This process's soft limit on open files (Linux), if it can be read. */
function openFileLimit(): number | undefined {
  try {
    const m = /^Max open files\s+(\d+)/m.exec(readFileSync('/proc/self/limits', 'utf8'));
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}
