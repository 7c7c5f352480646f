// 1:1 chat throughput against a single switchboard worker, next to the bare relay measured by
// the same driver in the same run. Prints delivered msg/s for both and their ratio.
// Run: npm run bench:chat -- [--pairs 100] [--window 32] [--duration 10] [--warmup 2] [--payload 100]

import { parseArgs } from 'node:util';
import { TokenSigner } from '../src/auth/token.js';
import { runChatLoad, type ChatLoadResult, type Target } from './lib/chat-load.js';
import { cpuSeconds, startRelayProcess, startWorkerProcess, type Started } from './lib/processes.js';

const { values } = parseArgs({
  options: {
    pairs: { type: 'string', default: '100' },
    window: { type: 'string', default: '32' },
    duration: { type: 'string', default: '10' },
    warmup: { type: 'string', default: '2' },
    payload: { type: 'string', default: '100' },
  },
});
const SECRET = 'bench-secret';
const signer = new TokenSigner(SECRET);

async function measure(target: Target): Promise<ChatLoadResult & { serverCpu: number; clientCpu: number }> {
  const server: Started = target === 'relay' ? await startRelayProcess() : await startWorkerProcess(SECRET);
  let cpu0 = 0;
  let self0 = process.cpuUsage();
  const result = await runChatLoad({
    target,
    port: server.port,
    pairs: Number(values.pairs),
    window: Number(values.window),
    warmupMs: Number(values.warmup) * 1000,
    durationMs: Number(values.duration) * 1000,
    payloadBytes: Number(values.payload),
    token: (uid) => signer.mint({ uid, ttlMs: 3_600_000 }),
    onMeasureStart: () => {
      cpu0 = cpuSeconds(server.child.pid!);
      self0 = process.cpuUsage();
    },
  });
  const serverCpu = (cpuSeconds(server.child.pid!) - cpu0) / result.seconds;
  const self = process.cpuUsage(self0);
  await server.stop();
  return { ...result, serverCpu, clientCpu: (self.user + self.system) / 1e6 / result.seconds };
}

const relay = await measure('relay');
const switchboard = await measure('switchboard');
const row = (r: typeof relay) =>
  `${r.target.padEnd(12)} ${Math.round(r.deliveredPerSec).toString().padStart(10)} ${Math.round(r.acked / r.seconds).toString().padStart(10)} ${(r.serverCpu * 100).toFixed(0).padStart(9)}% ${(r.clientCpu * 100).toFixed(0).padStart(9)}%`;
process.stdout.write(
  `\n1:1 chat, ${values.pairs} pairs, window ${values.window}, ${values.payload}-byte payload, ${values.duration} s after ${values.warmup} s warm-up\n` +
    `${'target'.padEnd(12)} ${'deliv/s'.padStart(10)} ${'acked/s'.padStart(10)} ${'server cpu'.padStart(10)} ${'driver cpu'.padStart(10)}\n` +
    `${row(relay)}\n${row(switchboard)}\n` +
    `ratio switchboard / bare relay: ${(switchboard.deliveredPerSec / relay.deliveredPerSec).toFixed(2)}\n`,
);
