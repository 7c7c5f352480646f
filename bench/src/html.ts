// Renders a BenchReport as one HTML page, its charts drawn here as inline SVG. Nothing is
// loaded from elsewhere (no scripts, stylesheets, fonts or images) so the file can be attached
// to an issue or mailed and opens the same way offline, years later. Hover tooltips are SVG
// <title>s, which browsers show natively without JavaScript.
//
// Every string from the report is escaped: labels, options, notes and ids come from users.

import type { BenchReport, LatencyReport, Machine, RunReport, Table, TimelinePoint } from './report.js';
import type { ProcessSeries } from './processes.js';
import { CPU_UNIT, formatCpu, formatValue, humanize, metricRow, optionRows, seriesLabel } from './labels.js';

export { formatValue };

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Escapes text for HTML element content and quoted attribute values (SVG text included). */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c]!);
}

// ---------------------------------------------------------------------------------------------
// Numbers

/** A tick label: as many decimals as the tick step needs, k/M for large values. */
function formatTick(v: number, step: number): string {
  const fixed = (value: number, unit: number) => {
    const decimals = Math.min(6, Math.max(0, -Math.floor(Math.log10(unit) + 1e-9)));
    const s = value.toFixed(decimals);
    return s.includes('.') ? s.replace(/\.?0+$/, '') : s;
  };
  if (Math.abs(v) >= 1e6 && step >= 1e5) return `${fixed(v / 1e6, step / 1e6)}M`;
  if (Math.abs(v) >= 1e3 && step >= 100) return `${fixed(v / 1e3, step / 1e3)}k`;
  return fixed(v, step);
}

/** Milliseconds, as the terminal table prints them. */
function formatMs(v: number): string {
  return Number.isFinite(v) ? v.toFixed(2) : 'n/a';
}

function formatBytes(bytes: number): string {
  return bytes >= 2 ** 30 ? `${(bytes / 2 ** 30).toFixed(1)} GiB` : `${(bytes / 2 ** 20).toFixed(0)} MiB`;
}

/** Coordinates in the SVG: one decimal is finer than a pixel. */
const c = (v: number) => v.toFixed(1);

/**
 * The width of a label in the 11 px system font, rounded up (digits and lower case are about
 * 6 px, '%' and capitals wider): enough to keep a label inside the chart, not to typeset it.
 */
