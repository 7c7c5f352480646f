// Token revocation and key rotation across a real cluster: worker processes on ZooKeeper and
// Redis and a `switchboard gate` process. An operator's revoke at the gate closes the user's
// sessions on every worker at once (Redis pub/sub); a revocation whose announcement is lost
// (recorded in the store only) is found by the workers' periodic check within
// --revocation-check-ms; and the token keys rotate with no outage: tokens of the old key log in
// until the key is retired, then they are refused naming its id.

import t, { type Test } from 'tap';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startZooKeeper } from '../helpers/zookeeper.js';
import { until } from '../../testkit/wait.js';
import { CLUSTER_ZK_GATE_AUTH, TestClient, startCluster, type TestCluster, type WorkerProcess } from '../helpers/cluster.js';
import { GateProcess, startGate } from '../helpers/gate-process.js';
import { RedisUserStore } from '../../src/users/redis-user-store.js';
import { TokenSigner } from '../../src/auth/token.js';
import type { GateLogin } from '../../src/client/gate-login.js';
import type { SwitchboardError } from '../../src/errors.js';

t.setTimeout(240_000);

const zk = await startZooKeeper(t);
const PASSWORD = 'correct horse battery staple';
const ADMIN = 'cluster-test-admin-credential-of-32-characters';
const dir = mkdtempSync(join(tmpdir(), 'sb-revocation-'));
const file = (name: string, text: string) => {
  const path = join(dir, name);
  writeFileSync(path, text, { mode: 0o600 });
  return path;
};
const adminFile = file('admin', `${ADMIN}\n`);

/** A client of `uid` on `worker` with `token`, recording how its connection ends. */
async function on(t: Test, worker: WorkerProcess, uid: string, deviceId: string, token: string) {
  const client = new TestClient({ host: '127.0.0.1', port: worker.port, uid, deviceId, token, retryStrategy: false });
  const ends: string[] = [];
  client.on('disconnect', ({ reason }) => ends.push(reason.code));
  client.on('error', () => {});
  t.teardown(() => client.close());
  await client.connect();
  return { client, ends };
}

/** The code a login with `token` on `worker` is refused with (or 'ok'), and the message. */
async function attempt(t: Test, worker: WorkerProcess, uid: string, deviceId: string, token: string): Promise<{ code: string; message: string }> {
  const client = new TestClient({ host: '127.0.0.1', port: worker.port, uid, deviceId, token, retryStrategy: false });
  t.teardown(() => client.close());
  return client.connect().then(
    () => (client.close(), { code: 'ok', message: '' }),
    (err: SwitchboardError) => ({ code: err.code, message: err.message }),
  );
}

async function account(gate: GateProcess, username: string, deviceId: string): Promise<GateLogin> {
  await gate.post('/api/users', { username, password: PASSWORD });
  const login = await gate.post<GateLogin>('/api/login', { username, password: PASSWORD, deviceId });
  if (login.status !== 200) throw new Error(`login of ${username}: ${login.status} ${JSON.stringify(login.body)}`);
  return login.body;
}

t.test("an operator's revoke at the gate closes the user's sessions on every worker at once", async (t) => {
  // The periodic check is a minute away: only the announcement can close them within the wait.
  const cluster = await startCluster(t, zk, { workers: 2, flags: { 'revocation-check-ms': 60_000 } });
  const [w1, w2] = cluster.workers as [WorkerProcess, WorkerProcess];
  const gate = await startGate(t, cluster, { flags: ['--admin-token-file', adminFile] });
  const phone = await account(gate, 'alice', 'phone');
  const laptop = (await gate.post<GateLogin>('/api/login', { username: 'alice', password: PASSWORD, deviceId: 'laptop' })).body;
  const bob = await account(gate, 'bob', 'phone');
  const sessions = [await on(t, w1, 'alice', 'phone', phone.token), await on(t, w2, 'alice', 'laptop', laptop.token)];
  const bobSession = await on(t, w2, 'bob', 'phone', bob.token);

  const response = await fetch(new URL('/api/admin/users/alice/revoke', gate.url), { method: 'POST', headers: { authorization: `Bearer ${ADMIN}` } });
  t.equal(response.status, 200, 'the operator revokes alice');
  await until('both of alice\'s sessions closed, one on each worker', () => sessions.every((s) => s.ends.includes('SB_ERR_TOKEN_REVOKED')), 15_000);
  t.equal((await attempt(t, w2, 'alice', 'phone', phone.token)).code, 'SB_ERR_TOKEN_REVOKED', 'an access token issued before is refused on another worker too');
  t.equal(bobSession.client.status, 'ready', 'bob stays');
  t.match(await w1.waitForLog({ msg: 'revoked sessions closed', uid: 'alice' }), { closed: 1 }, 'the worker logs what it closed');
});

