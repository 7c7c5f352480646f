// `bench group`: group chat on one node, beside the 1:1 chat it is judged against, in one run
// on one target. Three runs: 1:1 chat (the baseline: `--connections` / 2 pairs, closed loop);
// `--groups` groups of `--group-size` members; and one group of `--large-group` members with a
// 1:1 control pair beside it, during which the worker's event-loop delay is read from the probe
// preloaded into it. Reported: fan-out deliveries per second, send → delivery latency at every
// member, the delay, and loss and duplicates per member (must be 0), with the issue's targets.

import type { ScenarioOptions } from './options.js';
import { measure, type ChatRun, type ChatScenarioOptions } from './chat.js';
import { SOCKETS_PER_ADDRESS, driverAddresses, runDrivers } from '../drivers.js';
import type { GroupAccounting, GroupLoadResult, GroupSecond, GroupSpec } from '../group-load.js';
import { MAX_UIDS_PER_CALL, type GroupAdmin } from '../group-admin.js';
import { Latency, type LatencyReport } from '../latency.js';
import { ProcessSampler } from '../processes.js';
import { noProgress, type ProgressSink } from '../progress.js';
import { driverWarnings, fmt, machineInfo, meanCpu, sliceProcesses, sumCounts, type BenchReport, type RunReport } from '../report.js';
import { DriverTimeline } from '../timeline.js';
import { startTarget, type RunningTarget } from '../targets.js';

export interface GroupScenarioOptions extends ScenarioOptions {
  inbox: 'memory' | 'redis';
  /** Groups of the many-groups run, and their members each. */
  groups: number;
  groupSize: number;
  /** Members of the large group (0: no large-group run). */
  largeGroup: number;
  /** Members of each group that send. */
  senders: number;
  /** Messages each sender keeps in flight (not yet at every other member). */
  groupWindow: number;
  /** Open loop: msg/s each sender sends (0: the closed loop of groupWindow). */
  groupRate: number;
  /** The 1:1 baseline's window per pair (chat's --window). */
  window: number;
  /** The control pair's rate beside the large group, msg/s. */
  controlRate: number;
  payloadBytes: number;
  drainMs: number;
  /** Skip the 1:1 baseline. */
  noChat?: boolean;
  /** The members discard this many deliveries of the many-groups run (tests the accounting). */
  dropForTest?: number;
}

/** The issue's targets (issue 13, "Bench and targets"). */
export const GROUP_TARGETS = {
  /** Group deliveries/s over the 1:1 delivered/s of the same run: memory inbox, Redis inbox. */
  ratio: { memory: 1.5, redis: 1 },
  /** Event-loop delay p99 during the fan-out of a group of at least `members`. */
  loopDelayP99Ms: 20,
  members: 5000,
} as const;

interface GroupRun {
  o: GroupScenarioOptions;
  target: RunningTarget;
  sampler: ProcessSampler;
  progress: ProgressSink;
  runs: RunReport[];
  warnings: string[];
}

export async function groupScenario(o: GroupScenarioOptions): Promise<BenchReport> {
  if (o.groupSize < 2 || (o.largeGroup !== 0 && o.largeGroup < 2)) throw new Error('a group needs at least two members (one sender, one receiver)');
  if (o.senders < 1 || o.senders >= Math.max(o.groupSize, 2)) throw new Error('--group-senders must be at least 1 and below --group-size');
  const sampler = new ProcessSampler();
  sampler.start();
  const target = await startTarget({ kind: o.target, inbox: o.inbox, fsync: o.fsync, secret: o.secret, groups: true, sampler });
  const run: GroupRun = { o, target, sampler, progress: o.progress ?? noProgress, runs: [], warnings: [] };
  try {
    const chat = o.noChat ? undefined : await chatBaseline(run);
    const many = o.groups > 0 ? await groupRun(run, 'groups', o.groups, o.groupSize, false) : undefined;
    const large = o.largeGroup > 0 ? await groupRun(run, 'large group', 1, o.largeGroup, true) : undefined;
    judge(run, chat, many, large);
  } finally {
    await target.stop();
    sampler.stop();
  }
  return report(run);
}

