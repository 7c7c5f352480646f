// A smoke run of the chat bench driver against a real worker process, with tiny sizes: the
// report has its fields and the loss accounting holds, and a delivery dropped on purpose is
// reported as lost with its id. No timing assertions: this runs next to other tests.

import t, { type Test } from 'tap';
import { TokenSigner } from '../../src/auth/token.js';
import { runChatLoad, type ChatLoadOptions, type ChatLoadResult } from '../../bench/lib/chat-load.js';
import { startWorkerProcess } from '../../bench/lib/processes.js';

const SECRET = 'bench-smoke-secret';
const signer = new TokenSigner(SECRET);

const worker = await startWorkerProcess(SECRET);
t.teardown(() => worker.stop());

const base: ChatLoadOptions = {
  target: 'switchboard',
  port: worker.port,
  pairs: 2,
  window: 4,
  warmupMs: 50,
  durationMs: 300,
  payloadBytes: 20,
  verify: true,
  drainMs: 5000,
  token: (uid) => signer.mint({ uid, ttlMs: 60_000 }),
};

function checkReport(t: Test, r: ChatLoadResult, mode: 'open' | 'closed'): void {
  t.equal(r.mode, mode);
  t.ok(r.delivered > 0, 'messages delivered in the measured interval');
  t.ok(r.acked > 0, 'messages acknowledged in the measured interval');
  t.ok(r.seconds > 0);
  t.equal(r.deliveredPerSec, r.delivered / r.seconds);
  t.equal(r.ackedPerSec, r.acked / r.seconds);
  for (const latency of [r.delivery, r.ack]) {
    t.equal(latency.count > 0, true, 'latency samples recorded');
    t.ok(latency.p50 <= latency.p90 && latency.p90 <= latency.p99 && latency.p99 <= latency.p999 && latency.p999 <= latency.max, 'percentiles are ordered');
  }
  t.same(r.errors, {}, 'no refused sends');
  const a = r.accounting!;
  t.ok(a.sent > 0 && a.acked === a.sent, 'every send acknowledged after the drain');
}

t.test('closed loop: every acknowledged message received exactly once', async (t) => {
  const r = await runChatLoad(base);
  checkReport(t, r, 'closed');
  t.match(r.accounting, { lost: 0, dup: 0, lostIds: [], dupIds: [] });
  t.equal(r.accounting!.received, r.accounting!.sent);
});

t.test('open loop: every acknowledged message received exactly once', async (t) => {
  const r = await runChatLoad({ ...base, rate: 400 });
  checkReport(t, r, 'open');
  t.equal(r.rate, 400);
  t.match(r.accounting, { lost: 0, dup: 0, lostIds: [], dupIds: [] });
});

t.test('a delivery dropped on purpose is reported lost, with its id', async (t) => {
  // The receivers drop the first delivery they see: s0's or s1's msg_id 1, whichever came first.
  const r = await runChatLoad({ ...base, rate: 400, dropForTest: 1 });
  t.equal(r.accounting!.lost, 1);
  t.equal(r.accounting!.dup, 0);
  t.equal(r.accounting!.lostIds.length, 1);
  t.match(r.accounting!.lostIds[0], /^s[01]:1$/);
  t.equal(r.accounting!.received, r.accounting!.sent - 1);
});
