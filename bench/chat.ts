// 1:1 chat throughput and latency against a single switchboard worker (memory inbox, and Redis
// inbox when redis-server is installed), next to the bare relay measured by the same driver in
// the same run. Prints delivered msg/s, latency percentiles and the ratio to the relay.
// Run: npm run bench:chat -- [--pairs 100] [--window 32] [--duration 10] [--warmup 2]
//      [--payload 100] [--inbox memory,redis] [--redis-fsync none|everysec|always] [--cross-node]
//      [--rate MSGS_PER_S] [--verify] [--json out.json]
// --rate switches every target to the open loop at that total rate (default: closed loop with
// --window in flight per pair); --verify adds loss accounting to the switchboard targets.
// --cross-node adds a two-worker cluster (real ZooKeeper and Redis): senders on one worker,
// receivers on the other, every message forwarded over a peer link.

import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { TokenSigner } from '../src/auth/token.js';
import { runChatLoad, type ChatLoadResult, type Target } from './lib/chat-load.js';
import { cpuSeconds, freePort, startRelayProcess, startWorkerProcess, type Started } from './lib/processes.js';
import { startZooKeeper } from '../test/helpers/zookeeper.js';

const { values } = parseArgs({
  options: {
    pairs: { type: 'string', default: '100' },
    window: { type: 'string', default: '32' },
    duration: { type: 'string', default: '10' },
    warmup: { type: 'string', default: '2' },
    payload: { type: 'string', default: '100' },
    inbox: { type: 'string', default: 'memory,redis' },
    'redis-fsync': { type: 'string', default: 'none' },
    'cross-node': { type: 'boolean', default: false },
    rate: { type: 'string' },
    verify: { type: 'boolean', default: false },
    json: { type: 'string' },
  },
});
const rate = values.rate === undefined ? undefined : Number(values.rate);
if (rate !== undefined && !(rate > 0)) throw new Error('--rate must be a positive number of messages per second');
const SECRET = 'bench-secret';
const signer = new TokenSigner(SECRET);

interface Row extends ChatLoadResult {
  label: string;
  serverCpu: number;
  clientCpu: number;
}

async function startRedis(fsync: string): Promise<Started & { dir: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'sb-bench-redis-'));
  const port = await freePort();
  const persistence = fsync === 'none' ? ['--appendonly', 'no'] : ['--appendonly', 'yes', '--appendfsync', fsync];
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--dir', dir, ...persistence], { stdio: ['ignore', 'pipe', 'ignore'] });
  await new Promise<void>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`redis-server exited with ${code}`)));
    child.stdout!.on('data', (chunk: Buffer) => {
      if (chunk.toString().includes('Ready to accept connections')) resolve();
    });
  });
  const stop = () =>
    new Promise<void>((done) => {
      child.once('exit', () => done());
      child.kill('SIGKILL');
    });
  return { child, port, dir, stop };
}

async function measure(label: string, target: Target, start: () => Promise<Started>, receivers?: Started): Promise<Row> {
  const server = await start();
  let cpu0 = 0;
  let receiversCpu0 = 0;
  let self0 = process.cpuUsage();
  const result = await runChatLoad({
    target,
    port: server.port,
    receiverPort: receivers?.port,
    pairs: Number(values.pairs),
    window: Number(values.window),
    warmupMs: Number(values.warmup) * 1000,
    durationMs: Number(values.duration) * 1000,
    payloadBytes: Number(values.payload),
    rate,
    verify: values.verify && target === 'switchboard',
    token: (uid) => signer.mint({ uid, ttlMs: 3_600_000 }),
    onMeasureStart: () => {
      cpu0 = cpuSeconds(server.child.pid!);
      if (receivers) receiversCpu0 = cpuSeconds(receivers.child.pid!);
      self0 = process.cpuUsage();
    },
  });
  const serverCpu = (cpuSeconds(server.child.pid!) - cpu0 + (receivers ? cpuSeconds(receivers.child.pid!) - receiversCpu0 : 0)) / result.seconds;
  const self = process.cpuUsage(self0);
  await server.stop();
  return { ...result, label, serverCpu, clientCpu: (self.user + self.system) / 1e6 / result.seconds };
}

const rows: Row[] = [await measure('bare relay', 'relay', startRelayProcess)];
const inboxes = values.inbox.split(',');
if (inboxes.includes('memory')) rows.push(await measure('memory inbox', 'switchboard', () => startWorkerProcess(SECRET)));
if (inboxes.includes('redis')) {
  const redis = await startRedis(values['redis-fsync']);
  const redisCpu0 = cpuSeconds(redis.child.pid!);
  const t0 = Date.now();
  rows.push(await measure(`redis inbox (fsync ${values['redis-fsync']})`, 'switchboard', () => startWorkerProcess(SECRET, ['--redis', `redis://127.0.0.1:${redis.port}`])));
  process.stdout.write(`redis-server cpu over the redis run (incl. setup): ${(((cpuSeconds(redis.child.pid!) - redisCpu0) / ((Date.now() - t0) / 1000)) * 100).toFixed(0)}%\n`);
  await redis.stop();
  rmSync(redis.dir, { recursive: true, force: true });
}

