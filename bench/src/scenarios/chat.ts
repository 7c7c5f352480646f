// `bench chat` and `bench relay`: 1:1 chat through switchboard next to the bare relay measured
// by the same drivers in the same run. Closed loop (a window of messages in flight per pair),
// open loop at a fixed rate, or --max: a closed-loop probe for the ceiling, then open-loop
// steps bisecting below it for the highest rate delivered in full within the p99 bound. With
// --receipts the senders ask for RECEIPTs, so each receiver ack costs the server a DELIVERED
// receipt as well, and the report counts the ones the senders got. With --memory-baseline the
// same load first runs against an embedded node with the memory inbox, and every run against a
// Redis the bench started reports what it left in Redis per message.

import type { ScenarioOptions } from './options.js';
import { mergeAccounting, type ChatLoadResult, type ChatSecond, type Endpoint, type Target } from '../chat-load.js';
import { DriverTimeline } from '../timeline.js';
import { SOCKETS_PER_ADDRESS, driverAddresses, runDrivers, share } from '../drivers.js';
import { Latency } from '../latency.js';
import { ProcessSampler, startRelayProcess } from '../processes.js';
import { noProgress, type ProgressSink } from '../progress.js';
import { driverWarnings, fmt, machineInfo, meanCpu, sliceProcesses, sumCounts, type Accounting, type BenchReport, type LatencyReport, type RunReport } from '../report.js';
import { BENCH_WORKER_ARGS, startTarget, type RunningTarget } from '../targets.js';
import { RedisMemory } from '../redis-memory.js';
import { DEFAULT_INBOX_LIMITS } from '../../../src/inbox/inbox-store.js';
import { sleep } from '../../../testkit/wait.js';
import { benchCertificate } from '../tls-certs.js';

export interface ChatScenarioOptions extends ScenarioOptions {
  inbox: 'memory' | 'redis';
  /** Logged-in connections in total: half send, half receive. */
  connections: number;
  /** Closed loop: messages in flight per pair. */
  window: number;
  /** Open loop: messages per second in total. */
  rate?: number;
  /** Find the highest sustained rate. */
  max: boolean;
  /** --max: a step counts as sustained only with delivery p99 at or below this. */
  maxP99Ms: number;
  payloadBytes: number;
  crossNode: boolean;
  /** Measure a target started with --no-own-copies first (the ratio of own copies' cost). */
  noCopiesBaseline?: boolean;
  /** Measure the same load on an embedded node with the memory inbox first (the ratio to it). */
  memoryBaseline?: boolean;
  /** The Redis the bench starts is a 3-master Redis Cluster. */
  redisCluster?: boolean;
  /** Measure the bare relay too (the baseline of the ratio). */
  relay: boolean;
  /** Measure switchboard (false: `bench relay`, the baseline alone). */
  switchboard: boolean;
  drainMs: number;
  /** The receivers discard this many deliveries (tests the loss accounting). */
  dropForTest?: number;
}

/**
 * --receipts, beside ChatScenarioOptions rather than in it: every key of those has a label in
 * labels.ts (the compiler checks), and until that file names this one the reports show it as
 * "receipts: yes", the fallback for an unlabelled option.
 */
export interface ChatReceiptsOption {
  /** The senders log in with `receipts`: every receiver ack sends their sender a DELIVERED receipt. */
  receipts?: boolean;
}

/** --tls, beside ChatScenarioOptions for the reason ChatReceiptsOption is. */
export interface ChatTlsOption {
  /** After the plaintext run, the same load over the target's TLS client port. */
  tls?: boolean;
}

/** Open-loop steps of --max: the highest sustained rate is found within 1.1 × ceiling / 2^(steps-1). */
const MAX_STEPS = 6;
const STEP_PAUSE_MS = 1000;

export interface Load {
  label: string;
  target: Target;
  endpoints: Endpoint[];
  rate?: number;
  /** Overrides the options' --cross-node (an embedded baseline has one worker). */
  crossNode?: boolean;
  /** A target the bench started: what it stores, for the notes on its inbox. */
  stored?: TargetStore;
}

