// `bench conversations`: the chat list and history pages of a user with many conversations
// (PROTOCOL.md §14). Setup: `--conversations` - 1 senders send the user one message each and one
// more sends it the history conversation's messages, all acknowledged; the list and that history
// are then paged through once to check they hold what was sent. Then closed-loop runs on the
// user's own connections: LIST pages (limit 50, 1 and 8 in flight; limit 100, 8 in flight) and
// HISTORY pages (limit 50, 1 and 8 in flight), each request timed from its write to its answer.
// With --conversation-groups N the user is also a member of N groups (created through the gate,
// one event each), and LIST with groups merged in is measured too (limit 50, 1 and 8 in flight):
// every such page reads each of the user's groups, so the first page is asked again and again.

import type { ScenarioOptions } from './options.js';
import { Device, opName, populate, runRequests, walk, type Endpoint, type RequestLoadResult, type Walk } from '../conversations-load.js';
import { ProcessSampler } from '../processes.js';
import { noProgress, type ProgressSink } from '../progress.js';
import { fmt, machineInfo, meanCpu, sliceProcesses, type BenchReport, type RunReport } from '../report.js';
import { startTarget, type RunningTarget } from '../targets.js';
import { TokenSigner } from '../../../src/auth/token.js';
import { SwitchboardError } from '../../../src/errors.js';
import { ConversationOp } from '../../../src/protocol/types.js';

export interface ConversationsScenarioOptions extends ScenarioOptions {
  inbox: 'memory' | 'redis';
  /** The measured user's conversations: the history one, and one message from each other sender. */
  conversations: number;
  /** Groups the measured user is a member of (default 0: no LIST-with-groups runs). */
  groups?: number;
  /** Messages of the history conversation (default 500). */
  historyMessages?: number;
  payloadBytes: number;
  /** The measured runs (default DEFAULT_RUNS). */
  runs?: readonly RunSpec[];
}

export interface RunSpec {
  op: typeof ConversationOp.LIST | typeof ConversationOp.HISTORY;
  limit: number;
  inFlight: number;
  /** The user's connections the requests are spread over (default: one per request in flight, at most DEVICES). */
  connections?: number;
  /** LIST with the user's groups merged in. */
  groups?: boolean;
}

/** "Some hundreds" of messages: ten HISTORY pages of 50. */
export const HISTORY_MESSAGES = 500;

/** The measured user's devices (connections) the requesters are spread over: one below the worker's default --max-devices of 5. */
export const DEVICES = 4;

const { LIST, HISTORY } = ConversationOp;

export const DEFAULT_RUNS: readonly RunSpec[] = [
  { op: LIST, limit: 50, inFlight: 1 },
  { op: LIST, limit: 50, inFlight: 8 },
  { op: LIST, limit: 100, inFlight: 8 },
  { op: HISTORY, limit: 50, inFlight: 1 },
  { op: HISTORY, limit: 50, inFlight: 8 },
];

/** Beside DEFAULT_RUNS when the user has groups. */
export const GROUP_RUNS: readonly RunSpec[] = [
  { op: LIST, limit: 50, inFlight: 1, groups: true },
  { op: LIST, limit: 50, inFlight: 8, groups: true },
];

/** A run measured while the bench process used this much of a core may have measured the bench. */
const SATURATED = 0.9;

interface Context {
  o: ConversationsScenarioOptions;
  target: RunningTarget;
  sampler: ProcessSampler;
  progress: ProgressSink;
  warnings: string[];
}