export function textWidth(text: string): number {
  let w = 0;
  for (const ch of text) w += /[%MWmw@]/.test(ch) ? 10 : /[A-Z]/.test(ch) ? 8 : /[.,:;'|il1 ]/.test(ch) ? 4 : 6.5;
  return w;
}

/** The centre of a label of `text` near `x`, moved just enough for the label to fit within [lo, hi]. */
function fitCentre(x: number, text: string, lo: number, hi: number): number {
  const half = textWidth(text) / 2;
  return Math.min(hi - half, Math.max(lo + half, x));
}

// ---------------------------------------------------------------------------------------------
// Scales: each maps a data value into [0, 1] along its axis and says where its ticks go.

interface Scale {
  pos(v: number): number;
  ticks: { at: number; label: string }[];
}

const clamp01 = (v: number) => Math.min(1, Math.max(0, v));

function extent(values: number[]): [number, number] {
  return values.reduce<[number, number]>(([lo, hi], v) => [Math.min(lo, v), Math.max(hi, v)], [Infinity, -Infinity]);
}

/** 1, 2 or 5 times a power of ten, giving about `count` steps over `span`. */
function niceStep(span: number, count: number): number {
  const raw = span / count;
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  const f = raw / magnitude;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * magnitude;
}

/** A linear scale over the values with round ticks; `zero` keeps 0 in view (rates, counts). */
export function linearScale(values: number[], zero: boolean): Scale {
  let [lo, hi] = extent(values);
  if (zero) [lo, hi] = [Math.min(lo, 0), Math.max(hi, 0)];
  // A single value or all equal: widen so it sits mid-axis (or all-zero: show 0..1).
  if (hi === lo) {
    if (lo > 0) [lo, hi] = [0, hi * 2];
    else if (lo < 0) [lo, hi] = [lo * 2, 0];
    else hi = 1;
  }
  const step = niceStep(hi - lo, 5);
  lo = Math.floor(lo / step) * step;
  hi = Math.ceil(hi / step) * step;
  const ticks = [];
  for (let i = 0; i <= Math.round((hi - lo) / step); i++) {
    const at = Number((lo + i * step).toPrecision(12));
    ticks.push({ at, label: formatTick(at, step) });
  }
  return { pos: (v) => clamp01((v - lo) / (hi - lo)), ticks };
}

function decadeLabel(k: number): string {
  if (k >= 6) return `${10 ** (k - 6)}M`;
  if (k >= 3) return `${10 ** (k - 3)}k`;
  return k >= 0 ? String(10 ** k) : (10 ** k).toFixed(-k);
}

/** A log scale over whole decades; values at or below zero sit on the bottom line. */
export function logScale(values: number[]): Scale {
  const [min, max] = extent(values.filter((v) => v > 0));
  const lo = Math.floor(Math.log10(min));
  const hi = Math.max(lo + 1, Math.ceil(Math.log10(max)));
  const ticks = [];
  for (let k = lo; k <= hi; k++) ticks.push({ at: 10 ** k, label: decadeLabel(k) });
  return { pos: (v) => (v > 0 ? clamp01((Math.log10(v) - lo) / (hi - lo)) : 0), ticks };
}

/** Latency spread over more than two decades reads better on a log axis. */
function spansDecades(values: number[]): boolean {
  const positive = values.filter((v) => v > 0);
  if (positive.length === 0) return false;
  const [min, max] = extent(positive);
  return max / min > 100;
}

const HDR_TICKS = [0, 90, 99, 99.9, 99.99];
const HDR_LAST = HDR_TICKS.length - 1;

/**
 * The classic HDR percentile axis: x = -log10(1 - p/100), so 90%, 99%, 99.9%... are evenly
 * spaced and the tail gets the room. p = 100 (the max) would be infinitely far: it is drawn at
 * the last tick.
 */
export function hdrPosition(percentile: number): number {
  const p = Math.min(100, Math.max(0, percentile));
  return Math.min(HDR_LAST, -Math.log10(1 - p / 100)) / HDR_LAST;
}

const hdrScale: Scale = {
  pos: hdrPosition,
  ticks: HDR_TICKS.map((p) => ({ at: p, label: `${p}%` })),
};

// ---------------------------------------------------------------------------------------------
// Charts

export interface Series {
  name: string;
  /** [x, y] points; points that are not finite numbers are left out. */
  points: [number, number][];
}

/** A shaded span of the x axis, e.g. the warm-up seconds. */
export interface Band {
  from: number;
  to: number;
  label: string;
}

export interface ChartOptions {
  title: string;
  xLabel: string;
  yLabel: string;
  /** 'hdr': x is a percentile on the HDR axis. Default linear. */
  x?: 'linear' | 'hdr';
  /** 'auto-log': log scale when the values span more than two decades. Default linear from 0. */
  y?: 'linear' | 'auto-log';
  bands?: Band[];
  /** The tooltip of a point. */
  tip?: (series: string, x: number, y: number) => string;
}

const PALETTE = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#17becf', '#7f7f7f', '#bcbd22'];
const BAND_FILL: Record<string, string> = { warmup: '#888888', drain: '#4a90d9' };

const WIDTH = 640;
const PLOT = { left: 62, top: 30, width: 560, height: 200 };
const LEGEND_ROW = 18;
/** Points beyond this per series get no hover marker (the line is still complete). */
const MAX_MARKERS = 600;

/** The "no data" note a chart is replaced by when it has nothing to draw. */
export function noData(title: string): string {
  return `<figure class="chart empty"><figcaption>${escapeHtml(title)}</figcaption><p class="no-data">no data</p></figure>`;
}

/** A line chart as a <figure> holding one inline SVG, or the "no data" note. */
export function lineChart(series: Series[], o: ChartOptions): string {
  const drawn = series
    .map((s) => ({ name: s.name, points: s.points.filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y)) }))
    .filter((s) => s.points.length > 0);
  if (drawn.length === 0) return noData(o.title);

  const bands = (o.bands ?? []).filter((b) => Number.isFinite(b.from) && Number.isFinite(b.to));
  const xs = drawn.flatMap((s) => s.points.map((p) => p[0]));
  const ys = drawn.flatMap((s) => s.points.map((p) => p[1]));
  const x = o.x === 'hdr' ? hdrScale : linearScale([...xs, ...bands.flatMap((b) => [b.from, b.to])], false);
  const y = o.y === 'auto-log' && spansDecades(ys) ? logScale(ys) : linearScale(ys, true);
  const px = (v: number) => PLOT.left + x.pos(v) * PLOT.width;
  const py = (v: number) => PLOT.top + (1 - y.pos(v)) * PLOT.height;
  const bottom = PLOT.top + PLOT.height;
  const tip = o.tip ?? ((name, vx, vy) => `${name}: ${formatValue(vx)}, ${formatValue(vy)}`);

  const out: string[] = [];
  out.push(`<text class="title" x="${c(WIDTH / 2)}" y="18" text-anchor="middle">${escapeHtml(o.title)}</text>`);

  for (const b of bands) {
    const x0 = px(Math.min(b.from, b.to));
    const w = Math.max(2, px(Math.max(b.from, b.to)) - x0);
    const fill = BAND_FILL[b.label] ?? '#c9a400';
    out.push(`<rect x="${c(x0)}" y="${c(PLOT.top)}" width="${c(w)}" height="${c(PLOT.height)}" fill="${fill}" fill-opacity="0.18"><title>${escapeHtml(b.label)}</title></rect>`);
    // Inside the plot: a narrow band at the right edge has its label end at the edge.
    const labelX = Math.min(x0 + 3, PLOT.left + PLOT.width - 3 - textWidth(b.label));
    out.push(`<text class="band" x="${c(labelX)}" y="${c(PLOT.top + 12)}">${escapeHtml(b.label)}</text>`);
  }

  for (const t of y.ticks) {
    const ty = py(t.at);
    out.push(`<line class="grid" x1="${c(PLOT.left)}" x2="${c(PLOT.left + PLOT.width)}" y1="${c(ty)}" y2="${c(ty)}"/>`);
    out.push(`<text x="${c(PLOT.left - 6)}" y="${c(ty + 4)}" text-anchor="end">${escapeHtml(t.label)}</text>`);
  }
  for (const t of x.ticks) {
    const tx = px(t.at);
    out.push(`<line class="axis" x1="${c(tx)}" x2="${c(tx)}" y1="${c(bottom)}" y2="${c(bottom + 4)}"/>`);
    // The last tick sits on the plot's right edge: its label is kept inside the chart.
    out.push(`<text x="${c(fitCentre(tx, t.label, 2, WIDTH - 2))}" y="${c(bottom + 16)}" text-anchor="middle">${escapeHtml(t.label)}</text>`);
  }
  out.push(`<line class="axis" x1="${c(PLOT.left)}" x2="${c(PLOT.left + PLOT.width)}" y1="${c(bottom)}" y2="${c(bottom)}"/>`);
  out.push(`<line class="axis" x1="${c(PLOT.left)}" x2="${c(PLOT.left)}" y1="${c(PLOT.top)}" y2="${c(bottom)}"/>`);
  out.push(`<text class="label" x="${c(PLOT.left + PLOT.width / 2)}" y="${c(bottom + 34)}" text-anchor="middle">${escapeHtml(o.xLabel)}</text>`);
  out.push(`<text class="label" transform="translate(14 ${c(PLOT.top + PLOT.height / 2)}) rotate(-90)" text-anchor="middle">${escapeHtml(o.yLabel)}</text>`);

  drawn.forEach((s, i) => {
    const color = PALETTE[i % PALETTE.length]!;
    const points = s.points.map(([vx, vy]) => `${c(px(vx))},${c(py(vy))}`).join(' ');
    out.push(`<polyline fill="none" stroke="${color}" stroke-width="1.6" points="${points}"/>`);
    if (s.points.length > MAX_MARKERS) return;
    const r = s.points.length === 1 ? 3.5 : 2;
    for (const [vx, vy] of s.points) {
      out.push(`<circle cx="${c(px(vx))}" cy="${c(py(vy))}" r="${r}" fill="${color}"><title>${escapeHtml(tip(s.name, vx, vy))}</title></circle>`);
    }
  });

  // The legend, wrapped into rows under the plot.
  const entries = [
    ...drawn.map((s, i) => ({ name: s.name, swatch: (sx: number, sy: number) => `<line x1="${c(sx)}" x2="${c(sx + 16)}" y1="${c(sy)}" y2="${c(sy)}" stroke="${PALETTE[i % PALETTE.length]!}" stroke-width="3"/>` })),
    ...[...new Set(bands.map((b) => b.label))].map((label) => ({
      name: label,
      swatch: (sx: number, sy: number) => `<rect x="${c(sx)}" y="${c(sy - 5)}" width="16" height="10" fill="${BAND_FILL[label] ?? '#c9a400'}" fill-opacity="0.3"/>`,
    })),
  ];
  let lx = PLOT.left;
  let ly = bottom + 54;
  for (const e of entries) {
    const w = 22 + textWidth(e.name) + 14;
    if (lx + w > WIDTH && lx > PLOT.left) [lx, ly] = [PLOT.left, ly + LEGEND_ROW];
    out.push(`<g class="legend">${e.swatch(lx, ly)}<text x="${c(lx + 22)}" y="${c(ly + 4)}">${escapeHtml(e.name)}</text></g>`);
    lx += w;
  }
  const height = ly + 12;

  return `<figure class="chart"><svg viewBox="0 0 ${WIDTH} ${c(height)}" role="img" aria-label="${escapeHtml(o.title)}">${out.join('')}</svg></figure>`;
}

