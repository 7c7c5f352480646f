// What each command's --help lists (its own flags only, grouped, with defaults and variables),
// `switchboard --version` and `switchboard help CMD`, and the variables whose names are the
// gate's own. Real processes (bin/switchboard.js runs the compiled dist/: `npm run build` first).

import t, { type Test } from 'tap';
import { readFileSync } from 'node:fs';
import { parseOptions, type OptionSpecs } from '../../src/cli/options.js';
import { CLUSTER_OPTIONS, GATE_OPTIONS, LIMIT_OPTIONS, PROBE_OPTIONS } from '../../src/cli/common.js';
import { SERVE_COMMAND_OPTIONS } from '../../src/cli/commands/serve.js';
import { GATE_COMMAND_OPTIONS } from '../../src/cli/commands/gate.js';
import { CliProcess } from '../helpers/cli-process.js';
import { GateProcess } from '../helpers/gate-process.js';
import { CLUSTER_TOKEN_SECRET } from '../helpers/cluster.js';
import { freePort } from '../../testkit/services.js';
import { startRedis } from '../helpers/redis.js';
import { startZooKeeper } from '../helpers/zookeeper.js';

t.setTimeout(180_000);

async function run(t: Test, args: string[], env: Record<string, string> = {}) {
  const p = new CliProcess(t, args.join(' '), args, env);
  p.child.stdin.end();
  const exit = await p.exit(60_000);
  return { ...exit, stdout: p.stdout, stderr: p.stderr };
}

/** The flags a help text lists. */
const flagsOf = (help: string) => new Set([...help.matchAll(/^ {2}--([a-z0-9-]+)/gm)].map((m) => m[1]!));
/** The group headings a help text has. */
const groupsOf = (help: string) => [...help.matchAll(/^([a-z]+):$/gm)].map((m) => m[1]!);

const gateOnly = [...Object.keys(GATE_OPTIONS), ...Object.keys(PROBE_OPTIONS), 'gate-port', 'no-gate'];
const clusterOnly = Object.keys(CLUSTER_OPTIONS);

t.test('worker --help lists no gate flag; start --help no cluster flag; gate --help no worker limit', async (t) => {
  const worker = flagsOf((await run(t, ['worker', '--help'])).stdout);
  for (const flag of gateOnly) t.notOk(worker.has(flag), `worker: no --${flag}`);
  for (const flag of clusterOnly) t.ok(worker.has(flag), `worker: --${flag}`);

  const start = await run(t, ['start', '--help']);
  const startFlags = flagsOf(start.stdout);
  for (const flag of clusterOnly) t.notOk(startFlags.has(flag), `start: no --${flag}`);
  for (const flag of Object.keys(GATE_OPTIONS)) t.ok(startFlags.has(flag), `start: --${flag}`);
  t.match(start.stdout, /--redis/, 'start says stores can be in Redis');

  const gate = flagsOf((await run(t, ['gate', '--help'])).stdout);
  for (const flag of [...Object.keys(LIMIT_OPTIONS), 'announce-host', 'cluster-secret', 'zk-readers', 'peer-port', 'gate-port']) t.notOk(gate.has(flag), `gate: no --${flag}`);
  // The gate reads inboxes (the chat list over HTTP), and a read prunes by the retention limits: the workers' own.
  for (const flag of ['inbox-max-messages', 'inbox-max-age-s', 'dedupe-window-s']) t.ok(gate.has(flag), `gate: --${flag}, as the workers'`);

  for (const [command, specs] of Object.entries({ ...SERVE_COMMAND_OPTIONS, gate: GATE_COMMAND_OPTIONS })) {
    const help = (await run(t, [command, '--help'])).stdout;
    t.same(flagsOf(help), new Set([...Object.keys(specs), 'help']), `${command}: exactly its own flags`);
  }
});

