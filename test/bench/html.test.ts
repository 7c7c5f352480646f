// The bench's HTML report: one self-contained document, every user string escaped, one chart
// per series kind with a "no data" note instead of a broken chart, and no NaN/Infinity in the
// SVG whatever the data (empty, a single point, all zero).

import t, { type Test } from 'tap';
import { escapeHtml, hdrPosition, lineChart, phaseBands, renderHtml, textWidth } from '../../bench/src/html.js';
import { memoryInboxNote, type ChatScenarioOptions } from '../../bench/src/scenarios/chat.js';
import type { BenchReport, RunReport, TimelinePoint } from '../../bench/src/report.js';
import type { ProcessSeries } from '../../bench/src/processes.js';

const MiB = 2 ** 20;
const EVIL = '<script>alert(1)</script> & "co"';
const URL_IN_COMMAND = 'https://example.com/hook?a=1&b=<x>';

function timeline(seconds: number, rate: number, withP99: boolean): TimelinePoint[] {
  return Array.from({ length: seconds }, (_, i) => {
    const t = i + 1;
    const phase = t <= 3 ? 'warmup' : t <= seconds - 1 ? 'measure' : 'drain';
    const point: TimelinePoint = { t, phase, sent: rate, delivered: rate - i, acked: rate - 1, errors: i % 4 === 0 ? 2 : 0, connections: 200 };
    if (withP99) point.p99 = 1 + i * 0.5;
    return point;
  });
}

function processes(): ProcessSeries[] {
  const samples = (cpu: number, rss: number) => Array.from({ length: 12 }, (_, i) => ({ t: i + 0.5, cpu: cpu + i * 0.01, rss: rss + i * MiB }));
  return [
    { name: 'worker-1', role: 'worker', pid: 101, samples: samples(0.6, 80 * MiB) },
    { name: 'driver-1', role: 'driver', pid: 102, samples: samples(0.3, 60 * MiB) },
  ];
}

const distribution: [number, number][] = [[0, 0.05], [10, 0.2], [50, 0.8], [90, 2], [99, 9], [99.9, 40], [99.99, 120], [100, 300]];

function chatRun(label: string, withP99: boolean, lost: number): RunReport {
  return {
    label,
    metrics: { deliveredPerSec: 9876.54321, ratioToRelay: 0.8123 },
    latency: {
      delivery: { count: 98765, p50: 0.8, p90: 2, p99: 9, p999: 40, max: 300, distribution },
      ack: { count: 98000, p50: 0.5, p90: 0.9, p99: 1.5, p999: 2.5, max: 3, distribution: [[0, 0.3], [50, 0.5], [90, 0.9], [99, 1.5], [100, 3]] },
    },
    timeline: timeline(12, 10_000, withP99),
    processes: processes(),
    errors: lost ? { SB_ERR_RATE_LIMITED: 7 } : {},
    accounting: { sent: 120_000, acked: 119_990, received: 119_990 - lost, lost, dup: 0, lostIds: lost ? ['alice:m-17', 'bob:<m-18>'] : [], dupIds: [] },
    notes: ['drivers warmed up for 3 s'],
  };
}

const base = {
  scenario: 'chat',
  date: '2025-01-02T03:04:05.000Z',
  command: `switchboard bench chat --pairs 100 --webhook ${URL_IN_COMMAND}`,
  machine: { cpuModel: 'Test CPU @ 3GHz', cpuCount: 8, memoryBytes: 16 * 2 ** 30, node: 'v20.11.0', platform: 'linux x64' },
  target: 'switchboard',
};

const chat: BenchReport = {
  ...base,
  title: 'chat: 100 pairs, window 8',
  options: { pairs: 100, window: 8, webhook: URL_IN_COMMAND, tags: ['a', 'b'] },
  runs: [chatRun('switchboard x1', true, 0), chatRun('relay baseline', false, 2)],
  table: { columns: ['target', 'delivered/s', 'p99 ms', 'lost'], rows: [['switchboard x1', '9,877', '9.00', 0], ['relay baseline', '12,001', '4.10', 2]] },
  warnings: ['driver-1 used 95% of a core while measuring: the driver may be the bottleneck'],
};