/** What the runs against one target the bench started store in it, counted across them (they share its inboxes). */
export interface TargetStore {
  inbox: 'memory' | 'redis';
  /** Messages the target acknowledged (stored) in the runs so far. */
  acked: number;
  /** Inbox entries per acknowledged message: the recipient's and the sender's own copy, or one with --no-own-copies. */
  copies: 1 | 2;
  /** The Redis the bench started for the target (each master of a Redis Cluster). */
  redis?: RedisMemory;
  /** How many Redis servers hold its data (1, or the cluster's masters). */
  redisMasters: number;
}

/** What the runs of one `bench chat` command share (`bench group` measures its 1:1 baseline with them too). */
export interface ChatRun {
  o: ChatScenarioOptions & ChatReceiptsOption & ChatTlsOption;
  pairs: number;
  drivers: number;
  progress: ProgressSink;
  sampler: ProcessSampler;
  runs: RunReport[];
  warnings: string[];
}

export async function chatScenario(o: ChatScenarioOptions & ChatReceiptsOption & ChatTlsOption): Promise<BenchReport> {
  if (o.connections < 2) throw new Error('--connections must be at least 2 (one sender, one receiver)');
  if (o.memoryBaseline && (o.target === 'external' || o.max)) throw new Error('--memory-baseline starts an embedded node of its own: not with --target external or --max');
  if (o.redisCluster && o.target !== 'cluster' && !(o.target === 'embedded' && o.inbox === 'redis')) throw new Error('--redis-cluster makes the Redis the bench starts a Redis Cluster: with --target cluster, or --target embedded --inbox redis');
  const pairs = Math.floor(o.connections / 2);
  const sampler = new ProcessSampler();
  sampler.start();
  const run: ChatRun = { o, pairs, drivers: Math.max(1, Math.min(o.drivers, pairs)), progress: o.progress ?? noProgress, sampler, runs: [], warnings: [] };
  const relayRate = o.relay ? await relayRun(run) : undefined;
  const targetLabel = o.switchboard ? await switchboardRuns(run) : 'bare relay';
  sampler.stop();
  annotate(run, relayRate);
  return chatReport(run, targetLabel);
}

/** One measured run of the drivers against `load`. */
export async function measure(run: ChatRun, load: Load): Promise<RunReport> {
  const { o, pairs, drivers, sampler } = run;
  // Before the drivers connect and after they closed: the run's sessions are in neither reading.
  const before = await redisMemory(run, load);
  let startedAt = 0;
  // Distinct msg_ids per run: a later run against the same server is not deduped against this one.
  const msgIdBase = Date.now() * 1000;
  const timeline = new DriverTimeline(drivers, (p) =>
    run.progress(
      `[${load.label}] ${String(p.t).padStart(3)} s ${String(p.phase).padEnd(7)} delivered ${fmt.rate(Number(p.delivered)).padStart(9)}/s  p99 ${fmt.ms(Number(p.p99Ms)).padStart(8)} ms  ` +
        (p.receipts === undefined ? '' : `receipts ${fmt.rate(Number(p.receipts)).padStart(9)}/s  `) +
        `errors ${p.errors}  connections ${p.connections}`,
    ),
  );
  const results = await runDrivers({
    task: 'chat',
    drivers,
    sampler,
    onReady: () => {
      startedAt = sampler.now();
    },
    onTick: (_index, tick) => timeline.add(tick as ChatSecond),
    options: (index) => ({
      target: load.target,
      endpoints: load.endpoints,
      crossNode: load.crossNode ?? o.crossNode,
      localAddresses: driverAddresses(index, load.endpoints[0]!.host, Math.ceil((2 * share(pairs, drivers, index)) / SOCKETS_PER_ADDRESS)),
      pairs: share(pairs, drivers, index),
      msgIdBase,
      pairOffset: Array.from({ length: index }, (_, j) => share(pairs, drivers, j)).reduce((a, b) => a + b, 0),
      window: o.window,
      ...(load.rate === undefined ? {} : { rate: load.rate * (share(pairs, drivers, index) / pairs) }),
      warmupMs: o.warmupS * 1000,
      durationMs: o.durationS * 1000,
      payloadBytes: o.payloadBytes,
      drainMs: o.drainMs,
      ...(o.receipts && load.target === 'switchboard' ? { receipts: true } : {}),
      ...(index === 0 && o.dropForTest ? { dropForTest: o.dropForTest } : {}),
      secret: o.secret,
    }),
  });
  const endedAt = sampler.now();
  const from = startedAt + o.warmupS;
  const to = from + o.durationS;
  const after = before === undefined ? undefined : await redisMemory(run, load);
  run.warnings.push(...driverWarnings(sampler.series, from, to).map((w) => `${load.label}: ${w}`));
  const report = summarize(load, results, timeline, sliceProcesses(sampler.series, startedAt, endedAt), meanCpu(sampler.series, from, to));
  if (load.stored) storeNotes(run, load.stored, report, before, after);
  return report;
}

