// The test harness's Redis Cluster (testkit/redis-cluster.ts): real cluster-enabled servers
// joined by redis-cli, every slot served once startRedisCluster resolves, a key's master the
// node that really holds it; with replicas and a password, a killed master's replica takes its
// slots over and masterOf follows; with fsync, every node keeps an AOF with that policy.

import t from 'tap';
import { Cluster, Redis } from 'ioredis';
import { startRedisCluster } from '../helpers/redis.js';
import { until } from '../../testkit/wait.js';

t.test('3 masters: every slot served, masterOf names the node that holds the key', async (t) => {
  const cluster = await startRedisCluster(t);
  t.equal(cluster.nodes.length, 3);
  t.same(cluster.nodes.map((n) => n.role), ['master', 'master', 'master']);
  t.same(cluster.seeds, cluster.nodes.map((n) => `redis://127.0.0.1:${n.port}`));
  t.equal(new Set(cluster.nodes.map((n) => n.id)).size, 3, 'three node ids');
  const client = new Cluster(cluster.nodes.map((n) => ({ host: '127.0.0.1', port: n.port })));
  t.teardown(() => client.disconnect());
  const keys = ['{alice}:x', '{bob}:x', '{carol}:x', '{dave}:x', '{erin}:x', 'plain'];
  const holders = new Set<number>();
  for (const key of keys) {
    await client.set(key, key);
    const master = await cluster.masterOf(key);
    holders.add(master.port);
    const direct = new Redis(master.url, { maxRetriesPerRequest: 1 });
    t.equal(await direct.get(key), key, `${key}: its master holds it`);
    direct.disconnect();
    for (const other of cluster.nodes.filter((n) => n !== master)) {
      const elsewhere = new Redis(other.url, { maxRetriesPerRequest: 1 });
      await t.rejects(elsewhere.get(key), { message: /^MOVED \d+ 127\.0\.0\.1:(\d+)$/ }, `${key}: another node redirects`);
      elsewhere.disconnect();
    }
  }
  t.ok(holders.size > 1, `the keys spread over ${holders.size} masters`);
});

t.test('a replica each and a password: a killed master fails over, masterOf follows', async (t) => {
  const password = 'cluster password/with:odd@chars';
  const cluster = await startRedisCluster(t, { replicasPerMaster: 1, password, nodeTimeoutMs: 1_000 });
  t.equal(cluster.nodes.length, 6);
  t.equal(cluster.nodes.filter((n) => n.role === 'replica').length, 3);
  t.ok(cluster.seeds.every((s) => s.startsWith(`redis://default:${encodeURIComponent(password)}@`)), 'the URLs carry the password');
  const anonymous = new Redis(cluster.nodes[0]!.port, { maxRetriesPerRequest: 1, lazyConnect: true });
  anonymous.on('error', () => {});
  t.teardown(() => anonymous.disconnect());
  await t.rejects(anonymous.get('k'), { message: /NOAUTH/ }, 'a node refuses a client without it');
  const client = new Cluster(cluster.nodes.map((n) => ({ host: '127.0.0.1', port: n.port })), { redisOptions: { password } });
  t.teardown(() => client.disconnect());
  await client.set('{alice}:x', 'kept');
  const before = await cluster.masterOf('{alice}:x');
  await until('the write reached the replica', async () => {
    const replicas = cluster.nodes.filter((n) => n.role === 'replica');
    const values = await Promise.all(replicas.map(async (r) => {
      const c = new Redis(r.url, { maxRetriesPerRequest: 1 });
      try {
        await c.call('READONLY');
        return await c.get('{alice}:x').catch(() => null);
      } finally {
        c.disconnect();
      }
    }));
    return values.includes('kept');
  });
  await before.kill();
  t.equal(before.alive, false);
  await until('a replica took over the slot', async () => (await cluster.masterOf('{alice}:x').catch(() => before)) !== before, 20_000);
  const after = await cluster.masterOf('{alice}:x');
  t.equal(after.role, 'replica', 'the new master was a replica');
  await until('the cluster client reads it from the new master', async () => (await client.get('{alice}:x').catch(() => null)) === 'kept', 20_000);
});

t.test('fsync: every node appends to its AOF with that policy', async (t) => {
  const cluster = await startRedisCluster(t, { fsync: 'everysec' });
  for (const node of cluster.nodes) {
    const client = new Redis(node.url, { maxRetriesPerRequest: 1 });
    t.teardown(() => client.disconnect());
    t.same(await client.call('CONFIG', 'GET', 'appendonly'), ['appendonly', 'yes'], `${node.port}: AOF on`);
    t.same(await client.call('CONFIG', 'GET', 'appendfsync'), ['appendfsync', 'everysec'], `${node.port}: fsync everysec`);
  }
});
