// The cluster-wide OnlineCounter with real worker processes: after a burst of logins and
// logouts, and a worker killed with SIGKILL, `<root>/online` matches the sessions still logged
// in (its users are distinct users per worker). Each worker counts on its registry's ZooKeeper
// session (one per process).

import t from 'tap';
import { ZooKeeperOnlineCounter } from '../../src/registry/zk-online-counter.js';
import { ZooKeeperRegistry } from '../../src/registry/zk-registry.js';
import { silentLogger } from '../../src/log.js';
import { startZooKeeper } from '../helpers/zookeeper.js';
import { until } from '../../testkit/wait.js';
import { CLUSTER_ZK_GATE, startCluster, ZK_SESSION_TIMEOUT_MS } from '../helpers/cluster.js';

const zk = await startZooKeeper(t);

t.test('the online counter matches the logged-in sessions', async (t) => {
  const cluster = await startCluster(t, zk, { workers: 3 });
  const [w1, w2, w3] = cluster.live as [typeof cluster.live[0], typeof cluster.live[0], typeof cluster.live[0]];
  // Read as the gate does: with the reader identity the workers grant, on its registry's session.
  const registry = new ZooKeeperRegistry({ connect: zk.connect, root: cluster.root, sessionTimeoutMs: 5_000, auth: CLUSTER_ZK_GATE, nativeLogLevel: 'off', log: silentLogger() });
  t.teardown(() => registry.close());
  await registry.observe();
  const reader = new ZooKeeperOnlineCounter({ zookeeper: registry.zookeeper, selfId: () => '', local: () => ({ users: 0, sessions: 0 }), log: silentLogger() });
  t.teardown(() => reader.close());
  const counts = async () => reader.read();

  // A burst: 6 users on each worker, one of them with a second device on the same worker.
  const clients = [];
  for (const [i, w] of [w1, w2, w3].entries()) {
    for (let u = 0; u < 6; u++) clients.push({ w, c: await cluster.client(w, `u${i}-${u}`) });
    clients.push({ w, c: await cluster.client(w, `u${i}-0`, 'second-device') });
  }
  await until(
    () => 'counter shows 21 sessions, 18 users',
    async () => {
      const c = await counts();
      return c.sessions === 21 && c.users === 18;
    },
  );

  // One ZooKeeper session per worker: its counts node is owned by its registry's session.
  const session = await registry.zookeeper.whenConnected();
  for (const w of [w1, w2, w3]) {
    const own = await session.exists(`${cluster.root}/workers/w-${w.nodeId}`);
    const counted = await session.exists(`${cluster.root}/online-workers/${w.nodeId}`);
    t.ok(own && counted, `${w.name}: its znode and its counts node exist`);
    t.equal(counted?.ephemeralOwner, own?.ephemeralOwner, `${w.name}: both belong to one ZooKeeper session`);
  }

  // Logouts: both devices of u0-0 on w1 (a user and two sessions gone), and the first device
  // of u1-0 on w2 (a session gone, the user still online on the second device).
  const w1Clients = clients.filter((x) => x.w === w1);
  await w1Clients[0]!.c.logout();
  await w1Clients.at(-1)!.c.logout();
  await clients.find((x) => x.w === w2)!.c.logout();
  await until(
    () => 'counter after logouts: 18 sessions, 17 users',
    async () => {
      const c = await counts();
      return c.sessions === 18 && c.users === 17;
    },
  );

  // w3 dies without a word: its 7 sessions (6 users) leave the count with its ZooKeeper session.
  await w3.kill();
  await until(
    () => 'counter without w3: 11 sessions, 11 users',
    async () => {
      const c = await counts();
      return c.sessions === 11 && c.users === 11;
    },
    ZK_SESSION_TIMEOUT_MS + 15_000,
  );
});