/** used_memory of the load's Redis (undefined without one; a failed reading is a warning). */
async function redisMemory(run: ChatRun, load: Load): Promise<number | undefined> {
  if (!load.stored?.redis) return undefined;
  try {
    return await load.stored.redis.usedMemory();
  } catch (err) {
    run.warnings.push(`${load.label}: cannot read the Redis memory (INFO memory): ${(err as Error).message}`);
    return undefined;
  }
}

/** The bookkeeping of a target the bench started: its inbox, copies per message and, with Redis, a connection to read its memory. */
async function targetStore(target: RunningTarget, copies: 1 | 2): Promise<TargetStore> {
  const masters = target.redisMasters ?? [];
  const inbox = masters.length ? 'redis' : 'memory';
  return { inbox, acked: 0, copies, redisMasters: masters.length, ...(masters.length ? { redis: await RedisMemory.connect(masters) } : {}) };
}

/**
 * After a run against a target the bench started: the stored count goes up, and the notes say
 * what the inbox holds: on the memory inbox why the node's RSS climbs, on Redis how many bytes
 * the run left in it per message (the used_memory delta between `before` and `after`).
 */
function storeNotes(run: ChatRun, stored: TargetStore, report: RunReport, before: number | undefined, after: number | undefined): void {
  if (!report.accounting) return;
  const acked = report.accounting.acked;
  stored.acked += acked;
  if (stored.inbox === 'memory') {
    report.notes.push(memoryInboxNote(run.pairs, stored.acked));
    return;
  }
  if (before === undefined || after === undefined) return;
  const perInbox = stored.acked / run.pairs;
  const limit = DEFAULT_INBOX_LIMITS.maxMessages;
  const pruned = perInbox > limit;
  const delta = after - before;
  report.metrics.redisUsedMemoryDelta = delta;
  if (acked > 0) {
    report.metrics.redisBytesPerMessage = delta / acked;
    report.metrics.redisBytesPerEntry = delta / (acked * stored.copies);
  }
  report.notes.push(redisMemoryNote({ before, after, acked, copies: stored.copies, masters: stored.redisMasters, perInbox }));
  if (pruned) {
    run.warnings.push(
      `${report.label}: ${thousands(Math.round(perInbox))} messages per inbox on average on this target so far, more than --inbox-max-messages ${thousands(limit)}: ` +
        `retention pruned the inboxes during the run, so its Redis memory per message is meaningless (fewer pairs' messages: a shorter run, or more --connections)`,
    );
  }
}

