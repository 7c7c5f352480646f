// The server's node flags (src/cli/node-flags.ts): `npm start` gives them, NODE_OPTIONS is read as
// node reads it, and a server started without them says which are missing. Real processes (the
// compiled dist/: `npm run build` first).

import { readFileSync } from 'node:fs';
import t, { type Test } from 'tap';
import { MISSING_FLAGS_MESSAGE, SERVER_NODE_FLAGS, missingServerFlags, splitNodeOptions } from '../../src/cli/node-flags.js';
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

async function startAndStop(t: Test, name: string, o: { nodeArgs?: string[]; nodeOptions?: string }): Promise<SwitchboardProcess> {
  assertBuilt();
  const node = new SwitchboardProcess(name, START, { ...(o.nodeArgs ? { nodeArgs: o.nodeArgs } : {}), extraEnv: { NODE_OPTIONS: o.nodeOptions ?? '' } });
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