const edge: BenchReport = {
  ...base,
  title: 'edge & cases',
  options: { label: EVIL },
  runs: [
    { label: EVIL, metrics: { broken: Number.NaN, huge: Infinity }, latency: {}, timeline: [], processes: [], errors: { [EVIL]: 1 }, notes: [EVIL] },
    {
      label: 'one point, all zero',
      metrics: {},
      latency: { empty: { count: 0, p50: 0, p90: 0, p99: 0, p999: 0, max: 0, distribution: [] }, single: { count: 1, p50: 0, p90: 0, p99: 0, p999: 0, max: 0, distribution: [[100, 0]] } },
      timeline: [{ t: 0, phase: 'warmup', delivered: 0, connections: 0 }],
      processes: [{ name: 'worker-1', role: 'worker', pid: 1, samples: [{ t: 0, cpu: 0, rss: 0 }] }, { name: 'gone', role: 'driver', pid: 2, samples: [] }],
      errors: {},
      accounting: { sent: 0, acked: 0, received: 0, lost: 0, dup: 0, lostIds: [], dupIds: [] },
      notes: [],
    },
  ],
  table: { columns: ['run', `${EVIL} col`], rows: [[EVIL, Number.NaN]] },
  warnings: [],
};

const count = (text: string, needle: string) => text.split(needle).length - 1;

