// Memory per idle logged-in connection: starts a worker from the compiled CLI (embedded memory
// stores), reads its RSS once it has settled, logs in N connections that then only send
// heartbeats, and reads its RSS every second for --settle seconds. (RSS after - RSS before) / N
// is the figure, 5 s after the last login and at the end; nothing forces a GC. V8 gives back the
// garbage of the login burst only once the worker allocates little (its memory reducer, some
// 20 s later): the end figure is the idle steady state.
// Run: npm run build && node --import tsx bench/idle-probe.ts [--connections 15000]
//      [--batch 500] [--settle-before 15] [--settle 60] [--heartbeat-interval-ms 50000]
//      [--diag heap|snapshot] [--worker-stdout FILE]
// --diag heap writes V8's heap statistics per space (bench/lib/heap-stats.mjs; no GC) and
// --diag snapshot a heap snapshot (forces a GC first) of the loaded worker into --diag-dir;
// `node --import tsx bench/lib/heap-summary.ts FILE.heapsnapshot` lists it by constructor.

import net from 'node:net';
import { createWriteStream, mkdirSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { TokenSigner } from '../src/auth/token.js';
import { FrameDecoder } from '../src/protocol/frame.js';
import { decodeMessage, encodeMessageFrame } from '../src/protocol/codec.js';
import { HeadType, PRE_LOGIN_SESSION_ID } from '../src/protocol/types.js';
import { startWorkerProcess } from './lib/processes.js';

const { values } = parseArgs({
  options: {
    connections: { type: 'string', default: '15000' },
    batch: { type: 'string', default: '500' },
    'settle-before': { type: 'string', default: '15' },
    settle: { type: 'string', default: '60' },
    'heartbeat-interval-ms': { type: 'string', default: '50000' },
    diag: { type: 'string' },
    'diag-dir': { type: 'string', default: '/tmp/sb-idle-probe' },
    'worker-stdout': { type: 'string' },
  },
});
const connections = Number(values.connections);
const batch = Number(values.batch);
const settleBeforeMs = Number(values['settle-before']) * 1000;
const settleMs = Math.max(5, Number(values.settle)) * 1000;
const heartbeatMs = Number(values['heartbeat-interval-ms']);
const diag = values.diag;
const diagDir = values['diag-dir'];
if (diag !== undefined && diag !== 'heap' && diag !== 'snapshot') throw new Error('--diag is heap or snapshot');

const SECRET = 'idle-probe-secret';
const signer = new TokenSigner(SECRET);
/** Client sockets are spread over source addresses so no one address runs out of ephemeral ports. */
const SOURCE_ADDRESSES = 8;

function vmRssBytes(pid: number): number {
  const m = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!m) throw new Error(`no VmRSS for ${pid}`);
  return Number(m[1]) * 1024;
}

const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;

if (diag) {
  mkdirSync(diagDir, { recursive: true });
  process.env.SB_DIAG_DIR = diagDir;
  const flags = diag === 'heap' ? ['--import', './bench/lib/heap-stats.mjs'] : ['--heapsnapshot-signal=SIGUSR2', `--diagnostic-dir=${diagDir}`];
  process.env.BENCH_SERVER_NODE_ARGS = [process.env.BENCH_SERVER_NODE_ARGS ?? '', ...flags].join(' ');
}

/** Signals the worker to write its heap statistics or snapshot; resolves the new file once complete. */
async function dumpDiag(): Promise<string> {
  const existing = new Set(readdirSync(diagDir));
  worker.child.kill('SIGUSR2');
  const ext = diag === 'heap' ? '.json' : '.heapsnapshot';
  // Complete once the new file has stopped growing.
  let file: string | undefined;
  let size = -1;
  for (;;) {
    await sleep(500);
    file ??= readdirSync(diagDir).find((f) => f.endsWith(ext) && !existing.has(f));
    if (!file) continue;
    const now = statSync(join(diagDir, file)).size;
    if (now === size && now > 0) return join(diagDir, file);
    size = now;
  }
}

