// The gate's choice among real worker processes that cannot all serve, on a real ZooKeeper:
// a SIGKILLed worker (its znode kept for 30 s) is no longer handed out once the gate's probe of
// it failed, and with every worker dead the gate answers 503 SB_ERR_NO_WORKER; a worker
// stopped with SIGTERM leaves the gate's choice as soon as its stop returns (its znode is
// deleted; the probes are slowed down so that only the znode can tell). The probes leave no
// line above debug in a worker's log. Workers are told apart by load: the victim is idle, so a
// gate that did not know better would hand it out.

import t, { type Test } from 'tap';
import { startZooKeeper } from '../helpers/zookeeper.js';
import { startCluster, type WorkerProcess } from '../helpers/cluster.js';
import { startGate, type GateProcess } from '../helpers/gate-process.js';
import type { GateLogin } from '../../src/client/gate-login.js';

// Worker and gate processes, OWASP-cost password hashes, balance writes (≤ 1/s).
t.setTimeout(240_000);

const zk = await startZooKeeper(t);
const PASSWORD = 'correct horse battery staple';

/** Two workers, the victim idle and the other with two sessions: without health, logins go to the victim. */
async function victimAndSurvivor(t: Test, flags: Record<string, number> = {}) {
  const cluster = await startCluster(t, zk, { workers: 2, flags });
  const [victim, survivor] = cluster.workers as [WorkerProcess, WorkerProcess];
  for (const uid of ['s1', 's2']) await cluster.client(survivor, uid);
  return { cluster, victim, survivor };
}

/** Logs `uid` in through `gate`: the worker it was handed, or the error code and status. */
async function gateLogin(gate: GateProcess, uid: string): Promise<{ status: number; worker?: string; fallbacks?: string[]; code?: string }> {
  const r = await gate.post<GateLogin & { error?: { code: string } }>('/api/login', { username: uid, password: PASSWORD, deviceId: `${uid}-phone` });
  return r.status === 200 ? { status: 200, worker: r.body.worker.id, fallbacks: r.body.workers.map((w) => w.id) } : { status: r.status, code: r.body.error?.code };
}

t.test('a SIGKILLed worker is not handed out once a probe failed, long before its znode expires; none left is a 503', async (t) => {
  // Its znode would stay 30 s: only the gate's probe can tell the gate it is gone.
  const { cluster, victim, survivor } = await victimAndSurvivor(t, { 'zk-session-timeout-ms': 30_000 });
  const gate = await startGate(t, cluster);
  await gate.waitForBalances(new Map([[victim, 0], [survivor, 2]]), 'before the kill');
  for (const uid of ['kim', 'lee', 'max', 'ned']) t.equal((await gate.post('/api/users', { username: uid, password: PASSWORD })).status, 201, `${uid} registered`);
  t.equal((await gateLogin(gate, 'kim')).worker, victim.nodeId, 'while it lives, the idle worker is the choice');

  const from = gate.lines.length;
  await victim.kill();
  await gate.waitFor(`the gate's probe of ${victim.name} fails`, () =>
    gate.lines.slice(from).some((l) => l.msg === 'worker probe failed: not handed out' && l.worker === victim.nodeId && l.level === 40),
  );
  t.ok((await gate.workers()).some((w) => w.id === victim.nodeId), `${victim.name}'s znode is still registered`);
  for (const uid of ['lee', 'max', 'ned']) {
    const login = await gateLogin(gate, uid);
    t.equal(login.worker, survivor.nodeId, `${uid} is handed the live worker`);
    t.same(login.fallbacks, [victim.nodeId], 'the dead one only as the last fallback');
  }
  t.ok((await gate.workers()).some((w) => w.id === victim.nodeId), 'all of that before the znode expired');

  await survivor.kill();
  await gate.waitFor(`the gate's probe of ${survivor.name} fails`, () => gate.lines.slice(from).some((l) => l.msg === 'worker probe failed: not handed out' && l.worker === survivor.nodeId));
  t.same(await gateLogin(gate, 'kim'), { status: 503, code: 'SB_ERR_NO_WORKER' }, 'no reachable worker: 503 SB_ERR_NO_WORKER');
  t.same(
    survivor.lines.filter((l) => l.level >= 30 && l.connId !== undefined && l.uid === undefined && l.peer === undefined),
    [],
    'the probes (connections of no user and no peer) left no line above debug in the worker\'s log',
  );
});

t.test('a gracefully stopped worker leaves the gate\'s choice as soon as its stop returns', async (t) => {
  const { cluster, victim, survivor } = await victimAndSurvivor(t);
  // Probes too rare to notice anything within the test: what removes the worker is its znode.
  const gate = await startGate(t, cluster, { flags: ['--probe-interval-ms', '600000', '--probe-timeout-ms', '600000'] });
  await gate.waitForBalances(new Map([[victim, 0], [survivor, 2]]), 'before the stop');
  for (const uid of ['oda', 'pia']) t.equal((await gate.post('/api/users', { username: uid, password: PASSWORD })).status, 201, `${uid} registered`);
  t.equal((await gateLogin(gate, 'oda')).worker, victim.nodeId, 'while it runs, the idle worker is the choice');
  t.same(await victim.stop(), { code: 0, signal: null }, `${victim.name} stopped on SIGTERM`);
  const login = await gateLogin(gate, 'pia');
  t.equal(login.worker, survivor.nodeId, 'the next login, at once, is handed the other worker');
  t.same(login.fallbacks, [], 'and not the stopped one as a fallback');
});
