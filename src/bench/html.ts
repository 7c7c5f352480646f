// Renders a BenchReport as one self-contained HTML page (placeholder: see the bench issue).

import type { BenchReport } from './report.js';

export function renderHtml(report: BenchReport): string {
  return `<!doctype html><meta charset="utf-8"><title>${report.title}</title><pre>${JSON.stringify(report.table)}</pre>`;
}
