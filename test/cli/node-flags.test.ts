// The server's node flags (src/cli/node-flags.ts): the installed command runs node with them (its
// #! line), and a server started without them says which are missing. Real processes (the
// compiled dist/: `npm run build` first).

import t, { type Test } from 'tap';
import { SERVER_NODE_FLAGS, missingServerFlags } from '../../src/cli/node-flags.js';
import { SwitchboardProcess, assertBuilt } from '../../testkit/switchboard-process.js';

const HINT = 'node started without the server flags; run the switchboard command, or node with them (OPERATIONS.md, Running a node)';
const START = ['start', '--port', '0', '--gate-port', '0', '--log-level', 'info'];

t.test('missingServerFlags: given on the command line or in NODE_OPTIONS, in either spelling, with any value', async (t) => {
  t.same(missingServerFlags([], ''), [...SERVER_NODE_FLAGS], 'none given: all missing');
  t.same(missingServerFlags(['--max-semi-space-size=64'], ''), []);
  t.same(missingServerFlags(['--inspect', '--max-semi-space-size=32'], ''), [], 'another value is the operator\'s choice');
  t.same(missingServerFlags([], '--max_semi_space_size=128 --enable-source-maps'), [], 'NODE_OPTIONS, V8\'s underscore spelling');
  t.same(missingServerFlags(['--max-old-space-size=4096'], ''), [...SERVER_NODE_FLAGS], 'a similar flag is not it');
});

async function startAndStop(t: Test, name: string, o: { asCommand?: boolean; nodeArgs?: string[] }): Promise<SwitchboardProcess> {
  assertBuilt();
  const node = new SwitchboardProcess(name, START, { ...o, extraEnv: { NODE_OPTIONS: '' } });
  t.teardown(() => node.kill());
  await node.waitForLog({ msg: 'worker listening' });
  await node.stop();
  return node;
}

t.test('the switchboard command runs node with the server flags: no hint', async (t) => {
  const node = await startAndStop(t, 'switchboard start (as a command)', { asCommand: true });
  t.notOk(node.lines.some((l) => l.msg === HINT), node.describe());
});

t.test('node without them: the hint names what is missing', async (t) => {
  const node = await startAndStop(t, 'node bin/switchboard.js start', {});
  t.same(node.lines.find((l) => l.msg === HINT)?.missing, [...SERVER_NODE_FLAGS], node.describe());
});

t.test('node with them: no hint', async (t) => {
  const node = await startAndStop(t, 'node --max-semi-space-size=64 bin/switchboard.js start', { nodeArgs: [...SERVER_NODE_FLAGS] });
  t.notOk(node.lines.some((l) => l.msg === HINT), node.describe());
});
