// The gate of a real cluster: three worker processes on a real ZooKeeper and Redis, and a real
// `switchboard gate` process following them. Logins go to the least-loaded worker as the
// gate's /api/workers shows it (ties are random, so the test checks that the chosen worker had
// the least balance), /api/stats follows the OnlineCounter through logins and logouts, a worker
// stopped with SIGTERM is no longer handed out once the gate's view drops it, a forged worker
// znode never reaches the gate (the harness runs ZooKeeper authentication on), and the gate
// refuses to run in cluster mode with the public development secret or without --zk-auth.

import t from 'tap';
import { startZooKeeper } from '../helpers/zookeeper.js';
import { startRedis } from '../helpers/redis.js';
import { until } from '../../testkit/wait.js';
import { CLUSTER_PEER_SECRET, CLUSTER_TOKEN_SECRET, CLUSTER_ZK_GATE_AUTH, CLUSTER_ZK_WORKER, TestClient, startCluster, type TestCluster, type WorkerProcess } from '../helpers/cluster.js';
import { CliProcess } from '../helpers/cli-process.js';
import { GateProcess, startGate } from '../helpers/gate-process.js';
import net from 'node:net';
import type { GateLogin } from '../../src/client/gate-login.js';
import { ZK_MODE, ZK_RC, ZooKeeperSession, type ZooKeeperDigestAuth } from '../../src/registry/zookeeper-client.js';

// Processes, OWASP-cost password hashes and ZooKeeper balance writes (≤ 1/s): more than the default.
t.setTimeout(240_000);

const zk = await startZooKeeper(t);
const PASSWORD = 'correct horse battery staple';
const WAIT_MS = 20_000;

function gateArgs(cluster: TestCluster, extra: string[] = []): string[] {
  return ['gate', '--zk', zk.connect, '--zk-root', cluster.root, '--zk-auth', CLUSTER_ZK_GATE_AUTH, '--redis', cluster.redis.url, '--port', '0', '--log-level', 'info', ...extra];
}

