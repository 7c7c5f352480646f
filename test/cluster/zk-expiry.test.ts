// A worker whose ZooKeeper session expires while the worker itself, and its clients, stay up:
// its ZooKeeper traffic goes through a proxy that is cut for longer than the session timeout.
// The others see it leave and purge its sessions from Redis; once ZooKeeper is reachable again
// it registers under the same id, re-publishes its sessions, the others link to it again, and
// messages to its users flow again, live, without them logging in again, including the ones
// stored while the cluster thought the worker was gone.
//
// The route cache TTL is long here (ROUTE_CACHE_TTL_MS): a worker that looked the user up during
// the outage has cached "nowhere", and only the re-registered worker announcing its sessions
// again can make it forward before the TTL is over. Its first inbox re-read (1 s after the
// re-registration) is what delivers the messages stored during the outage; the next one comes
// only a TTL later, so what arrives after the first one arrived by forwarding. The same re-read
// makes the group devices there read their groups: a group entry sent during the outage was
// broadcast to the workers its worker linked to, which x was not.

import t from 'tap';
import { startZooKeeper } from '../helpers/zookeeper.js';
import { ZooKeeperProxy } from '../helpers/zookeeper-proxy.js';
import { sleep, until } from '../../testkit/wait.js';
import { LOGIN_RECHECKS_MS, ZK_SESSION_TIMEOUT_MS, startCluster, type WorkerProcess } from '../helpers/cluster.js';
import { GroupAdmin, groupDevice } from '../helpers/groups.js';

const zk = await startZooKeeper(t);

const ROUTE_CACHE_TTL_MS = 60_000;

t.test('a worker whose ZooKeeper session expired registers again and routing recovers', async (t) => {
  const flags = { 'route-cache-ttl-ms': ROUTE_CACHE_TTL_MS };
  const cluster = await startCluster(t, zk, { workers: 2, flags });
  const [a, b] = cluster.workers as [WorkerProcess, WorkerProcess];
  const proxy = await ZooKeeperProxy.start(t, zk.port);
  const x = await cluster.startWorker({ zk: proxy.connect, flags });
  await cluster.waitForMesh();

  const xena = await cluster.client(x, 'xena');
  const alice = await cluster.client(a, 'alice');
  const bob = await cluster.client(b, 'bob');
  const toXena = xena.got;
  const toAlice = alice.got;
  const sessionId = xena.sessionId;
  const group = await new GroupAdmin(t, cluster.redis.url).create('alice', ['yves']);
  const aliceGroups = await groupDevice(cluster, a, 'alice', 'alice-groups');
  const yves = await groupDevice(cluster, x, 'yves', 'yves-groups');
  await yves.got.atLeast(group, 1);
  // Past the first re-read after login (the second one is a TTL away).
  await sleep(LOGIN_RECHECKS_MS);
  const first = await alice.send('xena', 'before');
  t.match((await toXena.atLeast(1)).at(-1), { content: 'before', seq: first.seq }, 'cross-node delivery works before the expiry');

  // Cut ZooKeeper off for longer than the session timeout: the server expires the session.
  const marks = cluster.workers.map((w) => w.mark());
  const [markA, markB, markX] = marks as [number, number, number];
  proxy.partition();
  await x.waitForLog({ msg: 'zookeeper status', to: 'suspended' }, { from: markX });
  for (const [w, mark] of [
    [a, markA],
    [b, markB],
  ] as const) {
    await w.waitForLog({ msg: 'worker left', peer: x.nodeId }, { from: mark, timeoutMs: ZK_SESSION_TIMEOUT_MS + 10_000 });
    t.pass(`${w.name} saw ${x.name} leave when its session expired`);
  }
  const purge = await a.waitForLog({ msg: 'purged sessions of a departed worker', peer: x.nodeId }, { from: markA });
  t.equal(purge.purged, 2, `the lowest survivor ${a.name} purged xena's and yves's sessions`);
  t.same(await cluster.sessionsOf('xena'), [], 'xena has no session in Redis while the cluster thinks her worker is gone');
  // The cut-off worker keeps its session refresh timer (500 ms here) but must not write back
  // what the others purged: they would route to a worker they no longer link to.
  await sleep(1_200);
  t.same(await cluster.sessionsOf('xena'), [], 'the cut-off worker does not write her session back');
  t.equal(x.logs({ msg: 'zookeeper status', to: 'expired' }, markX).length, 0, 'the cut-off worker cannot know yet');

  // Stored while routing cannot find her: they must still reach her, live, once the worker is
  // back. Worker a has her cached at x (and no link to x); worker b looks her up now and caches
  // that she is nowhere.
  const during = [await alice.send('xena', 'during from a'), await bob.send('xena', 'during from b')];
  t.same(
    during.map((r) => r.seq),
    [first.seq + 1, first.seq + 2],
    'messages sent meanwhile are acknowledged (stored in her inbox)',
  );
  const groupDuring = await aliceGroups.client.sendToGroup(group, 'group during');

  proxy.heal();
  await x.waitForLog({ msg: 'zookeeper status', from: 'suspended', to: 'expired' }, { from: markX });
  const again = await x.waitForLog({ msg: 'registered with zookeeper' }, { from: markX });
  t.equal(again.id, x.nodeId, 'registered again under the same id');
  for (const [w, mark] of [
    [a, markA],
    [b, markB],
  ] as const) {
    const joined = await w.waitForLog({ msg: 'worker joined', peer: x.nodeId }, { from: mark });
    t.match(joined, { port: x.port }, `${w.name} saw ${x.name} join again`);
  }
  await cluster.waitForMesh();
  t.pass('every link is ready again');
  await until('xena is routed to her worker again', async () => (await cluster.sessionsOf('xena')).some((s) => s.nodeId === x.nodeId));
  t.same(
    (await cluster.sessionsOf('xena')).map((s) => ({ nodeId: s.nodeId, sessionId: s.sessionId })),
    [{ nodeId: x.nodeId, sessionId }],
    'her session is re-published in Redis, same session, same worker',
  );
  t.equal(xena.status, 'ready', 'her connection survived all along');
  t.equal(xena.sessionId, sessionId, 'as the same session');

  await toXena.atLeast(3, 10_000);
  t.match(
    toXena.messages.slice(1),
    [
      { content: 'during from a', seq: during[0]!.seq },
      { content: 'during from b', seq: during[1]!.seq },
    ],
    'the messages stored during the outage reached her without a new login',
  );
  t.same(
    (await yves.got.atLeast(group, 2, 10_000)).map((s) => `${s.seq}:${s.what}`),
    ['1:#created', `${groupDuring.seq}:group during`],
    'yves, on the same worker, gets the group entry sent during the outage before any later entry could show the gap',
  );
  await aliceGroups.client.sendToGroup(group, 'group after');
  t.equal((await yves.got.atLeast(group, 3)).at(-1)?.what, 'group after', 'and group entries live again');

  const fromA = await alice.send('xena', 'after from a');
  const fromB = await bob.send('xena', 'after from b');
  await toXena.atLeast(5);
  t.match(
    toXena.messages.slice(-2),
    [
      { content: 'after from a', seq: fromA.seq },
      { content: 'after from b', seq: fromB.seq },
    ],
    'messages from both other workers are delivered live again',
  );
  const reply = await xena.send('alice', 'back');
  t.match((await toAlice.atLeast(1)).at(-1), { content: 'back', seq: reply.seq }, 'and her own messages reach the others');
  t.same(
    toXena.messages.map((m) => m.seq),
    [1, 2, 3, 4, 5],
    'every message once, in order',
  );
});
