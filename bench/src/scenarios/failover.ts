// `bench failover`: 1:1 chat at a fixed rate through SDK clients over a real cluster, and one
// worker killed with SIGKILL halfway through the measured interval. What must hold: nothing
// acknowledged is lost and nothing is shown twice after the SDK's dedupe; what is measured:
// how long the clients of the dead worker take to be logged in elsewhere, and the dip in
// delivery around the kill (the timeline).

import type { ScenarioOptions } from './options.js';
import { mergeAccounting } from '../chat-load.js';
import { runDrivers, share } from '../drivers.js';
import type { FailoverLoadResult, FailoverSecond, Outage } from '../failover-load.js';
import { Latency } from '../latency.js';
import { DriverTimeline } from '../timeline.js';
import { ProcessSampler } from '../processes.js';
import { noProgress } from '../progress.js';
import { driverWarnings, fmt, machineInfo, meanCpu, sliceProcesses, sumCounts, type BenchReport, type LatencyReport, type RunReport } from '../report.js';
import { startTarget, type WorkerEndpoint } from '../targets.js';

export interface FailoverScenarioOptions extends ScenarioOptions {
  /** SDK clients in total: half send, half receive. */
  connections: number;
  /** Messages per second in total (open loop). */
  rate: number;
  payloadBytes: number;
  /** After the run, wait this long at most for every send to settle and every acknowledged message to arrive. */
  drainMs: number;
  /** The workers' ZooKeeper session timeout: how long the survivors take to see the dead worker leave. */
  zkSessionTimeoutMs: number;
}

/** The worker that is killed: worker 0, which holds the most clients (see victimShare) and the lowest id. */
const VICTIM = 0;

/** The drivers' results and when the kill happened, on the coordinator's clocks. */
interface KillRun {
  results: FailoverLoadResult[];
  timeline: DriverTimeline;
  /** Sampler seconds: the drivers started sending, and were done. */
  startedAt: number;
  endedAt: number;
  /** Date.now() just before the SIGKILL (0: no kill), and its sampler seconds after startedAt. */
  killAt: number;
  killAtS: number;
  killed: boolean;
}

export async function failoverScenario(o: FailoverScenarioOptions): Promise<BenchReport> {
  if (o.target !== 'cluster') throw new Error('bench failover kills a worker it started: use --target cluster');
  if (o.workers < 2) throw new Error('bench failover needs --workers 2 or more (one is killed)');
  if (o.connections < 2) throw new Error('--connections must be at least 2 (one sender, one receiver)');
  if (!(o.rate > 0)) throw new Error('--rate must be positive');
  const pairs = Math.floor(o.connections / 2);
  const drivers = Math.max(1, Math.min(o.drivers, pairs));
  const sampler = new ProcessSampler();
  sampler.start();
  const target = await startTarget({
    kind: 'cluster',
    workers: o.workers,
    fsync: o.fsync,
    secret: o.secret,
    workerArgs: ['--zk-session-timeout-ms', String(o.zkSessionTimeoutMs)],
    sampler,
  });
  const victim = target.workers[VICTIM]!;
  let run: KillRun;
  try {
    run = await killRun(o, target.workers, { pairs, drivers, sampler });
  } finally {
    await target.stop();
    sampler.stop();
  }
  const warnings: string[] = [];
  const child = victim.process!.child;
  if (!run.killed) warnings.push(`${victim.name} was not killed: the run ended before the kill was due`);
  else if (child.signalCode !== 'SIGKILL') warnings.push(`${victim.name} ended with ${child.signalCode ?? child.exitCode}, not SIGKILL`);
  const from = run.startedAt + o.warmupS;
  warnings.push(...driverWarnings(sampler.series, from, from + o.durationS));
  const report = runReport(o, run, victim.name, { pairs, sampler, warnings });
  return {
    scenario: 'failover',
    title: `failover: 1:1 chat, ${pairs} pairs (${pairs * 2} SDK clients) over ${o.workers} workers, open loop at ${fmt.rate(o.rate)} msg/s, ${victim.name} SIGKILLed ${Math.floor(o.durationS / 2) + 0.5} s into the ${o.durationS} s after ${o.warmupS} s warm-up, ${drivers} driver${drivers > 1 ? 's' : ''}`,
    date: new Date().toISOString(),
    command: o.command,
    machine: machineInfo(),
    options: { ...o, progress: undefined, victim: victim.name },
    target: target.label,
    runs: [report],
    table: {
      columns: ['run', 'clients', 'affected', 'back', 'recovery p50 ms', 'max', 'deliv/s', 'p50 ms', 'p99', 'max', 'lost', 'dup'],
      rows: [tableRow(report)],
    },
    warnings,
  };
}