t.test('--help groups the flags and shows defaults and variables', async (t) => {
  const worker = (await run(t, ['worker', '--help'])).stdout;
  t.same(groupsOf(worker), ['network', 'tls', 'secrets', 'stores', 'cluster', 'limits', 'logging']);
  t.match(worker, /^ {2}--port <int> .*\n {33}a whole number from 0 to 65535; default 9001; env SWITCHBOARD_PORT$/m, 'the port: range, default, variable');
  t.match(worker, /^ {2}--log-level <choice> .*\n {33}one of fatal, error, warn, info, debug, trace, silent; default info; env SWITCHBOARD_LOG_LEVEL$/m);
  const start = (await run(t, ['start', '--help'])).stdout;
  t.same(groupsOf(start), ['network', 'tls', 'secrets', 'stores', 'gate', 'limits', 'logging']);
  t.match(start, /default 9000; env SWITCHBOARD_PORT$/m, 'start: client port 9000');
  const gate = (await run(t, ['gate', '--help'])).stdout;
  t.same(groupsOf(gate), ['network', 'tls', 'secrets', 'stores', 'cluster', 'gate', 'logging']);
  t.match(gate, /^ {2}--port <int> .*\n {33}a whole number from 0 to 65535; default 8080; env SWITCHBOARD_GATE_PORT$/m, 'the gate port has the gate\'s variable');
  t.match(gate, /env SWITCHBOARD_GATE_HOST$/m);
  t.match(gate, /env SWITCHBOARD_GATE_ZK_AUTH$/m);
});

t.test('switchboard --version and switchboard help CMD', async (t) => {
  const { version } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
  const v = await run(t, ['--version']);
  t.same([v.code, v.stdout], [0, `switchboard ${version}\n`]);
  for (const command of ['start', 'worker', 'gate', 'chat', 'token']) {
    const help = await run(t, ['help', command]);
    t.equal(help.code, 0, `help ${command}: exit 0`);
    t.equal(help.stdout, (await run(t, [command, '--help'])).stdout, `help ${command} is ${command} --help`);
  }
  const unknown = await run(t, ['help', 'frobnicate']);
  t.equal(unknown.code, 2);
  t.match(unknown.stderr, 'unknown command "frobnicate"');
  t.match((await run(t, ['--help'])).stdout, 'switchboard --version');
});

t.test('start is a single node: a cluster flag is refused, a cluster variable not read', async (t) => {
  const r = await run(t, ['start', '--zk', '127.0.0.1:2181']);
  t.equal(r.code, 1);
  t.match(r.stderr, /^switchboard start: SB_ERR_CONFIG unknown option --zk /m);
});

t.test("every number of every server command has a range, and every default is within it", async (t) => {
  for (const [command, specs] of Object.entries({ ...SERVE_COMMAND_OPTIONS, gate: GATE_COMMAND_OPTIONS })) {
    for (const [name, spec] of Object.entries(specs as OptionSpecs)) {
      if (spec.type !== 'number') continue;
      t.ok(spec.min !== undefined || spec.above !== undefined, `${command} --${name} has a lower bound`);
    }
    t.doesNotThrow(() => parseOptions(specs as OptionSpecs, [], {}), `${command}: the defaults pass`);
  }
});

t.test('the gate has variables of its own; the worker\'s still work for it, with a warning', async (t) => {
  const zk = await startZooKeeper(t);
  const redis = await startRedis(t);
  const base = ['gate', '--dev', '--zk', zk.connect, '--zk-root', `/sb-help-${process.pid}`, '--redis', redis.url, '--secret', CLUSTER_TOKEN_SECRET, '--log-level', 'info'];
  const [gatePort, workerPort] = [await freePort(), await freePort()];

  // One environment for a worker and a gate (a shared file, a terminal).
  const shared = await new GateProcess(t, 'gate, shared environment', base, { SWITCHBOARD_PORT: String(workerPort), SWITCHBOARD_GATE_PORT: String(gatePort), SWITCHBOARD_HOST: '0.0.0.0', SWITCHBOARD_GATE_HOST: '127.0.0.1' }).started();
  t.match(shared.lines.find((l) => l.msg === 'gate listening'), { host: '127.0.0.1', port: gatePort }, 'SWITCHBOARD_GATE_PORT and SWITCHBOARD_GATE_HOST, not the worker\'s');
  t.notOk(shared.lines.some((l) => /SWITCHBOARD_PORT/.test(String(l.msg))), 'no warning');
  t.same(await shared.stop(), { code: 0, signal: null });

  const legacy = await new GateProcess(t, 'gate, SWITCHBOARD_PORT only', base, { SWITCHBOARD_PORT: String(gatePort) }).started();
  t.match(legacy.lines.find((l) => l.msg === 'gate listening'), { port: gatePort }, 'SWITCHBOARD_PORT alone still moves the gate');
  t.ok(legacy.lines.some((l) => l.level === 40 && /^SWITCHBOARD_PORT is read as --port for now.*set SWITCHBOARD_GATE_PORT instead$/.test(String(l.msg))), 'with a warning naming the new variable');
  t.same(await legacy.stop(), { code: 0, signal: null });
});