/** What a run's Redis memory figures are: what was read, what each is divided by, what the delta holds. */
function redisMemoryNote(m: { before: number; after: number; acked: number; copies: 1 | 2; masters: number; perInbox: number }): string {
  const delta = m.after - m.before;
  const limit = DEFAULT_INBOX_LIMITS.maxMessages;
  const where = m.masters > 1 ? `, summed over the ${m.masters} masters of the Redis Cluster` : '';
  const perMessage = m.acked > 0 ? `${fmt.bytes(delta / m.acked)} per acknowledged message, ${fmt.bytes(delta / (m.acked * m.copies))} per stored inbox entry` : 'no message acknowledged, nothing to divide by';
  return (
    `Redis memory: used_memory ${fmt.bytes(m.before)} before the drivers connected, ${fmt.bytes(m.after)} after they closed (+${fmt.bytes(delta)})${where}: ${perMessage} ` +
    `(${thousands(m.acked)} messages acknowledged, each stored ${m.copies === 2 ? "twice: the recipient's message and the sender's own copy" : 'once: the target runs --no-own-copies'}). ` +
    `Counted is everything the appends wrote: the inboxes' logs, conversation indexes, conversation entries and chat lists, and each sender's dedupe state ` +
    `(its last msg_ids per recipient: bounded, so a longer run's figure is lower by up to its share), with the receivers' ack positions and Redis's overhead for them; ` +
    (m.perInbox > limit
      ? `retention pruned the inboxes: ${thousands(Math.round(m.perInbox))} messages per inbox on average on this target so far, past --inbox-max-messages ${thousands(limit)}, so these figures are not the cost of a message.`
      : `retention pruned nothing: ${thousands(Math.round(m.perInbox))} messages per inbox on average on this target so far, within --inbox-max-messages ${thousands(limit)}.`)
  );
}

/** The bare relay's run; resolves its delivered rate, the baseline of the ratio. */
async function relayRun(run: ChatRun): Promise<number | undefined> {
  const { o } = run;
  const relay = await startRelayProcess();
  run.sampler.add('relay', 'relay', relay.child.pid);
  try {
    const report = await measure(run, { label: 'bare relay', target: 'relay', endpoints: [{ host: '127.0.0.1', port: relay.port }], ...(o.rate && !o.max ? { rate: o.rate } : {}) });
    run.runs.push(report);
    return report.metrics.deliveredPerSec;
  } finally {
    await relay.stop();
  }
}

/** switchboard's run (or, with --max, its probe and bisection steps); resolves the target's label. */
async function switchboardRuns(run: ChatRun): Promise<string> {
  const { o } = run;
  const memoryBaseline = o.memoryBaseline ? await memoryBaselineRun(run) : undefined;
  const baseline = o.noCopiesBaseline ? await noCopiesRun(run) : undefined;
  if (o.tls && (o.target === 'external' || o.max || o.noCopiesBaseline)) throw new Error('--tls starts its own target with a TLS port: not with --target external, --max or --no-own-copies-baseline');
  const certs = o.tls ? benchCertificate() : undefined;
  const workerArgs = certs ? ['--tls-port', '0', '--tls-cert', certs.cert, '--tls-key', certs.key] : [];
  const target = await startTarget({ kind: o.target, workers: o.workers, inbox: o.inbox, fsync: o.fsync, redisCluster: o.redisCluster, secret: o.secret, workerEndpoints: o.workerEndpoints, sampler: run.sampler, workerArgs });
  let stored: TargetStore | undefined;
  try {
    if (o.target !== 'external') stored = await targetStore(target, 2);
    const endpoints = target.workers.map(({ host, port }) => ({ host, port }));
    if (o.crossNode && endpoints.length < 2) throw new Error('--cross-node needs at least two workers (--target cluster --workers 2)');
    const label = o.crossNode ? 'switchboard, cross-node' : 'switchboard';
    if (o.max) await maxSearch(run, label, endpoints, stored);
    else run.runs.push(await measure(run, { label, target: 'switchboard', endpoints, ...(o.rate ? { rate: o.rate } : {}), stored }));
    const own = run.runs[run.runs.length - 1]!;
    if (certs) await tlsRun(run, label, target.workers, certs.ca, stored);
    if (memoryBaseline) noteMemoryBaseline(run, own, memoryBaseline, stored?.inbox === 'redis');
    if (baseline !== undefined) {
      const ratio = own.metrics.deliveredPerSec! / baseline;
      own.metrics.ratioToNoCopies = ratio;
      own.notes.push(`with own copies ${fmt.rate(own.metrics.deliveredPerSec!)} msg/s, ${(ratio * 100).toFixed(1)}% of the ${fmt.rate(baseline)} msg/s without them (target: at least 80%)`);
      if (ratio < 0.8) run.warnings.push(`own copies cost more than 20%: ${(ratio * 100).toFixed(1)}% of the delivered rate without them`);
    }
    return target.label;
  } finally {
    stored?.redis?.close();
    await target.stop();
    certs?.remove();
  }
}

