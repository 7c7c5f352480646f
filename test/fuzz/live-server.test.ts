// The live-server fuzz: a real worker process is sent at least 100 000 random and mutated frames
// per run (test/helpers/fuzz-frames.ts) over 150 connections at once, most of them after a real
// login, while a control pair of SDK clients chats through it. Asserted: the worker never
// crashes and still serves at the end; it never fails internally (no log line at error or
// fatal, no SB_ERR_INTERNAL answer or close); its memory stays bounded and comes back down once
// the connections are gone; and the control pair loses nothing it was acknowledged.
//
// The seed is printed; FUZZ_SEED=<n> replays a run's frames (each connection slot's frames follow
// from the seed; how the slots interleave is the scheduler's). OPERATIONS.md, "The live-server
// fuzz", says what is covered and what a run costs.

import t, { type Test } from 'tap';
import { TokenSigner } from '../../src/auth/token.js';
import { ImClient } from '../../src/client/im-client.js';
import { CLUSTER_TOKEN_SECRET, spawnWorker, startRedisWorker, type WorkerFlag, type WorkerProcess } from '../helpers/cluster.js';
import { GroupAdmin } from '../helpers/groups.js';
import { startRedis } from '../helpers/redis.js';
import { Rng, type FuzzPools } from '../helpers/fuzz-frames.js';
import { ControlPair, MiB, RssSampler, rssOf, runFuzz, type FuzzSettings, type FuzzStats } from '../helpers/fuzz-load.js';
import { until } from '../../testkit/wait.js';
import { connectLoggedIn } from '../helpers/raw-session.js';
import { encodeMessageFrame } from '../../src/protocol/codec.js';
import { HeadType, type ImMessage } from '../../src/protocol/types.js';

t.setTimeout(240_000);

const SEED = process.env.FUZZ_SEED ? Number(process.env.FUZZ_SEED) : Math.floor(Math.random() * 2 ** 32);
t.comment(`fuzz seed ${SEED} (replay: FUZZ_SEED=${SEED} npx tap test/fuzz/live-server.test.ts)`);

/** FUZZ_FRAMES=<n>: a longer (or, to try a change, shorter) run than the 100 000 frames of CI. */
const FRAMES = process.env.FUZZ_FRAMES ? Number(process.env.FUZZ_FRAMES) : 100_000;

const signer = new TokenSigner(CLUSTER_TOKEN_SECRET);

/**
 * The worker's resident memory may grow by at most this much over its baseline while fuzzed.
 * Measured: 105 to 116 MiB (150 connections' buffers, the inboxes' messages, V8's heap growth);
 * a leak of a KiB per frame (100 MiB a run) or of a connection's buffers goes past it.
 */
const PEAK_GROWTH = 200 * MiB;
/**
 * Once every fuzz connection is closed: at most this much above the baseline. RSS does not come
 * back to the baseline: the inboxes keep the fuzz's messages (in the worker's memory with the
 * memory inbox) and V8 keeps the heap it grew; measured 100 to 116 MiB.
 */
const SETTLED_GROWTH = 160 * MiB;
/**
 * The fuzz worker's --inbox-memory-mb. The bound is the whole worker's, so at it the control pair
 * would be refused too (SB_ERR_STORE_FULL): far above what a run stores.
 */
const INBOX_MB = 192;

/** The flags that let the fuzz through to the handlers: no message rate (a separate case keeps the defaults). */
const FUZZ_FLAGS: Record<string, WorkerFlag> = {
  'msg-rate': 0,
  'user-msg-rate': 0,
  'inbox-memory-mb': INBOX_MB,
  'login-timeout-ms': 2_000,
};

function pools(uids: string[], groups: string[] = []): FuzzPools {
  const tokens = new Map(uids.map((uid) => [uid, signer.mint({ uid, ttlMs: 600_000 })]));
  return {
    uids,
    devices: ['d0', 'd1', 'd2', 'd3', 'd4', 'd5', 'd6'],
    groups,
    extraRecipients: ['ctl-b'],
    token: (uid) => tokens.get(uid) ?? signer.mint({ uid, ttlMs: 600_000 }),
  };
}