t.test('a revocation whose announcement was lost is found by the periodic check', async (t) => {
  const cluster: TestCluster = await startCluster(t, zk, { workers: 2, flags: { 'revocation-check-ms': 500 } });
  const [w1, w2] = cluster.workers as [WorkerProcess, WorkerProcess];
  const gate = await startGate(t, cluster);
  const login = await account(gate, 'carol', 'phone');
  const tablet = (await gate.post<GateLogin>('/api/login', { username: 'carol', password: PASSWORD, deviceId: 'tablet' })).body;
  const phone = await on(t, w1, 'carol', 'phone', login.token);
  const other = await on(t, w2, 'carol', 'tablet', tablet.token);
  // Recorded as the gate records it, but never published: as if every worker missed the message.
  const users = new RedisUserStore({ url: cluster.redis.url });
  t.teardown(() => users.close());
  await users.revoke({ uid: 'carol', deviceId: 'phone', before: Date.now() }, 86_400_000);
  await until('the phone session closed by the periodic check', () => phone.ends.includes('SB_ERR_TOKEN_REVOKED'), 15_000);
  t.match(await w1.waitForLog({ msg: 'revoked sessions closed by the periodic check' }), { closed: 1 }, 'by the periodic check');
  t.equal(other.client.status, 'ready', "a device revocation leaves the user's other device alone");
});

t.test('token keys rotate with no outage: add, switch the signer, retire', async (t) => {
  const k1 = 'first-token-key-of-at-least-32-characters';
  const k2 = 'second-token-key-of-at-least-32-characters';
  const both = file('keys-both', `# old first\nk1 ${k1}\nk2 ${k2}\n`);
  const onlyNew = file('keys-new', `k2 ${k2}\n`);
  // Step 1: every worker accepts both keys (k1 still signs at the gate).
  const cluster = await startCluster(t, zk, { workers: 1, flags: { secret: false, 'token-keys': both } });
  const gateArgs = (keys: string, signing: string) => ['gate', '--zk', zk.connect, '--zk-root', cluster.root, '--zk-auth', CLUSTER_ZK_GATE_AUTH, '--redis', cluster.redis.url, '--port', '0', '--log-level', 'info', '--token-keys', keys, '--token-signing-key', signing];
  const oldGate = await new GateProcess(t, 'gate-k1', gateArgs(both, 'k1')).started();
  const old = await account(oldGate, 'dave', 'phone');
  t.equal(new TokenSigner({ signing: 'k1', keys: { k1, k2 } }).verify(old.token).keyId, 'k1', 'the gate signs with k1');
  // Step 2: the gate switches to k2.
  const newGate = await new GateProcess(t, 'gate-k2', gateArgs(both, 'k2')).started();
  const fresh = (await newGate.post<GateLogin>('/api/login', { username: 'dave', password: PASSWORD, deviceId: 'laptop' })).body;
  t.equal(new TokenSigner({ signing: 'k2', keys: { k2 } }).verify(fresh.token).keyId, 'k2', 'now with k2');
  const [w1] = cluster.workers as [WorkerProcess];
  t.equal((await attempt(t, w1, 'dave', 'phone', old.token)).code, 'ok', 'a token of the old key still logs in');
  t.equal((await attempt(t, w1, 'dave', 'laptop', fresh.token)).code, 'ok', 'and one of the new key');
  // Step 4 (after the access lifetime): k1 is retired on the workers.
  const retired = await cluster.startWorker({ flags: { secret: false, 'token-keys': onlyNew } });
  t.equal((await attempt(t, retired, 'dave', 'laptop', fresh.token)).code, 'ok', 'the new key logs in on a worker without k1');
  const refused = await attempt(t, retired, 'dave', 'phone', old.token);
  t.equal(refused.code, 'SB_ERR_TOKEN_INVALID', 'a token of the retired key is refused');
  t.match(refused.message, /unknown key id "k1"/, 'naming its key id');
});
