// The report files a bench run writes: JSON and HTML, redacted. Apart from report.ts so that the
// report's model does not import its HTML rendering, which imports the model.

import { writeFileSync } from 'node:fs';
import { renderHtml } from './html.js';
import { redactReport, type BenchReport } from './report.js';

/** Writes the JSON and HTML reports asked for, redacted (see redactReport); returns the paths written. */
export function writeReports(unsafe: BenchReport, paths: { json?: string; html?: string }, secrets: readonly string[] = []): string[] {
  const report = redactReport(unsafe, secrets);
  const written: string[] = [];
  if (paths.json) {
    writeFileSync(paths.json, `${JSON.stringify(report, null, 2)}\n`);
    written.push(paths.json);
  }
  if (paths.html) {
    writeFileSync(paths.html, renderHtml(report));
    written.push(paths.html);
  }
  return written;
}
