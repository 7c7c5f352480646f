// `bench login-storm`: logins per second, in two runs. "worker logins": token logins, the path
// every reconnecting client takes (connect, LOGIN_REQUEST, LOGIN_RESPONSE, logout, the server's
// close), from concurrent loops in the driver processes. "gate logins": a password login at the
// HTTP gate, then the worker login with the token it issued, from the coordinator; bounded by
// scrypt, by design, so it is measured with a few loops over a few registered users.

import type { ScenarioOptions } from './options.js';
import { MAX_GATE_USERS } from '../../../src/cli/commands/bench.js';
import { BENCH_DEVICE, USERS_PER_LOOP, registerUsers, runGateLoginLoad, type GateUser, type LoginLoadResult, type LoginSecond } from '../login-load.js';
import { driverAddresses, runDrivers, share } from '../drivers.js';
import { Latency } from '../latency.js';
import { DriverTimeline } from '../timeline.js';
import { ProcessSampler, type ProcessSeries } from '../processes.js';
import { noProgress, type ProgressSink } from '../progress.js';
import { driverWarnings, fmt, machineInfo, meanCpu, sliceProcesses, sumCounts, type BenchReport, type LatencyReport, type RunReport } from '../report.js';
import { startTarget, type RunningTarget, type TargetKind } from '../targets.js';

export interface LoginStormOptions extends ScenarioOptions {
  /** The secret the drivers mint worker tokens with (default: secret); a wrong one makes every worker login fail. */
  tokenSecret?: string;
  gateUrl?: string;
  /** Concurrent worker-login loops over all drivers (open loop: attempts in flight at most). */
  connections: number;
  /** Open loop: worker login attempts per second in total. */
  rate?: number;
  /** Gate run: users registered (and logged in in turn); 0 skips the gate run. */
  users: number;
  /** Gate run: concurrent loops (default: min(users, 4), the gate's concurrent-hash bound). */
  gateLoops?: number;
}

/** The gate hashes at most this many passwords at once by default; more loops only earn 429s. */
const GATE_HASH_CONCURRENCY = 4;
/** The gate's rate limits (by default 120 requests a minute per client address) would stop the run in seconds. */
const UNLIMITED_GATE = ['--rate-ip', '100000000', '--rate-user-ip', '100000000', '--rate-user', '100000000'];
const PASSWORD = 'login-storm bench password';

export async function loginStormScenario(o: LoginStormOptions): Promise<BenchReport> {
  if (o.connections < 1) throw new Error('--connections must be at least 1');
  if (o.users < 0 || o.users > MAX_GATE_USERS) throw new Error(`--users must be 0..${MAX_GATE_USERS} (each is one scrypt hash at the gate)`);
  const drivers = Math.max(1, Math.min(o.drivers, o.connections));
  const progress = o.progress ?? noProgress;
  const sampler = new ProcessSampler();
  sampler.start();
  const runs: RunReport[] = [];
  const warnings: string[] = [];
  const target = await startTarget({ kind: o.target, workers: o.workers, fsync: o.fsync, secret: o.secret, workerEndpoints: o.workerEndpoints, ...(o.gateUrl ? { gateUrl: o.gateUrl } : {}), gateArgs: UNLIMITED_GATE, sampler });
  try {
    runs.push(await workerRun(o, target, drivers, sampler, progress, warnings));
    if (o.users > 0) {
      if (target.gateUrl) runs.push(await gateRun(o, target, sampler, progress));
      else warnings.push('gate logins skipped: the target has no gate (--gate URL with --target external)');
    }
  } finally {
    await target.stop();
    sampler.stop();
  }
  for (const run of runs) {
    const failed = run.metrics.failures!;
    if (failed > 0) warnings.push(`${run.label}: ${failed} of ${run.metrics.attempts} logins failed (${Object.entries(run.errors).map(([c, n]) => `${c}=${n}`).join(' ')})`);
  }
  const mode = o.rate ? `open loop at ${fmt.rate(o.rate)} logins/s, at most ${o.connections} in flight` : `closed loop, ${o.connections} loops`;
  return {
    scenario: 'login-storm',
    title: `login storm: worker token logins (${mode}, ${drivers} driver${drivers > 1 ? 's' : ''})${o.users > 0 ? `, then gate password logins (${o.users} users)` : ''}, ${o.durationS} s after ${o.warmupS} s warm-up each`,
    date: new Date().toISOString(),
    command: o.command,
    machine: machineInfo(),
    options: { ...o, progress: undefined, secret: undefined, tokenSecret: undefined },
    target: target.label,
    runs,
    table: {
      columns: ['run', 'logins/s', 'per worker', 'p50 ms', 'p90', 'p99', 'p99.9', 'max', 'failed', 'worker cpu', 'gate cpu', 'driver cpu'],
      rows: runs.map((r) => {
        const l = r.latency.login!;
        const cpu = (key: string) => (r.metrics[key] === undefined ? '-' : fmt.pct(r.metrics[key]!));
        return [r.label, fmt.rate(r.metrics.loginsPerSec!), fmt.rate(r.metrics.loginsPerSecPerWorker!), fmt.ms(l.p50), fmt.ms(l.p90), fmt.ms(l.p99), fmt.ms(l.p999), fmt.ms(l.max), r.metrics.failures!, cpu('workerCpu'), cpu('gateCpu'), cpu('driverCpu')];
      }),
    },
    warnings,
  };
}

