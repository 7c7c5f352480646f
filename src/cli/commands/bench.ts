// `switchboard bench <scenario>`: drives real load over real sockets against a node or a
// cluster it starts (or one that is running), prints live progress on stderr and a table on
// stdout, and writes --json / --html reports. Scenarios live in src/bench/scenarios.

import { SwitchboardError } from '../../errors.js';
import { count, ms, parseOptions, secretFlags, usage, type OptionSpecs, type OptionValues } from '../options.js';
import { redactArgv } from '../../redact.js';
import { chatScenario } from '../../bench/scenarios/chat.js';
import { MAX_GATE_USERS, loginStormScenario } from '../../bench/scenarios/login-storm.js';
import { idleScenario } from '../../bench/scenarios/idle.js';
import { DEFAULT_LIMITS } from '../../config.js';
import { failoverScenario } from '../../bench/scenarios/failover.js';
import { formatReport, type BenchReport } from '../../bench/report.js';
import { writeReports } from '../../bench/report-files.js';
import { noProgress, stderrProgress, type ProgressSink } from '../../bench/progress.js';
import type { TargetKind } from '../../bench/targets.js';
import type { ScenarioOptions } from '../../bench/scenarios/options.js';

export const BENCH_OPTIONS = {
  target: { type: 'string', group: 'target', choices: ['embedded', 'cluster', 'external'], description: 'embedded (one `start` process), cluster (ZooKeeper + Redis + workers + gate) or external', default: 'embedded' },
  workers: { ...count(1, 64), group: 'target', description: 'cluster: worker processes', default: 2 },
  worker: { type: 'string', group: 'target', description: 'external: worker endpoints, host:port[,host:port...]' },
  gate: { type: 'string', group: 'target', description: 'external: the gate\'s base URL' },
  secret: { type: 'string', group: 'target', secret: true, description: 'token secret of the target (external: the deployment\'s; default: SWITCHBOARD_SECRET, else a bench secret); never written to a report' },
  inbox: { type: 'string', group: 'target', choices: ['memory', 'redis'], description: 'embedded: memory or redis (a Redis the bench starts)', default: 'memory' },
  'redis-fsync': { type: 'string', group: 'target', choices: ['none', 'everysec', 'always'], description: 'persistence of a Redis the bench starts: none, everysec or always', default: 'none' },
  connections: { ...count(1), group: 'load', description: 'logged-in connections in total (chat: half send, half receive; login-storm: concurrent login loops)', default: 200 },
  rate: { type: 'number', above: 0, group: 'load', description: 'open loop: messages (or logins) per second in total' },
  max: { type: 'boolean', group: 'load', description: 'find the highest sustained rate (chat)' },
  'max-p99-ms': { type: 'number', above: 0, group: 'load', description: '--max: a rate is sustained only with delivery p99 at or below this', default: 50 },
  window: { ...count(1), group: 'load', description: 'chat closed loop: messages in flight per pair', default: 32 },
  duration: { type: 'number', above: 0, group: 'load', description: 'measured seconds', default: 10 },
  warmup: { type: 'number', min: 0, group: 'load', description: 'seconds of load before measuring', default: 2 },
  payload: { ...count(0, 16 * 1024 * 1024), group: 'load', description: 'message content, bytes', default: 100 },
  drivers: { ...count(1, 256), group: 'load', description: 'driver processes the load is spread over', default: 1 },
  users: { ...count(0, MAX_GATE_USERS), group: 'load', description: 'login-storm: users registered at the gate for the password-login run (one scrypt hash each, ~0.4 s; at most 200; 0 skips it)', default: 20 },
  'heartbeat-ms': { ...ms(), group: 'load', description: 'idle: each connection heartbeats this often (the default is the worker\'s interval)', default: DEFAULT_LIMITS.heartbeatIntervalMs },
  'cross-node': { type: 'boolean', group: 'load', description: 'chat: every receiver on another worker than its sender' },
  'no-relay': { type: 'boolean', group: 'load', description: 'chat: skip the bare-relay baseline' },
  'drain-ms': { ...ms(0), group: 'load', description: 'after the run, wait this long at most for outstanding deliveries', default: 5000 },
  json: { type: 'string', group: 'reports', description: 'write the report as JSON to this file' },
  html: { type: 'string', group: 'reports', description: 'write a self-contained HTML report to this file' },
  quiet: { type: 'boolean', group: 'reports', description: 'no live progress on stderr' },
} as const satisfies OptionSpecs;

export type BenchOptions = OptionValues<typeof BENCH_OPTIONS>;

export interface ScenarioContext {
  command: string;
  secret: string;
  progress: ProgressSink;
}

/** What the bench's own targets sign with when no secret is given: as long as the servers require. */
const DEV_BENCH_SECRET = 'switchboard-bench-secret-for-local-targets';

/** The cluster secret of a cluster target started with token secret `secret` (src/bench/targets.ts). */
const clusterSecretOf = (secret: string) => `${secret}-cluster`;

