// The server's node flags (src/cli/node-flags.ts): `npm start` gives them, NODE_OPTIONS is read as
// node reads it, and a server started without them says which are missing. Real processes (the
// compiled dist/: `npm run build` first).

import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import t, { type Test } from 'tap';
import { MISSING_ENV_MESSAGE, MISSING_FLAGS_MESSAGE, SERVER_ENV, SERVER_NODE_FLAGS, missingServerEnv, missingServerFlags, splitNodeOptions } from '../../src/cli/node-flags.js';
import { SwitchboardProcess, assertBuilt } from '../../testkit/switchboard-process.js';

const START = ['start', '--port', '0', '--gate-port', '0', '--log-level', 'info'];

t.test('missingServerFlags: given on the command line or in NODE_OPTIONS, in either spelling, with any value', async (t) => {
  t.same(missingServerFlags([], ''), [...SERVER_NODE_FLAGS], 'none given: all missing');
  t.same(missingServerFlags([...SERVER_NODE_FLAGS], ''), []);
  t.same(missingServerFlags(['--inspect', '--max-semi-space-size=32', '--initial-old-space-size=1024'], ''), [], "another value is the operator's choice");
  t.same(missingServerFlags(['--initial_old_space_size=512'], '--max_semi_space_size=128 --enable-source-maps'), [], "NODE_OPTIONS, V8's underscore spelling");
  t.same(missingServerFlags(['--max-old-space-size=4096'], ''), [...SERVER_NODE_FLAGS], 'a similar flag is not it');
  t.same(missingServerFlags(['--max-semi-space-size=64'], ''), ['--initial-old-space-size=256'], 'one given, the other missing');
  t.same(missingServerFlags([], '"--max-semi-space-size=64" "--initial-old-space-size=256"'), [], 'quoted, as node takes it');
  t.same(missingServerFlags([], '--title "x --max-semi-space-size=9 --initial-old-space-size=9"'), [...SERVER_NODE_FLAGS], "inside another flag's quoted value: not given");
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

t.test('node with them, or NODE_OPTIONS with what node takes there: no hint', async (t) => {
  // Node refuses --initial-old-space-size in NODE_OPTIONS: it goes on the command line.
  for (const o of [{ nodeArgs: [...SERVER_NODE_FLAGS] }, { nodeOptions: '--max-semi-space-size=64', nodeArgs: ['--initial-old-space-size=256'] }]) {
    const node = await startAndStop(t, `switchboard start, ${JSON.stringify(o)}`, o);
    t.notOk(node.lines.some((l) => l.msg === MISSING_FLAGS_MESSAGE), node.describe());
  }
});

t.test('missingServerEnv: the malloc tunable at 1, where glibc and the kernel would use it', async (t) => {
  const wanted = [`GLIBC_TUNABLES=${SERVER_ENV.GLIBC_TUNABLES}`];
  const host = (glibc: string | null, thpMode: string | null) => () => ({ glibc, thpMode });
  const debian = host('2.36', 'madvise');
  t.same(missingServerEnv({}, debian), wanted, 'glibc 2.36, THP madvise, nothing set');
  t.same(missingServerEnv({ GLIBC_TUNABLES: 'glibc.malloc.hugetlb=1' }, () => t.fail('not asked') as never), [], 'set: the host is not even asked');
  t.same(missingServerEnv({ GLIBC_TUNABLES: 'glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1' }, debian), [], 'among other tunables');
  for (const value of ['0', '2', 'yes', '00', '']) t.same(missingServerEnv({ GLIBC_TUNABLES: `glibc.malloc.hugetlb=${value}` }, debian), wanted, `hugetlb=${value} is not 1`);
  t.same(missingServerEnv({ GLIBC_TUNABLES: 'glibc.malloc.hugetlb=1:glibc.malloc.hugetlb=0' }, debian), wanted, 'the last occurrence counts, as in glibc');
  t.same(missingServerEnv({ GLIBC_TUNABLES: 'glibc.malloc.arena_max=2' }, debian), wanted, 'other tunables only');
  t.same(missingServerEnv({}, host('2.31', 'madvise')), [], 'glibc before 2.35 has no such tunable');
  t.same(missingServerEnv({}, host('2.36', 'always')), [], 'THP always: huge pages anyway');
  t.same(missingServerEnv({}, host('2.36', 'never')), [], 'THP never: nothing to gain');
  t.same(missingServerEnv({}, host(null, null)), [], 'another C library ignores it');
});

t.test('npm start puts the tunable before node, ahead of the ones already in the environment', async (t) => {
  const start = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { scripts: Record<string, string> }).scripts.start!;
  const prefix = /^(GLIBC_TUNABLES=\S+) node /.exec(start)?.[1];
  t.ok(prefix, `${start}: the assignment right before node`);
  const value = (env: Record<string, string>) => execFileSync('sh', ['-c', `${prefix} node -e "process.stdout.write(process.env.GLIBC_TUNABLES)"`], { env: { PATH: process.env.PATH!, ...env }, encoding: 'utf8' });
  t.equal(value({}), SERVER_ENV.GLIBC_TUNABLES);
  t.equal(value({ GLIBC_TUNABLES: 'glibc.malloc.arena_max=2' }), `${SERVER_ENV.GLIBC_TUNABLES}:glibc.malloc.arena_max=2`, 'the user\'s own kept, after ours (the last wins)');
});

t.test('a server without the environment says so where glibc would read it; with it, nothing', { skip: missingServerEnv({}).length === 0 ? 'not glibc: the hint is never given' : false }, async (t) => {
  const without = await startAndStop(t, 'switchboard start, GLIBC_TUNABLES empty', { nodeArgs: [...SERVER_NODE_FLAGS] });
  t.same(without.lines.find((l) => l.msg === MISSING_ENV_MESSAGE)?.missing, [`GLIBC_TUNABLES=${SERVER_ENV.GLIBC_TUNABLES}`], without.describe());
  const withIt = await startAndStop(t, 'switchboard start, with GLIBC_TUNABLES', { nodeArgs: [...SERVER_NODE_FLAGS], tunables: SERVER_ENV.GLIBC_TUNABLES });
  t.notOk(withIt.lines.some((l) => l.msg === MISSING_ENV_MESSAGE), withIt.describe());
});
