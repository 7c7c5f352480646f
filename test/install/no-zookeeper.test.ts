// The native ZooKeeper client is an optional dependency: an install without a C/C++ toolchain
// leaves it out. Here the built switchboard runs from a copy whose node_modules holds every
// installed package but `zookeeper` (links to the real ones), so `require('zookeeper')` really
// fails: the embedded node starts and delivers a message, cluster mode refuses at once with
// SB_ERR_ZOOKEEPER_CLIENT_MISSING naming what to install. (.ci/run also installs with the
// toolchain hidden from the PATH: scripts/check-no-toolchain.sh.)

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { ImClient } from '../../src/client/im-client.js';
import { loginThroughGate, registerThroughGate } from '../../src/client/gate-login.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const SECRET = 'no-zookeeper-test-token-secret-of-32-chars-or-more';
const CLUSTER_SECRET = 'no-zookeeper-test-cluster-secret-of-32-chars-or-more';
const WAIT_MS = 15_000;

/** bin/, dist/, proto/ and package.json copied; node_modules linked, all but `zookeeper`. */
function installWithoutZooKeeper(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sb-no-zookeeper-'));
  for (const part of ['bin', 'dist', 'proto', 'package.json']) fs.cpSync(path.join(ROOT, part), path.join(dir, part), { recursive: true });
  fs.mkdirSync(path.join(dir, 'node_modules'));
  for (const entry of fs.readdirSync(path.join(ROOT, 'node_modules'))) {
    if (entry === 'zookeeper') continue;
    fs.symlinkSync(path.join(ROOT, 'node_modules', entry), path.join(dir, 'node_modules', entry));
  }
  return dir;
}

interface Run {
  stdout: string;
  stderr: string;
  exited: Promise<number | null>;
  kill(): void;
}

function switchboard(dir: string, args: string[]): Run {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('SWITCHBOARD_')));
  const child = spawn(process.execPath, ['bin/switchboard.js', ...args], { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'] });
  const run: Run = {
    stdout: '',
    stderr: '',
    exited: new Promise((resolve) => child.on('close', (code) => resolve(code))),
    kill: () => child.kill('SIGKILL'),
  };
  child.stdout.setEncoding('utf8').on('data', (s: string) => (run.stdout += s));
  child.stderr.setEncoding('utf8').on('data', (s: string) => (run.stderr += s));
  return run;
}

async function portFrom(run: Run, msg: string): Promise<number> {
  const deadline = Date.now() + WAIT_MS;
  while (Date.now() < deadline) {
    for (const line of run.stdout.split('\n')) {
      if (!line.startsWith('{')) continue;
      const parsed = JSON.parse(line) as { msg?: string; port?: number };
      if (parsed.msg === msg && parsed.port) return parsed.port;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`no "${msg}" line within ${WAIT_MS} ms\n${run.stdout}\n${run.stderr}`);
}

const dir = installWithoutZooKeeper();
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));

t.test('the copy really lacks the native client', async (t) => {
  const probe = switchboard(dir, ['--version']);
  t.equal(await probe.exited, 0);
  t.notOk(fs.existsSync(path.join(dir, 'node_modules/zookeeper')));
  t.ok(fs.existsSync(path.join(dir, 'node_modules/ioredis')), 'the other packages are there');
});

t.test('the embedded node starts and delivers without it', async (t) => {
  const node = switchboard(dir, ['start', '--port', '0', '--gate-port', '0', '--log-level', 'info', '--secret', SECRET]);
  t.teardown(() => node.kill());
  const gatePort = await portFrom(node, 'gate listening');
  const gate = `http://127.0.0.1:${gatePort}`;
  const clients: ImClient[] = [];
  t.teardown(() => clients.forEach((c) => c.close()));
  const connect = async (name: string) => {
    await registerThroughGate(gate, name, `${name}-password`);
    const login = await loginThroughGate(gate, { username: name, password: `${name}-password`, deviceId: 'phone' });
    const c = new ImClient({ host: login.worker.host, port: login.worker.port, token: login.token, uid: login.uid, deviceId: 'phone', retryStrategy: false });
    clients.push(c);
    await c.connect();
    return c;
  };
  const alice = await connect('alice');
  const bob = await connect('bob');
  const received = new Promise<string>((resolve) => bob.on('message', (m: { content: string }) => resolve(m.content)));
  await alice.send('bob', 'no compiler needed');
  t.equal(await received, 'no compiler needed');
});

for (const [command, extra] of [
  ['worker', ['--cluster-secret', CLUSTER_SECRET]],
  ['gate', []],
] as const) {
  t.test(`${command} --zk refuses at once, naming what to install`, async (t) => {
    // Nothing listens at either address: the refusal comes before anything connects.
    const run = switchboard(dir, [command, '--dev', '--zk', '127.0.0.1:1', '--redis', 'redis://127.0.0.1:1', '--secret', SECRET, ...extra]);
    t.teardown(() => run.kill());
    t.equal(await run.exited, 1, run.stderr);
    t.match(run.stderr, `switchboard ${command}: SB_ERR_ZOOKEEPER_CLIENT_MISSING cluster mode (--zk) needs the native ZooKeeper client`);
    t.match(run.stderr, 'apt-get install -y python3 make g++) and run `npm install` again');
    t.notMatch(run.stdout, 'redis connection error', 'Redis was not dialled first');
  });
}
