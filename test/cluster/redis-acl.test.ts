// Redis AUTH and ACL users with real processes: a Redis started with requirepass, and an ACL
// user limited to switchboard's key prefix and to the commands switchboard sends (the line
// OPERATIONS.md documents). Two workers and a gate on that user register users, log them in,
// chat across workers, store for an offline user and replay; the user really is limited (keys
// outside the prefix and other commands are refused); no password reaches a log line, also
// when Redis refuses it.

import t, { type Test } from 'tap';
import { Redis } from 'ioredis';
import { startZooKeeper } from '../helpers/zookeeper.js';
import { SWITCHBOARD_ACL, startRedis, type TestRedis } from '../helpers/redis.js';
import { until } from '../../testkit/wait.js';
import { CLUSTER_PEER_SECRET, CLUSTER_TOKEN_SECRET, CLUSTER_ZK_GATE_AUTH, TestClient, startCluster, type WorkerProcess } from '../helpers/cluster.js';
import { CliProcess } from '../helpers/cli-process.js';
import { RedisInboxStore } from '../../src/inbox/redis-inbox-store.js';
import { RedisUserStore } from '../../src/users/redis-user-store.js';
import { RedisGroupStore } from '../../src/groups/redis-group-store.js';
import { RedisGroupNotifier } from '../../src/groups/redis-group-notifier.js';
import type { GroupChange } from '../../src/groups/group-notifier.js';
import { errSerializer, silentLogger } from '../../src/log.js';
import type { GateLogin } from '../../src/client/gate-login.js';

t.setTimeout(240_000);

const zk = await startZooKeeper(t);
const ADMIN_PASSWORD = 'redis-admin-password-for-tests';
const APP_PASSWORD = 'switchboard-redis-password-for-tests';
const ACCOUNT_PASSWORD = 'correct horse battery staple';

function urlOf(redis: TestRedis, user: string, password: string): string {
  return `redis://${user}:${encodeURIComponent(password)}@127.0.0.1:${redis.port}`;
}

async function client(t: Test, url: string): Promise<Redis> {
  const redis = new Redis(url, { maxRetriesPerRequest: 1, lazyConnect: true });
  redis.on('error', () => {}); // refusals are asserted on the commands
  t.teardown(() => redis.disconnect());
  await redis.connect();
  return redis;
}

/** Redis's own error word (NOAUTH, NOPERM, ...), also from under a store's SB_ERR_STORE_UNAVAILABLE. */
const refusal = (call: Promise<unknown>) => call.then(() => 'allowed', (err: Error) => ((err.cause as Error | undefined)?.message ?? err.message).split(' ')[0]);

/** Every log line and stderr byte of these processes: none may hold a password. */
function leaks(processes: { name: string; text: string }[], secrets: string[]): string[] {
  return processes.flatMap((p) => secrets.filter((s) => p.text.includes(s) || p.text.includes(encodeURIComponent(s))).map((s) => `${p.name} printed ${s}`));
}

t.test('requirepass: the stores work with the password in the URL and are refused without', async (t) => {
  const redis = await startRedis(t, [], { password: ADMIN_PASSWORD });
  const inbox = new RedisInboxStore({ url: redis.url });
  t.teardown(() => inbox.close());
  t.match(await inbox.append({ uid: 'alice', sender: 'bob', msgId: 'm1', body: Buffer.from('hi') }), { seq: 1, duplicate: false }, 'an append with redis://default:<password>@ works');
  t.equal((await inbox.range('alice', 0, 10)).messages.length, 1, 'and so does a read');
  const users = new RedisUserStore({ url: `redis://127.0.0.1:${redis.port}`, redisOptions: { maxRetriesPerRequest: 1 } });
  users.redis.on('error', () => {});
  t.teardown(() => users.close());
  t.equal(await refusal(users.count()), 'NOAUTH', 'without the password: NOAUTH');
});

