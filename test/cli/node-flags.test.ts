// The server's node flags (src/cli/node-flags.ts): `npm start` gives them, NODE_OPTIONS is read as
// node reads it, and a server started without them says which are missing. Real processes (the
// compiled dist/: `npm run build` first).

import { readFileSync } from 'node:fs';
import t, { type Test } from 'tap';
import { MISSING_ENV_MESSAGE, MISSING_FLAGS_MESSAGE, SERVER_ENV, SERVER_NODE_FLAGS, missingServerEnv, missingServerFlags, splitNodeOptions } from '../../src/cli/node-flags.js';
import { SwitchboardProcess, assertBuilt } from '../../testkit/switchboard-process.js';

const START = ['start', '--port', '0', '--gate-port', '0', '--log-level', 'info'];

t.test('missingServerFlags: given on the command line or in NODE_OPTIONS, in either spelling, with any value', async (t) => {
  t.same(missingServerFlags([], ''), [...SERVER_NODE_FLAGS], 'none given: all missing');
  t.same(missingServerFlags([...SERVER_NODE_FLAGS], ''), []);
  t.same(missingServerFlags(['--inspect', '--max-semi-space-size=32'], ''), [], "another value is the operator's choice");
  t.same(missingServerFlags([], '--max_semi_space_size=128 --enable-source-maps'), [], "NODE_OPTIONS, V8's underscore spelling");
  t.same(missingServerFlags(['--max-old-space-size=4096'], ''), [...SERVER_NODE_FLAGS], 'a similar flag is not it');
  t.same(missingServerFlags([], '"--max-semi-space-size=64"'), [], 'quoted, as node takes it');
  t.same(missingServerFlags([], '--title "x --max-semi-space-size=9"'), [...SERVER_NODE_FLAGS], "inside another flag's quoted value: not given");
});

t.test('splitNodeOptions splits as node does', async (t) => {
  t.same(splitNodeOptions('  --a  --b=1\t--c '), ['--a', '--b=1', '--c']);
  t.same(splitNodeOptions('--title "two words" --x'), ['--title', 'two words', '--x']);
  t.same(splitNodeOptions('--require "a \\"b\\" c"'), ['--require', 'a "b" c'], 'a backslash in quotes takes the next character');
  t.same(splitNodeOptions('""'), [''], 'an empty quoted argument is one');
  t.same(splitNodeOptions(''), []);
});

t.test('npm start runs node with every server flag', async (t) => {
  const start = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { scripts: Record<string, string> }).scripts.start!;
  t.same(missingServerFlags(start.split(' '), ''), [], start);
  for (const flag of SERVER_NODE_FLAGS) t.ok(start.split(' ').includes(flag), `${flag}, with its value`);
});

async function startAndStop(t: Test, name: string, o: { nodeArgs?: string[]; nodeOptions?: string; tunables?: string }): Promise<SwitchboardProcess> {
  assertBuilt();
  const node = new SwitchboardProcess(name, START, { ...(o.nodeArgs ? { nodeArgs: o.nodeArgs } : {}), extraEnv: { NODE_OPTIONS: o.nodeOptions ?? '', GLIBC_TUNABLES: o.tunables ?? '' } });
  t.teardown(() => node.kill());
  await node.waitForLog({ msg: 'worker listening' });
  await node.stop();
  return node;
}

t.test('node without them: the hint names what is missing', async (t) => {
  const node = await startAndStop(t, 'node bin/switchboard.js start', {});
  t.same(node.lines.find((l) => l.msg === MISSING_FLAGS_MESSAGE)?.missing, [...SERVER_NODE_FLAGS], node.describe());
});

t.test('node with them, or NODE_OPTIONS with them: no hint', async (t) => {
  for (const o of [{ nodeArgs: [...SERVER_NODE_FLAGS] }, { nodeOptions: SERVER_NODE_FLAGS.join(' ') }]) {
    const node = await startAndStop(t, `switchboard start, ${JSON.stringify(o)}`, o);
    t.notOk(node.lines.some((l) => l.msg === MISSING_FLAGS_MESSAGE), node.describe());
  }
});

t.test('missingServerEnv: the malloc tunable, among others or alone, on glibc only', async (t) => {
  const wanted = [`GLIBC_TUNABLES=${SERVER_ENV.GLIBC_TUNABLES}`];
  t.same(missingServerEnv({}, '2.36'), wanted, 'glibc, nothing set');
  t.same(missingServerEnv({ GLIBC_TUNABLES: 'glibc.malloc.hugetlb=1' }, '2.36'), []);
  t.same(missingServerEnv({ GLIBC_TUNABLES: 'glibc.malloc.arena_max=2:glibc.malloc.hugetlb=2' }, '2.36'), [], 'among other tunables, 2 (hugetlbfs) too');
  t.same(missingServerEnv({ GLIBC_TUNABLES: 'glibc.malloc.hugetlb=0' }, '2.36'), wanted, 'turned off');
  t.same(missingServerEnv({ GLIBC_TUNABLES: 'glibc.malloc.arena_max=2' }, '2.36'), wanted, 'other tunables only');
  t.same(missingServerEnv({}, null), [], 'another C library ignores it: nothing to say');
});

t.test('npm start sets the server environment', async (t) => {
  const start = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { scripts: Record<string, string> }).scripts.start!;
  const assignments = Object.fromEntries(start.split(' ').filter((word) => /^[A-Z_]+=/.test(word)).map((word) => word.split(/=(.*)/s).slice(0, 2)));
  t.same(missingServerEnv(assignments, '2.36'), [], start);
});

t.test('a server without the environment says so where glibc would read it; with it, nothing', { skip: missingServerEnv({}).length === 0 ? 'not glibc: the hint is never given' : false }, async (t) => {
  const without = await startAndStop(t, 'switchboard start, GLIBC_TUNABLES empty', { nodeArgs: [...SERVER_NODE_FLAGS] });
  t.same(without.lines.find((l) => l.msg === MISSING_ENV_MESSAGE)?.missing, [`GLIBC_TUNABLES=${SERVER_ENV.GLIBC_TUNABLES}`], without.describe());
  const withIt = await startAndStop(t, 'switchboard start, with GLIBC_TUNABLES', { nodeArgs: [...SERVER_NODE_FLAGS], tunables: SERVER_ENV.GLIBC_TUNABLES });
  t.notOk(withIt.lines.some((l) => l.msg === MISSING_ENV_MESSAGE), withIt.describe());
});
