// A small real run of `bench failover`: a cluster of two worker processes, SDK clients at a
// low rate, worker-0 killed with SIGKILL halfway. Its clients come back on the other worker and
// every acknowledged message arrives exactly once. No timing assertions: this runs next to
// other tests. The workers run from dist/ (`npm run build` first, as npm test does).

import t from 'tap';
import { failoverScenario, victimShare } from '../../bench/src/scenarios/failover.js';

t.test('a worker killed mid-run: its clients come back, nothing lost, nothing twice', async (t) => {
  const report = await failoverScenario({
    target: 'cluster',
    workers: 2,
    fsync: 'none',
    secret: 'bench-failover-smoke-secret-at-least-32-chars',
    connections: 20,
    rate: 200,
    durationS: 4,
    warmupS: 1,
    payloadBytes: 40,
    drivers: 2,
    drainMs: 20_000,
    zkSessionTimeoutMs: 2_000,
    command: 'test',
  });
  t.equal(report.scenario, 'failover');
  t.equal(report.runs.length, 1);
  const run = report.runs[0]!;
  const m = run.metrics;

  const victim = run.processes.find((p) => p.name === 'worker-0');
  const survivor = run.processes.find((p) => p.name === 'worker-1');
  t.ok(victim && survivor, 'both workers sampled');
  t.ok(victim!.samples.length < survivor!.samples.length, "the killed worker's series ends early");
  t.equal(report.options.victim, 'worker-0');
  t.notOk(report.warnings.some((w) => /not SIGKILL|not killed/.test(w)), 'worker-0 ended by SIGKILL');
  t.ok(Number.isFinite(m.killAtS), 'the kill time is recorded');

  // 10 pairs on 2 workers: senders of even pairs and receivers of odd pairs start on worker-0.
  t.equal(victimShare(10, 2, 0), 10);
  t.equal(m.clientsOnVictim, 10);
  t.equal(m.clientsAffected, 10, "every client of worker-0 dropped, and only those");
  t.equal(m.clientsBack, 10, 'every affected client logged in again');
  t.ok(m.recoveryMsMax! >= m.recoveryMsP50!, 'recovery figures present');

  const a = run.accounting!;
  t.ok(a.sent > 0, 'messages sent');
  t.match(a, { lost: 0, dup: 0, lostIds: [], dupIds: [] });
  t.ok(a.acked <= a.sent && a.received <= a.sent, 'acked and received within sent');
  t.equal(a.acked, a.sent, 'every send acknowledged (the SDK resent what the kill cut off)');
  t.equal(a.received, a.acked, 'every acknowledged message received');
  t.same(run.errors, {}, 'no failed sends');

  t.ok(run.timeline.length >= 5, 'a timeline of seconds');
  const killSecond = run.timeline.filter((p) => p.event === 'worker-0 killed');
  t.equal(killSecond.length, 1, 'the kill second is marked');
  t.ok(Number(killSecond[0]?.connectionsMin) <= 10, "the kill second shows worker-0's clients disconnected");
  t.ok(run.timeline.some((p) => p.phase === 'measure' && Number(p.delivered) > 0), 'measured seconds with deliveries');
  t.equal(Math.max(...run.timeline.map((p) => Number(p.connections))), 20, 'every client counted connected');
  t.ok(run.latency.delivery!.count > 0 && run.latency.recovery!.count === 10, 'latency histograms');
  t.equal(report.table.rows.length, 1);
  t.same(report.warnings.filter((w) => !w.includes('used')), [], 'no warnings (other than a busy driver)');
});
