// What the bench's reports call things. Options, metrics and timeline counters are named for the
// code (durationS, serverCpu, p99Ms); a reader gets a label with its unit, a value formatted in
// that unit, and only the options that applied to the run (no worker count for one process, no
// p99 bound without --max, nothing undefined).
//
// CPU is a fraction of one core in the JSON; everywhere a person reads it, it is a percentage
// of one core (200% = two cores busy).

import type { ChatScenarioOptions } from './scenarios/chat.js';
import type { FailoverScenarioOptions } from './scenarios/failover.js';
import type { IdleScenarioOptions } from './scenarios/idle.js';
import type { LoginStormOptions } from './scenarios/login-storm.js';

/** A figure for a table: thousands separated, fewer decimals the larger it is; never "NaN". */
export function formatValue(v: number): string {
  if (!Number.isFinite(v)) return 'n/a';
  const digits = Math.abs(v) >= 100 ? 0 : Math.abs(v) >= 1 ? 2 : 4;
  return v.toLocaleString('en-US', { maximumFractionDigits: digits });
}

/** CPU, given as a fraction of one core, as people read it. */
export const formatCpu = (fraction: number): string => (Number.isFinite(fraction) ? `${(fraction * 100).toFixed(0)}%` : 'n/a');

export const CPU_UNIT = '% of one core';

const bytes = (v: number) => (!Number.isFinite(v) ? 'n/a' : v >= 2 ** 20 ? `${(v / 2 ** 20).toFixed(1)} MiB` : v >= 1024 ? `${(v / 1024).toFixed(1)} KiB` : `${Math.round(v)} B`);
const withUnit = (unit: string) => (v: number) => (Number.isFinite(v) ? `${formatValue(v)} ${unit}` : 'n/a');
const yesNo = (v: unknown) => (v ? 'yes' : 'no');

/** camelCase or snake_case in words, for a name no table below knows: dropForTest → drop for test. */
export function humanize(key: string): string {
  return key
    .split(/[_\-\s]+|(?<=[a-z0-9])(?=[A-Z])/)
    .filter(Boolean)
    .map((w) => (/^[A-Z0-9]+$/.test(w) ? w : w.toLowerCase()))
    .join(' ');
}

// ---------------------------------------------------------------------------------------------
// Options

/** Every scenario's options together, and what a scenario adds to them in its report. */
type AnyOptions = ChatScenarioOptions & FailoverScenarioOptions & IdleScenarioOptions & LoginStormOptions & { victim: string };

interface OptionLabel {
  label: string;
  format?: (value: never) => string;
  /** Shown only when this holds for the run's options (default: always, when defined). */
  when?: (o: Partial<AnyOptions>) => boolean;
}

const startsRedis = (o: Partial<AnyOptions>) => o.target === 'cluster' || (o.target === 'embedded' && o.inbox === 'redis');

/**
 * Every option key of every scenario (the compiler checks that none is missing); null: never
 * shown (the command line is printed above the table, secrets are not shown at all, progress is
 * where the lines went).
 */
const OPTIONS: { [K in keyof AnyOptions]-?: OptionLabel | null } = {
  target: { label: 'target' },
  workers: { label: 'worker processes', when: (o) => o.target === 'cluster' },
  workerEndpoints: { label: 'workers', format: (v: string[]) => v.join(', '), when: (o) => o.target === 'external' },
  gateUrl: { label: 'gate', when: (o) => o.target === 'external' },
  inbox: { label: 'inbox', when: (o) => o.target === 'embedded' },
  fsync: { label: 'Redis persistence (appendfsync)', when: startsRedis },
  redisCluster: { label: 'Redis: a Redis Cluster of 3 masters', format: yesNo, when: (o) => o.redisCluster === true },
  connections: { label: 'connections' },
  durationS: { label: 'measured', format: withUnit('s') },
  warmupS: { label: 'warm-up', format: withUnit('s') },
  drivers: { label: 'driver processes' },
  window: { label: 'window (messages in flight per pair)', when: (o) => o.rate === undefined || o.max === true },
  rate: { label: 'open-loop rate', format: withUnit('per s') },
  max: { label: 'find the highest sustained rate (--max)', format: yesNo, when: (o) => o.max === true },
  maxP99Ms: { label: 'delivery p99 bound of a sustained rate', format: withUnit('ms'), when: (o) => o.max === true },
  payloadBytes: { label: 'payload', format: withUnit('bytes') },
  crossNode: { label: 'every receiver on another worker (cross-node)', format: yesNo, when: (o) => o.crossNode === true || o.target !== 'embedded' },
  noCopiesBaseline: { label: 'measured first without own copies (--no-own-copies)', format: yesNo, when: (o) => o.noCopiesBaseline === true },
  memoryBaseline: { label: 'measured first on an embedded node with the memory inbox (--memory-baseline)', format: yesNo, when: (o) => o.memoryBaseline === true },
  relay: { label: 'bare relay measured too', format: yesNo, when: (o) => o.switchboard !== false },
  switchboard: null,
  drainMs: { label: 'drain after the run, at most', format: withUnit('ms') },
  dropForTest: { label: 'deliveries dropped on purpose (loss accounting test)' },
  zkSessionTimeoutMs: { label: 'workers\' ZooKeeper session timeout', format: withUnit('ms') },
  victim: { label: 'worker killed' },
  heartbeatMs: { label: 'heartbeat interval per connection', format: withUnit('ms') },
  settleS: { label: 'baseline RSS taken after', format: withUnit('s') },
  users: { label: 'gate users (password logins)' },
  gateLoops: { label: 'gate login loops' },
  secret: null,
  tokenSecret: null,
  progress: null,
  command: null,
};

