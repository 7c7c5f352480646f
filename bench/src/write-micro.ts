// Socket output microbench: what a tick's frames cost to send on loopback, written as one
// buffer (src/net/write-per-tick.ts: the frames copied together, one write) against a cork and
// a write per frame (the writev that uncork makes of them, what writePerTick did before). The
// CPU is this process's (user + system), which on loopback includes the kernel's delivery to
// the reading socket and the reader's reads (it only drains, in this process). Rounds alternate
// the two ways.
// Run: npm run bench:write [-- --frames 16 --bytes 160 --ticks 40000 --rounds 3]

import net from 'node:net';
import { parseArgs } from 'node:util';
import { writePerTick } from '../../src/net/write-per-tick.js';

const { values } = parseArgs({
  options: {
    frames: { type: 'string', default: '16' },
    bytes: { type: 'string', default: '160' },
    ticks: { type: 'string', default: '40000' },
    rounds: { type: 'string', default: '3' },
  },
});
const FRAMES = Number(values.frames);
const BYTES = Number(values.bytes);
const TICKS = Number(values.ticks);
const ROUNDS = Number(values.rounds);

type Way = 'one buffer (writePerTick)' | 'cork + a write each (writev)';

async function connected(): Promise<{ socket: net.Socket; close: () => void }> {
  const server = net.createServer((s) => s.resume());
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const socket = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
  await new Promise<void>((r) => socket.once('connect', r));
  socket.setNoDelay(true);
  return { socket, close: () => (socket.destroy(), server.close()) };
}

/** µs of this process's CPU per frame, `TICKS` ticks of `FRAMES` frames. */
async function run(way: Way): Promise<number> {
  const { socket, close } = await connected();
  const frames = Array.from({ length: FRAMES }, (_, i) => Buffer.alloc(BYTES, i));
  const before = process.cpuUsage();
  for (let tick = 0; tick < TICKS; tick++) {
    if (way === 'cork + a write each (writev)') {
      socket.cork();
      for (const frame of frames) socket.write(frame);
      process.nextTick(() => socket.uncork());
    } else {
      for (const frame of frames) writePerTick(socket, frame);
    }
    // The end of the tick (the flush), and now and then the reader's turn.
    await new Promise((r) => (tick % 64 === 63 ? setImmediate(r) : process.nextTick(r)));
    if (socket.writableLength > 1 << 20) await new Promise((r) => socket.once('drain', r));
  }
  const used = process.cpuUsage(before);
  close();
  return (used.user + used.system) / (TICKS * FRAMES);
}

const ways: Way[] = ['cork + a write each (writev)', 'one buffer (writePerTick)'];
const results = new Map<Way, number[]>(ways.map((w) => [w, []]));
for (let round = 0; round < ROUNDS; round++) for (const way of ways) results.get(way)!.push(await run(way));
console.log(`${FRAMES} frames of ${BYTES} bytes per tick, ${TICKS} ticks, loopback; µs of CPU per frame (each round):`);
for (const [way, us] of results) console.log(`  ${way.padEnd(30)} ${us.map((u) => u.toFixed(3)).join('  ')}`);
