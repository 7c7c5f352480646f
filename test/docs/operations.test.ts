// README.md and OPERATIONS.md as a new operator follows them: flags through npm, busy ports,
// every command's flags under the variable that command reads, a Redis config that keeps its
// data out of the checkout, and "Running a cluster" done for real: scripts/dev-services.sh
// runs, and every command it prints (the ones OPERATIONS.md shows) starts with the environment
// file it wrote, up to alice's message reaching bob across the cluster.

import t from 'tap';
import { readFileSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { envOf, type OptionSpecs } from '../../src/cli/options.js';
import { SERVE_COMMAND_OPTIONS } from '../../src/cli/commands/serve.js';
import { GATE_COMMAND_OPTIONS } from '../../src/cli/commands/gate.js';
import { ROOT } from '../../testkit/switchboard-process.js';
import { CliProcess } from '../helpers/cli-process.js';
import { GateProcess } from '../helpers/gate-process.js';
import { until } from '../../testkit/wait.js';
import { freePort } from '../../testkit/services.js';

t.setTimeout(180_000);

const read = (file: string) => readFileSync(new URL(`../../${file}`, import.meta.url), 'utf8');
const readme = read('README.md');
const operations = read('OPERATIONS.md');

t.test('README: flags through npm go after --, and a busy port names the flag that moves it', async (t) => {
  t.match(readme, 'npm start -- --port');
  t.match(readme, 'npx switchboard start --port');
  t.match(readme, /EADDRINUSE .*--port/s);
  t.match(readme, 'switchboard --version');
  t.match(readme, 'switchboard help <command>');
});

t.test("OPERATIONS: every flag of every server command with the variable that command reads", async (t) => {
  for (const [command, specs] of Object.entries({ ...SERVE_COMMAND_OPTIONS, gate: GATE_COMMAND_OPTIONS })) {
    for (const [flag, spec] of Object.entries(specs as OptionSpecs)) {
      const documented = new RegExp(`^\\| \`--${flag}\` \\| \`${envOf(flag, spec)}\``, 'm');
      t.match(operations, documented, `${command} --${flag} is documented as ${envOf(flag, spec)}`);
    }
  }
  t.notMatch(operations, /arrive with cluster mode/, 'no stale promise of cluster flags');
});

t.test('config/redis.conf keeps its data in a directory of its own; the docs start a development Redis elsewhere', async (t) => {
  const conf = read('config/redis.conf');
  t.match(conf, /^dir \/\S+$/m, 'an absolute dir: nothing is written where redis-server was started');
  // Redis changes into the file's dir while reading it: a --dir after the file cannot rescue a missing one.
  for (const [file, text] of [['README.md', readme], ['OPERATIONS.md', operations]] as const) {
    t.notMatch(text, /redis-server config\/redis\.conf --dir/, `${file}: no --dir after the file`);
  }
  t.match(operations, /^mkdir -p (\S+) && redis-server --bind 127\.0\.0\.1 --port 6379 --dir \1 /m, 'the development Redis has a directory of its own');
  t.match(operations, /install -d -o redis -g redis -m\s+0750\s+\/var\/lib\/redis\/switchboard/, 'and the deployment one says how to make its directory');
});

/** The commands in OPERATIONS.md's "Running a cluster" block, after the environment file. */
function documentedClusterSteps(): string[] {
  const section = operations.slice(operations.indexOf('## Running a cluster'));
  const block = /```sh\n([\s\S]*?)```/.exec(section)![1]!;
  return block
    .split('\n')
    .map((l) => l.replace(/\s+#.*$/, '').trim())
    .filter((l) => l.startsWith('npx switchboard '));
}

t.test('OPERATIONS "Running a cluster" followed as written: every printed command starts', async (t) => {
  const services = spawn('bash', ['scripts/dev-services.sh'], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  services.stdout.setEncoding('utf8').on('data', (s: string) => (out += s));
  services.stderr.setEncoding('utf8').on('data', (s: string) => (err += s));
  const exited = new Promise<number | null>((resolve) => services.once('exit', (code) => resolve(code)));
  t.teardown(async () => {
    services.kill('SIGTERM');
    await exited;
  });
  await until(() => `dev-services.sh printed its commands\n${out}\n${err}`, () => /per terminal/.test(out) || services.exitCode !== null, 60_000);
  t.match(out, 'This script stays in the foreground', 'it says it stays in the foreground');
  const envFile = /^ {2}\. (\S+\/env)$/m.exec(out)?.[1];
  t.ok(envFile, 'it prints the environment file to load');
  const printed = out
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l.startsWith('npx switchboard '));
  t.same(printed, documentedClusterSteps(), 'OPERATIONS.md shows exactly the commands it prints');

  const env = Object.fromEntries(
    [...readFileSync(envFile!, 'utf8').matchAll(/^export ([A-Z_]+)=(?:'([^']*)'|(\S*))$/gm)].map((m) => [m[1]!, m[2] ?? m[3] ?? '']),
  );
  for (const name of ['SWITCHBOARD_SECRET', 'SWITCHBOARD_CLUSTER_SECRET', 'SWITCHBOARD_ZK', 'SWITCHBOARD_REDIS', 'SWITCHBOARD_ZK_AUTH', 'SWITCHBOARD_ZK_READERS', 'SWITCHBOARD_GATE_ZK_AUTH']) {
    t.ok(env[name], `the file sets ${name}`);
  }

  // As printed, on ports free on this machine (9001, 9002 and 8080 may be taken here).
  const args = (line: string) => line.replace(/^npx switchboard /, '').split(' ');
  const [worker1, worker2, gateLine, alice, bob] = printed;
  const portless = async (line: string) => {
    const a = args(line);
    const i = a.indexOf('--port');
    if (i >= 0) a[i + 1] = String(await freePort());
    return a;
  };
  const workers = [new CliProcess(t, 'worker 1', await portless(worker1!), env), new CliProcess(t, 'worker 2', await portless(worker2!), env)];
  for (const w of workers) await w.waitForLog({ msg: 'worker listening' }, { timeoutMs: 30_000 });
  t.pass('both workers start in cluster mode with the file alone');
  t.notOk(workers.some((w) => w.lines.some((l) => l.level >= 40 && /SWITCHBOARD_|development|--/.test(String(l.msg)))), 'without a warning about their configuration');

  const gate = await new GateProcess(t, 'gate', await portless(gateLine!), env).started();
  await until('the gate lists both workers', async () => (await gate.workers()).length === 2, 30_000);
  t.notOk(gate.lines.some((l) => l.level === 40 && /SWITCHBOARD_/.test(String(l.msg))), 'the gate reads its own variables');

  const chat = (line: string, name: string) => new CliProcess(t, name, args(line).map((a) => a.replace('http://127.0.0.1:8080', gate.url)), env);
  const a = chat(alice!, 'alice');
  const b = chat(bob!, 'bob');
  for (const p of [a, b]) {
    // Off a terminal the password is the first line of input.
    p.write(`${p.name} has a long enough password\n`);
    await p.waitFor(`${p.name} logged in`, () => p.stdout.includes(`logged in as ${p.name}`), 30_000);
  }
  b.write('@alice hi\n');
  await a.waitFor('alice is shown bob\'s message', () => /bob: hi$/m.test(a.stdout), 30_000);
  t.pass('bob\'s "@alice hi" reached alice');
  for (const p of [a, b]) {
    p.write('/quit\n');
    t.same(await p.exit(), { code: 0, signal: null }, `${p.name}: /quit exits 0`);
  }
  for (const p of [gate, ...workers]) t.same(await p.stop(), { code: 0, signal: null }, `${p.name} stops on SIGTERM`);
});