async function controlClient(t: Test, worker: WorkerProcess, uid: string): Promise<ImClient> {
  const client = new ImClient({ host: '127.0.0.1', port: worker.port, uid, deviceId: `${uid}-phone`, token: signer.mint({ uid, ttlMs: 600_000 }), retryStrategy: false, requestTimeoutMs: 30_000 });
  t.teardown(() => client.close());
  await client.connect();
  return client;
}

interface CaseOptions {
  worker: WorkerProcess;
  settings: Omit<FuzzSettings, 'port' | 'going'>;
  pools: FuzzPools;
  seed: number;
  /** The control pair's pause between sends. */
  pauseMs?: number;
}

/** Runs the fuzz against `worker` beside a control pair and asserts the four properties. */
async function fuzzCase(t: Test, { worker, settings, pools, seed, pauseMs }: CaseOptions): Promise<FuzzStats> {
  const pid = worker.child.pid!;
  const a = await controlClient(t, worker, 'ctl-a');
  const b = await controlClient(t, worker, 'ctl-b');
  const control = new ControlPair(a, b, pauseMs);
  const baseline = rssOf(pid);
  const rss = new RssSampler(pid);
  const started = Date.now();
  control.start();
  const stats = await runFuzz({ ...settings, port: worker.port, going: () => worker.alive }, new Rng(seed), pools);
  const fuzzMs = Date.now() - started;
  await control.stop();
  rss.stop();

  // 0 crashes: alive, and serving a new login.
  t.ok(worker.alive, 'the worker is alive after the fuzz');
  t.notMatch(worker.stderr, /Error|error/, 'and wrote nothing on stderr (no uncaught exception)');
  const late = await controlClient(t, worker, 'late-comer');
  t.equal((await late.send('ctl-a', 'after the fuzz')).duplicate, false, 'a new client logs in and chats after the fuzz');

  // 0 internal errors.
  const failures = worker.lines.filter((l) => l.level >= 50);
  t.same(
    failures.map((l) => `${l.msg}: ${JSON.stringify(l.err ?? l)}`.slice(0, 2_000)),
    [],
    'no log line at level error or fatal',
  );
  t.same(stats.internal, [], 'no SB_ERR_INTERNAL answer or close');
  t.equal(stats.undecodable, 0, 'every frame the server sent decodes');

  // 0 control messages lost: all acknowledged, each shown once, in order.
  t.same(control.failures, [], 'every control send was acknowledged');
  for (const [sender, recipient] of [
    ['ctl-a', 'ctl-b'],
    ['ctl-b', 'ctl-a'],
  ] as const) {
    const acked = control.acked.get(sender)!;
    await until(
      () => `${recipient} shown ${acked.length} of ${sender}'s acknowledged messages (has ${control.shown.get(recipient)!.length})`,
      () => control.shown.get(recipient)!.length >= acked.length,
      15_000,
    );
    t.same(control.shown.get(recipient)!.slice(0, acked.length), acked, `${recipient} was shown every message ${sender} got an ack for, once, in order`);
  }
  // Under the fuzz a control message waits its turn behind the fuzz's (with Redis, a few hundred ms).
  t.ok(control.sent >= 20, `the control pair chatted throughout (${control.sent} acknowledged messages)`);

  // Bounded memory, and back down once the connections have closed.
  t.ok(rss.peak - baseline < PEAK_GROWTH, `peak RSS ${(rss.peak / MiB).toFixed(0)} MiB is within ${PEAK_GROWTH / MiB} MiB of the baseline ${(baseline / MiB).toFixed(0)} MiB`);
  const settledBound = baseline + SETTLED_GROWTH;
  let settled = rssOf(pid);
  await until(
    () => `RSS back under ${(settledBound / MiB).toFixed(0)} MiB (at ${(settled / MiB).toFixed(0)} MiB)`,
    () => (settled = rssOf(pid)) < settledBound,
    20_000,
    250,
  ).catch((err: Error) => t.fail(err.message));
  t.pass(`RSS settles at ${(settled / MiB).toFixed(0)} MiB, under ${(settledBound / MiB).toFixed(0)} MiB once the fuzz connections are closed`);

  t.ok(stats.framesSent >= settings.frames, `sent at least ${settings.frames} frames (${stats.framesSent})`);
  const summary = { seed, fuzzMs, baselineMiB: Math.round(baseline / MiB), peakMiB: Math.round(rss.peak / MiB), settledMiB: Math.round(settled / MiB), control: control.sent, ...stats.summary() };
  t.comment(JSON.stringify(summary));
  return stats;
}