// ---------------------------------------------------------------------------------------------
// A run's charts

/** Splits a counter name into lower-case words: p99Ms → [p99, ms], delivery_ms → [delivery, ms]. */
function words(key: string): string[] {
  return key.split(/[_\-\s]+|(?<=[a-z0-9])(?=[A-Z])/).map((w) => w.toLowerCase());
}

/**
 * Latency-like counters (p99, p999, anything in ms), memory (rss, bytes; charted in MiB) and connections are in other units than
 * the per-second rates: each kind gets its own chart. Matched word by word, so "items" or
 * "msgs" stay rates.
 */
function counterKind(key: string): 'rate' | 'connections' | 'latency' | 'bytes' {
  const w = words(key);
  if (w.includes('rss') || w.includes('bytes')) return 'bytes';
  if (w.some((x) => x === 'ms' || x === 'latency' || /^p\d{2,}$/.test(x))) return 'latency';
  if (w.includes('connections')) return 'connections';
  return 'rate';
}

/** Every numeric counter of the timeline except t, in order of first appearance. */
function numericKeys(timeline: TimelinePoint[]): string[] {
  const keys = new Set<string>();
  for (const point of timeline) {
    for (const [key, value] of Object.entries(point)) if (key !== 't' && typeof value === 'number') keys.add(key);
  }
  return [...keys];
}