export async function conversationsScenario(o: ConversationsScenarioOptions): Promise<BenchReport> {
  if (!(o.conversations >= 1)) throw new SwitchboardError('SB_ERR_CONFIG', '--conversations must be at least 1');
  const historyMessages = o.historyMessages ?? HISTORY_MESSAGES;
  const sampler = new ProcessSampler();
  sampler.start();
  // The load runs in this process: it is sampled as the driver.
  sampler.add('bench', 'driver', process.pid);
  const groups = o.groups ?? 0;
  const target = await startTarget({ kind: o.target, workers: o.workers, inbox: o.inbox, fsync: o.fsync, secret: o.secret, workerEndpoints: o.workerEndpoints, sampler, groups: groups > 0 });
  const c: Context = { o, target, sampler, progress: o.progress ?? noProgress, warnings: [] };
  const runs: RunReport[] = [];
  const devices: Device[] = [];
  try {
    const signer = new TokenSigner(o.secret);
    const token = (uid: string) => signer.mint({ uid, ttlMs: 3_600_000 });
    // Users of this run only: a later run against the same target starts from empty inboxes.
    const tag = `cv${Date.now().toString(36)}`;
    const user = `${tag}-u`;
    const historyPeer = `${tag}-p0`;
    const endpoints: Endpoint[] = target.workers.map(({ host, port }) => ({ host, port }));
    c.progress(`[setup] ${o.conversations} conversations: ${o.conversations - 1} senders of one message, ${historyPeer} of ${historyMessages}`);
    const filled = await populate({
      endpoints,
      user,
      senders: Array.from({ length: o.conversations - 1 }, (_, i) => `${tag}-p${i + 1}`),
      historyPeer,
      historyMessages,
      payloadBytes: o.payloadBytes,
      token,
    });
    if (groups > 0) {
      if (!target.groupAdmin) throw new SwitchboardError('SB_ERR_CONFIG', '--conversation-groups needs a target whose gate the bench can create groups through');
      c.progress(`[setup] ${groups} groups with ${user} as a member`);
      for (let i = 0; i < groups; i++) await target.groupAdmin.createGroup(`${tag}-owner`, `g${i}`, [user]);
    }
    for (let i = 0; i < DEVICES; i++) devices.push(await Device.login(endpoints[0]!, user, token(user), `d${i}`));
    const list = await walk(devices[0]!, LIST, 50);
    const history = await walk(devices[0]!, HISTORY, 50, historyPeer);
    runs.push(setupRun(c, filled, list, history, historyMessages));
    // --warmup is split over the ops, each op's share before its first run: the later runs of the
    // op continue on a server warm for it (and the whole run stays within a minute).
    const specs = o.runs ?? (groups > 0 ? [...DEFAULT_RUNS, ...GROUP_RUNS] : DEFAULT_RUNS);
    const warmupS = o.warmupS / new Set(specs.map((s) => (s.groups ? -s.op : s.op))).size;
    const warmed = new Set<number>();
    const kind = (spec: RunSpec) => (spec.groups ? -spec.op : spec.op);
    for (const spec of specs) {
      runs.push(await measured(c, devices, spec, spec.op === HISTORY ? historyPeer : '', warmed.has(kind(spec)) ? 0 : warmupS));
      warmed.add(kind(spec));
    }
  } finally {
    for (const device of devices) device.close();
    await target.stop();
    sampler.stop();
  }
  return report(c, runs, historyMessages);
}

const pages = (n: number) => `${n} page${n === 1 ? '' : 's'}`;

/** The setup as a run of the report: how long it took, and what the user's list and history held after it. */
function setupRun({ o, warnings }: Context, filled: Awaited<ReturnType<typeof populate>>, list: Walk, history: Walk, historyMessages: number): RunReport {
  const expected = Math.min(o.conversations, 50);
  if (list.entries !== o.conversations) warnings.push(`the user's list holds ${list.entries} conversations, not the ${o.conversations} it was sent`);
  if (list.firstPage !== expected || list.firstMore !== (o.conversations > 50)) warnings.push(`the first LIST page held ${list.firstPage} conversations (more: ${list.firstMore}), not ${expected} (more: ${o.conversations > 50})`);
  if (history.entries !== historyMessages) warnings.push(`the history conversation holds ${history.entries} messages, not the ${historyMessages} sent`);
  return {
    label: 'setup',
    metrics: {
      conversations: o.conversations,
      messages: filled.messages,
      setupSeconds: filled.seconds,
      sendsPerSec: filled.messages / filled.seconds,
      listed: list.entries,
      listPages: list.pages,
      firstPageEntries: list.firstPage,
      firstPageMore: list.firstMore ? 1 : 0,
      historyMessages: history.entries,
      historyPages: history.pages,
    },
    latency: { send: filled.sendLatency.report() },
    timeline: [],
    processes: [],
    errors: {},
    notes: [
      `${fmt.rate(filled.messages)} messages stored in ${filled.seconds.toFixed(1)} s (${fmt.rate(filled.messages / filled.seconds)}/s, send → answer p99 ${fmt.ms(filled.sendLatency.at(99))} ms); ` +
        `paged through once: the list held ${list.entries} conversations in ${pages(list.pages)} of 50 (the first ${list.firstPage}, ${list.firstMore ? 'with more' : 'the only one'}), ` +
        `the history conversation ${history.entries} messages in ${pages(history.pages)}`,
    ],
  };
}