t.test('logins go to the least-loaded worker; stats follow logins and logouts; a stopped worker is dropped', async (t) => {
  const cluster = await startCluster(t, zk, { workers: 3 });
  const [w1, w2, w3] = cluster.workers as [WorkerProcess, WorkerProcess, WorkerProcess];
  const gate = await startGate(t, cluster);
  t.same(await gate.get('/healthz'), { ok: true, workers: 3 }, 'the gate sees the three workers');
  const workerById = (id: string) => cluster.workers.find((w) => w.nodeId === id);

  // Sessions we hold, by worker: the balances the gate should come to show.
  const held = new Map<WorkerProcess, TestClient[]>(cluster.workers.map((w) => [w, []]));
  const balances = () => new Map([...held].filter(([w]) => w.alive).map(([w, clients]) => [w, clients.length]));
  const total = () => [...held.values()].reduce((n, clients) => n + clients.length, 0);
  const drop = async (worker: WorkerProcess, client: TestClient) => {
    await client.logout();
    held.set(worker, held.get(worker)!.filter((c) => c !== client));
  };

  // Different loads, by direct logins with tokens: w1 3, w2 1, w3 0.
  for (const [w, uids] of [
    [w1, ['d1', 'd2', 'd3']],
    [w2, ['d4']],
  ] as const) {
    for (const uid of uids) held.get(w)!.push(await cluster.client(w, uid));
  }
  await gate.waitForBalances(balances(), 'direct logins');
  t.pass('/api/workers shows w1 3, w2 1, w3 0');
  await gate.waitForOnline(4, 'direct logins');
  t.pass('/api/stats counts the 4 sessions');

  // Accounts are in Redis: registered through the gate.
  const users = ['alice', 'bob', 'carol', 'dave', 'erin', 'frank'];
  for (const u of users) {
    const r = await gate.post<{ uid: string }>('/api/users', { username: u, password: PASSWORD });
    t.equal(r.status, 201, `${u} registered`);
  }

  /** Logs `uid` in through the gate and checks the chosen worker had the least balance. */
  const loginThroughGate = async (uid: string, why: string): Promise<{ worker: WorkerProcess; login: GateLogin }> => {
    const view = await gate.workers();
    const least = Math.min(...view.map((w) => w.balance));
    const r = await gate.post<GateLogin>('/api/login', { username: uid, password: PASSWORD, deviceId: `${uid}-phone` });
    t.equal(r.status, 200, `${why}: ${uid} logged in`);
    const chosen = view.find((w) => w.id === r.body.worker.id);
    t.ok(chosen, `${why}: the gate named a worker of its view (${r.body.worker.id})`);
    t.equal(chosen?.balance, least, `${why}: ${uid} was sent to a least-loaded worker (${chosen?.id} at ${chosen?.balance}; view ${view.map((w) => `${w.id}=${w.balance}`).join(' ')})`);
    t.same(
      r.body.workers.map((w) => w.id).sort(),
      view.filter((w) => w.id !== r.body.worker.id).map((w) => w.id).sort(),
      `${why}: the others are the fallbacks`,
    );
    const worker = workerById(r.body.worker.id)!;
    t.equal(r.body.worker.port, worker.port, `${why}: at that worker's port`);
    return { worker, login: r.body };
  };

  /** Connects with the gate's token to the worker it named, and waits for the gate to see it. */
  const connect = async (uid: string, why: string): Promise<TestClient> => {
    const { worker, login } = await loginThroughGate(uid, why);
    const client = new TestClient({ host: login.worker.host, port: login.worker.port, token: login.token, uid: login.uid, deviceId: `${uid}-phone`, retryStrategy: false });
    t.teardown(() => client.close());
    await client.connect();
    held.get(worker)!.push(client);
    await gate.waitForBalances(balances(), `${why}: ${uid} connected`);
    return client;
  };

  for (const [i, uid] of ['alice', 'bob', 'carol', 'dave'].entries()) await connect(uid, `gate login ${i + 1}`);
  t.equal(held.get(w1)!.length, 3, 'w1, the busiest, got none of them');
  t.equal(held.get(w2)!.length + held.get(w3)!.length, 5, 'w2 and w3 shared the four');
  t.ok(Math.abs(held.get(w2)!.length - held.get(w3)!.length) <= 1, 'evenly');
  await gate.waitForOnline(total(), 'after the gate logins');
  t.pass(`/api/stats counts all ${total()} sessions`);

  // The token the gate issued is a working login: two users it placed chat.
  const [alice] = [...held.values()].flat().filter((c) => c.uid === 'alice');
  const [dave] = [...held.values()].flat().filter((c) => c.uid === 'dave');
  await alice!.send('dave', 'placed by the gate');
  t.match(await dave!.got.atLeast(1), [{ from: 'alice', content: 'placed by the gate' }], 'users the gate placed chat');

  // Logouts: two direct sessions of w1 and one gate session.
  await drop(w1, held.get(w1)![0]!);
  await drop(w1, held.get(w1)![0]!);
  await drop(cluster.workers.find((w) => held.get(w)!.includes(dave!))!, dave!);
  await gate.waitForBalances(balances(), 'after logouts');
  const stats = await gate.waitForOnline(total(), 'after logouts');
  t.same(
    stats.workers.map((w) => `${w.id}=${w.balance}`).sort(),
    [...balances()].map(([w, n]) => `${w.nodeId}=${n}`).sort(),
    `/api/stats counts ${total()} sessions and lists the balances`,
  );

  // Stop the worker the gate would hand out next: the least loaded.
  const view = await gate.workers();
  const least = Math.min(...view.map((w) => w.balance));
  const victim = workerById(view.find((w) => w.balance === least)!.id)!;
  const exit = await victim.stop();
  t.same(exit, { code: 0, signal: null }, `${victim.name} (balance ${least}) stopped cleanly on SIGTERM`);
  for (const c of held.get(victim)!) await c.logout();
  held.delete(victim);
  await gate.waitFor(`the gate's /api/workers drops ${victim.name}`, async () => !(await gate.workers()).some((w) => w.id === victim.nodeId), WAIT_MS);
  t.same((await gate.get<{ workers: number }>('/healthz')).workers, 2, '/healthz counts two workers');
  await gate.waitForOnline(total(), `after ${victim.name} stopped`);
  t.pass(`/api/stats counts the ${total()} sessions left`);
  for (const uid of ['erin', 'frank']) {
    const { worker } = await loginThroughGate(uid, `after ${victim.name} stopped`);
    t.not(worker, victim, `${uid} was not sent to the stopped worker`);
    t.ok(worker.alive, `${uid} was sent to a live worker (${worker.name})`);
  }

  t.same(await gate.stop(), { code: 0, signal: null }, 'the gate exits 0 on SIGTERM');
});