/** The 1:1 chat run on the same node, measured as `bench chat` measures it. */
async function chatBaseline(g: GroupRun): Promise<RunReport> {
  const { o, target, sampler } = g;
  const pairs = Math.max(1, Math.floor(o.connections / 2));
  const chatOptions: ChatScenarioOptions = { ...o, connections: pairs * 2, window: o.window, max: false, maxP99Ms: 50, crossNode: false, relay: false, switchboard: true };
  delete chatOptions.dropForTest;
  const chat: ChatRun = { o: chatOptions, pairs, drivers: Math.max(1, Math.min(o.drivers, pairs)), progress: g.progress, sampler, runs: [], warnings: [] };
  const startedAt = Date.now();
  const report = await measure(chat, { label: '1:1 chat', target: 'switchboard', endpoints: [{ host: target.workers[0]!.host, port: target.workers[0]!.port }] });
  g.warnings.push(...chat.warnings);
  // The measured seconds are the last `durationS` before the drain; the delay over the whole run is close enough for a baseline.
  addLoopDelay(report, target, startedAt + o.warmupS * 1000, Date.now());
  report.metrics.lost = report.accounting?.lost ?? 0;
  g.runs.push(report);
  return report;
}

/** uids of group `index` of a run: short, distinct across the runs of one target. */
function memberUids(prefix: string, size: number): string[] {
  return Array.from({ length: size }, (_, j) => `${prefix}m${j}`);
}

/** Creates `count` groups of `size` (a few at a time: each is a create and its slices of adds). */
async function createGroups(admin: GroupAdmin, prefix: string, count: number, size: number, senders: number): Promise<GroupSpec[]> {
  const specs: GroupSpec[] = new Array(count);
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < count; i = next++) {
      const members = memberUids(`${prefix}${i}`, size);
      const created = await admin.createGroup(members[0]!, `bench ${prefix}${i}`, members);
      specs[i] = { id: created.id, members, senders, seqBase: created.head };
    }
  };
  await Promise.all(Array.from({ length: Math.min(8, count) }, worker));
  return specs;
}

async function groupRun(g: GroupRun, label: string, count: number, size: number, large: boolean): Promise<RunReport> {
  const { o, target, sampler } = g;
  const createdAt = performance.now();
  const specs = await createGroups(target.groupAdmin!, large ? 'L' : 'g', count, size, o.senders);
  const createMs = performance.now() - createdAt;
  const drivers = Math.max(1, Math.min(o.drivers, count));
  const shares = Array.from({ length: drivers }, (_, i) => specs.filter((_, j) => j % drivers === i));
  const endpoint = { host: target.workers[0]!.host, port: target.workers[0]!.port };
  const timeline = new DriverTimeline(drivers, (p) =>
    g.progress(`[${label}] ${String(p.t).padStart(3)} s ${String(p.phase).padEnd(7)} delivered ${fmt.rate(Number(p.delivered)).padStart(9)}/s  p99 ${fmt.ms(Number(p.p99Ms)).padStart(8)} ms  errors ${p.errors}  connections ${p.connections}`),
  );
  let startedAt = 0;
  const msgIdBase = Date.now() * 1000;
  const results = await runDrivers({
    task: 'group',
    drivers,
    sampler,
    onReady: () => (startedAt = sampler.now()),
    onTick: (_i, tick) => timeline.add(tick as GroupSecond),
    options: (index) => {
      const sockets = shares[index]!.reduce((n, s) => n + s.members.length, 0) + (large && index === 0 ? 2 : 0);
      return {
        endpoint,
        localAddresses: driverAddresses(index, endpoint.host, Math.ceil(sockets / SOCKETS_PER_ADDRESS)),
        groups: shares[index]!,
        msgIdBase,
        window: o.groupWindow,
        ...(o.groupRate > 0 ? { rate: o.groupRate } : {}),
        warmupMs: o.warmupS * 1000,
        durationMs: o.durationS * 1000,
        payloadBytes: o.payloadBytes,
        drainMs: o.drainMs,
        ...(large && index === 0 && o.controlRate > 0 ? { control: { name: 'ctl', rate: o.controlRate } } : {}),
        ...(!large && index === 0 && o.dropForTest ? { dropForTest: o.dropForTest } : {}),
        secret: o.secret,
      };
    },
  });
  const endedAt = sampler.now();
  const from = startedAt + o.warmupS;
  const to = from + o.durationS;
  g.warnings.push(...driverWarnings(sampler.series, from, to).map((w) => `${label}: ${w}`));
  const report = summarize(label, results, timeline, sliceProcesses(sampler.series, startedAt, endedAt), meanCpu(sampler.series, from, to));
  report.metrics.groups = count;
  report.metrics.members = size;
  report.metrics.createMs = createMs;
  report.notes.push(
    `${count} group${count > 1 ? 's' : ''} of ${size} members (created in ${(createMs / 1000).toFixed(1)} s: a create and adds of at most ${MAX_UIDS_PER_CALL} uids each), ` +
      `${o.senders} sender${o.senders > 1 ? 's' : ''} per group, ${pacing(o)}; ` +
      `a message is ${size - 1} deliveries; ${fmt.rate(report.metrics.messagesPerSec!)} group messages/s`,
  );
  addLoopDelay(report, target, Math.min(...results.map((r) => r.measuredFrom)), Math.max(...results.map((r) => r.measuredTo)));
  if (large && o.controlRate > 0) {
    const control = Latency.merged(results.map((r) => r.controlLatency)).report();
    report.latency.control = control;
    const c = results.map((r) => r.control).reduce((a, b) => ({ acked: a.acked + b.acked, lost: a.lost + b.lost }));
    report.metrics.controlLost = c.lost;
    report.notes.push(`control pair (1:1 at ${o.controlRate} msg/s beside the fan-out): delivery p50 ${fmt.ms(control.p50)} p99 ${fmt.ms(control.p99)} max ${fmt.ms(control.max)} ms, ${c.acked} acknowledged, ${c.lost} lost`);
  }
  g.runs.push(report);
  return report;
}

