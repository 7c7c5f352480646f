// A Redis Cluster node that answers CLUSTERDOWN for a while (cluster_state:fail: with
// cluster-require-full-coverage, the default, every node does from when a master is flagged
// failed until its replica is elected): a call waits it out within the store's timeout and
// succeeds, rather than failing when the Cluster client has used up its redirections (ioredis
// counts each retry as one: 16 × 100 ms).

import t from 'tap';
import { Redis } from 'ioredis';
import { RedisUserStore } from '../../src/users/redis-user-store.js';
import { startRedisCluster } from '../helpers/redis.js';
import { sleep, until } from '../../testkit/wait.js';

/** The store's bound: beyond the time the cluster is down here. */
const TIMEOUT_MS = 5_000;
/** How long the node answers CLUSTERDOWN. */
const DOWN_MS = 2_500;

t.test('a master down (CLUSTERDOWN) for less than the timeout: a call on its slots waits it out and succeeds', async (t) => {
  const cluster = await startRedisCluster(t);
  const users = new RedisUserStore({ url: { cluster: cluster.seeds }, timeoutMs: TIMEOUT_MS });
  users.redis.on('error', () => {});
  t.teardown(() => users.close());
  await users.create({ username: 'alice', passwordHash: 'h', createdAt: 1 });
  const master = await cluster.masterOf('sb:user:{alice}');
  const admin = new Redis(master.url, { maxRetriesPerRequest: 1 });
  t.teardown(() => admin.disconnect());
  // Another slot of alice's master, unassigned there: with full coverage required, the master
  // answers CLUSTERDOWN to everything (what every node does while a failed master's replica is
  // elected), quickly, as a cluster does, until the slot is back.
  const slot = Number(await admin.call('CLUSTER', 'KEYSLOT', 'sb:user:{alice}'));
  const ranges = (await admin.call('CLUSTER', 'SLOTS')) as [number, number, [string, number]][];
  const [start, end] = ranges.find(([, , [, port]]) => port === master.port)!;
  const other = slot === start ? end : start;
  await admin.call('CLUSTER', 'DELSLOTS', other);
  t.teardown(() => admin.call('CLUSTER', 'ADDSLOTS', other).catch(() => {}));
  await until('alice\'s master says the cluster is down', async () => /cluster_state:fail/.test(String(await admin.call('CLUSTER', 'INFO'))), 5_000, 20);
  const downAt = Date.now();
  const call = users.get('alice').then(
    (user) => ({ user, at: Date.now() }),
    (err: unknown) => ({ err, at: Date.now() }),
  );
  await sleep(DOWN_MS);
  await admin.call('CLUSTER', 'ADDSLOTS', other);
  const outcome = await call;
  t.match(outcome, { user: { username: 'alice' } }, `answered once the master served again (${'err' in outcome ? String(outcome.err) : 'no error'})`);
  t.ok(outcome.at - downAt >= DOWN_MS, `after the ${DOWN_MS} ms it was down (${outcome.at - downAt} ms)`);
});