function plainValue(value: unknown): string {
  if (typeof value === 'string') return value;
  if (typeof value === 'boolean') return yesNo(value);
  if (typeof value === 'number') return formatValue(value);
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value); // a bigint or a cycle
  }
}

/** The options a reader needs, as [label, value] rows: the ones that applied, in their units. */
export function optionRows(options: Record<string, unknown>): [string, string][] {
  const o = options as Partial<AnyOptions>;
  const rows: [string, string][] = [];
  for (const [key, value] of Object.entries(options)) {
    if (value === undefined || typeof value === 'function') continue;
    const known = Object.hasOwn(OPTIONS, key) ? OPTIONS[key as keyof AnyOptions] : undefined;
    if (known === null) continue;
    if (known?.when && !known.when(o)) continue;
    const format = known?.format as ((v: unknown) => string) | undefined;
    rows.push([known?.label ?? humanize(key), format ? format(value) : plainValue(value)]);
  }
  return rows;
}

// ---------------------------------------------------------------------------------------------
// Metrics and timeline counters

interface MetricLabel {
  label: string;
  format: (v: number) => string;
}

const perSecond = (what: string): MetricLabel => ({ label: `${what} per second`, format: formatValue });
const count = (label: string): MetricLabel => ({ label, format: formatValue });
const cpu = (whose: string): MetricLabel => ({ label: `${whose} CPU (${CPU_UNIT})`, format: formatCpu });
const ms = (label: string): MetricLabel => ({ label: `${label} (ms)`, format: (v) => (Number.isFinite(v) ? v.toFixed(2) : 'n/a') });
const memory = (label: string): MetricLabel => ({ label, format: bytes });

/** The headline figures of every scenario by name. */
const METRICS: Record<string, MetricLabel> = {
  deliveredPerSec: perSecond('delivered'),
  ackedPerSec: perSecond('acknowledged'),
  offeredPerSec: perSecond('offered'),
  ratioToRelay: { label: 'delivered, as a share of the bare relay', format: (v) => (Number.isFinite(v) ? v.toFixed(2) : 'n/a') },
  ratioToMemoryInbox: { label: 'delivered, as a share of the memory inbox of the same sitting', format: (v) => (Number.isFinite(v) ? v.toFixed(2) : 'n/a') },
  ratioToNoCopies: { label: 'delivered, as a share of the same target without own copies', format: (v) => (Number.isFinite(v) ? v.toFixed(2) : 'n/a') },
  redisUsedMemoryDelta: memory('Redis used_memory added by the run'),
  redisBytesPerMessage: memory('Redis memory per acknowledged message'),
  redisBytesPerEntry: memory('Redis memory per stored inbox entry'),
  sustained: { label: 'sustained', format: yesNo },
  serverCpu: cpu('server'),
  workerCpu: cpu('worker'),
  gateCpu: cpu('gate'),
  redisCpu: cpu('Redis'),
  driverCpu: cpu('driver'),
  lost: count('lost'),
  dup: count('duplicated'),
  resentDeduped: count('resends answered as duplicates'),
  clients: count('clients'),
  clientsOnVictim: count('clients on the killed worker'),
  clientsAffected: count('clients dropped by the kill'),
  clientsBack: count('clients logged in again'),
  killAtS: { label: 'killed at (s into the run)', format: (v) => (Number.isFinite(v) ? v.toFixed(2) : 'n/a') },
  recoveryMsP50: ms('back after the kill, p50'),
  recoveryMsMax: ms('back after the kill, max'),
  recoveryFromDropMsMax: ms('back after the drop, max'),
  connections: count('connections logged in'),
  failedLogins: count('failed logins'),
  closedByServer: count('closed by the server'),
  loginsPerSec: perSecond('logins'),
  loginsPerSecPerWorker: perSecond('logins per worker,'),
  workers: count('workers'),
  attempts: count('attempts'),
  failures: count('failures'),
  heartbeatsPerSec: perSecond('heartbeats answered'),
  heartbeatsSent: count('heartbeats sent'),
  heartbeatReplies: count('heartbeats answered'),
  baselineRss: memory('server RSS before the connections'),
  loadedRss: memory('server RSS while measuring (mean)'),
  peakRss: memory('server RSS while measuring (peak)'),
  rssPerConnection: memory('RSS per connection'),
};

/** A metric as a [label, value] row. */
export function metricRow(key: string, value: number): [string, string] {
  const known = Object.hasOwn(METRICS, key) ? METRICS[key] : undefined;
  return known ? [known.label, known.format(value)] : [humanize(key), formatValue(value)];
}

/** The per-second counters of the timelines, as a chart's legend names them. */
const SERIES: Record<string, string> = {
  sent: 'sent',
  delivered: 'delivered',
  acked: 'acknowledged',
  errors: 'errors',
  connections: 'connections',
  connectionsMin: 'fewest connections in the second',
  attempts: 'attempts',
  logins: 'logins',
  failures: 'failures',
  rateLimited: 'rate limited',
  inFlight: 'in flight',
  heartbeats: 'heartbeats answered',
  workerRss: 'server RSS',
  p50Ms: 'p50',
  p99Ms: 'p99',
};

export function seriesLabel(key: string): string {
  return Object.hasOwn(SERIES, key) ? SERIES[key]! : humanize(key);
}
