// A worker whose Redis cannot serve, in process, on a real redis-server: it does not start (nor
// listen, nor register) while its stores do not answer; with a frozen Redis (SIGSTOP) a send is
// answered with SB_ERR_STORE_UNAVAILABLE within the command timeout and a login is refused with
// SB_ERR_STORE_UNAVAILABLE, not SB_ERR_INTERNAL; the health check marks the worker unready in
// the registry after its failure threshold (logins then refused at once, open sessions kept)
// and ready again once Redis answers. The same with worker processes and ZooKeeper:
// test/cluster/store-outage.test.ts.

import t, { type Test } from 'tap';
import { pino } from 'pino';
import { createNode, type NodeOptions } from '../../src/node.js';
import { RedisInboxStore } from '../../src/inbox/redis-inbox-store.js';
import { RedisSessionStore } from '../../src/session/redis-session-store.js';
import { StoreHealth } from '../../src/server/store-health.js';
import { HeadType } from '../../src/protocol/types.js';
import type { Logger } from '../../src/log.js';
import { TEST_SECRET } from '../helpers/node.js';
import { connect, connectLoggedIn } from '../helpers/raw-client.js';
import { requirePassword, startRedis, type TestRedis } from '../helpers/redis.js';
import { until } from '../../testkit/wait.js';

const TIMEOUT_MS = 300;
/** Well beyond the command timeout: what a client would wait for a frozen Redis without it. */
const ANSWER_MS = 5_000;

function capturingLogger(): { log: Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const log = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
  return { log, lines };
}

function redisStores(url: string) {
  return { inbox: new RedisInboxStore({ url, timeoutMs: TIMEOUT_MS }), store: new RedisSessionStore({ url, timeoutMs: TIMEOUT_MS }) };
}

async function startWorker(t: Test, redis: TestRedis, options: Partial<NodeOptions> = {}) {
  const node = createNode({ host: '127.0.0.1', port: 0, secret: TEST_SECRET, limits: { closeGraceMs: 200 }, ...redisStores(redis.url), ...options });
  const info = await node.start();
  t.teardown(() => node.stop());
  const token = (uid: string) => node.signer.mint({ uid, ttlMs: 60_000 });
  return { node, info, port: info.port, token };
}

t.test('a worker whose stores do not answer does not start: no listener, no registration, stores closed', async (t) => {
  const redis = await startRedis(t);
  await requirePassword(redis, 'the-right-one');
  const url = redis.url.replace('redis://', 'redis://:wrong@');
  const stores = redisStores(url);
  // Without a listener ioredis prints each failed AUTH on the console.
  for (const redis of [stores.inbox.redis, stores.store.redis]) redis.on('error', () => {});
  const node = createNode({ host: '127.0.0.1', port: 0, secret: TEST_SECRET, ...stores });
  t.teardown(() => node.stop());
  await t.rejects(node.start(), { code: 'SB_ERR_STORE_UNAVAILABLE', message: /WRONGPASS/ }, 'start() rejects with SB_ERR_STORE_UNAVAILABLE and the reason');
  t.equal(node.registry.registered(), false, 'not registered');
  t.same(node.registry.workers(), [], 'the registry lists no worker');
  t.equal(node.server.info, undefined, 'it never listened');
  await until('both Redis connections are closed', () => stores.inbox.redis.status === 'end' && stores.store.redis.status === 'end');
  t.pass('the stores were closed');
});