/** A target whose inbox is Redis should deliver at least this share of the memory inbox's rate. */
const MEMORY_BASELINE_TARGET = 0.4;

/** --memory-baseline: the configured target's run against the memory inbox's of the same sitting; below 0.4 on Redis, a warning (issue 16's target). */
function noteMemoryBaseline(run: ChatRun, own: RunReport, baseline: RunReport, redisInbox: boolean): void {
  const base = baseline.metrics.deliveredPerSec!;
  const ratio = own.metrics.deliveredPerSec! / base;
  own.metrics.ratioToMemoryInbox = ratio;
  own.notes.push(
    `${fmt.rate(own.metrics.deliveredPerSec!)} msg/s, ${(ratio * 100).toFixed(1)}% of the ${fmt.rate(base)} msg/s of an embedded node with the memory inbox under the same load just before ` +
      `(--memory-baseline${run.o.crossNode ? '; that node is one worker, so its pairs were not cross-node' : ''}${redisInbox ? `; the target on Redis: at least ${MEMORY_BASELINE_TARGET * 100}%` : ''})`,
  );
  if (redisInbox && ratio < MEMORY_BASELINE_TARGET) {
    run.warnings.push(`${own.label}: the Redis inbox delivered ${(ratio * 100).toFixed(1)}% of the memory inbox's rate in the same sitting, below the target of ${MEMORY_BASELINE_TARGET * 100}%`);
  }
}

/** --memory-baseline: the same load on an embedded node with the memory inbox, started and stopped here; its run. */
async function memoryBaselineRun(run: ChatRun): Promise<RunReport> {
  const { o } = run;
  const target = await startTarget({ kind: 'embedded', inbox: 'memory', secret: o.secret, sampler: run.sampler });
  try {
    const endpoints = target.workers.map(({ host, port }) => ({ host, port }));
    const stored = await targetStore(target, 2);
    const report = await measure(run, { label: 'embedded, memory inbox (baseline)', target: 'switchboard', endpoints, crossNode: false, stored, ...(o.rate ? { rate: o.rate } : {}) });
    run.runs.push(report);
    return report;
  } finally {
    await target.stop();
  }
}

/** --tls: the same load over the TLS ports of the same target, right after the plaintext run; notes the ratio. */
async function tlsRun(run: ChatRun, label: string, workers: readonly { host: string; tlsPort?: number }[], ca: string, stored: TargetStore | undefined): Promise<void> {
  const { o } = run;
  const plain = run.runs[run.runs.length - 1]!;
  const endpoints = workers.map(({ host, tlsPort }) => {
    if (tlsPort === undefined) throw new Error('--tls: a worker announced no TLS port');
    return { host, port: tlsPort, tls: { ca } };
  });
  await sleep(STEP_PAUSE_MS);
  const report = await measure(run, { label: `${label}, TLS`, target: 'switchboard', endpoints, ...(o.rate ? { rate: o.rate } : {}), stored });
  run.runs.push(report);
  const ratio = report.metrics.deliveredPerSec! / plain.metrics.deliveredPerSec!;
  report.notes.push(`over TLS ${fmt.rate(report.metrics.deliveredPerSec!)} msg/s, ${(ratio * 100).toFixed(1)}% of the ${fmt.rate(plain.metrics.deliveredPerSec!)} msg/s in plaintext just before, same target and load`);
}

