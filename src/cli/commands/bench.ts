// `switchboard bench <scenario>`: the command line is parsed and checked here; the bench itself
// is its own package (bench/, built into bench/dist by `npm run build`), loaded on demand with
// the options: a server process never loads the load generator, and the server's dist/ holds
// none of it. The flags and the scenario list live here, so --help and a bad flag need no bench.

import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { SwitchboardError } from '../../errors.js';
import { count, ms, parseOptions, secretFlags, usage, type OptionSpecs, type OptionValues } from '../options.js';
import { redactArgv } from '../../redact.js';
import { DEFAULT_LIMITS } from '../../config.js';

/** The most users `bench login-storm` registers at the gate: each costs one scrypt hash (~0.4 s of a thread). */
export const MAX_GATE_USERS = 200;

export const BENCH_OPTIONS = {
  target: { type: 'string', group: 'target', choices: ['embedded', 'cluster', 'external'], description: 'embedded (one `start` process), cluster (ZooKeeper + Redis + workers + gate) or external', default: 'embedded' },
  workers: { ...count(1, 64), group: 'target', description: 'cluster: worker processes', default: 2 },
  worker: { type: 'string', group: 'target', description: 'external: worker endpoints, host:port[,host:port...]' },
  gate: { type: 'string', group: 'target', description: 'external: the gate\'s base URL' },
  secret: { type: 'string', group: 'target', secret: true, description: 'token secret of the target (external: the deployment\'s; default: SWITCHBOARD_SECRET, else a bench secret); never written to a report' },
  inbox: { type: 'string', group: 'target', choices: ['memory', 'redis'], description: 'embedded: memory or redis (a Redis the bench starts)', default: 'memory' },
  'redis-fsync': { type: 'string', group: 'target', choices: ['none', 'everysec', 'always'], description: 'persistence of a Redis the bench starts (every node of a --redis-cluster): none, everysec or always', default: 'none' },
  'redis-cluster': { type: 'boolean', group: 'target', description: 'chat, --target cluster or --target embedded --inbox redis: the bench starts a Redis Cluster of 3 masters instead of one Redis (the servers get --redis <seeds> --redis-cluster)' },
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
  'no-own-copies-baseline': { type: 'boolean', group: 'load', description: "chat: first measure a target started with --no-own-copies (one inbox append per message), then the default one, in the same run" },
  'memory-baseline': { type: 'boolean', group: 'load', description: 'chat: first measure the same load on an embedded node with the memory inbox (started and stopped by the bench), and note the target\'s ratio to it; not with --target external or --max' },
  receipts: { type: 'boolean', group: 'load', description: 'chat: the senders log in with receipts, so every receiver ack also sends its sender a DELIVERED receipt; the report counts them (receipts/s)' },
  'no-relay': { type: 'boolean', group: 'load', description: 'chat: skip the bare-relay baseline' },
  tls: { type: 'boolean', group: 'load', description: 'chat: measure over the TLS client port too, right after the plaintext run on the same target (the bench makes a CA and a certificate; embedded or cluster)' },
  groups: { ...count(0, 10_000), group: 'load', description: 'group: groups of --group-size members in the many-groups run (0 skips it)', default: 10 },
  'group-size': { ...count(2, 10_000), group: 'load', description: 'group: members of each of those groups', default: 20 },
  'large-group': { ...count(0, 10_000), group: 'load', description: 'group: members of the one large group (0 skips that run; the event-loop delay target is for 5000)', default: 500 },
  'group-senders': { ...count(1, 1000), group: 'load', description: 'group: members of each group that send', default: 2 },
  'group-window': { ...count(1, 256), group: 'load', description: 'group: messages each sender keeps in flight (until every other member has it)', default: 4 },
  'group-rate': { type: 'number', min: 0, group: 'load', description: 'group: open loop, msg/s each sender sends whatever the deliveries (0: the closed loop of --group-window)', default: 0 },
  'control-rate': { type: 'number', min: 0, group: 'load', description: 'group: msg/s of the 1:1 control pair beside the large group (0: none)', default: 100 },
  conversations: { ...count(1, 9_000), group: 'load', description: "conversations: the measured user's conversations, each from its own sender (one of them holds the 500 messages of the history pages); at most 9 000, so that all of them fit the inbox's 10 000 retained messages", default: 1000 },
  'conversation-groups': { ...count(0, 1000), group: 'load', description: 'conversations: groups the measured user is a member of (one event each); with any, LIST runs with groups merged in are measured too', default: 0 },
  'drain-ms': { ...ms(0), group: 'load', description: 'after the run, wait this long at most for outstanding deliveries', default: 5000 },
  json: { type: 'string', group: 'reports', description: 'write the report as JSON to this file' },
  html: { type: 'string', group: 'reports', description: 'write a self-contained HTML report to this file' },
  quiet: { type: 'boolean', group: 'reports', description: 'no live progress on stderr' },
} as const satisfies OptionSpecs;

