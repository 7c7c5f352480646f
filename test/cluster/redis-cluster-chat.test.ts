// switchboard on a real 3-master Redis Cluster, selected by configuration (`--redis <seeds>
// --redis-cluster`), with real processes. `switchboard start`: users register at its gate, chat
// live and offline, and in a group made through the gate. Two workers and a gate on ZooKeeper,
// on a Redis ACL user limited as documented for a cluster (SWITCHBOARD_ACL and
// CLUSTER_REDIS_COMMANDS, on every node): a message crosses workers by the session records in
// the cluster, is stored for a user who is away and replayed at a gate login, a group made at the
// gate reaches a member on the other worker (the group notifier's pub/sub across the cluster's
// nodes), a crashed worker's sessions are purged from the cluster, and no node refused anything.
// The compiled dist/: `npm run build` first.

import t, { type Test } from 'tap';
import { Redis } from 'ioredis';
import { CliProcess } from '../helpers/cli-process.js';
import { SWITCHBOARD_ACL, startRedisCluster } from '../helpers/redis.js';
import { startZooKeeper } from '../helpers/zookeeper.js';
import { CLUSTER_TOKEN_SECRET, CLUSTER_ZK_GATE_AUTH, TestClient, startCluster, type WorkerProcess } from '../helpers/cluster.js';
import { GroupReceived, groupDevice } from '../helpers/groups.js';
import type { IncomingMessage } from '../../src/client/im-client.js';
import { loginThroughGate, registerThroughGate } from '../../src/client/gate-login.js';
import { GateGroups } from '../../src/client/gate-groups.js';
import { RedisSessionStore } from '../../src/session/redis-session-store.js';
import { RedisUserStore } from '../../src/users/redis-user-store.js';
import { CLUSTER_REDIS_COMMANDS } from '../../src/redis/redis-client.js';
import { until } from '../../testkit/wait.js';

// Processes, ZooKeeper, a Redis Cluster and OWASP-cost password hashes.
t.setTimeout(180_000);

const PASSWORD = 'correct horse battery staple';
const redis = await startRedisCluster(t);
const seeds = redis.seeds.join(',');

/** A client of `username` through the gate's login (`groups` on), recording what it is shown; closed on teardown. */
async function viaGate(t: Test, gateUrl: string, username: string, deviceId: string) {
  const login = await loginThroughGate(gateUrl, { username, password: PASSWORD, deviceId });
  const client = new TestClient({ host: login.worker.host, port: login.worker.port, uid: login.uid, deviceId, token: login.token, groups: true, retryStrategy: false });
  t.teardown(() => client.close());
  const groups = new GroupReceived(client);
  await client.connect();
  return { client, groups, login, gate: new GateGroups(gateUrl, login.token) };
}

t.test('switchboard start --redis <seeds> --redis-cluster: register at its gate, chat, store, replay, a group', async (t) => {
  const server = new CliProcess(t, 'start', ['start', '--port', '0', '--gate-port', '0', '--secret', 'redis-cluster-test-secret-of-32-characters', '--redis', seeds, '--redis-cluster', '--log-level', 'info']);
  const gateUrl = `http://127.0.0.1:${String((await server.waitForLog({ msg: 'gate listening' })).port)}`;
  for (const username of ['alice', 'bob']) t.match(await registerThroughGate(gateUrl, username, PASSWORD), { uid: username }, `${username} registers`);
  const users = new RedisUserStore({ url: { cluster: redis.seeds } });
  t.teardown(() => users.close());
  t.ok((await users.get('alice')) && (await users.get('bob')), 'the accounts are in the cluster');

  const bob = await viaGate(t, gateUrl, 'bob', 'bob-phone');
  t.match(await bob.client.send('alice', 'while you were away'), { seq: 1, ownSeq: 1 }, "stored for alice, who is offline, and bob's own copy (two users' inboxes, two slots)");
  const alice = await viaGate(t, gateUrl, 'alice', 'alice-phone');
  t.match(await alice.client.got.atLeast(1), [{ seq: 1, from: 'bob', content: 'while you were away' }], 'replayed at her login');
  await alice.client.send('bob', 'hello bob');
  t.match(await bob.client.got.atLeast(1), [{ from: 'alice', content: 'hello bob' }], 'live');

  const group = await alice.gate.createGroup('Climbing', ['bob']);
  await until('bob is shown the created event', () => bob.groups.of(group.id).length >= 1);
  t.match(await alice.client.sendToGroup(group.id, 'crag on saturday?'), { seq: 2 });
  await bob.groups.atLeast(group.id, 2);
  t.same(bob.groups.summary(group.id), ['1:#created', '2:crag on saturday?'], 'the group message reaches bob');
  t.same(server.logs((l) => l.level >= 50).map((l) => l.msg), [], 'nothing logged at error level');
  t.same(await server.stop(), { code: 0, signal: null }, 'exits 0');
});