/** The worker's event-loop delay over [from, to] (epoch ms), from the probe, into the run's report. */
function addLoopDelay(report: RunReport, target: RunningTarget, from: number, to: number): void {
  if (!target.loopDelay) return;
  const { delay, seconds, each } = target.loopDelay.between(from, to);
  if (seconds === 0) return;
  // A probe second much longer than a second is a stall: its report was held up with everything else.
  report.notes.push(`worker event-loop delay per probe second (span → max, ms): ${each.map((s) => `${Math.round(s.spanMs)} → ${fmt.ms(s.maxMs)}`).join(', ')}`);
  report.latency.loopDelay = delay;
  report.metrics.loopDelayP99Ms = delay.p99;
  report.metrics.loopDelayMaxMs = delay.max;
}

function summarize(label: string, results: GroupLoadResult[], timeline: DriverTimeline, processes: RunReport['processes'], cpu: Record<string, number>): RunReport {
  const merged = (key: 'deliveryLatency' | 'ackLatency'): LatencyReport => Latency.merged(results.map((r) => r[key])).report();
  const seconds = Math.max(...results.map((r) => r.seconds));
  const delivered = results.reduce((sum, r) => sum + r.delivered, 0);
  const acked = results.reduce((sum, r) => sum + r.acked, 0);
  const sum = (roles: string[]) => processes.filter((p) => roles.includes(p.role)).reduce((total, p) => total + (cpu[p.pid] ?? 0), 0);
  const accounting = mergeGroupAccounting(results.map((r) => r.accounting));
  const metrics: Record<string, number> = {
    deliveredPerSec: delivered / seconds,
    messagesPerSec: acked / seconds,
    ackedPerSec: acked / seconds,
    serverCpu: sum(['worker', 'node']),
    driverCpu: sum(['driver']),
    expected: accounting.expected,
    membersWithLoss: accounting.membersWithLoss,
  };
  const redis = processes.find((p) => p.role === 'redis');
  if (redis && cpu[redis.pid] !== undefined) metrics.redisCpu = cpu[redis.pid]!;
  return {
    label,
    metrics,
    latency: { delivery: merged('deliveryLatency'), ack: merged('ackLatency') },
    timeline: timeline.points(),
    processes: processes.filter((p) => p.samples.length > 0),
    errors: sumCounts(results.map((r) => r.errors)),
    accounting,
    notes: [],
  };
}

function mergeGroupAccounting(parts: GroupAccounting[]): GroupAccounting {
  const a: GroupAccounting = { sent: 0, acked: 0, received: 0, lost: 0, dup: 0, lostIds: [], dupIds: [], expected: 0, membersWithLoss: 0 };
  for (const p of parts) {
    for (const key of ['sent', 'acked', 'received', 'lost', 'dup', 'expected', 'membersWithLoss'] as const) a[key] += p[key];
    a.lostIds.push(...p.lostIds);
    a.dupIds.push(...p.dupIds);
  }
  a.lostIds = a.lostIds.slice(0, 10);
  a.dupIds = a.dupIds.slice(0, 10);
  return a;
}