t.test('memory inbox, message rates off: 100 000 frames over 150 connections', async (t) => {
  const worker = await spawnWorker(t, 'fuzz-memory', { secret: CLUSTER_TOKEN_SECRET, 'allow-unknown-recipients': true, 'close-grace-ms': 200, 'log-level': 'info', ...FUZZ_FLAGS });
  const uids = Array.from({ length: 120 }, (_, i) => `fz${i}`);
  await fuzzCase(t, { worker, seed: SEED, pools: pools(uids), settings: { connections: 150, frames: FRAMES, maxMs: 90_000, scriptFrames: 300 } });
});

t.test('Redis inbox and groups, message rates off: 30 000 frames over 100 connections', async (t) => {
  const redis = await startRedis(t);
  const { 'inbox-memory-mb': _memoryOnly, ...flags } = FUZZ_FLAGS;
  const worker = await startRedisWorker(t, redis, flags);
  const uids = Array.from({ length: 120 }, (_, i) => `fz${i}`);
  // Groups the fuzz users are members of, so that group messages, pages, reads and readers reach a real group's paths.
  const admin = new GroupAdmin(t, redis.url);
  const groups = [];
  for (let g = 0; g < 4; g++) groups.push(await admin.create(uids[g]!, uids.filter((_, i) => i % 4 === g || i < 8).filter((u) => u !== uids[g]), `fuzz ${g}`));
  const stats = await fuzzCase(t, { worker, seed: SEED + 1, pools: pools(uids, groups), settings: { connections: 100, frames: Math.round(FRAMES * 0.3), maxMs: 60_000, scriptFrames: 300 } });
  t.ok((stats.answers.get('SB_ERR_GROUP_NOT_MEMBER') ?? 0) + stats.responses > 0, 'the fuzz reached the group paths');
});

t.test('default limits: the rates and the device cap refuse fuzz frames, nothing else breaks, and the limits still stand', async (t) => {
  const worker = await spawnWorker(t, 'fuzz-defaults', { secret: CLUSTER_TOKEN_SECRET, 'allow-unknown-recipients': true, 'close-grace-ms': 200, 'log-level': 'info' });
  // Few users, long scripts: each user's sessions together send far above --user-msg-rate.
  const uids = Array.from({ length: 3 }, (_, i) => `fd${i}`);
  const stats = await fuzzCase(t, { worker, seed: SEED + 2, pauseMs: 25, pools: pools(uids), settings: { connections: 12, frames: Math.round(FRAMES * 0.15), maxMs: 40_000, scriptFrames: 3_000, fatalShare: 0, mutateShare: 0 } });
  // How many fuzz frames the rates refuse depends on how fast the machine sends them: counted in
  // the summary. That the limits stand after the fuzz, whatever the timing: 1 500 messages in
  // one write exceed the connection's burst of 1 000 (refilled at 100/s).
  t.comment(`rate refusals ${stats.answers.get('SB_ERR_RATE_LIMITED') ?? 0}, device cap refusals ${stats.answers.get('SB_ERR_TOO_MANY_DEVICES') ?? 0}`);
  const burst = await connectLoggedIn(t, worker.port, 'fd-burst', signer.mint({ uid: 'fd-burst', ttlMs: 600_000 }), 'd0', { acks: true });
  burst.sendRaw(Buffer.concat(Array.from({ length: 1_500 }, (_, i) => encodeMessageFrame(burst.chatMessage('fd0', `burst ${i}`, { msgId: i + 1 })))));
  const isResponse = (m: ImMessage) => m.type === HeadType.MESSAGE_RESPONSE;
  await until('1 500 responses to the burst', () => burst.received.filter(isResponse).length >= 1_500, 20_000);
  const limited = burst.received.filter((m) => isResponse(m) && m.messageResponse?.errorCode === 'SB_ERR_RATE_LIMITED').length;
  t.ok(limited > 0, `the default message rate still refuses a burst after the fuzz (${limited} of 1 500 refused)`);
});
