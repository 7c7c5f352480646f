// RedisRevocationNotifier on a real 3-master Redis Cluster: a gate's revocations reach a worker's
// notifier whatever node each is on (Redis forwards a PUBLISH to every node), also when
// published on a node other than the subscription's; junk is ignored; a killed subscription
// comes back on another node and reports missed() (the workers then check every session).

import t from 'tap';
import { Redis } from 'ioredis';
import type { RevocationListener } from '../../src/users/revocation-notifier.js';
import { RedisRevocationNotifier } from '../../src/users/redis-revocation-notifier.js';
import type { Revocation } from '../../src/users/user-store.js';
import { silentLogger } from '../../src/log.js';
import { startRedisCluster } from '../helpers/redis.js';
import { until } from '../../testkit/wait.js';

function recorder(): RevocationListener & { heard: Revocation[]; misses: number } {
  const r = { heard: [] as Revocation[], misses: 0, revoked: (x: Revocation) => void r.heard.push(x), missed: () => void r.misses++ };
  return r;
}

t.test('across the nodes of a cluster: heard wherever published; a killed subscription reports missed() from another node', async (t) => {
  const cluster = await startRedisCluster(t);
  const direct = cluster.nodes.map((node) => new Redis(node.url, { maxRetriesPerRequest: 1 }));
  t.teardown(() => direct.forEach((d) => d.disconnect()));
  const url = { cluster: cluster.seeds };
  const gate = new RedisRevocationNotifier({ url, keyPrefix: 'p:', log: silentLogger() });
  const worker = new RedisRevocationNotifier({ url, keyPrefix: 'p:', log: silentLogger() });
  t.teardown(() => Promise.all([gate.close(), worker.close()]));
  const r = recorder();
  worker.subscribe(r);
  /** The index of the one node that holds the subscription. */
  const holder = async () => {
    const counts = await Promise.all(direct.map(async (d) => ((await d.call('PUBSUB', 'NUMSUB', 'p:revocations')) as [string, number])[1]));
    return counts.filter((c) => c > 0).length === 1 ? counts.findIndex((c) => c > 0) : -1;
  };
  await until('subscribed on one node', async () => (await holder()) >= 0);
  const home = await holder();
  const other = direct.find((_, i) => i !== home)!;
  await other.publish('p:revocations', 'junk');
  await other.publish('p:revocations', JSON.stringify({ u: 'carol', b: 7 }));
  gate.publish({ uid: 'alice', deviceId: 'phone', before: 42 });
  await until('heard', () => r.heard.length === 2);
  t.same(
    [...r.heard].sort((a, b) => a.before - b.before),
    [{ uid: 'carol', before: 7 }, { uid: 'alice', deviceId: 'phone', before: 42 }],
    'from another node and from the gate notifier; the junk ignored',
  );
  t.equal(r.misses, 0);
  await direct[home]!.call('CLIENT', 'KILL', 'TYPE', 'pubsub');
  await until('missed() once the subscription is back', () => r.misses === 1);
  await until('subscribed again, on another node', async () => ![-1, home].includes(await holder()));
  await direct[home]!.publish('p:revocations', JSON.stringify({ u: 'bob', b: 43 }));
  await until('heard again', () => r.heard.length === 3);
  t.same(r.heard[2], { uid: 'bob', before: 43 }, 'published on the node it left');
});