export type BenchOptions = OptionValues<typeof BENCH_OPTIONS>;

export const SCENARIOS = {
  chat: '1:1 chat with acks, next to the bare relay',
  relay: 'the bare-relay baseline alone',
  'login-storm': 'logins per second: token logins at the workers, then password logins through the gate',
  idle: 'logged-in connections that only heartbeat: worker RSS per connection',
  failover: 'chat through SDK clients while a worker is SIGKILLed: loss, duplicates, recovery',
  group: 'group chat (many groups, one large group) beside 1:1 chat: fan-out deliveries/s, latency, event-loop delay, loss',
  conversations: "a user with --conversations conversations: chat-list (LIST) and history-page (HISTORY) requests/s and latency on the user's own connections",
} as const;

export type ScenarioName = keyof typeof SCENARIOS;

/** What the command hands the bench besides the flags. */
export interface BenchContext {
  /** The command line, secrets redacted, for the report. */
  command: string;
  /** The targets' token secret. */
  secret: string;
}

/** What the bench package's entry (bench/src/main.ts) exports. */
export interface BenchEntry {
  /** Runs the scenario, prints its table on stdout and writes the reports asked for. */
  runBench(scenario: ScenarioName, options: BenchOptions, context: BenchContext): Promise<void>;
}

/** What the bench's own targets sign with when no secret is given: as long as the servers require. */
const DEV_BENCH_SECRET = 'switchboard-bench-secret-for-local-targets';

/**
 * The bench's entry: its source when this file runs from source (tsx, as in the tests), else
 * its build. src/cli/commands and dist/cli/commands are both three levels below the root.
 */
const BENCH_ENTRY = import.meta.url.endsWith('.ts') ? new URL('../../../bench/src/main.ts', import.meta.url) : new URL('../../../bench/dist/bench/src/main.js', import.meta.url);

async function loadBench(): Promise<BenchEntry> {
  if (!existsSync(BENCH_ENTRY)) {
    throw new SwitchboardError('SB_ERR_CONFIG', `the bench is not built (${fileURLToPath(BENCH_ENTRY)} is missing): run \`npm run build\` in a switchboard checkout`);
  }
  return (await import(BENCH_ENTRY.href)) as BenchEntry;
}

function help(): string {
  const width = Math.max(...Object.keys(SCENARIOS).map((name) => name.length));
  const rows = Object.entries(SCENARIOS).map(([name, summary]) => `  ${name.padEnd(width)}  ${summary}`);
  return `${usage('bench <scenario>', 'Measures switchboard under real load; see bench/README.md.', BENCH_OPTIONS, { env: false })}\nscenarios:\n${rows.join('\n')}\n`;
}

export async function benchCommand(argv: string[]): Promise<void> {
  const [name, ...rest] = argv;
  if (!name || name === '--help' || name === '-h') {
    process.stdout.write(help());
    return;
  }
  if (!Object.hasOwn(SCENARIOS, name)) throw new SwitchboardError('SB_ERR_CONFIG', `unknown scenario "${name}" (one of ${Object.keys(SCENARIOS).join(', ')})`);
  // Flags only: SWITCHBOARD_* variables configure the servers, not the load.
  const o = parseOptions(BENCH_OPTIONS, rest, {});
  if (o.help) {
    process.stdout.write(help());
    return;
  }
  if (o.target !== 'external' && o.worker) throw new SwitchboardError('SB_ERR_CONFIG', '--worker points at a running deployment: use it with --target external');
  for (const flag of ['memory-baseline', 'redis-cluster'] as const) {
    if (o[flag] && name !== 'chat') throw new SwitchboardError('SB_ERR_CONFIG', `--${flag} is a flag of bench chat only`);
  }
  if (o['redis-cluster'] && o.target !== 'cluster' && !(o.target === 'embedded' && o.inbox === 'redis')) {
    throw new SwitchboardError('SB_ERR_CONFIG', '--redis-cluster makes the Redis the bench starts a Redis Cluster: use it with --target cluster, or --target embedded --inbox redis');
  }
  if (o['memory-baseline'] && (o.target === 'external' || o.max)) throw new SwitchboardError('SB_ERR_CONFIG', '--memory-baseline starts an embedded node of its own: not with --target external or --max');
  const secret = o.secret ?? process.env.SWITCHBOARD_SECRET ?? DEV_BENCH_SECRET;
  const bench = await loadBench();
  await bench.runBench(name as ScenarioName, o, { command: `switchboard bench ${redactArgv(argv, secretFlags(BENCH_OPTIONS)).join(' ')}`, secret });
}