/** --no-own-copies-baseline: the same load on a target that keeps no own copies (the 1:1 chat before them); its delivered rate. */
async function noCopiesRun(run: ChatRun): Promise<number> {
  const { o } = run;
  if (o.target === 'external' || o.max) throw new Error('--no-own-copies-baseline starts its own target: not with --target external or --max');
  const target = await startTarget({ kind: o.target, workers: o.workers, inbox: o.inbox, fsync: o.fsync, redisCluster: o.redisCluster, secret: o.secret, sampler: run.sampler, workerArgs: ['--no-own-copies'] });
  let stored: TargetStore | undefined;
  try {
    stored = await targetStore(target, 1);
    const endpoints = target.workers.map(({ host, port }) => ({ host, port }));
    const report = await measure(run, { label: o.crossNode ? 'switchboard, cross-node, no own copies' : 'switchboard, no own copies', target: 'switchboard', endpoints, stored, ...(o.rate ? { rate: o.rate } : {}) });
    run.runs.push(report);
    return report.metrics.deliveredPerSec!;
  } finally {
    stored?.redis?.close();
    await target.stop();
  }
}

/**
 * --max: a closed-loop probe for the ceiling, then bisection over (0, 1.1 × ceiling] for the
 * highest open-loop rate sustained (an open-loop rate is usually well below the closed-loop
 * ceiling: no batching of several messages per read and write).
 */
async function maxSearch(run: ChatRun, label: string, endpoints: Endpoint[], stored: TargetStore | undefined): Promise<void> {
  const { o } = run;
  const probe = await measure(run, { label: `${label}, closed loop (probe)`, target: 'switchboard', endpoints, stored });
  run.runs.push(probe);
  const ceiling = probe.metrics.deliveredPerSec!;
  if (!(ceiling > 0)) throw new Error(`--max: the closed-loop probe delivered nothing (errors: ${JSON.stringify(probe.errors)})`);
  let lo = 0;
  let hi = ceiling * 1.1;
  let best: RunReport | undefined;
  for (let step = 0; step < MAX_STEPS; step++) {
    // A step starts on a server that has worked off the previous one's backlog.
    await sleep(STEP_PAUSE_MS);
    const rate = Math.round(step === 0 ? ceiling / 2 : (lo + hi) / 2);
    const report = await measure(run, { label: `${label}, open loop ${fmt.rate(rate)}/s`, target: 'switchboard', endpoints, rate, stored });
    const sustained = report.metrics.deliveredPerSec! >= 0.97 * rate && report.latency.delivery!.p99 <= o.maxP99Ms && (report.accounting?.lost ?? 0) === 0;
    report.metrics.sustained = sustained ? 1 : 0;
    run.runs.push(report);
    if (sustained) {
      lo = rate;
      if (!best || rate > best.metrics.offeredPerSec!) best = report;
    } else {
      hi = rate;
    }
  }
  if (best) best.notes.push(`highest sustained rate: ${fmt.rate(best.metrics.offeredPerSec!)} msg/s (delivery p99 ≤ ${o.maxP99Ms} ms, ≥ 97% delivered, nothing lost; ${MAX_STEPS} bisection steps)`);
  else run.warnings.push(`no open-loop step was sustained: every rate tried missed p99 ≤ ${o.maxP99Ms} ms or lost messages`);
}

/** What the runs say together: the ratio to the relay, losses. */
function annotate({ runs, warnings }: ChatRun, relayRate: number | undefined): void {
  if (relayRate) for (const run of runs) run.metrics.ratioToRelay = run.metrics.deliveredPerSec! / relayRate;
  for (const run of runs) {
    const a = run.accounting;
    if (a && (a.lost > 0 || a.dup > 0)) {
      warnings.push(`${run.label}: lost=${a.lost} dup=${a.dup}: acknowledged messages were not delivered exactly once`);
    }
    // Receipts are at most once, but on a healthy target every ack makes one and the drain waits for it.
    if (a?.receipts !== undefined && a.receipts !== a.receiverAcks) {
      warnings.push(`${run.label}: receipts=${a.receipts} for receiverAcks=${a.receiverAcks}: not one DELIVERED receipt per receiver ack`);
    }
  }
}

