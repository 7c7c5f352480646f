// No import cycle anywhere: the server (src/), the bench package (bench/src/) and the testkit,
// type-only imports included: layers import downwards, and a file that needs something of a
// file importing it takes it from a third one. Reads the sources as text: every relative
// `from '...js'` (imports and re-exports) is an edge, across the three trees too (the bench
// imports the server; the CLI loads the bench with a dynamic import() of a computed path,
// which is no edge).

import t from 'tap';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url));
const TREES = ['src', 'bench/src', 'testkit'];

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? sources(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : []));
}

/** The src files `file` imports, by path. */
function importsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  return [...text.matchAll(/\bfrom\s+'(\.{1,2}\/[^']+)\.js'/g)].map((m) => resolve(dirname(file), `${m[1]}.ts`));
}

/** One cycle of the graph as a list of files, or undefined. */
function findCycle(graph: Map<string, string[]>): string[] | undefined {
  const state = new Map<string, 'open' | 'done'>();
  const path: string[] = [];
  const visit = (node: string): string[] | undefined => {
    if (state.get(node) === 'done') return undefined;
    if (state.get(node) === 'open') return [...path.slice(path.indexOf(node)), node];
    state.set(node, 'open');
    path.push(node);
    for (const next of graph.get(node) ?? []) {
      const cycle = visit(next);
      if (cycle) return cycle;
    }
    path.pop();
    state.set(node, 'done');
    return undefined;
  };
  for (const node of graph.keys()) {
    const cycle = visit(node);
    if (cycle) return cycle;
  }
  return undefined;
}

t.test('the cycle finder finds a cycle, type-only edges included', async (t) => {
  t.same(findCycle(new Map([['a', ['b']], ['b', ['c']], ['c', ['a']]])), ['a', 'b', 'c', 'a']);
  t.equal(findCycle(new Map([['a', ['b', 'c']], ['b', ['c']], ['c', []]])), undefined);
  t.ok(importsOf(fileURLToPath(new URL('../../bench/src/html.ts', import.meta.url))).some((f) => f.endsWith('report.ts')), 'an `import type` is an edge');
});

t.test('src/, bench/src/ and testkit/ have no import cycle', async (t) => {
  const files = TREES.flatMap((tree) => sources(join(root, tree)));
  for (const tree of TREES) t.ok(files.some((f) => f.startsWith(join(root, tree, '/'))), `${tree} read`);
  t.ok(files.length > 80, `${files.length} source files read`);
  const graph = new Map(files.map((f) => [f, importsOf(f)]));
  const cycle = findCycle(graph);
  t.equal(cycle?.map((f) => relative(root, f)).join(' -> '), undefined, 'no file imports, through others, a file that imports it');
});
