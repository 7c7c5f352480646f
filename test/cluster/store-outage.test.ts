// A cluster whose Redis freezes (SIGSTOP: connections stay open, nothing is answered), with real
// worker processes, ZooKeeper and a gate process: a send is answered with
// SB_ERR_STORE_UNAVAILABLE within the workers' Redis timeout instead of hanging; the workers
// mark themselves unready in ZooKeeper, so the gate answers 503 SB_ERR_NO_WORKER, and refuse
// direct logins with SB_ERR_STORE_UNAVAILABLE while keeping their open sessions; after SIGCONT
// they are ready again, the gate hands them out and the kept sessions chat across workers.
// The gate keeps its users in a Redis of its own, which stays up.

import t from 'tap';
import { startZooKeeper } from '../helpers/zookeeper.js';
import { startRedis } from '../helpers/redis.js';
import { until } from '../../testkit/wait.js';
import { startCluster, type WorkerProcess } from '../helpers/cluster.js';
import { startGate } from '../helpers/gate-process.js';
import type { GateLogin } from '../../src/client/gate-login.js';

t.setTimeout(180_000);

const zk = await startZooKeeper(t);
const PASSWORD = 'correct horse battery staple';
const FLAGS = { 'health-interval-ms': 200, 'health-failures': 2, 'redis-timeout-ms': 500 };

t.test('a frozen Redis: sends fail cleanly, workers turn unready (gate 503, logins refused), and all is well after the thaw', async (t) => {
  const redis = await startRedis(t);
  const cluster = await startCluster(t, zk, { workers: 2, redis, flags: FLAGS });
  const [w1, w2] = cluster.workers as [WorkerProcess, WorkerProcess];
  const gate = await startGate(t, cluster, { redisUrl: (await startRedis(t)).url });
  t.equal((await gate.post('/api/users', { username: 'erin', password: PASSWORD })).status, 201, 'erin registered at the gate');
  const alice = await cluster.client(w1, 'alice');
  const bob = await cluster.client(w2, 'bob');
  await alice.send('bob', 'before');
  await bob.got.atLeast(1);

  const marks = [w1.mark(), w2.mark()];
  redis.freeze();
  const refused = await alice.send('bob', 'while frozen').then(
    () => undefined,
    (err: { code?: string }) => err.code,
  );
  t.equal(refused, 'SB_ERR_STORE_UNAVAILABLE', 'the send is answered: SB_ERR_STORE_UNAVAILABLE');
  for (const [i, w] of [w1, w2].entries()) {
    await w.waitForLog({ msg: 'stores do not answer: not ready', level: 40 }, { from: marks[i] });
    t.pass(`${w.name} says it is not ready`);
  }
  await gate.waitFor('the gate sees both workers unready', async () => (await gate.post<{ error?: { code: string } }>('/api/login', { username: 'erin', password: PASSWORD, deviceId: 'p' })).status === 503);
  const noWorker = await gate.post<{ error?: { code: string } }>('/api/login', { username: 'erin', password: PASSWORD, deviceId: 'p' });
  t.same([noWorker.status, noWorker.body.error?.code], [503, 'SB_ERR_NO_WORKER'], 'the gate: 503 SB_ERR_NO_WORKER');
  const carol = await cluster.client(w1, 'carol', 'carol-phone', { connect: false });
  const loginRefusal = await carol.connect().then(
    () => undefined,
    (err: { code?: string }) => err.code,
  );
  t.equal(loginRefusal, 'SB_ERR_STORE_UNAVAILABLE', 'a direct login is refused with SB_ERR_STORE_UNAVAILABLE');
  t.equal(alice.status, 'ready', 'alice keeps her session');
  t.equal(bob.status, 'ready', 'bob keeps his');

  const thawed = [w1.mark(), w2.mark()];
  redis.thaw();
  for (const [i, w] of [w1, w2].entries()) {
    await w.waitForLog({ msg: 'stores answer again: ready' }, { from: thawed[i] });
    t.pass(`${w.name} is ready again`);
  }
  let login: { status: number; body: GateLogin } | undefined;
  await gate.waitFor('the gate hands a worker out again', async () => (login = await gate.post<GateLogin>('/api/login', { username: 'erin', password: PASSWORD, deviceId: 'p' })).status === 200);
  t.ok([w1.nodeId, w2.nodeId].includes(login!.body.worker.id), 'one of the two');
  const result = await alice.send('bob', 'after the thaw');
  t.ok(result.seq > 0, 'alice sends again');
  // (The send refused during the freeze may have been stored all the same, and arrive too.)
  await until('bob gets the message sent after the thaw', () => bob.got.from('alice').some((m) => m.content === 'after the thaw'));
  t.pass('and bob, on the other worker, gets it');
  const carolAgain = await cluster.client(w1, 'carol', 'carol-phone');
  t.equal(carolAgain.status, 'ready', 'direct logins work again');
});