/**
 * The drivers' load over `workers`, and the SIGKILL of the victim half way through the
 * measured interval (half a second past a whole second: the timeline's kill second is
 * unambiguous).
 */
async function killRun(o: FailoverScenarioOptions, workers: WorkerEndpoint[], { pairs, drivers, sampler }: { pairs: number; drivers: number; sampler: ProcessSampler }): Promise<KillRun> {
  const victim = workers[VICTIM]!;
  const progress = o.progress ?? noProgress;
  const timeline = new DriverTimeline(drivers, (p) =>
    progress(
      `[failover] ${String(p.t).padStart(3)} s ${String(p.phase).padEnd(7)} sent ${fmt.rate(Number(p.sent)).padStart(7)}/s  delivered ${fmt.rate(Number(p.delivered)).padStart(7)}/s  p99 ${fmt.ms(Number(p.p99Ms)).padStart(8)} ms  errors ${p.errors}  connected ${p.connections} (min ${p.connectionsMin})${p.event ? `  ← ${p.event}` : ''}`,
    ),
  );
  const run = { timeline, startedAt: 0, killAt: 0, killAtS: Number.NaN, killed: false } as KillRun;
  let killTimer: NodeJS.Timeout | undefined;
  let killed: Promise<void> | undefined;
  const kill = () => {
    run.killAt = Date.now();
    run.killAtS = sampler.now() - run.startedAt;
    // killAtS seconds after sending started: in second floor(killAtS) + 1.
    timeline.mark(Math.floor(run.killAtS) + 1, { event: `${victim.name} killed` });
    killed = victim.process!.kill();
  };
  const endpoints = workers.map(({ host, port }) => ({ host, port }));
  try {
    run.results = await runDrivers({
      task: 'failover',
      drivers,
      sampler,
      onReady: () => {
        run.startedAt = sampler.now();
        killTimer = setTimeout(kill, (o.warmupS + Math.floor(o.durationS / 2) + 0.5) * 1000);
      },
      onTick: (_index, tick) => timeline.add(tick as FailoverSecond),
      options: (index) => ({
        endpoints,
        pairs: share(pairs, drivers, index),
        pairOffset: Array.from({ length: index }, (_, j) => share(pairs, drivers, j)).reduce((a, b) => a + b, 0),
        rate: o.rate * (share(pairs, drivers, index) / pairs),
        warmupMs: o.warmupS * 1000,
        durationMs: o.durationS * 1000,
        payloadBytes: o.payloadBytes,
        drainMs: o.drainMs,
        secret: o.secret,
      }),
    });
    run.endedAt = sampler.now();
    await killed;
  } finally {
    clearTimeout(killTimer);
  }
  run.killed = killed !== undefined;
  return run;
}

