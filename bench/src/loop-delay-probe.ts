// Preloaded into a server the bench starts for `bench group` (node --import): the event loop's
// delay, measured as the lateness of a timer due every INTERVAL_MS, into an HDR histogram that
// is written once a second as one JSON line among the server's own log lines on stdout
// ({"msg":"bench loop delay", from, to, latency}); the bench (LoopDelayReader, targets.ts)
// merges the lines of the seconds it asks about. A worker exposes no such metric of its own.

import { Latency } from './latency.js';

/** How often the probe's timer is due: a stall shorter than this may fall between two samples. */
const INTERVAL_MS = 2;
const REPORT_MS = 1000;

const delay = new Latency();
let last = performance.now();
let from = Date.now();

// setInterval schedules the next call INTERVAL_MS after the previous one began: any more is delay.
setInterval(() => {
  const now = performance.now();
  delay.add(Math.max(0, now - last - INTERVAL_MS));
  last = now;
}, INTERVAL_MS).unref();

setInterval(() => {
  const to = Date.now();
  // One write of one line (well under PIPE_BUF): not interleaved with the server's own lines.
  process.stdout.write(`${JSON.stringify({ level: 30, time: to, msg: 'bench loop delay', from, to, latency: delay.encode() })}\n`);
  delay.reset();
  from = to;
}, REPORT_MS).unref();
