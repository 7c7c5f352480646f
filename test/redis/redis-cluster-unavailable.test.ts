// The Redis stores on a real Redis Cluster that cannot serve: with a master frozen (SIGSTOP)
// every call on its slots fails with SB_ERR_STORE_UNAVAILABLE within the command timeout, and
// works again after the thaw; with every node gone, calls fail within the timeout too instead of
// waiting in the Cluster client's own queue for a node to come back.

import t, { type Test } from 'tap';
import { RedisSessionStore } from '../../src/session/redis-session-store.js';
import { RedisUserStore } from '../../src/users/redis-user-store.js';
import { RedisGroupStore } from '../../src/groups/redis-group-store.js';
import { RedisRateLimitStore } from '../../src/gate/redis-rate-limit-store.js';
import { isSwitchboardError } from '../../src/errors.js';
import { startRedisCluster } from '../helpers/redis.js';
import { until } from '../../testkit/wait.js';

const TIMEOUT_MS = 300;
/** Far beyond the timeout: a call still pending then hangs. */
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

const cluster = await startRedisCluster(t);
const url = { cluster: cluster.seeds };
const sessions = new RedisSessionStore({ url, timeoutMs: TIMEOUT_MS });
const users = new RedisUserStore({ url, timeoutMs: TIMEOUT_MS });
const groups = new RedisGroupStore({ url, timeoutMs: TIMEOUT_MS });
const rates = new RedisRateLimitStore({ url, timeoutMs: TIMEOUT_MS });
for (const store of [sessions, users, groups, rates]) store.redis.on('error', () => {});
t.teardown(() => Promise.all([sessions.close(), users.close(), groups.close(), rates.close()]));

const record = { sessionId: 's1', uid: 'alice', deviceId: 'phone', nodeId: 'n1', platform: 0, loginAt: 1 };

type Call = [what: string, key: string, call: () => Promise<unknown>];

/** Every kind of call on alice's keys (and her group's, and a rate-limit key), with the key it touches. */
function calls(group: string): Call[] {
  return [
    ['sessions.add', 'sb:{alice}:sess', () => sessions.add({ ...record, sessionId: 's2' })],
    ['sessions.byUser', 'sb:{alice}:sess', () => sessions.byUser('alice')],
    ['sessions.remove', 'sb:{alice}:sess', () => sessions.remove('alice', 's1')],
    ['users.get', 'sb:user:{alice}', () => users.get('alice')],
    ['users.revocations', 'sb:revoked:{alice}', () => users.revocations(['alice'])],
    ['groups.append', `sb:{g:${group}}:log`, () => groups.append(group, 'alice', '1', Buffer.from('hi'))],
    ['groups.groupsOf', 'sb:{u:alice}:groups', () => groups.groupsOf('alice', { limit: 10 })],
    ['rates.add', 'sb:rl:fail:alice', () => rates.add('fail:alice', 1, 60_000)],
  ];
}

async function allUnavailable(t: Test, list: Call[], cause: RegExp): Promise<void> {
  const errors = await Promise.all(list.map(([what, , call]) => failure(what, call())));
  for (const [i, err] of errors.entries()) {
    const what = list[i]![0];
    t.ok(isSwitchboardError(err) && err.code === 'SB_ERR_STORE_UNAVAILABLE', `${what}: SB_ERR_STORE_UNAVAILABLE (${String(err)})`);
    t.match((err as Error).cause, { message: cause }, `${what}: the cause is attached`);
  }
}

t.test('a frozen master: calls on its slots fail within the timeout, and work again after the thaw', async (t) => {
  await users.create({ username: 'alice', passwordHash: 'h', createdAt: 1 });
  await sessions.add(record);
  const master = await cluster.masterOf('sb:user:{alice}');
  // A group of alice's whose keys are on that master too (ids are drawn at random).
  let group = '';
  while (group === '') {
    const g = await groups.create('alice', 'G');
    if ((await cluster.masterOf(`sb:{g:${g.id}}:log`)) === master) group = g.id;
  }
  const frozen: Call[] = [];
  for (const call of calls(group)) if ((await cluster.masterOf(call[1])) === master) frozen.push(call);
  t.ok(frozen.length >= 3, `${frozen.map(([what]) => what).join(', ')}: on that master`);
  master.process.kill('SIGSTOP');
  try {
    await allUnavailable(t, frozen, /timed out/);
  } finally {
    master.process.kill('SIGCONT');
  }
  await until('the stores answer again', async () => (await users.get('alice').catch(() => undefined)) !== undefined);
  t.match(await groups.append(group, 'alice', '2', Buffer.from('after')), { duplicate: false }, 'appends work again');
  t.ok((await sessions.byUser('alice')).length > 0, 'the session directory answers again');
});

// Last: it ends the cluster.
t.test('every node gone: calls fail within the timeout, not when a node is back', async (t) => {
  const g = await groups.create('alice', 'H');
  await cluster.kill();
  await allUnavailable(t, calls(g.id), /timed out|Connection is closed|None of startup nodes/);
  // Then the Cluster clients reconnect, queueing what they are sent until a node answers: the
  // calls must fail within the timeout all the same.
  const stores = [sessions, users, groups, rates];
  await until('the clients are reconnecting', async () => {
    await Promise.all(stores.map((s) => s.redis.ping().catch(() => {})));
    return stores.every((s) => s.redis.status !== 'ready');
  });
  await allUnavailable(t, calls(g.id), /timed out/);
});