/** The targets, as notes on the runs they judge (and a warning for each one missed). */
function judge(g: GroupRun, chat: RunReport | undefined, many: RunReport | undefined, large: RunReport | undefined): void {
  const { o, warnings } = g;
  const verdict = (run: RunReport, met: boolean, what: string) => {
    run.notes.push(`target ${what}: ${met ? 'met' : 'MISSED'}`);
    if (!met) warnings.push(`${run.label}: target ${what} missed`);
  };
  const chatRate = chat?.metrics.deliveredPerSec;
  const want = GROUP_TARGETS.ratio[o.inbox];
  for (const run of [many, large]) {
    if (!run || !chatRate) continue;
    const ratio = run.metrics.deliveredPerSec! / chatRate;
    run.metrics.ratioToChat = ratio;
    const what = `group deliveries/s ≥ ${want} × the 1:1 delivered/s (${o.inbox} inbox): ${fmt.rate(run.metrics.deliveredPerSec!)} / ${fmt.rate(chatRate)} = ${fmt.ratio(ratio)}`;
    // The throughput target is the many-groups run's; the large group's run measures the
    // event loop while one fan-out at a time happens (its rate is bound by that latency).
    if (run === many) verdict(run, ratio >= want, what);
    else run.notes.push(`${what} (not judged: the throughput target is for the many-groups run)`);
  }
  if (large?.metrics.loopDelayP99Ms !== undefined) {
    const p99 = large.metrics.loopDelayP99Ms;
    const what = `event-loop delay p99 ≤ ${GROUP_TARGETS.loopDelayP99Ms} ms during the fan-out to ${large.metrics.members} members: p99 ${fmt.ms(p99)} max ${fmt.ms(large.metrics.loopDelayMaxMs!)} ms`;
    if (large.metrics.members! >= GROUP_TARGETS.members) verdict(large, p99 <= GROUP_TARGETS.loopDelayP99Ms, what);
    else large.notes.push(`${what} (not judged: the target is for ${GROUP_TARGETS.members} members, --large-group ${GROUP_TARGETS.members})`);
  }
  for (const run of g.runs) {
    const a = run.accounting;
    if (a && (a.lost > 0 || a.dup > 0)) warnings.push(`${run.label}: lost=${a.lost} dup=${a.dup}: acknowledged messages were not delivered exactly once to every member`);
    if ((run.metrics.controlLost ?? 0) > 0) warnings.push(`${run.label}: the control pair lost ${run.metrics.controlLost} messages`);
  }
}

/** How the senders pace themselves: closed loop (a window) or open loop (a rate). */
function pacing(o: GroupScenarioOptions): string {
  if (o.groupRate > 0) return `open loop: ${o.groupRate} msg/s per sender`;
  return `${o.groupWindow} message${o.groupWindow > 1 ? 's' : ''} in flight per sender`;
}

function report(g: GroupRun): BenchReport {
  const { o, runs, warnings, target } = g;
  return {
    scenario: 'group',
    title:
      `group chat beside 1:1 chat: ${o.groups} groups × ${o.groupSize} members${o.largeGroup ? ` and one of ${o.largeGroup}` : ''}, ${o.senders} sender(s) per group, ` +
      `${pacing(o)}, ${o.payloadBytes}-byte payload, ${o.durationS} s after ${o.warmupS} s warm-up, ${o.inbox} inbox`,
    date: new Date().toISOString(),
    command: o.command,
    machine: machineInfo(),
    options: { ...o, progress: undefined },
    target: target.label,
    runs,
    table: {
      columns: ['run', 'deliv/s', 'msg/s', 'ratio', 'p50 ms', 'p99', 'max', 'ack p99', 'loop p99', 'loop max', 'server cpu', 'driver cpu', 'lost', 'dup'],
      rows: runs.map((r) => {
        const d = r.latency.delivery!;
        const loop = r.latency.loopDelay;
        return [
          r.label,
          fmt.rate(r.metrics.deliveredPerSec!),
          fmt.rate(r.metrics.ackedPerSec ?? 0),
          r.metrics.ratioToChat === undefined ? '-' : fmt.ratio(r.metrics.ratioToChat),
          fmt.ms(d.p50),
          fmt.ms(d.p99),
          fmt.ms(d.max),
          r.latency.ack ? fmt.ms(r.latency.ack.p99) : '-',
          loop ? fmt.ms(loop.p99) : '-',
          loop ? fmt.ms(loop.max) : '-',
          fmt.pct(r.metrics.serverCpu!),
          fmt.pct(r.metrics.driverCpu!),
          r.accounting?.lost ?? '-',
          r.accounting?.dup ?? '-',
        ];
      }),
    },
    warnings,
  };
}
