// Smoke runs of `bench chat` against a Redis the bench starts, with tiny sizes: the memory
// inbox's run of the same sitting and the ratio to it (--memory-baseline), Redis memory per
// message and per stored inbox entry (two entries per message, one with --no-own-copies), and
// --redis-cluster really starting a 3-master Redis Cluster, sampled node by node. No timing
// assertions: this runs next to other tests.

import t, { type Test } from 'tap';
import { chatScenario, type ChatScenarioOptions } from '../../bench/src/scenarios/chat.js';
import type { BenchReport, RunReport } from '../../bench/src/report.js';

// Targets with a Redis, a Redis Cluster, ZooKeeper, workers and a gate, started one after another.
t.setTimeout(180_000);

const base: ChatScenarioOptions = {
  target: 'embedded',
  workers: 2,
  inbox: 'redis',
  fsync: 'none',
  secret: 'bench-smoke-secret-at-least-32-characters',
  connections: 4,
  window: 4,
  max: false,
  maxP99Ms: 50,
  durationS: 1,
  warmupS: 0,
  payloadBytes: 40,
  drivers: 1,
  crossNode: false,
  relay: false,
  switchboard: true,
  drainMs: 5000,
  command: 'test',
};

function runOf(report: BenchReport, label: string): RunReport {
  const run = report.runs.find((r) => r.label === label);
  if (!run) throw new Error(`no run ${label} in ${report.runs.map((r) => r.label).join(', ')}`);
  return run;
}

/** A run against Redis: every acknowledged message delivered, and what it left in Redis per message and per entry. */
function checkRedisMemory(t: Test, run: RunReport, copies: 1 | 2, masters: number): void {
  const a = run.accounting!;
  t.ok(a.acked > 0 && a.received === a.acked, `${run.label}: messages acknowledged and received`);
  t.match(a, { lost: 0, dup: 0 });
  const m = run.metrics;
  t.ok(m.redisUsedMemoryDelta! > 0, `${run.label}: Redis holds more after the run (+${m.redisUsedMemoryDelta} bytes)`);
  t.equal(m.redisBytesPerMessage, m.redisUsedMemoryDelta! / a.acked, 'bytes per acknowledged message');
  t.equal(m.redisBytesPerEntry, m.redisUsedMemoryDelta! / (a.acked * copies), `bytes per stored entry: ${copies} per message`);
  const note = run.notes.find((n) => n.startsWith('Redis memory:'));
  t.ok(note, 'a note says what the figure is');
  t.match(note, /used_memory .* before the drivers connected, .* after they closed/);
  t.match(note, /per acknowledged message, .* per stored inbox entry/);
  t.match(note, copies === 2 ? /stored twice: the recipient's message and the sender's own copy/ : /stored once: the target runs --no-own-copies/);
  t.match(note, /logs, conversation indexes, .* dedupe state/);
  t.match(note, /retention pruned nothing: .* within --inbox-max-messages 10 000/);
  if (masters > 1) t.match(note, `summed over the ${masters} masters of the Redis Cluster`);
  else t.notMatch(note, /summed over/);
  t.equal(run.processes.filter((p) => p.role === 'redis').length, masters, `${masters} Redis process(es) sampled in the run`);
  t.ok(m.redisCpu !== undefined && m.redisCpu >= 0, 'Redis CPU reported');
}

t.test('--memory-baseline, --no-own-copies-baseline, --inbox redis: the memory inbox\'s run first, then Redis memory per message on each Redis target', async (t) => {
  const report = await chatScenario({ ...base, memoryBaseline: true, noCopiesBaseline: true });
  t.same(report.runs.map((r) => r.label), ['embedded, memory inbox (baseline)', 'switchboard, no own copies', 'switchboard'], 'the baseline runs first, on its own node');
  const memory = runOf(report, 'embedded, memory inbox (baseline)');
  t.ok(memory.metrics.deliveredPerSec! > 0, 'the baseline delivered');
  t.match(memory.accounting, { lost: 0, dup: 0 });
  t.equal(memory.metrics.redisUsedMemoryDelta, undefined, 'no Redis figure for the memory inbox');
  t.notOk(memory.processes.some((p) => p.role === 'redis'), 'and no Redis in its run');
  t.match(memory.notes.join(' '), /memory: the in-memory inbox keeps every stored message/);
  checkRedisMemory(t, runOf(report, 'switchboard, no own copies'), 1, 1);
  const sb = runOf(report, 'switchboard');
  checkRedisMemory(t, sb, 2, 1);
  t.notMatch(sb.notes.join(' '), /in-memory inbox/, 'the Redis target has no memory-inbox note');

  const ratio = sb.metrics.ratioToMemoryInbox!;
  t.equal(ratio, sb.metrics.deliveredPerSec! / memory.metrics.deliveredPerSec!, 'the ratio to the memory inbox of the same sitting');
  t.match(sb.notes.join(' '), /% of the [\d,]+ msg\/s of an embedded node with the memory inbox under the same load just before \(--memory-baseline; the target on Redis: at least 40%\)/);
  const below = report.warnings.filter((w) => w.includes("of the memory inbox's rate"));
  t.equal(below.length, ratio < 0.4 ? 1 : 0, 'a warning exactly when the Redis inbox is below 40% of it');
  t.equal(runOf(report, 'switchboard, no own copies').metrics.ratioToMemoryInbox, undefined, 'only the configured target gets the ratio');

  for (const column of ['redis cpu', 'redis B/msg', 'B/entry']) t.ok(report.table.columns.includes(column), `the table shows ${column}`);
  const at = report.table.columns.indexOf('redis B/msg');
  t.equal(report.table.rows[0]![at], '-', 'none for the memory inbox');
  t.equal(report.table.rows[2]![at], Math.round(sb.metrics.redisBytesPerMessage!));
});

t.test('--target cluster --redis-cluster --cross-node --redis-fsync everysec: workers and gate on a 3-master Redis Cluster', async (t) => {
  const report = await chatScenario({ ...base, target: 'cluster', redisCluster: true, crossNode: true, fsync: 'everysec' });
  t.match(report.target, /^cluster of 2 workers \(3-master redis cluster, fsync everysec\)$/);
  const sb = runOf(report, 'switchboard, cross-node');
  checkRedisMemory(t, sb, 2, 3);
  t.same(sb.processes.filter((p) => p.role === 'redis').map((p) => p.name).sort(), ['redis-0', 'redis-1', 'redis-2'], 'each node in the processes');
  t.equal(sb.processes.filter((p) => p.role === 'worker').length, 2, 'two workers');
});

t.test('--target embedded --inbox redis --redis-cluster: the node on a 3-master Redis Cluster', async (t) => {
  const report = await chatScenario({ ...base, redisCluster: true });
  t.match(report.target, /^embedded \(redis inbox on a 3-master redis cluster, fsync none\)$/);
  checkRedisMemory(t, runOf(report, 'switchboard'), 2, 3);
});

t.test('--memory-baseline and --redis-cluster refuse the targets they cannot apply to', async (t) => {
  await t.rejects(chatScenario({ ...base, memoryBaseline: true, target: 'external', workerEndpoints: ['127.0.0.1:1'] }), /--memory-baseline .* not with --target external or --max/);
  await t.rejects(chatScenario({ ...base, memoryBaseline: true, max: true }), /--memory-baseline .* not with --target external or --max/);
  await t.rejects(chatScenario({ ...base, redisCluster: true, inbox: 'memory' }), /--redis-cluster .* --target cluster, or --target embedded --inbox redis/);
});