t.test('an ACL user limited to the key prefix and the commands: two workers and a gate do everything on it', async (t) => {
  const redis = await startRedis(t, [], { password: ADMIN_PASSWORD });
  const admin = await client(t, redis.url);
  t.equal(await admin.call('ACL', 'SETUSER', 'switchboard', ...SWITCHBOARD_ACL('sb:', APP_PASSWORD)), 'OK', 'ACL SETUSER switchboard ... as documented');
  await admin.set('other-app:secret', 'not yours');
  const url = urlOf(redis, 'switchboard', APP_PASSWORD);
  // A small inbox, so that appends prune too.
  const cluster = await startCluster(t, zk, { workers: 2, redis: { ...redis, url }, flags: { 'inbox-max-messages': 5 } });
  const [w1, w2] = cluster.workers as [WorkerProcess, WorkerProcess];
  const gate = new CliProcess(t, 'gate', [
    'gate', '--zk', zk.connect, '--zk-root', cluster.root, '--zk-auth', CLUSTER_ZK_GATE_AUTH, '--redis', url,
    '--secret', CLUSTER_TOKEN_SECRET, '--port', '0', '--log-level', 'info',
  ]);
  const listening = await gate.waitForLog({ msg: 'gate listening' });
  const gateUrl = `http://127.0.0.1:${String(listening.port)}`;
  const post = async <T>(path: string, body: unknown) => {
    const response = await fetch(new URL(path, gateUrl), { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    return { status: response.status, body: (await response.json()) as T };
  };

  for (const username of ['alice', 'bob']) {
    t.equal((await post('/api/users', { username, password: ACCOUNT_PASSWORD })).status, 201, `${username} registers (the gate's user store)`);
  }
  const login = async (username: string, deviceId: string): Promise<TestClient> => {
    const r = await post<GateLogin>('/api/login', { username, password: ACCOUNT_PASSWORD, deviceId });
    t.equal(r.status, 200, `${username} logs in through the gate`);
    const c = new TestClient({ host: r.body.worker.host, port: r.body.worker.port, token: r.body.token, uid: r.body.uid, deviceId, retryStrategy: false });
    t.teardown(() => c.close());
    await c.connect();
    return c;
  };
  // The gate's group API on this user: the group store's scripts and the notifier's PUBLISH.
  const aliceLogin = await post<GateLogin>('/api/login', { username: 'alice', password: ACCOUNT_PASSWORD, deviceId: 'alice-web' });
  const created = await fetch(new URL('/api/groups', gateUrl), {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${aliceLogin.body.token}` },
    body: JSON.stringify({ name: 'Launch', members: ['bob'] }),
  });
  t.equal(created.status, 201, 'the gate creates a group (RedisGroupStore, RedisGroupNotifier)');
  const { group } = (await created.json()) as { group: { id: string } };
  const added = await fetch(new URL(`/api/groups/${group.id}/members/remove`, gateUrl), {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${aliceLogin.body.token}` },
    body: JSON.stringify({ uids: ['bob'] }),
  });
  t.equal(added.status, 200, 'and changes it');
  // The token lifecycle's scripts and its PUBLISH: a refresh rotates the family, a logout ends it and revokes the device.
  const refreshed = await post<GateLogin>('/api/refresh', { refreshToken: aliceLogin.body.refreshToken });
  t.equal(refreshed.status, 200, 'a refresh (RedisUserStore family script)');
  t.equal((await post('/api/logout', { refreshToken: refreshed.body.refreshToken })).status, 200, 'a logout (the revocation script, PUBLISH on sb:revocations)');
  // Direct logins place them on different workers: the message crosses a peer link.
  const alice = await cluster.client(w1, 'alice', 'alice-laptop');
  const bob = await cluster.client(w2, 'bob', 'bob-phone');
  await alice.send('bob', 'across workers');
  t.match(await bob.got.atLeast(1), [{ from: 'alice', content: 'across workers' }], 'chat across workers (sessions and inboxes in Redis)');
  await bob.logout();
  for (let i = 1; i <= 3; i++) await alice.send('bob', `while away ${i}`);
  t.equal(await cluster.inboxHead('bob'), 4, 'stored for bob while he is offline');
  const back = await login('bob', 'bob-tablet');
  await back.got.atLeast(4);
  t.same(
    back.got.messages.map((m) => m.content),
    ['across workers', 'while away 1', 'while away 2', 'while away 3'],
    'replayed on a new device after a gate login',
  );
  await until('the session records of both are in Redis', async () => (await cluster.sessionsOf('alice')).length === 1 && (await cluster.sessionsOf('bob')).length === 1);
  // Appends trim an inbox to its limit when its head passes a multiple of 16 (OPERATIONS.md),
  // without reading it: entries starting 31 seqs or more below the first kept go (an entry holds
  // up to 32; here one message each). At 64, to 29..64, and the age check (every 64) reads the first.
  for (let i = 1; i <= 64; i++) await alice.send('frank', `pruned ${i}`);
  const inbox = new RedisInboxStore({ url });
  t.teardown(() => inbox.close());
  t.match(await inbox.range('frank', 0, 0), { head: 64, oldest: 29 }, 'a full inbox is pruned to its limit (5) in Redis itself (read here without the limit)');
  // A crashed worker's sessions are purged by the survivor.
  await cluster.client(w2, 'erin');
  const mark = w1.mark();
  await w2.kill();
  await w1.waitForLog({ msg: 'purged sessions of a departed worker', peer: w2.nodeId }, { from: mark });
  t.same(await cluster.sessionsOf('erin'), [], "the crashed worker's sessions are purged");

  const denied = (await admin.call('ACL', 'LOG')) as unknown[];
  t.same(denied, [], 'switchboard itself was refused nothing: ACL LOG is empty');

  // The ACL is real: outside the prefix, and any other command, is refused.
  const app = await client(t, url);
  t.equal(await refusal(app.get('other-app:secret')), 'NOPERM', "reading another application's key: NOPERM");
  t.equal(await refusal(app.set('other-app:secret', 'mine')), 'NOPERM', "writing it: NOPERM");
  t.equal(await refusal(app.del('other-app:secret')), 'NOPERM', 'deleting it: NOPERM');
  t.equal(await refusal(app.eval("return redis.call('GET', KEYS[1])", 1, 'other-app:secret')), 'NOPERM', 'through a script: NOPERM');
  t.match(
    await app.eval("return redis.call('FLUSHALL')", 0).then(() => 'allowed', (err: Error) => err.message),
    /can't run this command/,
    'a command outside the set, inside a script: refused',
  );
  for (const [what, call] of [
    ['KEYS *', () => app.keys('*')],
    ['FLUSHALL', () => app.flushall()],
    ['CONFIG GET', () => app.call('CONFIG', 'GET', 'requirepass')],
    ['ACL LIST', () => app.call('ACL', 'LIST')],
    ['PUBLISH outside the channel prefix', () => app.call('PUBLISH', 'other-app:channel', 'x')],
    ['SUBSCRIBE outside the channel prefix', () => app.call('SUBSCRIBE', 'other-app:channel')],
  ] as const) {
    t.equal(await refusal(call()), 'NOPERM', `${what}: NOPERM`);
  }
  t.equal(await refusal(app.call('PUBLISH', 'sb:groups', 'not a change')), 'allowed', 'PUBLISH on its own channel is allowed');
  t.equal(await refusal(app.get('sb:{alice}:seq')), 'allowed', 'its own keys are allowed');
  t.equal(await admin.get('other-app:secret'), 'not yours', "the other application's key is untouched");
  const keys = await admin.keys('*');
  t.same(keys.filter((k) => !k.startsWith('sb:') && k !== 'other-app:secret'), [], `every key switchboard wrote starts with sb: (${keys.length - 1} keys)`);
  t.ok(((await admin.call('ACL', 'LOG')) as unknown[]).length > 0, 'Redis logged those refusals (ACL LOG)');

  await gate.stop();
  for (const w of cluster.workers) await w.stop();
  const printed = [...cluster.workers.map((w) => ({ name: w.name, text: JSON.stringify(w.lines) + w.tail() })), { name: 'gate', text: gate.stdout + gate.stderr }];
  t.same(leaks(printed, [APP_PASSWORD, ADMIN_PASSWORD]), [], 'no password in any log line');
});

t.test('the group store and the group notifier under the documented ACL user: create, add, append, read, notify', async (t) => {
  const redis = await startRedis(t, [], { password: ADMIN_PASSWORD });
  const admin = await client(t, redis.url);
  t.equal(await admin.call('ACL', 'SETUSER', 'switchboard', ...SWITCHBOARD_ACL('sb:', APP_PASSWORD)), 'OK');
  const url = urlOf(redis, 'switchboard', APP_PASSWORD);
  const groups = new RedisGroupStore({ url, limits: { maxEntries: 3, dedupeEntries: 2 } });
  t.teardown(() => groups.close());
  const workerSide = new RedisGroupNotifier({ url, log: silentLogger() });
  const gateSide = new RedisGroupNotifier({ url, log: silentLogger() });
  t.teardown(() => workerSide.close());
  t.teardown(() => gateSide.close());
  const heard: GroupChange[] = [];
  let missed = 0;
  workerSide.subscribe({ change: (c) => heard.push(c), missed: () => void missed++ });
  await until('the worker side is subscribed to sb:groups', async () => ((await admin.call('PUBSUB', 'NUMSUB', 'sb:groups')) as [string, number])[1] === 1);
  const g = await groups.create('alice', 'G', ['bob']);
  gateSide.publish({ group: g.id, seq: g.head, added: ['alice', 'bob'] });
  const { seq } = await groups.addMembers(g.id, 'alice', ['carol']);
  gateSide.publish({ group: g.id, seq: seq!, added: ['carol'] });
  for (let i = 1; i <= 4; i++) await groups.append(g.id, 'bob', `m${i}`, Buffer.from(`hello ${i}`));
  t.match(await groups.append(g.id, 'bob', 'm4', Buffer.from('again')), { duplicate: true }, 'a resent message is found');
  t.equal((await groups.read(g.id, 'carol', 0, 10)).entries.length, 3, 'read, pruned to maxEntries');
  await until('both changes heard', () => heard.length === 2);
  t.same(heard, [{ group: g.id, seq: 1, added: ['alice', 'bob'] }, { group: g.id, seq: 2, added: ['carol'] }]);
  await admin.call('CLIENT', 'KILL', 'TYPE', 'pubsub');
  await until('missed() once the subscription is back under the ACL user', () => missed === 1);
  t.same((await admin.call('ACL', 'LOG')) as unknown[], [], 'nothing was refused');
});

t.test('a custom --redis-prefix: the workers and the gate keep to it, under a user limited to it', async (t) => {
  const redis = await startRedis(t, [], { password: ADMIN_PASSWORD });
  const admin = await client(t, redis.url);
  await admin.call('ACL', 'SETUSER', 'tenant2', ...SWITCHBOARD_ACL('tenant2:', APP_PASSWORD));
  const url = urlOf(redis, 'tenant2', APP_PASSWORD);
  const cluster = await startCluster(t, zk, { workers: 1, redis: { ...redis, url }, flags: { 'redis-prefix': 'tenant2:' } });
  const [w1] = cluster.workers as [WorkerProcess];
  const gate = new CliProcess(t, 'gate', [
    'gate', '--zk', zk.connect, '--zk-root', cluster.root, '--zk-auth', CLUSTER_ZK_GATE_AUTH, '--redis', url, '--redis-prefix', 'tenant2:',
    '--secret', CLUSTER_TOKEN_SECRET, '--port', '0', '--log-level', 'info',
  ]);
  const listening = await gate.waitForLog({ msg: 'gate listening' });
  const registered = await fetch(`http://127.0.0.1:${String(listening.port)}/api/users`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: 'carol', password: ACCOUNT_PASSWORD }) });
  t.equal(registered.status, 201, 'the gate registers a user');
  const carol = await cluster.client(w1, 'carol');
  const dave = await cluster.client(w1, 'dave');
  await carol.send('dave', 'hello');
  t.match(await dave.got.atLeast(1), [{ from: 'carol', content: 'hello' }], 'the worker stores and delivers');
  const keys = await admin.keys('*');
  t.ok(keys.length > 0 && keys.every((k) => k.startsWith('tenant2:')), `every key starts with tenant2: (${keys.join(', ')})`);
  t.same((await admin.call('ACL', 'LOG')) as unknown[], [], 'and nothing was refused');
});

