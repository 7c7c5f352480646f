// The bench package's entry, loaded on demand by `switchboard bench` (src/cli/commands/bench.ts,
// which parses and checks the flags): turns the flags into a scenario's options, runs it, prints
// its table on stdout and writes the --json / --html reports, with no secret of the run in them.

import { SwitchboardError } from '../../src/errors.js';
import type { BenchContext, BenchEntry, BenchOptions, ScenarioName } from '../../src/cli/commands/bench.js';
import { chatScenario } from './scenarios/chat.js';
import { loginStormScenario } from './scenarios/login-storm.js';
import { idleScenario } from './scenarios/idle.js';
import { failoverScenario } from './scenarios/failover.js';
import { groupScenario } from './scenarios/group.js';
import { conversationsScenario } from './scenarios/conversations.js';
import type { ScenarioOptions } from './scenarios/options.js';
import { formatReport, type BenchReport } from './report.js';
import { writeReports } from './report-files.js';
import { noProgress, stderrProgress, type ProgressSink } from './progress.js';
import { clusterSecretOf, type TargetKind } from './targets.js';

interface RunContext extends BenchContext {
  progress: ProgressSink;
}

const SCENARIOS: Record<ScenarioName, (o: BenchOptions, c: RunContext) => Promise<BenchReport>> = {
  chat: (o, c) => chatScenario(chatOptions(o, c, true)),
  relay: (o, c) => chatScenario(chatOptions(o, c, false)),
  'login-storm': (o, c) => loginStormScenario(loginStormOptions(o, c)),
  idle: (o, c) => idleScenario(idleOptions(o, c)),
  failover: (o, c) => failoverScenario(failoverOptions(o, c)),
  group: (o, c) => groupScenario(groupOptions(o, c)),
  conversations: (o, c) => conversationsScenario(conversationsOptions(o, c)),
};

export const runBench: BenchEntry['runBench'] = async (scenario, o, context) => {
  const report = await SCENARIOS[scenario](o, { ...context, progress: o.quiet ? noProgress : stderrProgress });
  // The reports are for sharing: no secret the run used may be in them, wherever it ended up.
  const secrets = [context.secret, clusterSecretOf(context.secret)];
  process.stdout.write(formatReport(report, secrets));
  for (const file of writeReports(report, { json: o.json, html: o.html }, secrets)) process.stdout.write(`wrote ${file}\n`);
};

function oneOf<T extends string>(flag: string, value: string, allowed: readonly T[]): T {
  if (!(allowed as readonly string[]).includes(value)) throw new SwitchboardError('SB_ERR_CONFIG', `--${flag} must be one of ${allowed.join(', ')}, got ${JSON.stringify(value)}`);
  return value as T;
}

/** The options every scenario takes (ScenarioOptions). */
function common(o: BenchOptions, c: RunContext): ScenarioOptions {
  return {
    target: oneOf<TargetKind>('target', o.target, ['embedded', 'cluster', 'external']),
    workers: o.workers,
    fsync: oneOf('redis-fsync', o['redis-fsync'], ['none', 'everysec', 'always'] as const),
    secret: c.secret,
    ...(o.worker ? { workerEndpoints: o.worker.split(',') } : {}),
    connections: o.connections,
    durationS: o.duration,
    warmupS: o.warmup,
    drivers: Math.max(1, o.drivers),
    progress: c.progress,
    command: c.command,
  };
}

const inbox = (o: BenchOptions) => oneOf('inbox', o.inbox, ['memory', 'redis'] as const);

function chatOptions(o: BenchOptions, c: RunContext, switchboard: boolean) {
  return {
    ...common(o, c),
    inbox: inbox(o),
    window: o.window,
    ...(o.rate ? { rate: o.rate } : {}),
    max: o.max,
    maxP99Ms: o['max-p99-ms'],
    payloadBytes: o.payload,
    crossNode: o['cross-node'],
    noCopiesBaseline: o['no-own-copies-baseline'] === true,
    memoryBaseline: o['memory-baseline'] === true,
    redisCluster: o['redis-cluster'] === true,
    ...(o.receipts ? { receipts: true } : {}),
    ...(o.tls ? { tls: true } : {}),
    relay: !switchboard || !o['no-relay'],
    switchboard,
    drainMs: o['drain-ms'],
  };
}

/** Failover drains for at least this long: the drain ends once everything arrived, so waiting out a slow recovery costs nothing. */
const FAILOVER_MIN_DRAIN_MS = 15_000;
/** The workers' ZooKeeper session timeout in `bench failover` (the default 10 s would take most of a run). */
const FAILOVER_ZK_SESSION_TIMEOUT_MS = 4_000;

function failoverOptions(o: BenchOptions, c: RunContext) {
  return {
    ...common(o, c),
    rate: o.rate ?? 2000,
    payloadBytes: o.payload,
    drainMs: Math.max(o['drain-ms'], FAILOVER_MIN_DRAIN_MS),
    zkSessionTimeoutMs: FAILOVER_ZK_SESSION_TIMEOUT_MS,
  };
}

function groupOptions(o: BenchOptions, c: RunContext) {
  return {
    ...common(o, c),
    inbox: inbox(o),
    groups: o.groups,
    groupSize: o['group-size'],
    largeGroup: o['large-group'],
    senders: o['group-senders'],
    groupWindow: o['group-window'],
    groupRate: o['group-rate'],
    window: o.window,
    controlRate: o['control-rate'],
    payloadBytes: o.payload,
    drainMs: o['drain-ms'],
  };
}

function conversationsOptions(o: BenchOptions, c: RunContext) {
  return {
    ...common(o, c),
    inbox: inbox(o),
    conversations: o.conversations,
    groups: o['conversation-groups'],
    payloadBytes: o.payload,
  };
}

function idleOptions(o: BenchOptions, c: RunContext) {
  return {
    ...common(o, c),
    inbox: inbox(o),
    heartbeatMs: o['heartbeat-ms'],
  };
}

function loginStormOptions(o: BenchOptions, c: RunContext) {
  return {
    ...common(o, c),
    ...(o.gate ? { gateUrl: o.gate } : {}),
    ...(o.rate ? { rate: o.rate } : {}),
    users: o.users,
  };
}