/**
 * The spans of the timeline not in the 'measure' phase (warm-up, drain). A band covers exactly
 * the samples of its phase: it reaches halfway to the neighbouring points of another phase, and
 * at either end of the timeline as far out as half the step between the points there, so the
 * first and last samples sit inside their band, not on its edge.
 */
export function phaseBands(timeline: TimelinePoint[]): Band[] {
  const points = timeline.filter((p) => Number.isFinite(p.t)).sort((a, b) => a.t - b.t);
  const halfStep = (a: TimelinePoint | undefined, b: TimelinePoint | undefined) => (a && b ? Math.abs(b.t - a.t) / 2 : 0.5);
  const bands: Band[] = [];
  let start = 0;
  for (let i = 1; i <= points.length; i++) {
    const first = points[start]!;
    const next = points[i];
    if (next && next.phase === first.phase) continue;
    if (first.phase && first.phase !== 'measure') {
      const previous = points[start - 1];
      const last = points[i - 1]!;
      bands.push({
        from: previous ? (previous.t + first.t) / 2 : first.t - halfStep(first, points[start + 1]),
        to: next ? (last.t + next.t) / 2 : last.t + halfStep(points[i - 2], last),
        label: first.phase,
      });
    }
    start = i;
  }
  return bands;
}

function timelineCharts(timeline: TimelinePoint[]): string[] {
  const keys = numericKeys(timeline);
  const bands = phaseBands(timeline);
  const series = (kind: ReturnType<typeof counterKind>): Series[] =>
    keys
      .filter((k) => counterKind(k) === kind)
      .map((k) => ({
        name: seriesLabel(k),
        points: timeline.flatMap((p): [number, number][] => (typeof p[k] === 'number' ? [[p.t, p[k] as number]] : [])),
      }));
  const tip = (unit: string) => (name: string, t: number, v: number) => `${name} at ${formatValue(t)} s: ${formatValue(v)}${unit}`;
  const charts = [lineChart(series('rate'), { title: 'Throughput over time', xLabel: 'time (s)', yLabel: 'per second', bands, tip: tip('/s') })];
  const connections = series('connections');
  if (connections.length) charts.push(lineChart(connections, { title: 'Connections over time', xLabel: 'time (s)', yLabel: 'connections', bands, tip: tip('') }));
  const memory = series('bytes').map((s) => ({ ...s, points: s.points.map(([t, v]): [number, number] => [t, v / 2 ** 20]) }));
  if (memory.length) charts.push(lineChart(memory, { title: 'Memory over time', xLabel: 'time (s)', yLabel: 'MiB', bands, tip: tip(' MiB') }));
  const latency = series('latency');
  if (latency.length) charts.push(lineChart(latency, { title: 'Latency over time', xLabel: 'time (s)', yLabel: 'ms', y: 'auto-log', bands, tip: tip(' ms') }));
  return charts;
}

