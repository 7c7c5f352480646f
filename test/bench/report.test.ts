// The report's arithmetic over process samples: per-process means within a run's interval,
// saturated drivers, and the terminal table.

import t from 'tap';
import { driverWarnings, formatTable, meanCpu, sliceProcesses } from '../../bench/src/report.js';
import type { ProcessSeries } from '../../bench/src/processes.js';

const series = (name: string, role: ProcessSeries['role'], pid: number, points: [number, number][]): ProcessSeries => ({
  name,
  role,
  pid,
  samples: points.map(([t, cpu]) => ({ t, cpu, rss: 1 << 20 })),
});

// Two runs, each with its own driver-0: the first measured over (0, 3], the second over (10, 13].
const processes = [
  series('driver-0', 'driver', 101, [[1, 0.5], [2, 0.7], [3, 0.6]]),
  series('driver-0', 'driver', 202, [[11, 0.95], [12, 0.97], [13, 0.99]]),
  series('node', 'node', 303, [[1, 1], [2, 1], [11, 0.5], [12, 0.7]]),
];

t.test('mean CPU per process within an interval, by pid', async (t) => {
  const first = meanCpu(processes, 0, 3);
  t.same(Object.keys(first).sort(), ['101', '303'], 'the second run\'s driver has no samples here');
  t.ok(Math.abs(first[101]! - 0.6) < 1e-9);
  t.equal(first[303], 1);
  const second = meanCpu(processes, 10, 13);
  t.ok(Math.abs(second[202]! - 0.97) < 1e-9);
  t.ok(Math.abs(second[303]! - 0.6) < 1e-9);
});

t.test('a driver at ≥ 90% of one core while measuring is a warning; one below is not', async (t) => {
  t.same(driverWarnings(processes, 0, 3), []);
  const warnings = driverWarnings(processes, 10, 13);
  t.equal(warnings.length, 1);
  t.match(warnings[0], /driver-0 used 97% of one core/);
});

t.test('slicing re-bases the samples of an interval', async (t) => {
  const sliced = sliceProcesses(processes, 10, 13);
  t.same(sliced[0]!.samples, []);
  t.same(sliced[1]!.samples.map((s) => s.t), [1, 2, 3]);
});

t.test('the terminal table aligns its columns', async (t) => {
  const text = formatTable({ columns: ['run', 'deliv/s'], rows: [['bare relay', '1,000'], ['switchboard', 5]] });
  t.equal(text, ['run          deliv/s', 'bare relay     1,000', 'switchboard        5'].join('\n'));
});