const worker = await startWorkerProcess(SECRET, ['--heartbeat-interval-ms', String(heartbeatMs), '--login-timeout-ms', '60000']);
const pid = worker.child.pid!;
// With BENCH_SERVER_NODE_ARGS=--trace-gc, this is where the collector's story goes.
if (values['worker-stdout']) worker.child.stdout!.pipe(createWriteStream(values['worker-stdout']));
await sleep(settleBeforeMs);
const before = vmRssBytes(pid);
console.log(`worker pid ${pid} port ${worker.port}: RSS with 0 connections ${mib(before)}`);
if (diag === 'heap') console.log(`heap: ${await dumpDiag()}`);

const heartbeat = encodeMessageFrame({ type: HeadType.HEART_BEAT, sequence: 7, heartBeat: { seq: 1 } });
const sockets: net.Socket[] = [];
let loggedIn = 0;
let failed = 0;

function open(i: number): Promise<void> {
  return new Promise((resolve) => {
    const uid = `idle${i}`;
    const socket = net.connect({ host: '127.0.0.1', port: worker.port, localAddress: `127.0.0.${2 + (i % SOURCE_ADDRESSES)}` });
    let settled = false;
    const done = (ok: boolean) => {
      if (settled) return;
      settled = true;
      if (ok) loggedIn++;
      else failed++;
      resolve();
    };
    const decoder = new FrameDecoder((body) => {
      const m = decodeMessage(body);
      if (m.type === HeadType.LOGIN_RESPONSE) done(m.loginResponse?.result === true);
    });
    socket.on('data', (chunk: Buffer) => decoder.push(chunk));
    socket.on('error', () => done(false));
    socket.on('close', () => done(false));
    socket.on('connect', () => {
      const token = signer.mint({ uid, deviceId: 'd', ttlMs: 3_600_000 });
      socket.write(
        encodeMessageFrame({ type: HeadType.LOGIN_REQUEST, sequence: 1, sessionId: PRE_LOGIN_SESSION_ID, loginRequest: { uid, deviceId: 'd', token } }),
      );
    });
    sockets.push(socket);
  });
}

const started = Date.now();
for (let i = 0; i < connections; i += batch) {
  const pending: Promise<void>[] = [];
  for (let j = i; j < Math.min(connections, i + batch); j++) pending.push(open(j));
  await Promise.all(pending);
}
console.log(`${loggedIn} logged in, ${failed} failed, in ${((Date.now() - started) / 1000).toFixed(1)} s`);

// Every socket sends one heartbeat per interval, spread evenly over it.
const TICK_MS = 1000;
let next = 0;
const beats = setInterval(() => {
  const count = Math.ceil((sockets.length * TICK_MS) / heartbeatMs);
  for (let k = 0; k < count; k++) {
    const socket = sockets[next++ % sockets.length]!;
    if (!socket.destroyed) socket.write(heartbeat);
  }
}, TICK_MS);

// RSS every second while settling: it moves as the collector catches up with login garbage.
const samples: number[] = [];
for (let t = 0; t < settleMs; t += 1000) {
  await sleep(1000);
  samples.push(vmRssBytes(pid));
}
console.log(`RSS while settling (MiB, 1 s apart): ${samples.map((b) => (b / 1024 / 1024).toFixed(0)).join(' ')}`);
const perConnection = (rss: number) => Math.round((rss - before) / Math.max(1, loggedIn));
const early = samples[4]!;
const after = samples.at(-1)!;
const stillOpen = sockets.filter((s) => !s.destroyed).length;
console.log(`RSS with ${stillOpen} connections: ${mib(early)} after 5 s, ${mib(after)} after ${settleMs / 1000} s`);
console.log(
  `connections=${loggedIn} rss_before=${before} rss_5s=${early} rss_after=${after} ` +
    `bytes_per_connection_5s=${perConnection(early)} bytes_per_connection=${perConnection(after)}`,
);

if (diag) console.log(`${diag}: ${await dumpDiag()} (RSS now ${mib(vmRssBytes(pid))})`);

clearInterval(beats);
for (const socket of sockets) socket.destroy();
await worker.stop();