function latencyCharts(latency: Record<string, LatencyReport>): string[] {
  const entries = Object.entries(latency);
  if (entries.length === 0) return [noData('Latency distribution')];
  return entries.map(([key, l]) => {
    const name = humanize(key);
    return lineChart([{ name, points: l.distribution }], {
      title: `${name} latency by percentile`,
      xLabel: 'percentile',
      yLabel: 'ms',
      x: 'hdr',
      y: 'auto-log',
      tip: (_, p, ms) => `${name} p${p}: ${formatValue(ms)} ms`,
    });
  });
}

function processCharts(processes: ProcessSeries[]): string[] {
  const series = (value: (s: ProcessSeries['samples'][number]) => number): Series[] =>
    processes.map((p) => ({ name: p.name, points: p.samples.map((s): [number, number] => [s.t, value(s)]) }));
  return [
    lineChart(series((s) => s.cpu * 100), {
      title: 'CPU over time',
      xLabel: 'time (s)',
      yLabel: CPU_UNIT,
      tip: (name, t, v) => `${name} at ${formatValue(t)} s: ${formatCpu(v / 100)} of one core`,
    }),
    lineChart(series((s) => s.rss / 2 ** 20), {
      title: 'RSS over time',
      xLabel: 'time (s)',
      yLabel: 'MiB',
      tip: (name, t, v) => `${name} at ${formatValue(t)} s: ${v.toFixed(1)} MiB`,
    }),
  ];
}

// ---------------------------------------------------------------------------------------------
// Tables and sections

function cell(value: string | number): string {
  return escapeHtml(typeof value === 'number' ? formatValue(value) : value);
}

