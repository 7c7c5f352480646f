// Smoke runs of `bench chat` and `bench relay` with tiny sizes: the report has its fields,
// the loss accounting holds across two driver processes, and a delivery dropped on purpose is
// reported as lost with its id. No timing assertions: this runs next to other tests.

import t, { type Test } from 'tap';
import { chatScenario, type ChatScenarioOptions } from '../../bench/src/scenarios/chat.js';
import type { BenchReport, RunReport } from '../../bench/src/report.js';
import { startWorkerProcess } from '../../bench/src/processes.js';
import { BENCH_WORKER_ARGS } from '../../bench/src/targets.js';

// Eight runs of real load (processes, drivers, a --max bisection): on a loaded machine they
// take longer than tap's default minute.
t.setTimeout(180_000);

const base: ChatScenarioOptions = {
  target: 'embedded',
  workers: 1,
  inbox: 'memory',
  fsync: 'none',
  secret: 'bench-smoke-secret-at-least-32-characters',
  connections: 8,
  window: 4,
  max: false,
  maxP99Ms: 50,
  durationS: 1,
  warmupS: 0.3,
  payloadBytes: 40,
  drivers: 2,
  crossNode: false,
  relay: true,
  switchboard: true,
  drainMs: 5000,
  command: 'test',
};

function checkRun(t: Test, run: RunReport, switchboard: boolean): void {
  t.ok(run.metrics.deliveredPerSec! > 0, `${run.label}: messages delivered`);
  t.ok(run.metrics.driverCpu! > 0, `${run.label}: driver CPU sampled`);
  const d = run.latency.delivery!;
  t.ok(d.count > 0, 'delivery latency recorded');
  t.ok(d.p50 <= d.p90 && d.p90 <= d.p99 && d.p99 <= d.p999 && d.p999 <= d.max, 'percentiles are ordered');
  t.ok(d.distribution.length > 0, 'a distribution to plot');
  t.ok(run.timeline.some((p) => p.phase === 'measure' && Number(p.delivered) > 0), 'the timeline has measured seconds');
  t.equal(Math.max(...run.timeline.map((p) => Number(p.connections))), base.connections, 'every connection counted in the timeline');
  const names = run.processes.map((p) => p.role);
  t.equal(names.filter((r) => r === 'driver').length, 2, 'both driver processes sampled');
  t.ok(names.includes(switchboard ? 'node' : 'relay'), 'the server process sampled');
  if (switchboard) {
    t.ok(run.metrics.ackedPerSec! > 0, 'sends answered');
    t.ok(run.latency.ack!.count > 0, 'ack latency recorded');
    t.same(run.errors, {}, 'no refused sends');
  } else {
    t.equal(run.accounting, undefined, 'the relay has no accounting');
  }
}

function runOf(report: BenchReport, label: string): RunReport {
  const run = report.runs.find((r) => r.label === label);
  if (!run) throw new Error(`no run ${label} in ${report.runs.map((r) => r.label).join(', ')}`);
  return run;
}

t.test('closed loop over two drivers: every acknowledged message received exactly once', async (t) => {
  const report = await chatScenario(base);
  t.equal(report.scenario, 'chat');
  t.match(report.machine, { cpuCount: Number, node: process.version });
  t.equal(report.table.rows.length, 2);
  checkRun(t, runOf(report, 'bare relay'), false);
  const sb = runOf(report, 'switchboard');
  checkRun(t, sb, true);
  t.equal(sb.metrics.ratioToRelay, sb.metrics.deliveredPerSec! / runOf(report, 'bare relay').metrics.deliveredPerSec!);
  const a = sb.accounting!;
  t.ok(a.sent > 0 && a.acked === a.sent && a.received === a.sent, 'every send acknowledged and received');
  t.match(a, { lost: 0, dup: 0, lostIds: [], dupIds: [] });
  t.same(report.warnings.filter((w) => w.includes('lost=')), [], 'no loss warning');
  // The embedded node's memory inbox explains its RSS climb, with this run's count; the relay stores nothing.
  t.match(sb.notes.join(' '), new RegExp(`memory: .*--inbox-max-messages.*${a.acked.toLocaleString('en-US').replace(/,/g, ' ')} stored so far`));
  t.notMatch(runOf(report, 'bare relay').notes.join(' '), /inbox/);
});

t.test('open loop: the rate is split over the drivers and nothing is lost', async (t) => {
  const report = await chatScenario({ ...base, relay: false, rate: 400 });
  const sb = runOf(report, 'switchboard');
  t.equal(sb.metrics.offeredPerSec, 400);
  t.ok(sb.latency.sendLag!.count > 0, 'send lag recorded');
  const fromSend = sb.latency.deliveryFromSend!;
  t.equal(fromSend.count, sb.latency.delivery!.count, 'every delivery also timed from its actual send');
  t.ok(fromSend.p50 <= sb.latency.delivery!.p50 + 0.01, 'which is never later than the intended send time');
  // 400 msg/s for ~1.3 s: far from the 1.3 × 400 it would be if each driver sent the whole rate twice.
  t.ok(sb.accounting!.sent < 400 * 2, 'drivers share the rate');
  t.match(sb.accounting, { lost: 0, dup: 0 });
});

