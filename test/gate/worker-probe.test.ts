// WorkerProbe against real sockets and a real ZooKeeper view: a live worker node answers its
// heartbeat probe, a registered port nobody listens on (a SIGKILLed worker) and a listener that
// never answers (a stalled one) do not; the verdict follows when they come back, a worker that
// leaves the view is forgotten, and with room for one probe at a time every worker is still
// probed in turn. The worker logs nothing above debug for the probes.

import t, { type Test } from 'tap';
import net from 'node:net';
import { pino } from 'pino';
import { WorkerProbe } from '../../src/gate/worker-probe.js';
import { ZooKeeperRegistry } from '../../src/registry/zk-registry.js';
import type { ImNode } from '../../src/registry/im-node.js';
import { silentLogger, type Logger } from '../../src/log.js';
import { createNode } from '../../src/node.js';
import { TEST_SECRET } from '../helpers/node.js';
import { freePort } from '../../testkit/services.js';
import { startZooKeeper } from '../helpers/zookeeper.js';
import { until } from '../../testkit/wait.js';

const zk = await startZooKeeper(t);
let roots = 0;

function capturingLogger(level = 'debug'): { log: Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const log = pino({ level }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
  return { log, lines };
}

function registry(t: Test, root: string): ZooKeeperRegistry {
  const r = new ZooKeeperRegistry({ connect: zk.connect, root, log: silentLogger(), nativeLogLevel: 'off' });
  t.teardown(() => r.close());
  return r;
}

/** Registers a worker entry for host:port without any server behind it. */
async function announce(t: Test, root: string, port: number): Promise<ImNode & { registry: ZooKeeperRegistry }> {
  const r = registry(t, root);
  return { ...(await r.register({ host: '127.0.0.1', port, balance: 0, startedAt: Date.now(), version: 'probe-test', ready: true })), registry: r };
}

/** A TCP listener that accepts and never answers. */
async function silentServer(t: Test): Promise<number> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    for (const s of sockets) s.destroy();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return (server.address() as net.AddressInfo).port;
}

async function setup(t: Test, concurrency = 32) {
  const root = `/sb-probe-${process.pid}-${++roots}`;
  const workerLog = capturingLogger('info');
  const node = createNode({ host: '127.0.0.1', port: 0, secret: TEST_SECRET, registry: registry(t, root), log: workerLog.log });
  const live = await node.start();
  t.teardown(() => node.stop());
  const deadPort = await freePort();
  const dead = await announce(t, root, deadPort);
  const stalled = await announce(t, root, await silentServer(t));
  const observer = registry(t, root);
  await observer.observe();
  await until('the gate sees the three', () => observer.workers().length === 3);
  const probeLog = capturingLogger();
  const probe = new WorkerProbe({ registry: observer, intervalMs: 50, timeoutMs: 300, concurrency, log: probeLog.log });
  probe.start();
  t.teardown(() => probe.close());
  const info = (id: string) => observer.workers().find((w) => w.id === id)!;
  return { root, node, live, dead, deadPort, stalled, observer, probe, probeLog, workerLog, info };
}

t.test('refused and unanswered probes make a worker unreachable; answered ones reachable again', async (t) => {
  const s = await setup(t);
  await until('the dead port is unreachable', () => !s.probe.reachable(s.info(s.dead.id)));
  await until('the stalled listener is unreachable', () => !s.probe.reachable(s.info(s.stalled.id)));
  t.equal(s.probe.reachable(s.info(s.live.id)), true, 'the live worker is reachable');
  const failed = s.probeLog.lines.filter((l) => l.msg === 'worker probe failed: not handed out');
  t.same(failed.map((l) => l.worker).sort(), [s.dead.id, s.stalled.id].sort(), 'each failure logged once, at warn');
  t.match(failed.find((l) => l.worker === s.stalled.id), { level: 40, err: { message: /no heartbeat echo within 300 ms/ } }, 'the stalled one timed out');
  t.match(failed.find((l) => l.worker === s.dead.id), { err: { code: 'ECONNREFUSED' } }, 'the dead one refused');

  // The dead worker comes back on its port.
  const back = createNode({ host: '127.0.0.1', port: s.deadPort, secret: TEST_SECRET });
  await back.start();
  t.teardown(() => back.stop());
  await until('the revived port is reachable again', () => s.probe.reachable(s.info(s.dead.id)));
  t.ok(s.probeLog.lines.some((l) => l.msg === 'worker probe answered again' && l.worker === s.dead.id && l.level === 30), 'logged at info');
  t.equal(s.probeLog.lines.filter((l) => l.msg === 'worker probe failed: not handed out' && l.worker === s.dead.id).length, 1, 'repeated failures were not logged again');
  t.same(
    s.workerLog.lines.filter((l) => l.connId !== undefined),
    [],
    'dozens of probes later, the worker has logged nothing about them at info',
  );
  t.equal(s.node.server.connectionCount <= 1, true, 'and holds at most the one in flight');
});

t.test('one probe at a time: every worker is still probed, a stalled one does not starve the others', async (t) => {
  const s = await setup(t, 1);
  await until('both failures are seen', () => !s.probe.reachable(s.info(s.dead.id)) && !s.probe.reachable(s.info(s.stalled.id)));
  t.equal(s.probe.reachable(s.info(s.live.id)), true);
});

t.test('a worker that leaves the view is forgotten; one never probed counts as reachable', async (t) => {
  const s = await setup(t);
  await until('the dead port is unreachable', () => !s.probe.reachable(s.info(s.dead.id)));
  const gone = s.info(s.dead.id);
  t.equal(s.probe.reachable({ ...gone, port: gone.port + 1 }), true, 'a known id at a new address is judged anew');
  await s.dead.registry.close(); // its znode goes
  await until('the view drops it', () => !s.observer.workers().some((w) => w.id === s.dead.id));
  t.equal(s.probe.reachable(gone), true, 'its verdict is forgotten with it: nothing is kept for workers that left');
  t.equal(s.probe.reachable({ ...gone, id: 'never-seen' }), true, 'a worker not probed yet is reachable');
});

t.test('an interval, timeout or concurrency below 1 is refused with SB_ERR_CONFIG', async (t) => {
  const observer = registry(t, `/sb-probe-${process.pid}-config`);
  for (const settings of [{ intervalMs: 0 }, { timeoutMs: 0 }, { concurrency: 0 }]) {
    t.throws(() => new WorkerProbe({ registry: observer, log: silentLogger(), ...settings }), { code: 'SB_ERR_CONFIG' }, JSON.stringify(settings));
  }
});
