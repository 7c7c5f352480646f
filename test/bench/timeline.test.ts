// The drivers' seconds merged into one timeline: counters summed, histograms merged, a second
// reported complete once every driver sent it, marks added to their second.

import t from 'tap';
import { DriverTimeline, PhaseClock } from '../../bench/src/timeline.js';
import { Latency } from '../../bench/src/latency.js';
import type { TimelinePoint } from '../../bench/src/report.js';

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

t.test('a second is labelled with the phase it spent most of its time in, whichever timer fires first', async (t) => {
  // A 2 s warm-up and a 1 s second timer expire together: the phase change may run just before
  // or just after the second is reported, and the last warm-up second is warm-up either way.
  let now = 0;
  const changeFirst = new PhaseClock<'warmup' | 'measure' | 'drain'>('warmup', () => now);
  now = 1001;
  t.equal(changeFirst.second(), 'warmup', 'second 1');
  now = 2000;
  changeFirst.enter('measure');
  now = 2002;
  t.equal(changeFirst.current, 'measure', 'the load measures from the change on');
  t.equal(changeFirst.second(), 'warmup', 'second 2: warm-up, although reported after the change');
  now = 3003;
  t.equal(changeFirst.second(), 'measure', 'second 3');
  now = 3100;
  changeFirst.enter('drain');
  now = 3600;
  t.equal(changeFirst.second(), 'drain', 'a short last second: most of it was drain');

  now = 0;
  const reportFirst = new PhaseClock<'warmup' | 'measure'>('warmup', () => now);
  now = 1000;
  reportFirst.second();
  now = 2000;
  t.equal(reportFirst.second(), 'warmup', 'second 2, reported before the change');
  reportFirst.enter('measure');
  now = 3001;
  t.equal(reportFirst.second(), 'measure', 'second 3: measure, although it began with the change');
});