/** The run's report: the outages the kill caused and how soon the clients were back, loss and delivery. */
function runReport(o: FailoverScenarioOptions, run: KillRun, victim: string, { pairs, sampler, warnings }: { pairs: number; sampler: ProcessSampler; warnings: string[] }): RunReport {
  const { results, killAt, killAtS } = run;
  const from = run.startedAt + o.warmupS;
  const processes = sliceProcesses(sampler.series, run.startedAt, run.endedAt).filter((p) => p.samples.length > 0);
  const cpu = meanCpu(sampler.series, from, from + o.durationS);
  const outages = results.flatMap((r) => r.outages);
  const affected = outages.filter((x) => killAt > 0 && x.droppedAt >= killAt);
  const back = affected.filter((x): x is Outage & { readyAt: number } => x.readyAt !== null);
  const fromKill = new Latency();
  const fromDrop = new Latency();
  for (const x of back) {
    fromKill.add(x.readyAt - killAt);
    fromDrop.add(x.readyAt - x.droppedAt);
  }
  const onVictim = victimShare(pairs, o.workers, VICTIM);
  const accounting = mergeAccounting(results.map((r) => r.accounting));
  const merged = (key: 'deliveryLatency' | 'ackLatency' | 'sendLag'): LatencyReport => Latency.merged(results.map((r) => r[key])).report();
  const seconds = Math.max(...results.map((r) => r.seconds));
  const sum = (roles: string[]) => processes.filter((p) => roles.includes(p.role)).reduce((total, p) => total + (cpu[p.pid] ?? 0), 0);
  const total = (f: (r: FailoverLoadResult) => number) => results.reduce((s, r) => s + f(r), 0);
  const recovery = fromKill.percentiles();
  const metrics: Record<string, number> = {
    offeredPerSec: o.rate,
    deliveredPerSec: total((r) => r.delivered) / seconds,
    ackedPerSec: total((r) => r.acked) / seconds,
    lost: accounting.lost,
    dup: accounting.dup,
    resentDeduped: total((r) => r.resentDeduped),
    clients: total((r) => r.clients),
    clientsOnVictim: onVictim,
    clientsAffected: affected.length,
    clientsBack: back.length,
    killAtS,
    serverCpu: sum(['worker']),
    driverCpu: sum(['driver']),
  };
  if (back.length > 0) {
    metrics.recoveryMsP50 = recovery.p50;
    metrics.recoveryMsMax = recovery.max;
    metrics.recoveryFromDropMsMax = fromDrop.percentiles().max;
  }
  if (accounting.lost > 0 || accounting.dup > 0) warnings.push(`lost=${accounting.lost} dup=${accounting.dup}: acknowledged messages were not delivered exactly once`);
  if (back.length < affected.length) {
    warnings.push(`${affected.length - back.length} of ${affected.length} clients of ${victim} never logged in again: ${affected.filter((x) => x.readyAt === null).slice(0, 10).map((x) => x.uid).join(' ')}`);
  }
  if (affected.length !== onVictim) warnings.push(`${affected.length} clients dropped after the kill, ${onVictim} were on ${victim}`);
  if (outages.length > affected.length) warnings.push(`${outages.length - affected.length} clients dropped before the kill`);
  return {
    label: `${victim} SIGKILLed at ${fmt.ms(killAtS)} s`,
    metrics,
    latency: { delivery: merged('deliveryLatency'), ack: merged('ackLatency'), sendLag: merged('sendLag'), recovery: { ...recovery, distribution: fromKill.distribution() } },
    timeline: run.timeline.points(),
    processes,
    errors: sumCounts(results.map((r) => r.errors)),
    accounting,
    notes: [
      `${onVictim} of ${metrics.clients} clients were on ${victim}; ${affected.length} dropped, ${back.length} logged in again on another worker`,
      back.length > 0
        ? `back after the kill (coordinator's clock just before SIGKILL → the SDK's 'ready'): p50 ${fmt.ms(recovery.p50)} ms, max ${fmt.ms(recovery.max)} ms`
        : 'no client came back',
      `${metrics.resentDeduped} sends were answered as duplicates: resent by the SDK after the reconnect, stored once`,
      `workers' ZooKeeper session timeout ${o.zkSessionTimeoutMs} ms: the survivors see ${victim} leave that long after the kill`,
    ],
  };
}

function tableRow(run: RunReport): (string | number)[] {
  const { metrics: m, latency } = run;
  const recovered = m.clientsBack! > 0;
  return [
    run.label,
    m.clients!,
    m.clientsAffected!,
    m.clientsBack!,
    recovered ? fmt.ms(m.recoveryMsP50!) : '-',
    recovered ? fmt.ms(m.recoveryMsMax!) : '-',
    fmt.rate(m.deliveredPerSec!),
    fmt.ms(latency.delivery!.p50),
    fmt.ms(latency.delivery!.p99),
    fmt.ms(latency.delivery!.max),
    m.lost!,
    m.dup!,
  ];
}

/** Clients that start on worker `w`: pair N's sender on N mod workers, its receiver on the next. */
export function victimShare(pairs: number, workers: number, w: number): number {
  let count = 0;
  for (let i = 0; i < pairs; i++) count += Number(i % workers === w) + Number((i + 1) % workers === w);
  return count;
}