export const SCENARIOS: Record<string, { summary: string; run: (o: BenchOptions, c: ScenarioContext) => Promise<BenchReport> }> = {
  chat: { summary: '1:1 chat with acks, next to the bare relay', run: (o, c) => chatScenario(chatOptions(o, c, true)) },
  relay: { summary: 'the bare-relay baseline alone', run: (o, c) => chatScenario(chatOptions(o, c, false)) },
  'login-storm': { summary: 'logins per second: token logins at the workers, then password logins through the gate', run: (o, c) => loginStormScenario(loginStormOptions(o, c)) },
  idle: { summary: 'logged-in connections that only heartbeat: worker RSS per connection', run: (o, c) => idleScenario(idleOptions(o, c)) },
  failover: { summary: 'chat through SDK clients while a worker is SIGKILLed: loss, duplicates, recovery', run: (o, c) => failoverScenario(failoverOptions(o, c)) },
};

function oneOf<T extends string>(flag: string, value: string, allowed: readonly T[]): T {
  if (!(allowed as readonly string[]).includes(value)) throw new SwitchboardError('SB_ERR_CONFIG', `--${flag} must be one of ${allowed.join(', ')}, got ${JSON.stringify(value)}`);
  return value as T;
}

/** The options every scenario takes (ScenarioOptions). */
function common(o: BenchOptions, c: ScenarioContext): ScenarioOptions {
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

function chatOptions(o: BenchOptions, c: ScenarioContext, switchboard: boolean) {
  return {
    ...common(o, c),
    inbox: inbox(o),
    window: o.window,
    ...(o.rate ? { rate: o.rate } : {}),
    max: o.max,
    maxP99Ms: o['max-p99-ms'],
    payloadBytes: o.payload,
    crossNode: o['cross-node'],
    relay: !switchboard || !o['no-relay'],
    switchboard,
    drainMs: o['drain-ms'],
  };
}

/** Failover drains for at least this long: the drain ends once everything arrived, so waiting out a slow recovery costs nothing. */
const FAILOVER_MIN_DRAIN_MS = 15_000;
/** The workers' ZooKeeper session timeout in `bench failover` (the default 10 s would take most of a run). */
const FAILOVER_ZK_SESSION_TIMEOUT_MS = 4_000;

function failoverOptions(o: BenchOptions, c: ScenarioContext) {
  return {
    ...common(o, c),
    rate: o.rate ?? 2000,
    payloadBytes: o.payload,
    drainMs: Math.max(o['drain-ms'], FAILOVER_MIN_DRAIN_MS),
    zkSessionTimeoutMs: FAILOVER_ZK_SESSION_TIMEOUT_MS,
  };
}

function idleOptions(o: BenchOptions, c: ScenarioContext) {
  return {
    ...common(o, c),
    inbox: inbox(o),
    heartbeatMs: o['heartbeat-ms'],
  };
}

function loginStormOptions(o: BenchOptions, c: ScenarioContext) {
  return {
    ...common(o, c),
    ...(o.gate ? { gateUrl: o.gate } : {}),
    ...(o.rate ? { rate: o.rate } : {}),
    users: o.users,
  };
}

function help(): string {
  const rows = Object.entries(SCENARIOS).map(([name, s]) => `  ${name.padEnd(12)} ${s.summary}`);
  return `${usage('bench <scenario>', 'Measures switchboard under real load; see bench/README.md.', BENCH_OPTIONS, { env: false })}\nscenarios:\n${rows.join('\n')}\n`;
}

export async function benchCommand(argv: string[]): Promise<void> {
  const [name, ...rest] = argv;
  if (!name || name === '--help' || name === '-h') {
    process.stdout.write(help());
    return;
  }
  const scenario = Object.hasOwn(SCENARIOS, name) ? SCENARIOS[name] : undefined;
  if (!scenario) throw new SwitchboardError('SB_ERR_CONFIG', `unknown scenario "${name}" (one of ${Object.keys(SCENARIOS).join(', ')})`);
  // Flags only: SWITCHBOARD_* variables configure the servers, not the load.
  const o = parseOptions(BENCH_OPTIONS, rest, {});
  if (o.help) {
    process.stdout.write(help());
    return;
  }
  if (o.target !== 'external' && o.worker) throw new SwitchboardError('SB_ERR_CONFIG', '--worker points at a running deployment: use it with --target external');
  const secret = o.secret ?? process.env.SWITCHBOARD_SECRET ?? DEV_BENCH_SECRET;
  const report = await scenario.run(o, {
    command: `switchboard bench ${redactArgv(argv, secretFlags(BENCH_OPTIONS)).join(' ')}`,
    secret,
    progress: o.quiet ? noProgress : stderrProgress,
  });
  // The reports are for sharing: no secret the run used may be in them, wherever it ended up.
  const secrets = [secret, clusterSecretOf(secret)];
  process.stdout.write(formatReport(report, secrets));
  for (const file of writeReports(report, { json: o.json, html: o.html }, secrets)) process.stdout.write(`wrote ${file}\n`);
}
