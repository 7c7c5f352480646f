// Smoke runs of `bench login-storm` with tiny sizes: worker logins from two driver processes
// and password logins through the gate land in the report with their counts, latency and
// processes; with tokens from the wrong secret every worker login fails, counted by code, and
// the run still reports. No timing assertions: this runs next to other tests.

import t from 'tap';
import { loginStormScenario, type LoginStormOptions } from '../../bench/src/scenarios/login-storm.js';
import { driverAddresses } from '../../bench/src/drivers.js';
import type { BenchReport, RunReport } from '../../bench/src/report.js';

const base: LoginStormOptions = {
  target: 'embedded',
  workers: 1,
  fsync: 'none',
  secret: 'bench-smoke-secret-at-least-32-characters',
  connections: 4,
  // Long enough for a password login (scrypt, ~0.4 s of a core each) to finish on a loaded machine.
  durationS: 3,
  warmupS: 0.3,
  drivers: 2,
  users: 2,
  command: 'test',
};

function runOf(report: BenchReport, label: string): RunReport {
  const run = report.runs.find((r) => r.label === label);
  if (!run) throw new Error(`no run ${label} in ${report.runs.map((r) => r.label).join(', ')}`);
  return run;
}

t.test('source addresses: each driver its own, none off loopback', async (t) => {
  const [a, b] = [driverAddresses(0, '127.0.0.1', 64), driverAddresses(1, '127.0.0.1', 64)];
  t.equal(a.length, 64);
  t.same(a.slice(0, 2), ['127.0.0.2', '127.0.1.2']);
  t.same(b.slice(0, 2), ['127.0.0.3', '127.0.1.3']);
  t.equal(a.filter((x) => b.includes(x)).length, 0, 'disjoint');
  t.equal(new Set(a).size, 64, 'distinct');
  t.same(driverAddresses(0, '10.0.0.5', 4), []);
});

t.test('worker logins over two drivers, then gate logins through HTTP', async (t) => {
  const report = await loginStormScenario(base);
  t.equal(report.scenario, 'login-storm');
  t.match(report.machine, { cpuCount: Number, node: process.version });
  t.equal(report.runs.length, 2);
  t.equal(report.table.rows.length, 2);
  t.equal(report.options.secret, undefined, 'the secret stays out of the report');

  const worker = runOf(report, 'worker logins');
  t.ok(worker.metrics.loginsPerSec! > 0, 'worker logins succeeded');
  t.equal(worker.metrics.loginsPerSecPerWorker, worker.metrics.loginsPerSec, 'one worker');
  t.equal(worker.metrics.failures, 0, 'no failed login');
  t.same(worker.errors, {}, 'no errors, logouts included');
  t.ok(worker.metrics.attempts! > 0, 'attempts counted');
  t.ok(worker.metrics.driverCpu! > 0, 'driver CPU sampled');
  t.ok(worker.metrics.workerCpu! > 0, 'worker CPU sampled');
  const l = worker.latency.login!;
  t.ok(l.count > 0, 'login latency recorded');
  t.ok(l.p50 <= l.p90 && l.p90 <= l.p99 && l.p99 <= l.p999 && l.p999 <= l.max, 'percentiles are ordered');
  t.ok(l.distribution.length > 0, 'a distribution to plot');
  t.ok(worker.timeline.some((p) => p.phase === 'measure' && Number(p.logins) > 0 && Number(p.p99Ms) > 0), 'the timeline has measured seconds');
  t.ok(worker.timeline.every((p) => p.failures === 0), 'no failures in the timeline');
  const roles = worker.processes.map((p) => p.role);
  t.equal(roles.filter((r) => r === 'driver').length, 2, 'both driver processes sampled');
  t.ok(roles.includes('node'), 'the server process sampled');

  const gate = runOf(report, 'gate logins');
  t.equal(gate.metrics.usersRegistered, 2, 'both users registered through the gate');
  t.ok(gate.metrics.loginsPerSec! > 0, 'password logins through the gate and the worker succeeded');
  t.equal(gate.metrics.failures, 0);
  t.equal(gate.metrics.rateLimited, 0, 'no 429: the gate ran with raised limits');
  t.same(gate.errors, {});
  t.ok(gate.latency.login!.count > 0 && gate.latency.http!.count === gate.latency.login!.count, 'gate and full-login latency recorded');
  t.ok(gate.latency.login!.p50 >= gate.latency.http!.p50, 'the full login includes the HTTP part');
  t.ok(gate.notes.some((n) => n.includes('scrypt')), 'the report says scrypt bounds the gate');
  t.same(report.warnings.filter((w) => w.includes('failed')), [], 'no failure warning');
});

t.test('tokens from the wrong secret: every worker login fails with SB_ERR_TOKEN_INVALID, and the run still reports', async (t) => {
  const report = await loginStormScenario({ ...base, tokenSecret: 'not-the-secret', users: 0 });
  t.equal(report.runs.length, 1, 'no gate run with --users 0');
  const worker = runOf(report, 'worker logins');
  t.equal(worker.metrics.loginsPerSec, 0);
  t.ok(worker.metrics.attempts! > 0);
  t.equal(worker.metrics.failures, worker.metrics.attempts, 'every attempt failed');
  t.same(Object.keys(worker.errors), ['SB_ERR_TOKEN_INVALID']);
  t.equal(worker.errors.SB_ERR_TOKEN_INVALID, worker.metrics.attempts, 'counted by code');
  t.equal(worker.latency.login!.count, 0, 'no login latency');
  t.ok(worker.timeline.some((p) => Number(p.failures) > 0), 'failures in the timeline');
  t.ok(report.warnings.some((w) => w.includes('logins failed') && w.includes('SB_ERR_TOKEN_INVALID')), 'a warning names the code');
});