t.test('a forged worker znode never reaches the gate: logins go to real workers only', async (t) => {
  const cluster = await startCluster(t, zk, { workers: 1 });
  const [real] = cluster.workers as [WorkerProcess];
  const gate = await startGate(t, cluster);
  // The real worker holds a session: a forged worker at balance 0 would be the least loaded.
  await cluster.client(real, 'busy');
  await gate.waitForBalances(new Map([[real, 1]]), 'one direct login');

  // The attacker's listener, where a forged znode would send users' logins.
  const trap = net.createServer((socket) => socket.destroy());
  await new Promise<void>((resolve) => trap.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => trap.close(() => resolve())));
  const trapPort = (trap.address() as net.AddressInfo).port;
  const forged = (id: string) => Buffer.from(JSON.stringify({ id, host: '127.0.0.1', port: trapPort, balance: 0, startedAt: Date.now(), version: 'forged' }));
  const strangers: [string, ZooKeeperDigestAuth | undefined][] = [
    ['without credentials', undefined],
    ['with the workers\' user and a guessed password', { user: CLUSTER_ZK_WORKER.user, password: 'guessed' }],
    ['with an identity of its own', { user: 'mallory', password: 'mallory-password' }],
  ];
  const own = `${cluster.root}/workers/w-${real.nodeId}`;
  for (const [how, auth] of strangers) {
    const attacker = await new Promise<ZooKeeperSession>((resolve) => {
      const s: ZooKeeperSession = new ZooKeeperSession({ connect: zk.connect, sessionTimeoutMs: 10_000, logLevel: 'off', auth, onConnected: () => resolve(s) });
    });
    t.teardown(() => attacker.close());
    const refused = async (call: Promise<unknown>) => call.then(() => 0, (err: { rc?: number }) => err.rc);
    t.equal(await refused(attacker.create(`${cluster.root}/workers/w-0000099999`, forged('0000099999'), ZK_MODE.EPHEMERAL)), ZK_RC.NO_AUTH, `a client ${how} cannot add a worker znode`);
    t.equal(await refused(attacker.create(`${cluster.root}/workers/w-`, forged(''), ZK_MODE.EPHEMERAL_SEQUENTIAL)), ZK_RC.NO_AUTH, `nor a sequential one`);
    t.equal(await refused(attacker.set(own, forged(real.nodeId), -1)), ZK_RC.NO_AUTH, `nor point the real worker's znode at its listener`);
  }

  t.equal((await gate.post('/api/users', { username: 'victim', password: PASSWORD })).status, 201, 'a user registers');
  const login = await gate.post<GateLogin>('/api/login', { username: 'victim', password: PASSWORD, deviceId: 'phone' });
  t.equal(login.status, 200, 'and logs in through the gate');
  t.equal(login.body.worker.port, real.port, 'sent to the real worker');
  t.same(login.body.workers, [], 'with no other worker to fall back on');
  t.same(
    (await gate.workers()).map((w) => w.port),
    [real.port],
    "the gate's view holds the real worker alone",
  );
});

t.test('accounts live in Redis: a second gate logs in users the first registered', async (t) => {
  const cluster = await startCluster(t, zk, { workers: 1 });
  const first = await startGate(t, cluster, 'gate-1');
  const second = await startGate(t, cluster, 'gate-2');
  t.equal((await first.post('/api/users', { username: 'Grace', password: PASSWORD })).status, 201, 'registered at the first gate');
  const taken = await second.post<{ error: { code: string } }>('/api/users', { username: 'grace', password: PASSWORD });
  t.equal(taken.status, 409, 'the second gate knows the name is taken');
  t.equal(taken.body.error.code, 'SB_ERR_USERNAME_TAKEN', 'SB_ERR_USERNAME_TAKEN');
  const login = await second.post<GateLogin>('/api/login', { username: 'GRACE', password: PASSWORD, deviceId: 'phone' });
  t.equal(login.status, 200, 'the second gate logs grace in');
  t.equal(login.body.worker.id, cluster.workers[0]!.nodeId, 'on the one worker');
  const client = new TestClient({ host: login.body.worker.host, port: login.body.worker.port, token: login.body.token, uid: login.body.uid, deviceId: 'phone', retryStrategy: false });
  t.teardown(() => client.close());
  await client.connect();
  t.pass('and the worker accepts the second gate\'s token');
  const wrong = await first.post<{ error: { code: string } }>('/api/login', { username: 'grace', password: 'not the password', deviceId: 'phone' });
  t.equal(wrong.status, 401, 'a wrong password is refused');
  t.equal(wrong.body.error.code, 'SB_ERR_LOGIN_FAILED', 'SB_ERR_LOGIN_FAILED');
});