/** A table with a header row; the first column left-aligned, the figures right-aligned. */
function htmlTable(table: Table, className = 'data'): string {
  const head = table.columns.map((col) => `<th>${escapeHtml(col)}</th>`).join('');
  const rows = table.rows.map((row) => `<tr>${row.map((v) => `<td>${cell(v)}</td>`).join('')}</tr>`).join('');
  return `<table class="${className}"><thead><tr>${head}</tr></thead><tbody>${rows}</tbody></table>`;
}

/** Key → value rows (options, machine, metrics). */
function keyValueTable(entries: [string, string][]): string {
  const rows = entries.map(([k, v]) => `<tr><th>${escapeHtml(k)}</th><td>${escapeHtml(v)}</td></tr>`).join('');
  return `<table class="kv">${rows}</table>`;
}

function machineTable(m: Machine): string {
  return keyValueTable([
    ['cpu', `${m.cpuModel} × ${m.cpuCount}`],
    ['memory', formatBytes(m.memoryBytes)],
    ['node', m.node],
    ['platform', m.platform],
  ]);
}

function accountingSection(run: RunReport): string {
  const a = run.accounting;
  if (!a) return '<p class="muted">No loss accounting for this run.</p>';
  const ok = a.lost === 0 && a.dup === 0;
  const status = (n: number) => (n === 0 ? 'pass' : 'fail');
  const verdict = ok ? 'no message lost or duplicated' : `${a.lost} lost, ${a.dup} duplicated`;
  const ids = (label: string, list: string[]) =>
    list.length ? `<p class="ids fail">${label}: ${list.map((id) => `<code>${escapeHtml(id)}</code>`).join(' ')}</p>` : '';
  return (
    `<p class="verdict ${ok ? 'pass' : 'fail'}">${ok ? 'PASS' : 'FAIL'}: ${verdict}</p>` +
    `<table class="data accounting"><thead><tr><th>sent</th><th>acked</th><th>received</th><th>lost</th><th>dup</th></tr></thead>` +
    `<tbody><tr><td>${cell(a.sent)}</td><td>${cell(a.acked)}</td><td>${cell(a.received)}</td>` +
    `<td class="${status(a.lost)}">${cell(a.lost)}</td><td class="${status(a.dup)}">${cell(a.dup)}</td></tr></tbody></table>` +
    ids('lost ids', a.lostIds) +
    ids('dup ids', a.dupIds)
  );
}

function latencyTable(latency: Record<string, LatencyReport>): string {
  const entries = Object.entries(latency);
  if (entries.length === 0) return '';
  return htmlTable({
    columns: ['latency (ms)', 'count', 'p50', 'p90', 'p99', 'p99.9', 'max'],
    rows: entries.map(([name, l]) => [humanize(name), l.count, ...[l.p50, l.p90, l.p99, l.p999, l.max].map(formatMs)]),
  });
}

function runSection(run: RunReport, index: number): string {
  const metrics = Object.entries(run.metrics);
  const errors = Object.entries(run.errors);
  return [
    `<section class="run" id="run-${index + 1}">`,
    `<h2>${escapeHtml(run.label)}</h2>`,
    '<div class="facts">',
    `<div><h3>Metrics</h3>${metrics.length ? keyValueTable(metrics.map(([k, v]) => metricRow(k, v))) : '<p class="muted">none</p>'}</div>`,
    `<div><h3>Errors</h3>${errors.length ? `<div class="fail">${htmlTable({ columns: ['code', 'count'], rows: errors })}</div>` : '<p class="pass">none</p>'}</div>`,
    `<div><h3>Accounting</h3>${accountingSection(run)}</div>`,
    '</div>',
    run.notes.length ? `<h3>Notes</h3><ul class="notes">${run.notes.map((n) => `<li>${escapeHtml(n)}</li>`).join('')}</ul>` : '',
    latencyTable(run.latency),
    '<div class="charts">',
    ...timelineCharts(run.timeline),
    ...latencyCharts(run.latency),
    ...processCharts(run.processes),
    '</div>',
    '</section>',
  ].join('\n');
}