if (values['cross-node']) {
  const teardowns: (() => unknown)[] = [];
  const zk = await startZooKeeper({ teardown: (fn: () => unknown) => teardowns.push(fn) } as unknown as Parameters<typeof startZooKeeper>[0]);
  const redis = await startRedis(values['redis-fsync']);
  const cluster = ['--zk', zk.connect, '--zk-root', `/bench-${process.pid}`, '--redis', `redis://127.0.0.1:${redis.port}`, '--cluster-secret', 'bench-cluster'];
  const receivers = await startWorkerProcess(SECRET, cluster);
  const label = `2 workers, cross-node, redis (fsync ${values['redis-fsync']})`;
  rows.push(
    await measure(
      label,
      'switchboard',
      async () => {
        const senders = await startWorkerProcess(SECRET, cluster);
        // Both peer links come up within a second of registration.
        await new Promise((r) => setTimeout(r, 1500));
        return senders;
      },
      receivers,
    ),
  );
  await receivers.stop();
  await redis.stop();
  rmSync(redis.dir, { recursive: true, force: true });
  for (const fn of teardowns.reverse()) await fn();
}

const relay = rows[0]!;
const ms = (v: number) => v.toFixed(2).padStart(8);
const mode = rate === undefined ? `closed loop, window ${values.window}` : `open loop at ${rate} msg/s`;
process.stdout.write(
  `\n1:1 chat, ${values.pairs} pairs, ${mode}, ${values.payload}-byte payload, ${values.duration} s after ${values.warmup} s warm-up\n` +
    `${'target'.padEnd(40)} ${'deliv/s'.padStart(9)} ${'acked/s'.padStart(9)} ${'ratio'.padStart(6)} ${'p50 ms'.padStart(8)} ${'p90'.padStart(8)} ${'p99'.padStart(8)} ${'p99.9'.padStart(8)} ${'max'.padStart(8)} ${'ack p99'.padStart(8)} ${'server'.padStart(7)} ${'driver'.padStart(7)}\n` +
    rows
      .map(
        (r) =>
          `${r.label.padEnd(40)} ${Math.round(r.deliveredPerSec).toString().padStart(9)} ${(r.target === 'relay' ? '-' : Math.round(r.ackedPerSec).toString()).padStart(9)} ${(r.deliveredPerSec / relay.deliveredPerSec).toFixed(2).padStart(6)} ${ms(r.delivery.p50)} ${ms(r.delivery.p90)} ${ms(r.delivery.p99)} ${ms(r.delivery.p999)} ${ms(r.delivery.max)} ${r.target === 'relay' ? '       -' : ms(r.ack.p99)} ${(r.serverCpu * 100).toFixed(0).padStart(6)}% ${(r.clientCpu * 100).toFixed(0).padStart(6)}%`,
      )
      .join('\n') +
    '\n',
);
for (const r of rows) {
  if (r.sendLag) process.stdout.write(`${r.label}: driver send lag p50 ${r.sendLag.p50.toFixed(2)} p99 ${r.sendLag.p99.toFixed(2)} max ${r.sendLag.max.toFixed(2)} ms\n`);
  if (!r.accounting) continue;
  const a = r.accounting;
  const errors = Object.entries(r.errors ?? {}).map(([code, n]) => `${code}=${n}`).join(' ') || 'none';
  process.stdout.write(
    `${r.label}: sent=${a.sent} acked=${a.acked} received=${a.received} lost=${a.lost} dup=${a.dup} errors: ${errors}` +
      (a.lostIds.length ? ` lost ids: ${a.lostIds.join(' ')}` : '') +
      (a.dupIds.length ? ` dup ids: ${a.dupIds.join(' ')}` : '') +
      '\n',
  );
}
if (values.json) {
  const cpuList = cpus();
  const report = {
    date: new Date().toISOString(),
    command: `npm run bench:chat -- ${process.argv.slice(2).join(' ')}`,
    options: values,
    machine: { cpuModel: cpuList[0]?.model ?? 'unknown', cpuCount: cpuList.length, node: process.version, platform: `${process.platform} ${process.arch}` },
    rows,
  };
  writeFileSync(values.json, `${JSON.stringify(report, null, 2)}\n`);
  process.stdout.write(`wrote ${values.json}\n`);
}
