// The composition root in one process: a configuration that names nothing to run or half a
// cluster is refused before anything is built, and `switchboard start`'s configuration (a worker
// and its embedded gate, memory stores) gives a gate that registers, logs in and counts through
// the worker's MemoryOnlineCounter, and a stop() that leaves no port open. The commands that
// fill the configuration from flags are tested as processes in test/cli/.

import t from 'tap';
import net from 'node:net';
import { createSwitchboard, type SwitchboardConfig, type WorkerConfig } from '../../src/node.js';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { DEFAULT_HEALTH_SETTINGS } from '../../src/server/store-health.js';
import { DEFAULT_INBOX_LIMITS } from '../../src/inbox/inbox-store.js';
import { DEFAULT_GATE_LIMITS } from '../../src/gate/web-gate.js';
import { DEFAULT_CLUSTER_SETTINGS } from '../../src/cluster/cluster.js';
import { ImClient } from '../../src/client/im-client.js';
import { loginThroughGate, registerThroughGate } from '../../src/client/gate-login.js';
import { silentLogger } from '../../src/log.js';
import { TEST_SECRET } from '../helpers/node.js';

const WORKER: WorkerConfig = {
  host: '127.0.0.1',
  port: 0,
  limits: { ...DEFAULT_LIMITS, closeGraceMs: 200 },
  health: DEFAULT_HEALTH_SETTINGS,
  inboxLimits: DEFAULT_INBOX_LIMITS,
  memoryInboxBytes: 16 * 1024 * 1024,
  checkRecipients: true,
};
const GATE = { host: '127.0.0.1', port: 0, limits: DEFAULT_GATE_LIMITS, registration: true, trustProxy: [] };
const base: SwitchboardConfig = { secret: TEST_SECRET, log: silentLogger() };

t.test('a configuration that cannot run is refused before anything is built', async (t) => {
  const redis = { url: 'redis://127.0.0.1:1', keyPrefix: 'sb:', timeoutMs: 100 };
  const zookeeper = { connect: '127.0.0.1:1', root: '/sb' };
  const cluster = { settings: { ...DEFAULT_CLUSTER_SETTINGS, secret: 'x'.repeat(32) }, sessionTtlMs: 60_000 };
  for (const [what, config] of [
    ['nothing to run', base],
    ['a cluster worker without ZooKeeper', { ...base, redis, worker: { ...WORKER, cluster } }],
    ['a cluster worker without Redis', { ...base, zookeeper, worker: { ...WORKER, cluster } }],
    ['ZooKeeper for a worker without cluster settings', { ...base, redis, zookeeper, worker: WORKER }],
    ["a cluster's gate without Redis", { ...base, zookeeper, gate: GATE }],
  ] as const) {
    t.throws(() => createSwitchboard(config), { code: 'SB_ERR_CONFIG' }, what);
  }
});

t.test('a worker and its embedded gate: register, log in, counted, and stopped', async (t) => {
  const switchboard = createSwitchboard({ ...base, worker: WORKER, gate: GATE });
  const started = await switchboard.start();
  let stopped = false;
  t.teardown(() => (stopped ? undefined : switchboard.stop()));
  t.ok(started.worker && started.gate, 'the worker and the gate started');
  const gateUrl = `http://127.0.0.1:${started.gate!.port}`;

  await registerThroughGate(gateUrl, 'alice', 'a password long enough');
  const login = await loginThroughGate(gateUrl, { username: 'alice', password: 'a password long enough', deviceId: 'phone' });
  t.match(login.worker, { id: started.worker!.id, port: started.worker!.port }, 'the gate hands out the embedded worker');
  const alice = new ImClient({ host: login.worker.host, port: login.worker.port, token: login.token, uid: login.uid, deviceId: 'phone', retryStrategy: false });
  t.teardown(() => alice.close());
  await alice.connect();
  const stats = (await (await fetch(`${gateUrl}/api/stats`)).json()) as { online: { users: number; sessions: number } };
  t.same(stats.online, { users: 1, sessions: 1 }, "the gate reads the worker's own counts");

  await switchboard.stop();
  stopped = true;
  for (const port of [started.worker!.port, started.gate!.port]) {
    const refused = await new Promise<boolean>((resolve) => {
      const socket = net.connect({ host: '127.0.0.1', port }, () => {
        socket.destroy();
        resolve(false);
      });
      socket.on('error', () => resolve(true));
    });
    t.ok(refused, `port ${port} is closed after stop()`);
  }
});
