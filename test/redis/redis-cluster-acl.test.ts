// A Redis ACL user on a real Redis Cluster (password-protected, 3 masters): the documented rules
// (test/helpers/redis.ts SWITCHBOARD_ACL) plus what the Cluster client sends
// (CLUSTER_REDIS_COMMANDS), set on every node. On that user every store and both notifiers work,
// a key of a slot being migrated is followed (ASK), and no node refuses anything. Each of the
// cluster rules is needed: without CLUSTER SLOTS or CLUSTER INFO nothing works, without ASKING a
// key in a slot being migrated cannot be reached, without CLIENT SETNAME every connection's
// slot-map refresh is refused (ignored by the client, but logged by Redis).

import t from 'tap';
import { Redis } from 'ioredis';
import { CLUSTER_REDIS_COMMANDS } from '../../src/redis/redis-client.js';
import { RedisSessionStore } from '../../src/session/redis-session-store.js';
import { RedisUserStore } from '../../src/users/redis-user-store.js';
import { RedisGroupStore } from '../../src/groups/redis-group-store.js';
import { RedisRateLimitStore } from '../../src/gate/redis-rate-limit-store.js';
import { RedisGroupNotifier } from '../../src/groups/redis-group-notifier.js';
import { RedisRevocationNotifier } from '../../src/users/redis-revocation-notifier.js';
import type { GroupChange } from '../../src/groups/group-notifier.js';
import type { Revocation } from '../../src/users/user-store.js';
import { silentLogger } from '../../src/log.js';
import { SWITCHBOARD_ACL, startRedisCluster } from '../helpers/redis.js';
import { until } from '../../testkit/wait.js';
import type { RedisClusterNode } from '../../testkit/redis-cluster.js';

const ADMIN_PASSWORD = 'cluster-admin-password-for-tests';
const APP_PASSWORD = 'switchboard-cluster-password-for-tests';
const CLUSTER_RULES = CLUSTER_REDIS_COMMANDS.map((c) => `+${c}`);

const cluster = await startRedisCluster(t, { password: ADMIN_PASSWORD });
const admins = new Map(cluster.nodes.map((node) => [node, new Redis(node.url, { maxRetriesPerRequest: 1 })]));
t.teardown(() => admins.forEach((a) => a.disconnect()));
const admin = (node: RedisClusterNode) => admins.get(node)!;

/** ACL SETUSER on every node: a cluster does not share its users. */
async function setUser(name: string, rules: string[]): Promise<void> {
  for (const a of admins.values()) await a.call('ACL', 'SETUSER', name, ...rules);
}

/** What the nodes refused (ACL LOG), as the refused command per entry; only `user`'s if given. */
async function refused(user?: string): Promise<string[]> {
  const logs = await Promise.all([...admins.values()].map((a) => a.call('ACL', 'LOG') as Promise<unknown[][]>));
  const field = (entry: unknown[], name: string) => String(entry[entry.indexOf(name) + 1]);
  return logs.flat().filter((entry) => user === undefined || field(entry, 'username') === user).map((entry) => field(entry, 'object'));
}

const resetLogs = () => Promise.all([...admins.values()].map((a) => a.call('ACL', 'LOG', 'RESET')));
const seedsOf = (user: string) => ({ cluster: cluster.nodes.map((n) => `redis://${user}:${APP_PASSWORD}@127.0.0.1:${n.port}`) });

/**
 * Moves `key`'s slot half way to another master, as a resharding does (the key is on the new
 * one, its slot still the old one's, which answers ASK); `finish` hands the slot over.
 */
async function migrating(key: string): Promise<{ finish: () => Promise<void> }> {
  const from = await cluster.masterOf(key);
  const to = cluster.nodes.find((n) => n !== from && n.alive)!;
  const slot = Number(await admin(from).call('CLUSTER', 'KEYSLOT', key));
  await admin(to).call('CLUSTER', 'SETSLOT', slot, 'IMPORTING', from.id);
  await admin(from).call('CLUSTER', 'SETSLOT', slot, 'MIGRATING', to.id);
  // Every key of the slot (a user's keys share it), as a resharding moves them.
  const keys = (await admin(from).call('CLUSTER', 'GETKEYSINSLOT', slot, 1_000)) as string[];
  t.ok(keys.includes(key));
  t.equal(await admin(from).call('MIGRATE', '127.0.0.1', to.port, '', 0, 5_000, 'AUTH2', 'default', ADMIN_PASSWORD, 'KEYS', ...keys), 'OK', `${keys.join(', ')} moved to ${to.port}`);
  await t.rejects(admin(from).get(key), { message: /^ASK / }, 'its old master answers ASK');
  return { finish: async () => void (await Promise.all([...admins.values()].map((a) => a.call('CLUSTER', 'SETSLOT', slot, 'NODE', to.id)))) };
}