// Only system fonts: a web font would be a download.
const CSS = `
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #222; margin: 0 auto; padding: 1.5em; max-width: 1400px; }
h1 { font-size: 1.5em; margin: 0 0 .3em; } h2 { border-bottom: 1px solid #ccc; padding-bottom: .2em; margin-top: 2em; } h3 { font-size: 1em; margin: 1em 0 .4em; }
pre { background: #f5f5f5; padding: .6em; overflow-x: auto; white-space: pre-wrap; word-break: break-all; }
table { border-collapse: collapse; margin: .3em 0 1em; }
th, td { padding: .2em .7em; border-bottom: 1px solid #e4e4e4; text-align: left; vertical-align: top; }
table.data td:not(:first-child), table.data th:not(:first-child) { text-align: right; font-variant-numeric: tabular-nums; }
table.data thead th { border-bottom: 2px solid #bbb; }
table.kv th { font-weight: 600; color: #555; } table.kv td { font-variant-numeric: tabular-nums; word-break: break-word; }
.meta { color: #555; } .muted { color: #777; }
.warnings { background: #fff4e5; border: 2px solid #e67e22; border-radius: 4px; padding: .6em 1em; margin: 1em 0; }
.warnings h2 { margin: 0; border: 0; font-size: 1.1em; color: #b35900; }
.pass { color: #1e7b34; } .fail { color: #b71c1c; font-weight: 600; }
td.pass { background: #e8f5e9; } td.fail { background: #ffebee; }
.verdict { font-weight: 600; } .ids code { font-weight: normal; }
.top, .facts { display: flex; flex-wrap: wrap; gap: 0 2.5em; }
.charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(480px, 1fr)); gap: 1em; }
figure.chart { margin: 0; border: 1px solid #e4e4e4; border-radius: 4px; padding: .4em; }
figure.empty figcaption { font-weight: 600; } .no-data { color: #777; font-style: italic; }
svg { width: 100%; height: auto; display: block; }
svg text { font-size: 11px; fill: #333; } svg text.title { font-size: 13px; font-weight: 600; } svg text.label { fill: #555; } svg text.band { fill: #666; font-style: italic; }
svg line.grid { stroke: #eee; } svg line.axis { stroke: #888; }
nav ul { margin: .3em 0; }
`;

/** The report as one self-contained HTML document. */
export function renderHtml(report: BenchReport): string {
  const warnings = report.warnings.length
    ? `<div class="warnings"><h2>Warnings</h2><ul>${report.warnings.map((w) => `<li>${escapeHtml(w)}</li>`).join('')}</ul></div>`
    : '';
  const nav = report.runs.length > 1
    ? `<nav><h3>Runs</h3><ul>${report.runs.map((r, i) => `<li><a href="#run-${i + 1}">${escapeHtml(r.label)}</a></li>`).join('')}</ul></nav>`
    : '';
  const options = optionRows(report.options);
  return [
    '<!doctype html>',
    '<html lang="en">',
    '<head>',
    '<meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    `<title>${escapeHtml(report.title)}</title>`,
    `<style>${CSS}</style>`,
    '</head>',
    '<body>',
    `<h1>${escapeHtml(report.title)}</h1>`,
    `<p class="meta">${escapeHtml(report.date)} · scenario <b>${escapeHtml(report.scenario)}</b> · target <b>${escapeHtml(report.target)}</b></p>`,
    warnings,
    `<pre><code>${escapeHtml(report.command)}</code></pre>`,
    '<div class="top">',
    `<div><h3>Machine</h3>${machineTable(report.machine)}</div>`,
    `<div><h3>Options</h3>${options.length ? keyValueTable(options) : '<p class="muted">none</p>'}</div>`,
    '</div>',
    '<h2>Summary</h2>',
    htmlTable(report.table),
    report.table.columns.some((col) => /cpu/i.test(col)) ? `<p class="muted">CPU figures are in ${CPU_UNIT}: 100% is one core busy, 200% two.</p>` : '',
    nav,
    ...report.runs.map(runSection),
    '</body>',
    '</html>',
    '',
  ].join('\n');
}