/** CPU of the server processes over the measured seconds: workers (or the embedded node) and the gate. */
function serverCpu(processes: ProcessSeries[], cpu: Record<string, number>, kind: TargetKind): Record<string, number> {
  const sum = (roles: string[]) => processes.filter((p) => roles.includes(p.role)).reduce((total, p) => total + (cpu[p.pid] ?? 0), 0);
  const out: Record<string, number> = {};
  if (kind === 'external') return out;
  // Embedded: one process is both gate and worker: its CPU is the worker's and the gate's column stays empty.
  out.workerCpu = sum(['worker', 'node']);
  if (processes.some((p) => p.role === 'gate')) out.gateCpu = sum(['gate']);
  if (processes.some((p) => p.role === 'redis')) out.redisCpu = sum(['redis']);
  return out;
}

async function workerRun(o: LoginStormOptions, target: RunningTarget, drivers: number, sampler: ProcessSampler, progress: ProgressSink, warnings: string[]): Promise<RunReport> {
  const label = 'worker logins';
  const endpoints = target.workers.map(({ host, port }) => ({ host, port }));
  const timeline = new DriverTimeline(drivers, (p) =>
    progress(`[${label}] ${String(p.t).padStart(3)} s ${String(p.phase).padEnd(7)} logins ${fmt.rate(Number(p.logins)).padStart(7)}/s  p99 ${fmt.ms(Number(p.p99Ms)).padStart(8)} ms  failures ${p.failures}  in flight ${p.inFlight}`),
  );
  let startedAt = 0;
  const results: LoginLoadResult[] = await runDrivers({
    task: 'login',
    drivers,
    sampler,
    onReady: () => {
      startedAt = sampler.now();
    },
    onTick: (_index, tick) => timeline.add(tick as LoginSecond),
    options: (index) => ({
      endpoints,
      // Many addresses, cycled per connection: a (source, destination) pair rarely comes round while the server holds it in TIME_WAIT.
      localAddresses: driverAddresses(index, endpoints[0]!.host, 64),
      loops: share(o.connections, drivers, index),
      loopOffset: Array.from({ length: index }, (_, j) => share(o.connections, drivers, j)).reduce((a, b) => a + b, 0),
      loopStride: o.connections,
      ...(o.rate === undefined ? {} : { rate: o.rate * (share(o.connections, drivers, index) / o.connections) }),
      warmupMs: o.warmupS * 1000,
      durationMs: o.durationS * 1000,
      secret: o.tokenSecret ?? o.secret,
    }),
  });
  const endedAt = sampler.now();
  const from = startedAt + o.warmupS;
  const to = from + o.durationS;
  const processes = sliceProcesses(sampler.series, startedAt, endedAt).filter((p) => p.samples.length > 0);
  const cpu = meanCpu(sampler.series, from, to);
  warnings.push(...driverWarnings(sampler.series, from, to).map((w) => `${label}: ${w}`));

  const latency = Latency.merged(results.map((r) => r.latency));
  const startLag = Latency.merged(results.map((r) => r.startLag));
  const seconds = Math.max(...results.map((r) => r.seconds));
  const loginsPerSec = results.reduce((sum, r) => sum + r.logins, 0) / seconds;
  const metrics: Record<string, number> = {
    loginsPerSec,
    loginsPerSecPerWorker: loginsPerSec / endpoints.length,
    workers: endpoints.length,
    attempts: results.reduce((sum, r) => sum + r.attempts, 0),
    failures: results.reduce((sum, r) => sum + r.failures, 0),
    ...serverCpu(processes, cpu, target.kind),
    driverCpu: processes.filter((p) => p.role === 'driver').reduce((total, p) => total + (cpu[p.pid] ?? 0), 0),
  };
  if (o.rate !== undefined) metrics.offeredPerSec = o.rate;
  const latencies: Record<string, LatencyReport> = { login: latency.report() };
  if (o.rate !== undefined) latencies.startLag = startLag.report();
  const notes = [
    `each cycle: connect, LOGIN_REQUEST (token minted in the driver), LOGIN_RESPONSE, LOGOUT_REQUEST, LOGOUT_RESPONSE and the server's close (TIME_WAIT on the server's side); latency is connect → LOGIN_RESPONSE${o.rate !== undefined ? ' from the intended start' : ''}`,
    `${usersNote(o.connections)}; source addresses cycled per connection over 64 loopback addresses per driver`,
  ];
  if (o.rate !== undefined) notes.push(`driver start lag p99 ${fmt.ms(startLag.percentiles().p99)} ms (attempts wait for one of the ${o.connections} loops to be free)`);
  if (metrics.workerCpu !== undefined) notes.push(`worker CPU ${fmt.pct(metrics.workerCpu / endpoints.length)} of one core per worker: ${fmt.rate(loginsPerSec / Math.max(metrics.workerCpu, 1e-9))} logins per worker core-second`);
  return {
    label,
    metrics,
    latency: latencies,
    timeline: timeline.points(),
    processes,
    errors: sumCounts(results.map((r) => r.errors)),
    notes,
  };
}