function chatReport({ o, pairs, drivers, runs, warnings }: ChatRun, targetLabel: string): BenchReport {
  const mode = o.max ? `--max (p99 ≤ ${o.maxP99Ms} ms)` : o.rate ? `open loop at ${fmt.rate(o.rate)} msg/s` : `closed loop, window ${o.window}`;
  const receipts = o.receipts === true && o.switchboard;
  const redisMemory = runs.some((r) => r.metrics.redisUsedMemoryDelta !== undefined);
  return {
    scenario: o.switchboard ? 'chat' : 'relay',
    title: `1:1 chat, ${pairs} pairs (${pairs * 2} connections), ${mode}, ${o.payloadBytes}-byte payload, ${o.durationS} s after ${o.warmupS} s warm-up, ${drivers} driver${drivers > 1 ? 's' : ''}${receipts ? ', senders take receipts' : ''}`,
    date: new Date().toISOString(),
    command: o.command,
    machine: machineInfo(),
    options: { ...o, progress: undefined },
    target: targetLabel,
    runs,
    table: {
      columns: [
        'run', 'deliv/s', 'acked/s', ...(receipts ? ['receipts/s'] : []), 'ratio', 'p50 ms', 'p90', 'p99', 'p99.9', 'max', 'ack p99', 'server cpu', 'driver cpu',
        ...(redisMemory ? ['redis cpu', 'redis B/msg', 'B/entry'] : []), 'lost', 'dup',
      ],
      rows: runs.map((r) => tableRow(r, receipts, redisMemory)),
    },
    warnings,
  };
}

function tableRow(r: RunReport, receipts: boolean, redisMemory: boolean): (string | number)[] {
  const bytes = (v: number | undefined) => (v === undefined ? '-' : Math.round(v));
  const d = r.latency.delivery!;
  const relay = !r.accounting;
  return [
    r.label,
    fmt.rate(r.metrics.deliveredPerSec!),
    relay ? '-' : fmt.rate(r.metrics.ackedPerSec!),
    ...(receipts ? [r.metrics.receiptsPerSec === undefined ? '-' : fmt.rate(r.metrics.receiptsPerSec)] : []),
    r.metrics.ratioToRelay === undefined ? '-' : fmt.ratio(r.metrics.ratioToRelay),
    fmt.ms(d.p50),
    fmt.ms(d.p90),
    fmt.ms(d.p99),
    fmt.ms(d.p999),
    fmt.ms(d.max),
    relay ? '-' : fmt.ms(r.latency.ack!.p99),
    fmt.pct(r.metrics.serverCpu!),
    fmt.pct(r.metrics.driverCpu!),
    ...(redisMemory ? [r.metrics.redisCpu === undefined ? '-' : fmt.pct(r.metrics.redisCpu), bytes(r.metrics.redisBytesPerMessage), bytes(r.metrics.redisBytesPerEntry)] : []),
    relay ? '-' : r.accounting!.lost,
    relay ? '-' : r.accounting!.dup,
  ];
}

/** The --inbox-memory-mb the bench gives the nodes it starts. */
function benchInboxMemoryMb(): number {
  const at = BENCH_WORKER_ARGS.indexOf('--inbox-memory-mb');
  return Number(BENCH_WORKER_ARGS[at + 1]);
}

const thousands = (n: number) => n.toLocaleString('en-US').replace(/,/g, ' ');

/**
 * Why the embedded node's RSS climbs through a chat run on the memory inbox: it holds every
 * message it stored (acknowledged ones too: a user's other devices may still read them) up to
 * the inbox's bounds, which a run of seconds reaches only by count. `stored`: messages the node
 * acknowledged (stored) so far, this run and the earlier ones of the same command.
 */
export function memoryInboxNote(recipients: number, stored: number): string {
  const perUser = DEFAULT_INBOX_LIMITS.maxMessages;
  const days = (ms: number) => `${ms / 86_400_000} day${ms === 86_400_000 ? '' : 's'}`;
  const held = Math.min(stored, recipients * perUser);
  return (
    `memory: the in-memory inbox keeps every stored message in the node's RSS, acknowledged or not, up to its bounds: ` +
    `per recipient at most ${thousands(perUser)} messages (--inbox-max-messages) none older than ${days(DEFAULT_INBOX_LIMITS.maxAgeMs)} (--inbox-max-age-s), ` +
    `and a dedupe entry per message for ${days(DEFAULT_INBOX_LIMITS.dedupeWindowMs)} (--dedupe-window-s, at most ${thousands(perUser)} per recipient); ` +
    `all inboxes together at most ${thousands(benchInboxMemoryMb())} MiB accounted (--inbox-memory-mb as the bench starts the node; 256 by default), ` +
    `past which appends are refused with SB_ERR_STORE_FULL. ` +
    `A run of seconds reaches no age bound, so RSS grows with every message stored until each of the ${thousands(recipients)} recipients holds ${thousands(perUser)}, then levels off: ` +
    `${thousands(stored)} stored so far, at most ${thousands(held)} of them still held (${stored > held ? 'the oldest pruned' : 'none pruned yet'}). Retention, not a leak.`
  );
}

