// The Redis GroupStore on a real 3-master Redis Cluster: the shared conformance suite, where a
// group's keys and its members' indexes live on different masters; and every key of a group in
// one slot, every key of a user in another, as the cluster itself reports them.

import t from 'tap';
import { Redis } from 'ioredis';
import { RedisGroupStore, type RedisGroupStoreOptions } from '../../src/groups/redis-group-store.js';
import type { GroupStore } from '../../src/groups/group-store.js';
import { startRedisCluster } from '../helpers/redis.js';
import { groupStoreConformance } from './group-store.conformance.js';

const cluster = await startRedisCluster(t);
const url = { cluster: cluster.seeds };
let n = 0;
const options = new WeakMap<GroupStore, RedisGroupStoreOptions>();
// Each test gets its own key prefix on the one cluster; a twin is a second client of it.
groupStoreConformance(
  t,
  async (limits, now) => {
    const o = { url, limits, keyPrefix: `t${++n}:`, now };
    const store = new RedisGroupStore(o);
    options.set(store, o);
    return store;
  },
  async (store) => new RedisGroupStore(options.get(store)!),
);

t.test("a group's keys share one slot, a user's another: the scripts run where the cluster put them", async (t) => {
  const s = new RedisGroupStore({ url, keyPrefix: 'slots:' });
  t.teardown(() => s.close());
  const g = await s.create('alice', 'G', ['bob', 'carol', 'dave', 'erin']);
  await s.append(g.id, 'bob', '1', Buffer.from('hi'));
  await s.markRead(g.id, 'carol', 2, true);
  await s.leave(g.id, 'dave');
  // Each master's own keys: where the cluster really put them.
  const direct = cluster.nodes.map((node) => new Redis(node.url, { maxRetriesPerRequest: 1 }));
  t.teardown(() => direct.forEach((d) => d.disconnect()));
  const keys = (await Promise.all(direct.map((d) => d.keys('slots:*')))).flat();
  const slotsOf = async (tag: string) => {
    const tagged = keys.filter((k) => k.startsWith(`slots:{${tag}}`));
    t.ok(tagged.length > 0, `keys of {${tag}}: ${tagged.length}`);
    return new Set(await Promise.all(tagged.map((k) => direct[0]!.call('CLUSTER', 'KEYSLOT', k))));
  };
  t.equal((await slotsOf(`g:${g.id}`)).size, 1, "the group's keys: one slot");
  const masters = new Set<number>();
  for (const uid of ['alice', 'bob', 'carol', 'dave', 'erin']) {
    t.equal((await slotsOf(`u:${uid}`)).size, 1, `${uid}'s keys: one slot`);
    masters.add((await cluster.masterOf(`slots:{u:${uid}}:groups`)).port);
  }
  t.ok(masters.size > 1, `the members' indexes are on ${masters.size} masters`);
  t.same((await s.groupsOf('erin', { limit: 10 })).groups, [{ id: g.id, role: 'member' }]);
  t.match(await s.departedOf('dave'), [{ id: g.id, reason: 'left' }]);
});