t.test('the documented rules and the cluster rules, on every node: every store and notifier works, ASK is followed, nothing is refused', async (t) => {
  await setUser('switchboard', [...SWITCHBOARD_ACL('sb:', APP_PASSWORD), ...CLUSTER_RULES]);
  await resetLogs();
  const url = seedsOf('switchboard');
  const sessions = new RedisSessionStore({ url });
  const users = new RedisUserStore({ url });
  const groups = new RedisGroupStore({ url });
  const rates = new RedisRateLimitStore({ url });
  const gateGroups = new RedisGroupNotifier({ url, log: silentLogger() });
  const workerGroups = new RedisGroupNotifier({ url, log: silentLogger() });
  const gateRevocations = new RedisRevocationNotifier({ url, log: silentLogger() });
  const workerRevocations = new RedisRevocationNotifier({ url, log: silentLogger() });
  t.teardown(() => Promise.all([sessions, users, groups, rates, gateGroups, workerGroups, gateRevocations, workerRevocations].map((s) => s.close())));

  const changes: GroupChange[] = [];
  const revocations: Revocation[] = [];
  workerGroups.subscribe({ change: (c) => changes.push(c), missed: () => {} });
  workerRevocations.subscribe({ revoked: (r) => revocations.push(r), missed: () => {} });

  const record = (uid: string, sessionId: string) => ({ sessionId, uid, deviceId: `${uid}-phone`, nodeId: 'n1', platform: 1, loginAt: 1 });
  await sessions.refresh([record('alice', 's1'), record('bob', 's2'), record('carol', 's3')]);
  t.equal((await sessions.byUser('bob')).length, 1, 'sessions');
  t.equal(await sessions.remove('carol', 's3'), true);
  t.equal(await sessions.purgeNode('n1'), 2);

  for (const username of ['alice', 'bob', 'zed']) t.equal(await users.create({ username, passwordHash: 'h', createdAt: 1 }), true, `account ${username}`);
  await users.createFamily('alice', { id: 'f1', deviceId: 'phone', tokenHash: 'ab', now: 1, expiresAt: Date.now() + 60_000, maxFamilies: 5 });
  t.equal((await users.families('alice', 2, 0)).length, 1, 'refresh families');
  await users.revoke({ uid: 'bob', deviceId: 'phone', before: 5 }, 60_000);
  t.equal((await users.revocations(['alice', 'bob'])).get('bob')?.devices.get('phone'), 5, 'revocations');

  const g = await groups.create('alice', 'G', ['bob']);
  await groups.append(g.id, 'bob', 'm1', Buffer.from('hi'));
  await groups.markRead(g.id, 'alice', 2, true);
  t.same((await groups.groupsOf('bob', { limit: 10 })).groups, [{ id: g.id, role: 'member' }], 'groups');
  t.equal((await rates.add('fail:alice', 1, 60_000)).count, 1, 'rate limits');

  gateGroups.publish({ group: g.id, seq: 2 });
  gateRevocations.publish({ uid: 'bob', before: 6 });
  await until('the group change and the revocation are heard', () => changes.length > 0 && revocations.length > 0);

  const { finish } = await migrating('sb:user:{zed}');
  t.match(await users.get('zed'), { username: 'zed' }, "a key in a slot being migrated is read on its new master (ASK, ASKING)");
  await finish();
  t.match(await users.get('zed'), { username: 'zed' }, 'and after the slot moved (MOVED)');

  t.same(await refused(), [], 'no node refused anything (ACL LOG is empty everywhere)');
  const app = new Redis(url.cluster[0]!, { maxRetriesPerRequest: 1 });
  t.teardown(() => app.disconnect());
  await t.rejects(app.call('CLUSTER', 'NODES'), { message: /NOPERM/ }, 'the user is still limited: CLUSTER NODES is refused');
  await t.rejects(app.call('CLUSTER', 'SETSLOT', 1, 'STABLE'), { message: /NOPERM/ }, 'and so is changing the cluster');
});

t.test('each cluster rule is needed', async (t) => {
  const without = async (rule: string) => {
    const name = `without-${rule.replace(/\W/g, '')}`;
    await setUser(name, [...SWITCHBOARD_ACL('sb:', APP_PASSWORD), ...CLUSTER_RULES.filter((r) => r !== `+${rule}`)]);
    const store = new RedisUserStore({ url: seedsOf(name), timeoutMs: 1_000, redisOptions: { maxRetriesPerRequest: 1 } });
    store.redis.on('error', () => {});
    t.teardown(() => store.close());
    return store;
  };
  for (const rule of ['cluster|slots', 'cluster|info']) {
    const store = await without(rule);
    await t.rejects(store.get('alice'), { code: 'SB_ERR_STORE_UNAVAILABLE' }, `without ${rule}: nothing works`);
  }

  const noAsking = await without('asking');
  t.match(await noAsking.get('alice'), { username: 'alice' }, 'without asking: a key whose slot stays put is read');
  const { finish } = await migrating('sb:user:{bob}');
  await t.rejects(noAsking.get('bob'), { code: 'SB_ERR_STORE_UNAVAILABLE' }, 'but not one in a slot being migrated');
  await finish();

  const noName = await without('client|setname');
  t.match(await noName.get('alice'), { username: 'alice' }, 'without client|setname: it works');
  await until('the refused CLIENT SETNAME shows in ACL LOG', async () => (await refused('without-clientsetname')).includes('client|setname'));
  t.same([...new Set(await refused('without-clientsetname'))], ['client|setname'], 'and nothing else is refused');
});
