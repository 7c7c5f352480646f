// Lists a V8 heap snapshot by object kind: count and self size per (node type, constructor or
// name), largest first, so per-connection objects stand out as rows counted in multiples of the
// connection count. `--retainers KEY` lists what holds the objects of one row instead (by the
// holder's row and the edge's name).
// Run: node --import tsx bench/src/profile/heap-summary.ts FILE.heapsnapshot [--top 40] [--retainers 'object Object']

import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

const { values, positionals } = parseArgs({ allowPositionals: true, options: { top: { type: 'string', default: '40' }, retainers: { type: 'string' } } });
if (positionals.length !== 1) throw new Error('usage: heap-summary.ts FILE.heapsnapshot [--top N]');

interface Snapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[], ...unknown[]]; edge_fields: string[]; edge_types: [string[], ...unknown[]] } };
  nodes: number[];
  edges: number[];
  strings: string[];
}

const snap = JSON.parse(readFileSync(positionals[0]!, 'utf8')) as Snapshot;
const fields = snap.snapshot.meta.node_fields;
const types = snap.snapshot.meta.node_types[0];
const width = fields.length;
const typeAt = fields.indexOf('type');
const nameAt = fields.indexOf('name');
const sizeAt = fields.indexOf('self_size');

const nodeCount = snap.nodes.length / width;
/** The row a node is counted in: node type and, except for strings (named by their contents), its name. */
function keyOf(node: number): string {
  const i = node * width;
  const type = types[snap.nodes[i + typeAt]!]!;
  const name = type === 'string' || type === 'concatenated string' || type === 'sliced string' ? '' : snap.strings[snap.nodes[i + nameAt]!]!;
  return `${type} ${name}`.trim();
}

function print(rows: Map<string, { count: number; bytes: number }>): void {
  const sorted = [...rows].sort((a, b) => b[1].bytes - a[1].bytes || b[1].count - a[1].count).slice(0, Number(values.top));
  for (const [key, { count, bytes }] of sorted) {
    console.log(`${(bytes / 1024).toFixed(0).padStart(9)} KiB ${String(count).padStart(8)}  ${key.slice(0, 100)}`);
  }
}

function add(rows: Map<string, { count: number; bytes: number }>, key: string, bytes: number): void {
  const row = rows.get(key) ?? { count: 0, bytes: 0 };
  row.count++;
  row.bytes += bytes;
  rows.set(key, row);
}

const rows = new Map<string, { count: number; bytes: number }>();
let total = 0;
for (let n = 0; n < nodeCount; n++) {
  const bytes = snap.nodes[n * width + sizeAt]!;
  total += bytes;
  add(rows, keyOf(n), bytes);
}
console.log(`${(total / 1024 / 1024).toFixed(1)} MiB in ${nodeCount} nodes`);

if (values.retainers === undefined) {
  print(rows);
} else {
  // Edges are stored per node in node order; to_node is an index into `nodes`.
  const edgeFields = snap.snapshot.meta.edge_fields;
  const edgeTypes = snap.snapshot.meta.edge_types[0];
  const edgeWidth = edgeFields.length;
  const edgeTypeAt = edgeFields.indexOf('type');
  const edgeNameAt = edgeFields.indexOf('name_or_index');
  const toAt = edgeFields.indexOf('to_node');
  const edgeCountAt = fields.indexOf('edge_count');
  const holders = new Map<string, { count: number; bytes: number }>();
  let e = 0;
  for (let n = 0; n < nodeCount; n++) {
    const edges = snap.nodes[n * width + edgeCountAt]!;
    for (let k = 0; k < edges; k++, e += edgeWidth) {
      const to = snap.edges[e + toAt]! / width;
      if (keyOf(to) !== values.retainers) continue;
      const edgeType = edgeTypes[snap.edges[e + edgeTypeAt]!]!;
      if (edgeType === 'weak') continue;
      const nameOrIndex = snap.edges[e + edgeNameAt]!;
      const edgeName = edgeType === 'element' || edgeType === 'hidden' ? `[${nameOrIndex}]` : snap.strings[nameOrIndex]!;
      add(holders, `${keyOf(n)} .${edgeName} (${edgeType})`, snap.nodes[to * width + sizeAt]!);
    }
  }
  print(holders);
}
