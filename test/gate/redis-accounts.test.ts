// The account takeover after a restart: `switchboard start --redis URL` kept the inboxes in
// Redis but the accounts in memory, so after a restart anyone could sign up with a stored
// user's name, log in and be replayed that user's messages. With --redis the accounts live in
// Redis too. Real Redis, a real `switchboard start` process stopped and started again: the name
// cannot be registered a second time, the old password still logs in (and a new one does not),
// and the stored message reaches the account's owner.

import t, { type Test } from 'tap';
import { CliProcess } from '../helpers/cli-process.js';
import { startRedis } from '../helpers/redis.js';
import { ImClient, type IncomingMessage } from '../../src/client/im-client.js';
import { loginThroughGate, registerThroughGate } from '../../src/client/gate-login.js';

// Four OWASP-cost password hashes and two process starts.
t.setTimeout(120_000);

const ALICE_PASSWORD = 'alice keeps this one';
const BOB_PASSWORD = 'bob has one of his own';

async function start(t: Test, name: string, redisUrl: string): Promise<{ server: CliProcess; gateUrl: string }> {
  const server = new CliProcess(t, name, ['start', '--port', '0', '--gate-port', '0', '--secret', 'redis-accounts-test-secret-of-32-characters', '--redis', redisUrl, '--log-level', 'info']);
  const listening = await server.waitForLog({ msg: 'gate listening' });
  return { server, gateUrl: `http://127.0.0.1:${String(listening.port)}` };
}

async function client(t: Test, gateUrl: string, username: string, password: string): Promise<ImClient> {
  const login = await loginThroughGate(gateUrl, { username, password, deviceId: `${username}-phone` });
  const c = new ImClient({ host: login.worker.host, port: login.worker.port, uid: login.uid, deviceId: `${username}-phone`, token: login.token, retryStrategy: false });
  t.teardown(() => c.close());
  return c;
}

t.test('start --redis: accounts survive a restart with the inboxes they own', async (t) => {
  const redis = await startRedis(t);

  const first = await start(t, 'first start', redis.url);
  await registerThroughGate(first.gateUrl, 'alice', ALICE_PASSWORD);
  await registerThroughGate(first.gateUrl, 'bob', BOB_PASSWORD);
  const bob = await client(t, first.gateUrl, 'bob', BOB_PASSWORD);
  await bob.connect();
  t.match(await bob.send('alice', 'for alice only'), { seq: 1 }, 'stored for alice, who is offline');
  await bob.logout();
  t.same(await first.server.stop(), { code: 0, signal: null }, 'the first process exits 0');

  const second = await start(t, 'second start', redis.url);
  await t.rejects(registerThroughGate(second.gateUrl, 'alice', 'mallory wants in'), { code: 'SB_ERR_USERNAME_TAKEN' }, 'alice cannot be registered again');
  await t.rejects(registerThroughGate(second.gateUrl, 'Alice', 'mallory wants in'), { code: 'SB_ERR_USERNAME_TAKEN' }, 'nor as Alice');
  await t.rejects(loginThroughGate(second.gateUrl, { username: 'alice', password: 'mallory wants in', deviceId: 'x' }), { code: 'SB_ERR_LOGIN_FAILED' }, 'the attacker\'s password does not log in');

  const alice = await client(t, second.gateUrl, 'alice', ALICE_PASSWORD);
  const got: IncomingMessage[] = [];
  alice.on('message', (m) => got.push(m));
  await alice.connect();
  await second.server.waitFor('alice is replayed her message', () => got.length > 0);
  t.match(got, [{ seq: 1, from: 'bob', content: 'for alice only' }], 'the old password logs in, and alice gets what was stored for her');
  await t.rejects(alice.send('mallory', 'x'), { code: 'SB_ERR_UNKNOWN_RECIPIENT' }, 'recipients are checked against the accounts in Redis');
  t.same(await second.server.stop(), { code: 0, signal: null });
});