t.test('a refused Redis password never reaches a log line', async (t) => {
  const redis = await startRedis(t, [], { password: ADMIN_PASSWORD });
  const wrong = 'a-wrong-password-that-must-not-leak';
  const url = urlOf(redis, 'default', wrong);
  const worker = new CliProcess(t, 'worker with a wrong Redis password', [
    'worker', '--port', '0', '--zk', zk.connect, '--zk-root', `/sb-redis-wrong-${process.pid}`, '--redis', url, '--secret', CLUSTER_TOKEN_SECRET,
    '--cluster-secret', CLUSTER_PEER_SECRET, '--zk-auth', 'sb-worker:zk-password-for-tests', '--log-level', 'info',
  ]);
  const line = await worker.waitForLog({ msg: 'redis connection error' });
  t.match(line.err, { message: /WRONGPASS/ }, 'Redis refused it, and the worker logged that');
  t.match(line.err, { command: { name: 'auth' } }, 'naming the command');
  t.notOk('args' in ((line.err as { command?: object }).command ?? {}), 'without its arguments');
  const gate = new CliProcess(t, 'gate with a wrong Redis password', [
    'gate', '--zk', zk.connect, '--zk-root', `/sb-redis-wrong-${process.pid}`, '--zk-auth', 'sb-gate:zk-gate-password-for-tests', '--redis', url,
    '--secret', CLUSTER_TOKEN_SECRET, '--port', '0', '--log-level', 'info',
  ]);
  t.match((await gate.waitForLog({ msg: 'redis connection error', store: 'users' })).err, { message: /WRONGPASS/ }, 'the gate logs it too');
  await worker.stop();
  await gate.stop();
  const printed = [worker, gate].map((p) => ({ name: p.name, text: p.stdout + p.stderr }));
  t.same(leaks(printed, [wrong, 'zk-password-for-tests', 'zk-gate-password-for-tests']), [], 'neither the Redis nor the ZooKeeper passwords are printed');

  // The serializer on its own: a URL's password is masked wherever an error carries it.
  const err = Object.assign(new Error(`cannot reach redis://app:${wrong}@10.0.0.1:6379`), { command: { name: 'auth', args: ['app', wrong] } });
  const out = JSON.stringify(errSerializer(err));
  t.notMatch(out, wrong, 'errSerializer drops command arguments and masks URL passwords');
  t.match(out, 'redis://app:[redacted]@10.0.0.1:6379');
});
