// The drivers' seconds merged into one timeline: counters summed, histograms merged, a second
// reported complete once every driver sent it, marks added to their second.

import t from 'tap';
import { DriverTimeline } from '../../src/bench/timeline.js';
import { Latency } from '../../src/bench/latency.js';
import type { TimelinePoint } from '../../src/bench/report.js';

const histogram = (...ms: number[]) => {
  const latency = new Latency();
  for (const v of ms) latency.add(v);
  return latency.encode();
};

t.test('two drivers: sums per second, merged latency, completion once both reported', async (t) => {
  const completed: TimelinePoint[] = [];
  const timeline = new DriverTimeline(2, (p) => completed.push(p));
  timeline.add({ t: 1, phase: 'warmup', sent: 10, connections: 4, latency: histogram(1, 1, 1) });
  t.equal(completed.length, 0, 'not complete with one driver');
  timeline.add({ t: 2, phase: 'measure', sent: 7, connections: 4, latency: histogram(2) });
  timeline.add({ t: 1, phase: 'warmup', sent: 5, connections: 4, latency: histogram(9) });
  t.equal(completed.length, 1);
  t.match(completed[0], { t: 1, phase: 'warmup', sent: 15, connections: 8 });
  t.ok(Math.abs(Number(completed[0]!.p99Ms) - 9) < 0.01, 'the slow driver\'s latency is in the merged p99');
  t.ok(Math.abs(Number(completed[0]!.p50Ms) - 1) < 0.01);
  timeline.mark(2, { event: 'worker-0 killed' });
  timeline.add({ t: 2, phase: 'measure', sent: 3, connections: 2, latency: '' });
  t.match(completed[1], { t: 2, sent: 10, connections: 6, event: 'worker-0 killed' });
  t.same(timeline.points().map((p) => p.t), [1, 2], 'in order');
  t.notOk('latency' in completed[0]!, 'the encoded histogram is not a counter');
});