t.test('a delivery dropped on purpose is reported lost, with its id', async (t) => {
  const report = await chatScenario({ ...base, relay: false, rate: 400, dropForTest: 1 });
  const a = runOf(report, 'switchboard').accounting!;
  t.equal(a.lost, 1);
  t.equal(a.dup, 0);
  t.equal(a.lostIds.length, 1);
  // Driver 0 holds pairs 0 and 1 of 4: the first delivery it saw was s0's or s1's msg_id 1.
  t.match(a.lostIds[0], /^s[01]:1$/);
  t.equal(a.received, a.sent - 1);
  t.ok(report.warnings.some((w) => w.includes('lost=1')), 'the loss is a warning');
});

t.test('two runs against one running worker: the second is neither deduped nor fed the first one\'s leftovers', async (t) => {
  // An external target keeps its own limits: this one is started as the bench starts its own.
  const worker = await startWorkerProcess('worker', base.secret, [...BENCH_WORKER_ARGS]);
  t.teardown(() => worker.stop());
  const external: ChatScenarioOptions = { ...base, target: 'external', workerEndpoints: [`127.0.0.1:${worker.port}`], relay: false, drivers: 1, drainMs: 0 };
  // No drain: the first run leaves messages in the inboxes, unacknowledged.
  const first = runOf(await chatScenario(external), 'switchboard');
  t.ok(first.accounting!.sent > 0);
  const second = runOf(await chatScenario({ ...external, drainMs: 5000 }), 'switchboard');
  const a = second.accounting!;
  t.ok(a.sent > 0 && a.acked === a.sent, 'every send of the second run accepted');
  t.equal(a.received, a.sent, 'and received');
  t.match(a, { lost: 0, dup: 0 });
});

t.test('--max: a closed-loop probe, then open-loop steps bisecting below 1.1 × its rate', async (t) => {
  const report = await chatScenario({ ...base, relay: false, drivers: 1, max: true, maxP99Ms: 10_000, durationS: 0.5, warmupS: 0.2 });
  const [probe, ...steps] = report.runs;
  t.match(probe!.label, /closed loop \(probe\)/);
  t.equal(steps.length, 6, 'six steps');
  const ceiling = probe!.metrics.deliveredPerSec!;
  t.equal(steps[0]!.metrics.offeredPerSec, Math.round(ceiling / 2), 'the first step at half the ceiling');
  for (const step of steps) {
    t.ok(step.metrics.offeredPerSec! > 0 && step.metrics.offeredPerSec! <= ceiling * 1.1, 'within (0, 1.1 × ceiling]');
    t.ok(step.metrics.sustained === 0 || step.metrics.sustained === 1, 'judged');
    t.match(step.accounting, { lost: 0, dup: 0 });
  }
  const sustained = steps.filter((s) => s.metrics.sustained === 1);
  if (sustained.length) {
    const best = sustained.reduce((a, b) => (b.metrics.offeredPerSec! > a.metrics.offeredPerSec! ? b : a));
    t.match(best.notes.join(' '), /highest sustained rate/);
  } else {
    t.match(report.warnings.join(' '), /no open-loop step was sustained/);
  }
});

t.test('--receipts: the senders get one DELIVERED receipt per receiver ack, counted apart from deliveries and errors', async (t) => {
  const report = await chatScenario({ ...base, relay: false, receipts: true });
  const sb = runOf(report, 'switchboard');
  checkRun(t, sb, true);
  t.ok(sb.metrics.receiptsPerSec! > 0, 'receipts received while measuring');
  t.ok(sb.metrics.receiverAcksPerSec! > 0, 'receiver acks counted while measuring');
  const a = sb.accounting!;
  t.ok(a.receipts! > 0, 'receipts received over the run');
  t.equal(a.receipts, a.receiverAcks, 'one receipt per receiver ack, none missing after the drain');
  t.ok(a.sent > 0 && a.acked === a.sent && a.received === a.sent, 'every send acknowledged and received: receipts are not deliveries');
  t.match(a, { lost: 0, dup: 0 });
  t.same(report.warnings.filter((w) => w.includes('lost=') || w.includes('receipts=')), [], 'no loss or receipt warning');
  t.ok(report.table.columns.includes('receipts/s'), 'the table shows receipts/s');
  t.ok(sb.timeline.some((p) => p.phase === 'measure' && Number(p.receipts) > 0), 'the timeline counts receipts per second');
  t.match(sb.notes.join(' '), /senders got [\d,]+ DELIVERED receipts\/s/);
});

t.test('refused sends: counted by code, not as acked, and the closed loop keeps sending', async (t) => {
  // A 250-byte message fits a 300-byte frame, its delivery (with the inbox seq) does not.
  const worker = await startWorkerProcess('worker', base.secret, [...BENCH_WORKER_ARGS, '--max-frame-length', '300']);
  t.teardown(() => worker.stop());
  const report = await chatScenario({ ...base, target: 'external', workerEndpoints: [`127.0.0.1:${worker.port}`], relay: false, drivers: 1, connections: 2, payloadBytes: 250, drainMs: 2000 });
  const run = runOf(report, 'switchboard');
  t.ok(run.errors.SB_ERR_MESSAGE_TOO_LARGE! > 0, 'refusals counted by code');
  t.equal(run.metrics.ackedPerSec, 0, 'a refusal is not an ack');
  t.equal(run.metrics.deliveredPerSec, 0);
  t.equal(run.latency.ack!.count, 0, 'no ack latency from refusals');
  t.match(run.accounting, { acked: 0, received: 0, lost: 0, dup: 0 });
  t.ok(run.accounting!.sent > base.window, 'each refusal freed its slot: more than one window was sent');
});