function usersNote(loops: number): string {
  return `uids ls0..ls${loops * USERS_PER_LOOP - 1}, device "${BENCH_DEVICE}", each loop cycling through ${USERS_PER_LOOP} of them`;
}

async function gateRun(o: LoginStormOptions, target: RunningTarget, sampler: ProcessSampler, progress: ProgressSink): Promise<RunReport> {
  const label = 'gate logins';
  const gateUrl = target.gateUrl!;
  const users: GateUser[] = Array.from({ length: o.users }, (_, i) => ({ username: `bench-ls-${i}`, password: PASSWORD }));
  const loops = Math.max(1, Math.min(o.gateLoops ?? GATE_HASH_CONCURRENCY, o.users));
  progress(`[${label}] registering ${users.length} users (one scrypt hash each)`);
  const registration = await registerUsers(gateUrl, users, GATE_HASH_CONCURRENCY);
  const startedAt = sampler.now();
  const result = await runGateLoginLoad({
    gateUrl,
    users,
    loops,
    warmupMs: o.warmupS * 1000,
    durationMs: o.durationS * 1000,
    onSecond: (p) => progress(`[${label}] ${String(p.t).padStart(3)} s ${String(p.phase).padEnd(7)} logins ${String(p.logins).padStart(5)}/s  p99 ${fmt.ms(Number(p.p99Ms)).padStart(8)} ms  failures ${p.failures}  429s ${p.rateLimited}`),
  });
  const endedAt = sampler.now();
  const from = startedAt + o.warmupS;
  const to = from + o.durationS;
  const processes = sliceProcesses(sampler.series, startedAt, endedAt).filter((p) => p.samples.length > 0 && p.role !== 'driver');
  const cpu = meanCpu(sampler.series, from, to);
  const loginsPerSec = result.logins / result.seconds;
  const metrics: Record<string, number> = {
    loginsPerSec,
    loginsPerSecPerWorker: loginsPerSec / target.workers.length,
    workers: target.workers.length,
    attempts: result.attempts,
    failures: result.failures,
    rateLimited: result.rateLimited,
    users: o.users,
    loops,
    usersRegistered: registration.registered,
    usersExisting: registration.existing,
    registrationSeconds: registration.seconds,
    ...serverCpu(processes, cpu, target.kind),
  };
  const errors = sumCounts([result.errors, Object.fromEntries(Object.entries(registration.errors).map(([c, n]) => [`${c} (registration)`, n]))]);
  const http = result.http.percentiles();
  const notes = [
    `POST /api/login with a password, then the worker login with the returned token; latency is POST → the worker's LOGIN_RESPONSE (the HTTP part alone: p50 ${fmt.ms(http.p50)} ms, p99 ${fmt.ms(http.p99)} ms)`,
    `bounded by scrypt, by design: every password check is one scrypt hash (N=2^17, a few hundred ms of a libuv thread) and a gate runs at most ${GATE_HASH_CONCURRENCY} at once, so a gate manages a few logins per second per core; the ≥ 5k/s per worker target is about token logins (the worker run)`,
    `${o.users} users (bench-ls-0..${o.users - 1}) registered in ${registration.seconds.toFixed(1)} s (${registration.registered} new, ${registration.existing} already there), logged in in turn by ${loops} concurrent loops`,
    target.kind === 'external'
      ? "the gate's own rate limits apply (by default 120 requests a minute per client address; only failed logins count per user name): 429s are counted, and each costs its loop a second"
      : `the gate ran with its rate limits raised (${UNLIMITED_GATE.join(' ')}); 429s counted: ${result.rateLimited}`,
  ];
  return {
    label,
    metrics,
    latency: { login: result.login.report(), http: result.http.report() },
    timeline: result.timeline,
    processes,
    errors,
    notes,
  };
}