t.test('a frozen Redis: a send gets SB_ERR_STORE_UNAVAILABLE, a login too; both work after the thaw', async (t) => {
  const redis = await startRedis(t);
  // A threshold the test never reaches: the store calls themselves must answer.
  const w = await startWorker(t, redis, { health: { failures: 1_000_000 } });
  const alice = await connectLoggedIn(t, w.port, 'alice', w.token('alice'), 'phone');
  redis.freeze();

  const sent = alice.chat('bob', 'while frozen');
  const response = await alice.response(sent, ANSWER_MS);
  t.equal(response.messageResponse?.result, false, 'the send is refused');
  t.equal(response.messageResponse?.errorCode, 'SB_ERR_STORE_UNAVAILABLE', 'with SB_ERR_STORE_UNAVAILABLE');
  t.equal(alice.isClosed, false, 'the session stays');

  const bob = await connect(t, w.port);
  const refused = await bob.next((m) => m.type === HeadType.LOGIN_RESPONSE, 100).catch(() => undefined);
  t.equal(refused, undefined, '(nothing before the login)');
  bob.send({ type: HeadType.LOGIN_REQUEST, sequence: 1, sessionId: '-1', loginRequest: { uid: 'bob', deviceId: 'phone', token: w.token('bob') } });
  const login = await bob.next((m) => m.type === HeadType.LOGIN_RESPONSE, ANSWER_MS);
  t.equal(login.loginResponse?.result, false, 'the login is refused');
  t.equal(login.loginResponse?.errorCode, 'SB_ERR_STORE_UNAVAILABLE', 'with SB_ERR_STORE_UNAVAILABLE, not SB_ERR_INTERNAL');
  await bob.waitClosed();

  redis.thaw();
  await until('the inbox answers again', () => w.node.inbox.ping().then(() => true, () => false));
  const again = await alice.chatAndWait('bob', 'after the thaw');
  t.equal(again.messageResponse?.result, true, 'sends work again');
  const bob2 = await connectLoggedIn(t, w.port, 'bob', w.token('bob'), 'phone');
  t.ok((await bob2.deliveries(1, ANSWER_MS)).length >= 1, 'logins work again, and the stored message is replayed');
});

t.test('health: unready after the failure threshold (logins refused at once, sessions kept), ready after the thaw', async (t) => {
  const redis = await startRedis(t);
  const { log, lines } = capturingLogger();
  const w = await startWorker(t, redis, { health: { intervalMs: 100, failures: 2 }, log });
  const self = () => w.node.registry.workers().find((x) => x.id === w.info.id);
  t.equal(self()?.ready, true, 'registered ready');
  const alice = await connectLoggedIn(t, w.port, 'alice', w.token('alice'), 'phone');

  redis.freeze();
  await until('the registry lists the worker unready', () => self()?.ready === false);
  const unready = lines.find((l) => l.msg === 'stores do not answer: not ready');
  t.match(unready, { level: 40, component: 'health', ready: false, failures: 2, err: { message: /unavailable/ } }, 'logged once, with the cause');

  const bob = await connect(t, w.port);
  bob.send({ type: HeadType.LOGIN_REQUEST, sequence: 1, sessionId: '-1', loginRequest: { uid: 'bob', deviceId: 'phone', token: w.token('bob') } });
  const login = await bob.next((m) => m.type === HeadType.LOGIN_RESPONSE, ANSWER_MS);
  t.equal(login.loginResponse?.errorCode, 'SB_ERR_STORE_UNAVAILABLE', 'a login is refused with SB_ERR_STORE_UNAVAILABLE');
  t.equal(lines.filter((l) => l.msg === 'login storage failed').length, 0, 'without trying the stores');
  t.equal(alice.isClosed, false, 'the open session is kept');
  t.equal(w.node.server.sessions.size, 1);

  redis.thaw();
  await until('the registry lists the worker ready again', () => self()?.ready === true);
  t.ok(lines.some((l) => l.msg === 'stores answer again: ready' && l.level === 30), 'logged');
  t.equal((await alice.chatAndWait('bob', 'after')).messageResponse?.result, true, 'the kept session sends again');
  await connectLoggedIn(t, w.port, 'bob', w.token('bob'), 'phone');
  t.pass('logins are accepted again');
});

t.test('StoreHealth refuses an interval below 1 ms or a threshold below 1', async (t) => {
  for (const settings of [{ intervalMs: 0 }, { failures: 0 }, { failures: 1.5 }]) {
    t.throws(() => new StoreHealth({ stores: {}, log: pino({ level: 'silent' }), ...settings }), { code: 'SB_ERR_CONFIG' }, JSON.stringify(settings));
  }
});
