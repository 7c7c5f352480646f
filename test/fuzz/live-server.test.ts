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
import { CLUSTER_TOKEN_SECRET, spawnWorker, type WorkerFlag, type WorkerProcess } from '../helpers/cluster.js';
import { Rng, type FuzzPools } from '../helpers/fuzz-frames.js';
import { ControlPair, MiB, RssSampler, rssOf, runFuzz, type FuzzSettings } from '../helpers/fuzz-load.js';
import { until } from '../../testkit/wait.js';

t.setTimeout(240_000);

const SEED = process.env.FUZZ_SEED ? Number(process.env.FUZZ_SEED) : Math.floor(Math.random() * 2 ** 32);
t.comment(`fuzz seed ${SEED} (replay: FUZZ_SEED=${SEED} npx tap test/fuzz/live-server.test.ts)`);

/** FUZZ_FRAMES=<n>: a longer (or, to try a change, shorter) run than the 100 000 frames of CI. */
const FRAMES = process.env.FUZZ_FRAMES ? Number(process.env.FUZZ_FRAMES) : 100_000;

const signer = new TokenSigner(CLUSTER_TOKEN_SECRET);

/**
 * The worker's resident memory may grow by at most this much over its baseline while fuzzed: what
 * 150 connections' buffers, the inboxes (bounded by --inbox-memory-mb) and V8's heap growth need,
 * with room to spare; a leak of a few KiB per frame or per connection exceeds it.
 */
const PEAK_GROWTH = 256 * MiB;
/** Once every fuzz connection is closed, at most this much above the baseline, besides the inboxes' bound. */
const SETTLED_GROWTH = 96 * MiB;
/** The fuzz worker's --inbox-memory-mb: what the inboxes may keep at most (full: SB_ERR_STORE_FULL, which the fuzz reaches). */
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
  settings: Omit<FuzzSettings, 'port'>;
  pools: FuzzPools;
  seed: number;
}

/** Runs the fuzz against `worker` beside a control pair and asserts the four properties. */
async function fuzzCase(t: Test, { worker, settings, pools, seed }: CaseOptions): Promise<void> {
  const pid = worker.child.pid!;
  const a = await controlClient(t, worker, 'ctl-a');
  const b = await controlClient(t, worker, 'ctl-b');
  const control = new ControlPair(a, b);
  const baseline = rssOf(pid);
  const rss = new RssSampler(pid);
  const started = Date.now();
  control.start();
  const stats = await runFuzz({ ...settings, port: worker.port }, new Rng(seed), pools);
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
  t.ok(control.sent > 100, `the control pair chatted throughout (${control.sent} acknowledged messages)`);

  // Bounded memory, and back down once the connections have closed.
  t.ok(rss.peak - baseline < PEAK_GROWTH, `peak RSS ${(rss.peak / MiB).toFixed(0)} MiB is within ${PEAK_GROWTH / MiB} MiB of the baseline ${(baseline / MiB).toFixed(0)} MiB`);
  const settledBound = baseline + INBOX_MB * MiB + SETTLED_GROWTH;
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
}

t.test('memory inbox, message rates off: 100 000 frames over 150 connections', async (t) => {
  const worker = await spawnWorker(t, 'fuzz-memory', { secret: CLUSTER_TOKEN_SECRET, 'allow-unknown-recipients': true, 'close-grace-ms': 200, 'log-level': 'info', ...FUZZ_FLAGS });
  const uids = Array.from({ length: 120 }, (_, i) => `fz${i}`);
  await fuzzCase(t, { worker, seed: SEED, pools: pools(uids), settings: { connections: 150, frames: FRAMES, maxMs: 90_000, scriptFrames: 300 } });
});
