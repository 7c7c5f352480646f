// Where the servers listen and what they tell clients: --host 0.0.0.0 without --announce-host
// warns that clients are told 127.0.0.1, the `start` banner shows what clients are told (what
// the gate hands out), and a busy port names the flag and variable that move it. Real processes
// (bin/switchboard.js runs the compiled dist/: `npm run build` first).

import t, { type Test } from 'tap';
import net from 'node:net';
import { CliProcess } from '../helpers/cli-process.js';
import { GateProcess } from '../helpers/gate-process.js';
import { CLUSTER_TOKEN_SECRET } from '../helpers/cluster.js';
import { startRedis } from '../helpers/redis.js';
import { startZooKeeper } from '../helpers/zookeeper.js';

t.setTimeout(120_000);

/** `start` on free ports; resolves once its banner is out. */
async function start(t: Test, extra: string[]): Promise<CliProcess> {
  const server = new CliProcess(t, `start ${extra.join(' ')}`, ['start', '--port', '0', '--gate-port', '0', '--log-level', 'info', ...extra]);
  await server.waitForLog({ msg: 'gate listening' });
  await server.waitFor('the banner', () => server.stderr.includes('Native clients log in'));
  return server;
}

/** The workers the embedded gate hands out, as /api/workers shows them. */
async function handedOut(server: CliProcess): Promise<{ host: string; port: number }[]> {
  const gatePort = Number(server.lines.find((l) => l.msg === 'gate listening')!.port);
  const response = await fetch(`http://127.0.0.1:${gatePort}/api/workers`);
  return ((await response.json()) as { workers: { host: string; port: number }[] }).workers;
}

t.test('--host 0.0.0.0 without --announce-host: a warning, and the banner says clients are told 127.0.0.1', async (t) => {
  const server = await start(t, ['--host', '0.0.0.0']);
  const warning = server.lines.find((l) => l.level === 40 && l.host === '0.0.0.0');
  t.match(warning, { announceHost: '127.0.0.1', msg: /^--host 0\.0\.0\.0 without --announce-host: clients are told 127\.0\.0\.1.*set --announce-host/ }, 'logged as a warning at start');
  t.ok(Array.isArray(warning?.addresses), "with this host's addresses");
  const [worker] = await handedOut(server);
  t.equal(worker?.host, '127.0.0.1', 'the gate hands out 127.0.0.1');
  t.match(server.stderr, `clients are told 127.0.0.1:${worker?.port}`, 'the banner shows what clients are told');
  t.match(server.stderr, /^ {2}listening on 0\.0\.0\.0:\d+ and 0\.0\.0\.0:\d+$/m, 'and where it listens');
  t.match(server.stderr, /^warning: --host 0\.0\.0\.0 without --announce-host/m, 'the banner repeats the warning');
  t.same(await server.stop(), { code: 0, signal: null });
});

t.test('--host 0.0.0.0 with --announce-host: no warning, and the banner shows the announced address', async (t) => {
  const server = await start(t, ['--host', '0.0.0.0', '--announce-host', '127.0.0.2']);
  t.notOk(server.lines.some((l) => l.level === 40 && l.host === '0.0.0.0'), 'no warning');
  const [worker] = await handedOut(server);
  t.equal(worker?.host, '127.0.0.2', 'the gate hands out the announced host');
  t.match(server.stderr, new RegExp(`clients are told 127\\.0\\.0\\.2:${worker?.port}, gate http://127\\.0\\.0\\.2:\\d+\\.`), 'and so does the banner');
  t.notMatch(server.stderr, /^warning:/m);
  t.same(await server.stop(), { code: 0, signal: null });
});

/** A port some other process listens on, for the test's duration. */
async function busyPort(t: Test): Promise<number> {
  const holder = net.createServer();
  await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => holder.close(() => resolve())));
  return (holder.address() as net.AddressInfo).port;
}

t.test('a busy port names the flag and the variable that move it, and keeps the code EADDRINUSE', async (t) => {
  const busy = await busyPort(t);
  const zk = await startZooKeeper(t);
  const redis = await startRedis(t);
  for (const [what, args, moves] of [
    ['worker', ['worker', '--port', String(busy)], 'the client port) is in use by another process: stop it, or choose another port with --port (or SWITCHBOARD_PORT)'],
    ['start', ['start', '--port', String(busy), '--gate-port', '0'], 'the client port) is in use by another process: stop it, or choose another port with --port (or SWITCHBOARD_PORT)'],
    ['start', ['start', '--port', '0', '--gate-port', String(busy)], 'the gate port) is in use by another process: stop it, or choose another port with --gate-port (or SWITCHBOARD_GATE_PORT)'],
    ['gate', ['gate', '--dev', '--port', String(busy), '--zk', zk.connect, '--zk-root', `/sb-listen-${process.pid}`, '--redis', redis.url, '--secret', CLUSTER_TOKEN_SECRET], 'the gate port) is in use by another process: stop it, or choose another port with --port (or SWITCHBOARD_GATE_PORT)'],
  ] as const) {
    const p = what === 'gate' ? new GateProcess(t, args.join(' '), [...args]) : new CliProcess(t, args.join(' '), [...args]);
    t.same(await p.exit(), { code: 1, signal: null }, `${args.join(' ')}: exit 1`);
    t.match(p.stderr, `switchboard ${what}: EADDRINUSE 127.0.0.1:${busy} (${moves}`, `${args.join(' ')}: says which port and which flag`);
  }
});