t.test('two workers and a gate on the cluster, on an ACL user: chat across workers, store and replay, a group, a crashed worker purged', async (t) => {
  const zk = await startZooKeeper(t);
  const prefix = 'c2:';
  // The ACL user on every node: a cluster does not share its users.
  const admins = redis.nodes.map((node) => new Redis(node.url, { maxRetriesPerRequest: 1 }));
  t.teardown(() => admins.forEach((a) => a.disconnect()));
  const rules = [...SWITCHBOARD_ACL(prefix, PASSWORD), ...CLUSTER_REDIS_COMMANDS.map((c) => `+${c}`)];
  for (const a of admins) t.equal(await a.call('ACL', 'SETUSER', 'switchboard', ...rules), 'OK');
  const limited = redis.nodes.map((node) => `redis://switchboard:${encodeURIComponent(PASSWORD)}@127.0.0.1:${node.port}`);
  const onCluster = { redis: limited.join(','), 'redis-cluster': true, 'redis-prefix': prefix };
  // The workers' --redis is the cluster's seeds: the harness's own Redis stays unused.
  const cluster = await startCluster(t, zk, { workers: 2, flags: onCluster });
  const [w1, w2] = cluster.workers as [WorkerProcess, WorkerProcess];
  const gate = new CliProcess(t, 'gate', [
    'gate', '--zk', zk.connect, '--zk-root', cluster.root, '--zk-auth', CLUSTER_ZK_GATE_AUTH, '--redis', limited.join(','), '--redis-cluster', '--redis-prefix', prefix,
    '--secret', CLUSTER_TOKEN_SECRET, '--port', '0', '--log-level', 'info',
  ]);
  const gateUrl = `http://127.0.0.1:${String((await gate.waitForLog({ msg: 'gate listening' })).port)}`;
  for (const username of ['carol', 'dave']) await registerThroughGate(gateUrl, username, PASSWORD);
  const sessions = new RedisSessionStore({ url: { cluster: redis.seeds }, keyPrefix: prefix });
  t.teardown(() => sessions.close());

  // Direct logins put them on different workers: the message crosses the peer link.
  const carol = await groupDevice(cluster, w1, 'carol', 'carol-laptop');
  const dave = await groupDevice(cluster, w2, 'dave', 'dave-phone');
  await until('both session records are in the cluster', async () => (await sessions.byUser('carol')).length === 1 && (await sessions.byUser('dave')).length === 1);
  t.match(await sessions.byUser('dave'), [{ nodeId: w2.nodeId, deviceId: 'dave-phone' }], "dave's record names w2");
  await carol.client.send('dave', 'across workers');
  t.match(await dave.client.got.atLeast(1), [{ from: 'carol', content: 'across workers' }], 'from w1 to w2');

  await dave.client.logout();
  await until("dave's session record is removed", async () => (await sessions.byUser('dave')).length === 0);
  for (let i = 1; i <= 3; i++) await carol.client.send('dave', `while away ${i}`);
  const back = await viaGate(t, gateUrl, 'dave', 'dave-tablet');
  await back.client.got.atLeast(4);
  t.same(back.client.got.messages.map((m: IncomingMessage) => m.content), ['across workers', 'while away 1', 'while away 2', 'while away 3'], 'replayed on a new device after a gate login');

  const carolAtGate = new GateGroups(gateUrl, (await loginThroughGate(gateUrl, { username: 'carol', password: PASSWORD, deviceId: 'carol-web' })).token);
  const group = await carolAtGate.createGroup('Launch', ['dave']);
  await until('the workers learnt the group: dave is shown its created event', () => back.groups.of(group.id).length >= 1);
  await carol.client.sendToGroup(group.id, 'go');
  await back.groups.atLeast(group.id, 2);
  t.same(back.groups.summary(group.id), ['1:#created', '2:go'], 'a group message from w1 reaches dave wherever the gate put him');

  // A crashed worker's sessions: the survivor purges them from the cluster.
  const victim = back.login.worker.id === w1.nodeId ? w1 : w2;
  const survivor = victim === w1 ? w2 : w1;
  const erin = await cluster.client(victim, 'erin');
  await until("erin's session record is in the cluster", async () => (await sessions.byUser('erin')).length === 1);
  const mark = survivor.mark();
  await victim.kill();
  await survivor.waitForLog({ msg: 'purged sessions of a departed worker', peer: victim.nodeId }, { from: mark });
  t.same(await sessions.byUser('erin'), [], "the crashed worker's sessions are purged");
  erin.close();
  const errors = [survivor, gate].flatMap((p) => p.logs((l) => l.level >= 50).map((l) => `${p.name}: ${String(l.msg)}`));
  t.same(errors, [], 'nothing logged at error level');
  await gate.stop();
  await survivor.stop();
  const denied = (await Promise.all(admins.map((a) => a.call('ACL', 'LOG') as Promise<unknown[]>))).flat();
  t.same(denied, [], 'the ACL user was refused nothing on any node (ACL LOG)');
});