/** Checks that would fail for any report: a full document, nothing loaded, no NaN/Infinity. */
function checkDocument(t: Test, html: string): void {
  t.match(html, /^<!doctype html>\n<html lang="en">/);
  t.match(html, /<\/body>\n<\/html>\n$/);
  t.equal(count(html, '<script'), 0, 'no script element at all');
  t.notMatch(html, /<link\b/i, 'no stylesheet link');
  t.notMatch(html, /\bsrc\s*=/i, 'nothing loaded by src');
  t.notMatch(html, /url\(|@import/i, 'nothing loaded from the CSS');
  t.notMatch(html, /xmlns/, 'inline SVG needs no namespace URL');
  for (const [, target] of html.matchAll(/\bhref\s*=\s*"([^"]*)"/g)) t.match(target, /^#/, `href ${target} stays in the page`);
  t.notMatch(html, /NaN|Infinity/, 'no NaN or Infinity anywhere');
  t.equal(count(html, '<svg'), count(html, '</svg>'), 'SVGs are closed');
}

t.test('a chat report with two runs', async (t) => {
  const html = renderHtml(chat);
  checkDocument(t, html);

  t.ok(html.includes('<title>chat: 100 pairs, window 8</title>'));
  for (const text of ['2025-01-02T03:04:05.000Z', 'Test CPU @ 3GHz × 8', '16.0 GiB', 'v20.11.0', 'linux x64', 'switchboard bench chat --pairs 100']) {
    t.ok(html.includes(text), `shows ${text}`);
  }
  t.ok(html.includes('<th>tags</th><td>[&quot;a&quot;,&quot;b&quot;]</td>'), 'non-string options as JSON');
  t.ok(html.includes(escapeHtml(URL_IN_COMMAND)) && !html.includes(URL_IN_COMMAND), 'a URL in the command is escaped text');
  t.ok(html.includes('class="warnings"') && html.includes(escapeHtml(chat.warnings[0]!)), 'the warning is shown');
  t.ok(html.indexOf('class="warnings"') < html.indexOf('<h2>Summary</h2>'), 'warnings come before the figures');

  for (const column of chat.table.columns) t.ok(html.includes(`<th>${escapeHtml(column)}</th>`), `summary column ${column}`);
  for (const run of chat.runs) t.ok(html.includes(`<h2>${run.label}</h2>`), `run ${run.label}`);
  t.ok(html.includes('<th>delivered per second</th><td>9,877</td>'), 'metric labelled and formatted');
  t.ok(html.includes('<td>SB_ERR_RATE_LIMITED</td><td>7</td>'), 'errors by code');

  // Accounting: the clean run passes, the lossy one fails and lists its lost ids.
  t.ok(html.includes('<td>120,000</td><td>119,990</td><td>119,990</td><td class="pass">0</td><td class="pass">0</td>'));
  t.ok(html.includes('<td>120,000</td><td>119,990</td><td>119,988</td><td class="fail">2</td><td class="pass">0</td>'));
  t.ok(html.includes('PASS: no message lost or duplicated') && html.includes('FAIL: 2 lost, 0 duplicated'));
  t.ok(html.includes('<code>alice:m-17</code> <code>bob:&lt;m-18&gt;</code>'), 'lost ids, escaped');
  t.ok(html.includes('<li>drivers warmed up for 3 s</li>'), 'notes');
  t.ok(html.includes('<td>delivery</td><td>98,765</td><td>0.80</td><td>2.00</td><td>9.00</td><td>40.00</td><td>300.00</td>'), 'percentiles as text');

  // Run 1: throughput, connections, latency over time, 2 distributions, CPU, RSS. Run 2: no p99.
  t.equal(count(html, '<svg'), 7 + 6, 'one SVG per chart');
  t.equal(count(html, 'no data'), 0);
  for (const title of ['Throughput over time', 'Connections over time', 'Latency over time', 'delivery latency by percentile', 'ack latency by percentile', 'CPU over time', 'RSS over time']) {
    t.ok(html.includes(`>${title}</text>`), `chart ${title}`);
  }
  t.equal(count(html, '>Latency over time</text>'), 1, 'only the run with p99 has a latency-over-time chart');

  // Connections and p99 are not on the throughput chart; legends name the series.
  const throughput = html.slice(html.indexOf('>Throughput over time<'), html.indexOf('</svg>', html.indexOf('>Throughput over time<')));
  for (const key of ['sent', 'delivered', 'acknowledged', 'errors']) t.ok(throughput.includes(`">${key}</text></g>`), `legend ${key}`);
  t.notOk(throughput.includes('>connections</text>') || throughput.includes('>p99</text>'), 'no mixed units');
  t.ok(throughput.includes('>warmup</text>') && throughput.includes('fill="#888888"'), 'warm-up shaded and labelled');

  // The delivery distribution spans 0.05..300 ms: log axis, decade ticks; HDR percentile ticks.
  const delivery = html.slice(html.indexOf('>delivery latency by percentile<'));
  for (const tick of ['>0.01<', '>0.1<', '>1<', '>10<', '>100<', '>1k<', '>0%<', '>90%<', '>99%<', '>99.9%<', '>99.99%<']) t.ok(delivery.includes(tick), `tick ${tick}`);
  t.ok(html.includes('>CPU over time<') && html.includes('>worker-1</text>') && html.includes('>driver-1</text>'), 'one series per process');
});

t.test('edge cases: empty data, one point, zeros, hostile strings', async (t) => {
  const html = renderHtml(edge);
  checkDocument(t, html);

  t.notOk(html.includes('<script>alert(1)'), 'the label is never markup');
  t.ok(html.includes('<h2>&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;co&quot;</h2>'), 'the label, escaped');
  t.equal(count(html, '&lt;script&gt;alert(1)'), 7, 'escaped in heading, nav, option, error code, note, table header and cell');
  t.ok(html.includes('<title>edge &amp; cases</title>'));
  t.notOk(html.includes('class="warnings"'), 'no warnings box without warnings');
  t.ok(html.includes('<th>broken</th><td>n/a</td>') && html.includes('<th>huge</th><td>n/a</td>'), 'non-finite metrics as n/a');
  t.ok(html.includes('No loss accounting'), 'a run without accounting says so');

  // Run 1: throughput, latency, CPU and RSS all empty. Run 2: the empty distribution is a note;
  // throughput, connections, the single distribution point, CPU and RSS are drawn.
  t.equal(count(html, 'class="no-data"'), 4 + 1);
  t.equal(count(html, '<svg'), 5);
  t.match(html, /<svg[^>]*aria-label="single latency by percentile"/);
  t.ok(html.includes('<figcaption>empty latency by percentile</figcaption>'));
});

t.test('lineChart', async (t) => {
  t.match(lineChart([], { title: 'x', xLabel: 'x', yLabel: 'y' }), /no data/);
  t.match(lineChart([{ name: 'a', points: [[Number.NaN, 1], [1, Infinity]] }], { title: 'x', xLabel: 'x', yLabel: 'y' }), /no data/, 'non-finite points are no data');

  const zeros = lineChart([{ name: 'a', points: [[0, 0], [1, 0], [2, 0]] }], { title: 'zeros', xLabel: 'x', yLabel: 'y', y: 'auto-log' });
  t.notMatch(zeros, /NaN|Infinity/);
  t.match(zeros, />1<\/text>/, 'all-zero values get a 0..1 axis');

  const one = lineChart([{ name: 'a', points: [[5, 42]] }], { title: 'one', xLabel: 'x', yLabel: 'y' });
  t.notMatch(one, /NaN|Infinity/);
  t.match(one, /<circle cx="342.0"/, 'a single point sits mid-axis');

  const narrow = lineChart([{ name: 'a', points: [[50, 2], [99, 20]] }], { title: 'narrow', xLabel: 'p', yLabel: 'ms', x: 'hdr', y: 'auto-log' });
  t.notMatch(narrow, />100<\/text>/, 'one decade stays linear');
  t.match(narrow, />20<\/text>/);
});

t.test('helpers', async (t) => {
  t.equal(escapeHtml(`<a href="x">'&'</a>`), '&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;');
  t.equal(hdrPosition(0), 0);
  t.ok(Math.abs(hdrPosition(90) - 0.25) < 1e-12, '90% a quarter along');
  t.ok(Math.abs(hdrPosition(99) - 0.5) < 1e-12, '99% half way');
  t.equal(hdrPosition(100), 1, 'the max at the last tick');
  t.equal(hdrPosition(99.9999), 1, 'beyond the last tick: clamped');
  t.same(phaseBands(timeline(12, 1, false)), [{ from: 0.5, to: 3.5, label: 'warmup' }, { from: 11.5, to: 12.5, label: 'drain' }]);
  t.same(phaseBands([]), []);
});

// The options exactly as `switchboard bench chat --duration 4 --warmup 2` hands them to the
// scenario (the workers default included), as the scenario puts them into its report.
const chatOptions = {
  target: 'embedded',
  workers: 2,
  fsync: 'none',
  secret: '[redacted]',
  connections: 40,
  durationS: 4,
  warmupS: 2,
  drivers: 1,
  command: 'switchboard bench chat --duration 4 --warmup 2',
  inbox: 'memory',
  window: 32,
  max: false,
  maxP99Ms: 50,
  payloadBytes: 100,
  crossNode: false,
  relay: true,
  switchboard: true,
  drainMs: 5000,
} satisfies ChatScenarioOptions;

/** The rows of the Options table, as text. */
function optionsTable(html: string): string {
  const start = html.indexOf('<h3>Options</h3>');
  return html.slice(start, html.indexOf('</table>', start));
}

t.test('options and metrics are labelled for people, in their units, CPU as a percentage of one core', async (t) => {
  const report: BenchReport = {
    ...chat,
    options: { ...chatOptions, progress: undefined },
    runs: [{ ...chatRun('switchboard', true, 0), metrics: { deliveredPerSec: 49_067.02, serverCpu: 0.4107, driverCpu: 1.237, ratioToRelay: 0.2602 } }],
    table: { columns: ['run', 'deliv/s', 'server cpu'], rows: [['switchboard', '49,067', '41%']] },
  };
  const html = renderHtml(report);
  const options = optionsTable(html);
  t.notMatch(options, /undefined/, 'no undefined option');
  // Keys named for the code (durationS, maxP99Ms, ...); one-word keys such as target are words.
  for (const key of [...Object.keys(chatOptions), 'progress'].filter((k) => /[A-Z]/.test(k) || ['progress', 'command', 'secret', 'switchboard', 'workers'].includes(k))) {
    t.notOk(options.includes(`<th>${key}</th>`), `no raw key ${key}`);
  }
  t.notMatch(options, /worker/i, 'an embedded target is one process: no worker count');
  t.notMatch(options, /redacted|secret/, 'no secret, not even redacted');
  t.notMatch(options, /p99/, 'no p99 bound without --max');
  t.notMatch(options, /<th>command<\/th>/, 'the command line is shown above, once');
  for (const row of ['<th>measured</th><td>4 s</td>', '<th>warm-up</th><td>2 s</td>', '<th>payload</th><td>100 bytes</td>', '<th>drain after the run, at most</th><td>5,000 ms</td>', '<th>inbox</th><td>memory</td>']) {
    t.ok(options.includes(row), row);
  }

  const cluster = optionsTable(renderHtml({ ...report, options: { ...chatOptions, target: 'cluster', max: true } }));
  t.ok(cluster.includes('<th>worker processes</th><td>2</td>'), 'a cluster shows its workers');
  t.ok(cluster.includes('<th>delivery p99 bound of a sustained rate</th><td>50 ms</td>'), '--max shows its bound');
  t.notMatch(cluster, /<th>inbox<\/th>/, 'a cluster\'s inbox is Redis: no inbox option');

  t.ok(html.includes('<th>server CPU (% of one core)</th><td>41%</td>'), 'server CPU in percent of one core');
  t.ok(html.includes('<th>driver CPU (% of one core)</th><td>124%</td>'), 'over one core reads as such');
  t.notMatch(html, /0\.4107|>0\.41<|serverCpu|deliveredPerSec/, 'no fraction, no raw metric key');
  t.ok(html.includes('>% of one core</text>'), 'the CPU chart says its unit');
  t.match(html, /CPU figures are in % of one core/, 'and the summary says it too');
});

t.test('bands cover the samples of their phase and no other', async (t) => {
  // A chat run with --warmup 2 --duration 4: seconds 1-2 warm up, 3-6 measure, 7 drains.
  const points: TimelinePoint[] = [1, 2, 3, 4, 5, 6, 7].map((s) => ({ t: s, phase: s <= 2 ? 'warmup' : s <= 6 ? 'measure' : 'drain', delivered: 1 }));
  const bands = phaseBands(points);
  t.same(bands.map((b) => b.label), ['warmup', 'drain']);
  for (const band of bands) {
    const inside = points.filter((p) => p.t > band.from && p.t < band.to).map((p) => p.t);
    t.same(inside, points.filter((p) => p.phase === band.label).map((p) => p.t), `${band.label} holds exactly its samples`);
  }
  t.same(bands[0], { from: 0.5, to: 2.5, label: 'warmup' }, 'the first warm-up sample is inside its band, not on its edge');
});

t.test('every label stays inside its chart', async (t) => {
  const svgTexts = (svg: string) => {
    const width = Number(/viewBox="0 0 (\d+)/.exec(svg)![1]);
    return { width, texts: [...svg.matchAll(/<text(?: class="(\w+)")? x="([\d.-]+)"[^>]*?(?:text-anchor="(\w+)")?>([^<]*)<\/text>/g)] };
  };
  const charts = [
    lineChart([{ name: 'delivery', points: distribution }], { title: 'delivery latency by percentile', xLabel: 'percentile', yLabel: 'ms', x: 'hdr', y: 'auto-log' }),
    lineChart([{ name: 'delivered', points: timeline(12, 1, false).map((p) => [p.t, 1]) }], { title: 'throughput', xLabel: 'time (s)', yLabel: '/s', bands: phaseBands(timeline(12, 1, false)) }),
  ];
  for (const chart of charts) {
    const { width, texts } = svgTexts(chart);
    t.ok(texts.length > 10, 'labels found');
    for (const [, , x, anchor, raw] of texts) {
      const label = raw!.replace(/&[a-z#0-9]+;/g, '&');
      const w = textWidth(label);
      const left = anchor === 'middle' ? Number(x) - w / 2 : anchor === 'end' ? Number(x) - w : Number(x);
      t.ok(left >= 0 && left + w <= width, `"${label}" within 0..${width} (${left.toFixed(1)}..${(left + w).toFixed(1)})`);
    }
  }
  t.ok(charts[0]!.includes('>99.99%</text>'), 'the last percentile is labelled');
  // The drain band is the last half second of the plot: its label ends inside the plot.
  const drain = /<text class="band" x="([\d.]+)"[^>]*>drain<\/text>/.exec(charts[1]!);
  t.ok(drain && Number(drain[1]) + textWidth('drain') <= 62 + 560, 'the drain label ends inside the plot');
});

t.test('the memory inbox note states its bounds as the bench runs it', async (t) => {
  const below = memoryInboxNote(20, 150_000);
  for (const part of ['10 000 messages (--inbox-max-messages)', '30 days (--inbox-max-age-s)', '1 day (--dedupe-window-s', '16 384 MiB accounted (--inbox-memory-mb', '256 by default', 'SB_ERR_STORE_FULL', 'each of the 20 recipients holds 10 000', '150 000 stored so far, at most 150 000 of them still held (none pruned yet)']) {
    t.ok(below.includes(part), part);
  }
  t.match(memoryInboxNote(20, 265_536), /265 536 stored so far, at most 200 000 of them still held \(the oldest pruned\)/);
});
