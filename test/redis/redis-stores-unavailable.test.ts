// The Redis stores when Redis cannot serve, on a real redis-server: frozen (SIGSTOP: the
// connection stays open and nothing is answered) every call of every store fails with
// SB_ERR_STORE_UNAVAILABLE within the command timeout instead of waiting for the thaw, and works
// again after it; with a wrong password ping() fails with Redis's reason and no trace of the
// password, which ioredis attaches to its AUTH errors.

import t from 'tap';
import { RedisInboxStore } from '../../src/inbox/redis-inbox-store.js';
import { RedisSessionStore } from '../../src/session/redis-session-store.js';
import { RedisUserStore } from '../../src/users/redis-user-store.js';
import { isSwitchboardError } from '../../src/errors.js';
import { createRedisClient } from '../../src/redis/redis-client.js';
import { requirePassword, startRedis } from '../helpers/redis.js';

const TIMEOUT_MS = 300;
/** Far beyond the timeout: a call still pending then hangs (what a frozen Redis did before). */
const HANG_MS = 10_000;

/** The error `call` rejected with; fails the test if it resolved, or had not settled after HANG_MS. */
async function failure(what: string, call: Promise<unknown>): Promise<unknown> {
  let timer: NodeJS.Timeout | undefined;
  const hang = new Promise<'hang'>((resolve) => (timer = setTimeout(() => resolve('hang'), HANG_MS)));
  try {
    const outcome = await Promise.race([call.then(() => 'resolved' as const, (err: unknown) => ({ err })), hang]);
    if (outcome === 'hang') throw new Error(`${what}: still pending after ${HANG_MS} ms`);
    if (outcome === 'resolved') throw new Error(`${what}: resolved`);
    return outcome.err;
  } finally {
    clearTimeout(timer);
  }
}

const record = { sessionId: 's1', uid: 'alice', deviceId: 'phone', nodeId: 'n1', platform: 0, loginAt: 1 };

t.test('a frozen Redis: every store call fails with SB_ERR_STORE_UNAVAILABLE, and works again after the thaw', async (t) => {
  const redis = await startRedis(t);
  const inbox = new RedisInboxStore({ url: redis.url, timeoutMs: TIMEOUT_MS });
  const sessions = new RedisSessionStore({ url: redis.url, timeoutMs: TIMEOUT_MS });
  const users = new RedisUserStore({ url: redis.url, timeoutMs: TIMEOUT_MS });
  t.teardown(() => Promise.all([inbox.close(), sessions.close(), users.close()]));
  await Promise.all([inbox.ping(), sessions.ping(), users.ping()]);
  await sessions.add(record);

  redis.freeze();
  const calls: [string, () => Promise<unknown>][] = [
    ['inbox.append', () => inbox.append({ uid: 'bob', sender: 'alice', msgId: '1', body: Buffer.from('hi') })],
    ['inbox.range', () => inbox.range('bob', 0, 10)],
    ['inbox.cursor', () => inbox.cursor('bob', 'phone')],
    ['inbox.saveCursor', () => inbox.saveCursor('bob', 'phone', 1, 1)],
    ['inbox.ping', () => inbox.ping()],
    ['sessions.add', () => sessions.add({ ...record, sessionId: 's2' })],
    ['sessions.refresh', () => sessions.refresh([record])],
    ['sessions.remove', () => sessions.remove('alice', 's1')],
    ['sessions.byUser', () => sessions.byUser('alice')],
    ['sessions.purgeNode', () => sessions.purgeNode('n9')],
    ['sessions.ping', () => sessions.ping()],
    ['users.create', () => users.create({ username: 'carol', passwordHash: 'h', createdAt: 1 })],
    ['users.get', () => users.get('carol')],
    ['users.exists', () => users.exists('carol')],
    ['users.count', () => users.count()],
    ['users.ping', () => users.ping()],
  ];
  const errors = await Promise.all(calls.map(([what, call]) => failure(what, call())));
  for (const [i, err] of errors.entries()) {
    const what = calls[i]![0];
    t.ok(isSwitchboardError(err) && err.code === 'SB_ERR_STORE_UNAVAILABLE', `${what}: SB_ERR_STORE_UNAVAILABLE (${String(err)})`);
    t.match((err as Error).cause, { message: /timed out/ }, `${what}: the cause is attached`);
  }

  redis.thaw();
  await Promise.all([inbox.ping(), sessions.ping(), users.ping()]);
  t.match(await inbox.append({ uid: 'dave', sender: 'alice', msgId: '1', body: Buffer.from('after') }), { seq: 1, duplicate: false }, 'appends work again');
  t.equal((await sessions.byUser('alice')).length > 0, true, 'the session directory answers again');
  t.equal(await users.create({ username: 'erin', passwordHash: 'h', createdAt: 1 }), true, 'the user store answers again');
});

t.test('a wrong password: ping fails with SB_ERR_STORE_UNAVAILABLE and the reason, never the password', async (t) => {
  const redis = await startRedis(t);
  const rightUrl = await requirePassword(redis, 'the-right-one');
  const url = redis.url.replace('redis://', 'redis://:not-the-password@');
  const stores = [new RedisInboxStore({ url, timeoutMs: TIMEOUT_MS }), new RedisSessionStore({ url, timeoutMs: TIMEOUT_MS }), new RedisUserStore({ url, timeoutMs: TIMEOUT_MS })];
  t.teardown(() => Promise.all(stores.map((s) => s.close())));
  for (const store of stores) {
    const err = (await failure(store.constructor.name, store.ping())) as Error & { code?: string };
    t.equal(err.code, 'SB_ERR_STORE_UNAVAILABLE', `${store.constructor.name}: SB_ERR_STORE_UNAVAILABLE`);
    t.match(err.message, /WRONGPASS/, 'with the reason');
    const everything = JSON.stringify({ ...err, cause: { ...(err.cause as object) } }) + String(err.stack) + String((err.cause as Error).stack);
    t.notMatch(everything, /not-the-password/, 'the error and its cause do not carry the password');
  }
  const authenticated = new RedisUserStore({ url: rightUrl });
  t.teardown(() => authenticated.close());
  await authenticated.ping();
  t.pass('the right password in the URL is answered');
});

t.test('a command timeout below 1 ms is refused with SB_ERR_CONFIG', async (t) => {
  for (const timeoutMs of [0, -1, Number.NaN]) {
    t.throws(() => createRedisClient('redis://127.0.0.1:1', { timeoutMs }), { code: 'SB_ERR_CONFIG' }, String(timeoutMs));
  }
});