t.test('two gate processes on one Redis share the login limits; --trust-proxy names the client behind a proxy', async (t) => {
  const cluster = await startCluster(t, zk, { workers: 1 });
  const flags = ['--secret', CLUSTER_TOKEN_SECRET, '--rate-user-ip', '3', '--trust-proxy', 'loopback'];
  const one = await new GateProcess(t, 'gate-1', gateArgs(cluster, flags)).started();
  const two = await new GateProcess(t, 'gate-2', gateArgs(cluster, flags)).started();
  const login = async (gate: GateProcess, password: string, client: string) => {
    const r = await fetch(new URL('/api/login', gate.url), {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-forwarded-for': client },
      body: JSON.stringify({ username: 'heidi', password, deviceId: 'phone' }),
    });
    return r.status;
  };
  t.equal((await one.post('/api/users', { username: 'heidi', password: PASSWORD })).status, 201);
  // The test connects from 127.0.0.1, a trusted proxy: X-Forwarded-For names the client.
  t.same([await login(one, 'guess 1', '203.0.113.1'), await login(two, 'guess 2', '203.0.113.1'), await login(one, 'guess 3', '203.0.113.1')], [401, 401, 401], 'three failures of client 203.0.113.1, at two gates');
  t.equal(await login(two, PASSWORD, '203.0.113.1'), 429, 'the second gate counted the first gate\'s failures: 203.0.113.1 is locked out of heidi');
  t.equal(await login(one, PASSWORD, '203.0.113.1'), 429, 'at the first gate too');
  t.equal(await login(two, PASSWORD, '203.0.113.2'), 200, 'another client behind the same proxy logs heidi in');
  t.ok(one.lines.some((l) => l.msg === 'login rate limited' && l.ip === '203.0.113.1' && l.username === 'heidi'), 'the refusal is logged with the client address');
});

t.test('the gate refuses to start in cluster mode without --secret or --zk-auth unless --dev', async (t) => {
  const redis = await startRedis(t);
  const root = `/sb-gate-secret-${process.pid}`;
  const base = ['gate', '--zk', zk.connect, '--zk-root', root, '--redis', redis.url, '--port', '0', '--log-level', 'info'];

  const refused = new CliProcess(t, 'gate without --secret', base);
  t.same(await refused.exit(), { code: 1, signal: null }, 'exit code 1');
  t.match(refused.stderr, /^switchboard gate: SB_ERR_CONFIG .*--secret/m, 'SB_ERR_CONFIG on stderr, naming --secret');

  const dev = await new GateProcess(t, 'gate --dev', [...base, '--dev']).started();
  t.ok(
    dev.lines.some((l) => l.level === 40 && /development secret/.test(String(l.msg))),
    'with --dev it runs, warning about the development secret',
  );
  t.same(await dev.get('/healthz'), { ok: true, workers: 0 }, 'and serves');
  t.same(await dev.stop(), { code: 0, signal: null }, 'and exits 0 on SIGTERM');

  // Without a ZooKeeper identity anyone who reaches ZooKeeper could list a worker of their own.
  for (const [what, args] of [
    ['gate', [...base, '--secret', CLUSTER_TOKEN_SECRET]],
    ['worker', ['worker', '--port', '0', '--zk', zk.connect, '--zk-root', root, '--redis', redis.url, '--secret', CLUSTER_TOKEN_SECRET, '--cluster-secret', CLUSTER_PEER_SECRET]],
  ] as const) {
    const p = new CliProcess(t, `${what} without --zk-auth`, [...args]);
    t.same(await p.exit(), { code: 1, signal: null }, `${what} without --zk-auth: exit code 1`);
    t.match(p.stderr, new RegExp(`^switchboard ${what}: SB_ERR_CONFIG .*--zk-auth`, 'm'), `${what}: SB_ERR_CONFIG on stderr, naming --zk-auth`);
  }
  t.ok(
    dev.lines.some((l) => l.level === 40 && /no --zk-auth/.test(String(l.msg))),
    'with --dev the gate runs without one, warning about it',
  );

  for (const [what, args] of [
    ['without --zk', ['gate', '--redis', redis.url, '--secret', CLUSTER_TOKEN_SECRET, '--port', '0']],
    ['without --redis', ['gate', '--zk', zk.connect, '--zk-auth', CLUSTER_ZK_GATE_AUTH, '--secret', CLUSTER_TOKEN_SECRET, '--port', '0']],
  ] as const) {
    const p = new CliProcess(t, `gate ${what}`, [...args]);
    t.same(await p.exit(), { code: 1, signal: null }, `${what}: exit code 1`);
    t.match(p.stderr, /SB_ERR_CONFIG/, `${what}: SB_ERR_CONFIG`);
  }
});

t.test('a gate whose port is taken exits 1 instead of hanging on its ZooKeeper and Redis connections', async (t) => {
  const redis = await startRedis(t);
  const holder = net.createServer();
  await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => holder.close(() => resolve())));
  const busy = (holder.address() as net.AddressInfo).port;
  const gate = new CliProcess(t, 'gate on a busy port', ['gate', '--zk', zk.connect, '--zk-root', `/sb-gate-port-${process.pid}`, '--zk-auth', CLUSTER_ZK_GATE_AUTH, '--redis', redis.url, '--secret', CLUSTER_TOKEN_SECRET, '--port', String(busy)]);
  t.same(await gate.exit(), { code: 1, signal: null }, 'exit code 1');
  t.match(gate.stderr, /^switchboard gate: EADDRINUSE /m, 'saying why');
});