function summarize(load: Load, results: ChatLoadResult[], timeline: DriverTimeline, processes: RunReport['processes'], cpu: Record<string, number>): RunReport {
  const merged = (key: 'deliveryLatency' | 'ackLatency' | 'sendLag' | 'fromSendLatency'): LatencyReport => Latency.merged(results.map((r) => r[key])).report();
  const seconds = Math.max(...results.map((r) => r.seconds));
  const delivered = results.reduce((sum, r) => sum + r.delivered, 0);
  const acked = results.reduce((sum, r) => sum + r.acked, 0);
  const errors = sumCounts(results.map((r) => r.errors));
  const accountings = results.map((r) => r.accounting).filter((a): a is Accounting => a !== undefined);
  const sum = (roles: string[]) => processes.filter((p) => roles.includes(p.role)).reduce((total, p) => total + (cpu[p.pid] ?? 0), 0);
  const latency: Record<string, LatencyReport> = { delivery: merged('deliveryLatency') };
  if (load.target === 'switchboard') latency.ack = merged('ackLatency');
  if (load.rate !== undefined) {
    latency.sendLag = merged('sendLag');
    latency.deliveryFromSend = merged('fromSendLatency');
  }
  const metrics: Record<string, number> = {
    deliveredPerSec: delivered / seconds,
    ackedPerSec: acked / seconds,
    serverCpu: sum(['worker', 'node', 'relay']),
    driverCpu: sum(['driver']),
  };
  if (load.rate !== undefined) metrics.offeredPerSec = load.rate;
  const withReceipts = results.filter((r) => r.receipts !== undefined);
  if (withReceipts.length) {
    metrics.receiptsPerSec = withReceipts.reduce((sum, r) => sum + r.receipts!, 0) / seconds;
    metrics.receiverAcksPerSec = withReceipts.reduce((sum, r) => sum + r.receiverAcks!, 0) / seconds;
  }
  // The Redis of this run's target, every node of a Redis Cluster (an earlier target's, stopped, has no samples here).
  const redis = processes.filter((p) => p.role === 'redis' && cpu[p.pid] !== undefined);
  if (redis.length) metrics.redisCpu = redis.reduce((total, p) => total + cpu[p.pid]!, 0);
  return {
    label: load.label,
    metrics,
    latency,
    timeline: timeline.points(),
    // Only the processes of this run: the relay's run does not list the workers, and vice versa.
    processes: processes.filter((p) => p.samples.length > 0),
    errors,
    ...(accountings.length ? { accounting: mergeAccounting(accountings) } : {}),
    notes: [
      ...(load.rate !== undefined
        ? [
            `driver send lag p99 ${fmt.ms(latency.sendLag!.p99)} ms (the driver's own share of the latency); ` +
              `delivery from the actual send p50 ${fmt.ms(latency.deliveryFromSend!.p50)} p99 ${fmt.ms(latency.deliveryFromSend!.p99)} p99.9 ${fmt.ms(latency.deliveryFromSend!.p999)} ms`,
          ]
        : []),
      ...(metrics.receiptsPerSec === undefined
        ? []
        : [
            `receipts: the senders got ${fmt.rate(metrics.receiptsPerSec)} DELIVERED receipts/s for the receivers' ${fmt.rate(metrics.receiverAcksPerSec!)} acks/s ` +
              `(one per ack; ${(metrics.deliveredPerSec! / Math.max(1, metrics.receiverAcksPerSec!)).toFixed(1)} deliveries per ack)`,
          ]),
    ],
  };
}
