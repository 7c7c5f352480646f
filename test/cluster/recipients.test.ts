// Cluster workers (`switchboard worker --zk --redis`) check recipients against the accounts in
// Redis, where `switchboard gate` keeps them: two real worker processes, real ZooKeeper and
// Redis. A name without an account is refused with SB_ERR_UNKNOWN_RECIPIENT, `Bob` reaches bob
// across workers, and an account made a moment ago is a recipient at once on both workers.

import t from 'tap';
import { startZooKeeper } from '../helpers/zookeeper.js';
import { startCluster, type WorkerProcess } from '../helpers/cluster.js';
import { RedisUserStore } from '../../src/users/redis-user-store.js';

const zk = await startZooKeeper(t);
// The harness lets the tests' users be without accounts; these workers check, as by default.
const cluster = await startCluster(t, zk, { workers: 2, flags: { 'allow-unknown-recipients': false } });
const [a, b] = cluster.workers as [WorkerProcess, WorkerProcess];
const users = new RedisUserStore({ url: cluster.redis.url });
t.teardown(() => users.close());
const register = (username: string) => users.create({ username, passwordHash: 'made by the test', createdAt: Date.now() });

t.test('recipients must have an account in Redis, on every worker', async (t) => {
  await register('alice');
  await register('bob');
  const alice = await cluster.client(a, 'alice');
  const bob = await cluster.client(b, 'bob');

  await t.rejects(alice.send('mallory', 'hello?'), { code: 'SB_ERR_UNKNOWN_RECIPIENT' }, 'no account: refused');
  t.equal(await cluster.inboxHead('mallory'), 0, 'and nothing stored');

  const result = await alice.send('Bob', 'across workers, by any case');
  t.equal(result.seq, 1);
  const [m] = await bob.got.atLeast(1);
  t.match(m, { from: 'alice', to: 'bob', content: 'across workers, by any case' }, 'Bob is bob');

  await t.rejects(bob.send('carol', 'too early'), { code: 'SB_ERR_UNKNOWN_RECIPIENT' });
  await register('carol');
  t.match(await bob.send('carol', 'welcome'), { seq: 1 }, 'an account made a moment ago is a recipient at once');
  t.match(await alice.send('carol', 'from the other worker'), { seq: 2 });
});
