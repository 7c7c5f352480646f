// Smoke run of `bench idle` with tiny sizes: 50 connections over two driver processes all log
// in (with disjoint user ids, else the second login of a uid would replace the first), every
// one heartbeats and is answered, and the worker's RSS is read before and under load. No
// timing or memory-size assertions: this runs next to other tests.

import t from 'tap';
import { idleScenario, type IdleScenarioOptions } from '../../bench/src/scenarios/idle.js';

const base: IdleScenarioOptions = {
  target: 'embedded',
  workers: 1,
  inbox: 'memory',
  fsync: 'none',
  secret: 'bench-smoke-secret-at-least-32-characters',
  connections: 50,
  durationS: 1,
  warmupS: 0.5,
  // 50 connections over 200 ms: each heartbeats about 7 times in the 1.5 s it is held.
  heartbeatMs: 200,
  drivers: 2,
  settleS: 0.5,
  command: 'test',
};

t.test('50 idle connections over two drivers: all logged in, heartbeats answered, RSS read', async (t) => {
  const report = await idleScenario(base);
  t.equal(report.scenario, 'idle');
  t.match(report.title, /50 logged-in connections/);
  t.match(report.machine, { cpuCount: Number, node: process.version });
  t.equal(report.runs.length, 1);
  const run = report.runs[0]!;
  const m = run.metrics;
  t.equal(m.connections, 50, 'every connection logged in');
  t.equal(m.failedLogins, 0, 'no failed login');
  t.equal(m.closedByServer, 0, 'no connection closed by the server (a replaced session would be)');
  t.same(run.errors, {});
  t.equal(run.latency.login!.count, 50, 'one login answer per connection');
  t.ok(m.loginsPerSec! > 0, 'login rate measured');
  // Every connection got at least its first heartbeat out and answered, and nearly all were answered.
  t.ok(m.heartbeatsSent! >= 50, `heartbeats sent (${m.heartbeatsSent})`);
  t.ok(m.heartbeatReplies! >= m.heartbeatsSent! - 50 && m.heartbeatReplies! <= m.heartbeatsSent!, `heartbeats answered (${m.heartbeatReplies} of ${m.heartbeatsSent})`);
  t.ok(m.heartbeatsPerSec! > 0, 'heartbeats answered while measuring');
  t.ok(run.latency.heartbeat!.count > 0, 'heartbeat echo latency recorded');
  t.ok(m.baselineRss! > 0 && m.loadedRss! > 0, 'baseline and loaded RSS read');
  t.ok(Number.isFinite(m.rssPerConnection), `rssPerConnection is a number (${m.rssPerConnection})`);
  t.equal(m.rssPerConnection, (m.loadedRss! - m.baselineRss!) / 50);

  const measured = run.timeline.filter((p) => p.phase === 'measure');
  t.ok(measured.length >= 1, 'the timeline has measured seconds');
  t.ok(measured.every((p) => Number(p.workerRss) > 0), 'worker RSS in the timeline');
  t.equal(Math.max(...run.timeline.map((p) => Number(p.connections))), 50, 'every connection counted in the timeline');
  const roles = run.processes.map((p) => p.role);
  t.equal(roles.filter((r) => r === 'driver').length, 2, 'both driver processes sampled');
  t.ok(run.processes.some((p) => p.role === 'node' && p.samples.length > 0), 'the worker process sampled');
  t.equal(report.table.rows.length, 1);
  t.same(report.warnings, [], 'no warnings');
});

t.test('the external target reports no RSS, with a note saying why', async (t) => {
  // No deployment runs here: a refused endpoint exercises the failed-login accounting too.
  const report = await idleScenario({ ...base, target: 'external', workerEndpoints: ['127.0.0.1:1'], connections: 4, drivers: 1 });
  const run = report.runs[0]!;
  t.equal(run.metrics.connections, 0);
  t.equal(run.metrics.failedLogins, 4, 'every connection counted as failed');
  t.same(run.errors, { ECONNREFUSED: 4 });
  t.equal(run.metrics.rssPerConnection, undefined, 'no RSS figure');
  t.ok(run.notes.some((n) => n.includes('not measured')), 'a note says the RSS is not measured');
  t.ok(report.warnings.some((w) => w.includes('4 of 4 connections failed to log in')), 'failed logins are a warning');
});
