// Summarises a .cpuprofile (node --cpu-prof): self time per function, top N.
// Run: node --import tsx bench/src/profile/profile-summary.ts file.cpuprofile [N]

import { readFileSync } from 'node:fs';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
}
const profile = JSON.parse(readFileSync(process.argv[2]!, 'utf8')) as { nodes: Node[]; samples: number[] };
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const self = new Map<string, number>();
for (const id of profile.samples) {
  const n = byId.get(id)!;
  const key = `${n.callFrame.functionName || '(anonymous)'} ${n.callFrame.url.replace(/^.*\/(node_modules|src|dist)\//, '$1/')}:${n.callFrame.lineNumber + 1}`;
  self.set(key, (self.get(key) ?? 0) + 1);
}
const total = profile.samples.length;
for (const [key, count] of [...self].sort((a, b) => b[1] - a[1]).slice(0, Number(process.argv[3] ?? 30))) {
  process.stdout.write(`${((count / total) * 100).toFixed(1).padStart(5)}%  ${key}\n`);
}