async function measured(c: Context, devices: Device[], spec: RunSpec, peer: string, warmupS: number): Promise<RunReport> {
  const { o, sampler } = c;
  const used = Math.max(1, Math.min(spec.connections ?? spec.inFlight, spec.inFlight, devices.length));
  const label = `${opName(spec.op).toLowerCase()}${spec.groups ? ` with ${o.groups} groups` : ''}, limit ${spec.limit}, ${spec.inFlight} in flight${spec.inFlight > 1 ? ` on ${used} connection${used > 1 ? 's' : ''}` : ''}`;
  const startedAt = sampler.now();
  let from = startedAt;
  const result = await runRequests({
    devices: devices.slice(0, used),
    op: spec.op,
    limit: spec.limit,
    peer,
    groups: spec.groups === true,
    inFlight: spec.inFlight,
    warmupMs: warmupS * 1000,
    durationMs: o.durationS * 1000,
    atStart: () => (from = sampler.now()),
    onSecond: (p) => c.progress(`[${label}] ${String(p.t).padStart(3)} s ${String(p.phase).padEnd(7)} ${fmt.rate(Number(p.requests)).padStart(7)} req/s  p99 ${fmt.ms(Number(p.p99Ms)).padStart(7)} ms  errors ${p.errors}`),
  });
  const to = from + result.seconds;
  return summarize(c, label, spec, used, result, sliceProcesses(sampler.series, startedAt, sampler.now()), meanCpu(sampler.series, from, to));
}

function summarize(c: Context, label: string, spec: RunSpec, connections: number, r: RequestLoadResult, processes: RunReport['processes'], cpu: Record<number, number>): RunReport {
  const byRole = (roles: string[]) => processes.filter((p) => roles.includes(p.role) && cpu[p.pid] !== undefined).reduce((sum, p) => sum + cpu[p.pid]!, 0);
  const metrics: Record<string, number> = {
    requestsPerSec: r.requests / r.seconds,
    inFlight: spec.inFlight,
    connections,
    limit: spec.limit,
    entriesPerResponse: r.requests ? r.entries / r.requests : 0,
    responseBytes: r.requests ? r.bytes / r.requests : 0,
    serverCpu: byRole(['node', 'worker']),
    driverCpu: byRole(['driver']),
  };
  const redis = processes.find((p) => p.role === 'redis' && cpu[p.pid] !== undefined);
  if (redis) metrics.redisCpu = cpu[redis.pid]!;
  if (metrics.driverCpu! >= SATURATED) c.warnings.push(`${label}: the bench process used ${fmt.pct(metrics.driverCpu!)} of a core while measuring: the figures may be its own limit`);
  const errors = Object.entries(r.errors);
  if (errors.length) c.warnings.push(`${label}: ${errors.map(([code, n]) => `${code}=${n}`).join(' ')}`);
  return {
    label,
    metrics,
    latency: { request: r.latency.report() },
    timeline: r.timeline,
    processes: processes.filter((p) => p.samples.length > 0),
    errors: r.errors,
    notes: [],
  };
}

function report(c: Context, runs: RunReport[], historyMessages: number): BenchReport {
  const { o, target, warnings } = c;
  const measuredRuns = runs.filter((r) => r.label !== 'setup');
  const cpu = (v: number | undefined) => (v === undefined ? '-' : fmt.pct(v));
  return {
    scenario: 'conversations',
    title:
      `conversations: one user with ${o.conversations} conversations (${o.conversations - 1} of one message, one of ${historyMessages}), ` +
      `LIST and HISTORY pages in a closed loop on the user's own connections, ${o.durationS} s per run (${o.warmupS} s of warm-up split over the ops, before each op's first run), ${o.payloadBytes}-byte messages`,
    date: new Date().toISOString(),
    command: o.command,
    machine: machineInfo(),
    // The load is this process's, on the user's own connections: --connections and --drivers do not apply.
    options: { ...o, progress: undefined, connections: undefined, drivers: undefined },
    target: target.label,
    runs,
    table: {
      columns: ['run', 'req/s', 'p50 ms', 'p90', 'p99', 'p99.9', 'max', 'entries', 'resp bytes', 'server cpu', 'redis cpu', 'bench cpu', 'errors'],
      rows: measuredRuns.map((r) => {
        const l = r.latency.request!;
        const m = r.metrics;
        return [
          r.label,
          fmt.rate(m.requestsPerSec!),
          fmt.ms(l.p50),
          fmt.ms(l.p90),
          fmt.ms(l.p99),
          fmt.ms(l.p999),
          fmt.ms(l.max),
          m.entriesPerResponse!.toFixed(1),
          fmt.rate(m.responseBytes!),
          cpu(m.serverCpu),
          cpu(m.redisCpu),
          cpu(m.driverCpu),
          Object.values(r.errors).reduce((a, b) => a + b, 0),
        ];
      }),
    },
    warnings,
  };
}
