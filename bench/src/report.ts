// The report every scenario produces: one model, printed as a table at the end, written as
// JSON (--json) for machines and as a self-contained HTML page (--html) with charts.

import { cpus, totalmem } from 'node:os';
import type { LatencyReport } from './latency.js';
import type { ProcessSeries } from './processes.js';
import { redactDeep } from '../../src/redact.js';

export interface Accounting {
  sent: number;
  /** Sends answered with result=true. */
  acked: number;
  /** Distinct messages received (after dedupe by inbox seq). */
  received: number;
  /** Acknowledged, never received. */
  lost: number;
  /** The same msg_id received under two inbox sequences. */
  dup: number;
  /** The first few lost and duplicated messages, as "sender:msg_id". */
  lostIds: string[];
  dupIds: string[];
  /**
   * Chat with receipts: the receivers' MESSAGE_ACKs and the RECEIPTs their senders got. Each ack
   * makes one DELIVERED receipt (PROTOCOL.md §14): after the drain the two are equal.
   */
  receiverAcks?: number;
  receipts?: number;
}

export interface Machine {
  cpuModel: string;
  cpuCount: number;
  memoryBytes: number;
  node: string;
  platform: string;
}

/** One second of a run: seconds since the run started and the scenario's counters for it. */
export interface TimelinePoint {
  t: number;
  phase?: string;
  [counter: string]: number | string | undefined;
}

export type { LatencyReport } from './latency.js';

/** One measured configuration (a target, a rate step, a phase). */
export interface RunReport {
  label: string;
  /** Headline figures by name, e.g. deliveredPerSec, ratioToRelay, rssPerConnection. */
  metrics: Record<string, number>;
  /** Latency distributions by name, e.g. delivery, ack, login. */
  latency: Record<string, LatencyReport>;
  /** Per-second counters over the run (rates per second). */
  timeline: TimelinePoint[];
  /** CPU (fraction of a core) and RSS of every process over the run. */
  processes: ProcessSeries[];
  /** Refused operations and failures by code. */
  errors: Record<string, number>;
  accounting?: Accounting;
  notes: string[];
}

export interface Table {
  columns: string[];
  rows: (string | number)[][];
}

export interface BenchReport {
  scenario: string;
  /** One line saying what was measured. */
  title: string;
  date: string;
  command: string;
  machine: Machine;
  options: Record<string, unknown>;
  target: string;
  runs: RunReport[];
  /** The human summary printed at the end. */
  table: Table;
  warnings: string[];
}

export function machineInfo(): Machine {
  const list = cpus();
  return {
    cpuModel: list[0]?.model.trim() ?? 'unknown',
    cpuCount: list.length,
    memoryBytes: totalmem(),
    node: process.version,
    platform: `${process.platform} ${process.arch}`,
  };
}

/** A driver using most of a core cannot offer more load: what it measured is its own limit. */
const SATURATED = 0.9;

/** Warnings about drivers that were saturated during the measured seconds [from, to]. */
export function driverWarnings(processes: ProcessSeries[], from: number, to: number): string[] {
  const warnings: string[] = [];
  for (const p of processes) {
    if (p.role !== 'driver') continue;
    const samples = p.samples.filter((s) => s.t > from && s.t <= to + 0.5);
    if (samples.length === 0) continue;
    const mean = samples.reduce((sum, s) => sum + s.cpu, 0) / samples.length;
    if (mean >= SATURATED) {
      warnings.push(`${p.name} used ${(mean * 100).toFixed(0)}% of one core while measuring: the driver may be the bottleneck (add --drivers, or measure from another machine)`);
    }
  }
  return warnings;
}

/**
 * Mean CPU (fraction of a core) of each process over [from, to], by pid (names repeat: every
 * run has its own driver-0). Processes without samples in the interval are left out.
 */
export function meanCpu(processes: ProcessSeries[], from: number, to: number): Record<number, number> {
  const out: Record<number, number> = {};
  for (const p of processes) {
    const samples = p.samples.filter((s) => s.t > from && s.t <= to + 0.5);
    if (samples.length) out[p.pid] = samples.reduce((sum, s) => sum + s.cpu, 0) / samples.length;
  }
  return out;
}

/** The processes' samples within [from, to], re-based so that `from` is t=0. */
export function sliceProcesses(processes: ProcessSeries[], from: number, to: number): ProcessSeries[] {
  return processes.map((p) => ({
    ...p,
    samples: p.samples.filter((s) => s.t >= from && s.t <= to + 0.5).map((s) => ({ ...s, t: Math.round((s.t - from) * 10) / 10 })),
  }));
}

export function formatTable(table: Table): string {
  const cells = [table.columns, ...table.rows.map((row) => row.map(String))];
  const widths = table.columns.map((_, i) => Math.max(...cells.map((row) => String(row[i] ?? '').length)));
  return cells
    .map((row) => row.map((cell, i) => (i === 0 ? String(cell).padEnd(widths[i]!) : String(cell).padStart(widths[i]!))).join('  '))
    .join('\n');
}

/**
 * The report as it may be shown or written: every field named like a secret redacted, URL
 * passwords redacted, and every occurrence of `secrets` (the ones the run used) redacted.
 */
export function redactReport(report: BenchReport, secrets: readonly string[] = []): BenchReport {
  return redactDeep(report, secrets);
}

/** The summary for a terminal: title, table, accounting and warnings (redacted, see redactReport). */
export function formatReport(unsafe: BenchReport, secrets: readonly string[] = []): string {
  const report = redactReport(unsafe, secrets);
  const lines = [`\n${report.title}`, `target: ${report.target}`, formatTable(report.table)];
  for (const run of report.runs) {
    const a = run.accounting;
    const errors = Object.entries(run.errors).map(([code, n]) => `${code}=${n}`).join(' ');
    if (a) {
      lines.push(
        `${run.label}: sent=${a.sent} acked=${a.acked} received=${a.received} lost=${a.lost} dup=${a.dup}` +
          (a.receipts === undefined ? '' : ` receipts=${a.receipts} receiverAcks=${a.receiverAcks}`) +
          (a.lostIds.length ? ` lost ids: ${a.lostIds.join(' ')}` : '') +
          (a.dupIds.length ? ` dup ids: ${a.dupIds.join(' ')}` : ''),
      );
    }
    if (errors) lines.push(`${run.label}: errors ${errors}`);
    for (const note of run.notes) lines.push(`${run.label}: ${note}`);
  }
  for (const warning of report.warnings) lines.push(`warning: ${warning}`);
  return `${lines.join('\n')}\n`;
}

/** Counts by code summed over several parts (drivers, or kinds of failure). */
export function sumCounts(parts: Record<string, number>[]): Record<string, number> {
  const total: Record<string, number> = {};
  for (const part of parts) for (const [code, n] of Object.entries(part)) total[code] = (total[code] ?? 0) + n;
  return total;
}

/** Numbers for tables: fixed decimals for ms, thousands separated for rates. */
export const fmt = {
  ms: (v: number) => v.toFixed(2),
  rate: (v: number) => Math.round(v).toLocaleString('en-US'),
  pct: (v: number) => `${(v * 100).toFixed(0)}%`,
  ratio: (v: number) => v.toFixed(2),
  bytes: (v: number) => (v >= 1 << 20 ? `${(v / (1 << 20)).toFixed(1)} MiB` : v >= 1024 ? `${(v / 1024).toFixed(1)} KiB` : `${Math.round(v)} B`),
};
