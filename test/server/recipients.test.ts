// Recipients where the worker knows the accounts (a UserStore): the attack wrote to invented
// names, each one a new inbox nobody could ever read. Now a name without an account is refused
// with UNKNOWN_RECIPIENT (11) and nothing is stored; names are folded as user names are, so
// `Alice` reaches alice; a user who registered a moment ago is reachable at once; the lookup of
// a recipient not yet known keeps the order of the sender's responses. Without a UserStore any
// id is a recipient, as written.

import t, { type Test } from 'tap';
import { pino } from 'pino';
import { once } from 'node:events';
import { startNode, type TestNode } from '../helpers/node.js';
import { startRedis } from '../helpers/redis.js';
import { isType, u64, type RawClient } from '../../testkit/raw-client.js';
import { connectLoggedIn } from '../helpers/raw-session.js';
import { HeadType, ResultCode } from '../../src/protocol/types.js';
import { MemoryUserStore } from '../../src/users/memory-user-store.js';
import { RedisUserStore } from '../../src/users/redis-user-store.js';
import type { UserStore } from '../../src/users/user-store.js';
import { RecipientCheck } from '../../src/server/recipients.js';
import { decodeStoredRequest } from '../../src/protocol/codec.js';

async function register(users: UserStore, ...names: string[]): Promise<void> {
  for (const username of names) await users.create({ username, passwordHash: 'unused', createdAt: Date.now() });
}

async function withAccounts(t: Test, ...names: string[]): Promise<{ tn: TestNode; users: MemoryUserStore }> {
  const users = new MemoryUserStore();
  await register(users, ...names);
  const tn = await startNode(t, {}, { users });
  return { tn, users };
}

t.test('a recipient without an account is refused with UNKNOWN_RECIPIENT; nothing is stored', async (t) => {
  const { tn } = await withAccounts(t, 'alice', 'bob');
  const alice = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'));
  const bob = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'));
  for (const to of ['mallory', 'victim-1', 'no', 'x'.repeat(33), 'a b', 'bob@example', 'ålice']) {
    const response = (await alice.chatAndWait(to, 'hello?')).messageResponse;
    t.match(response, { result: false, code: ResultCode.UNKNOWN_RECIPIENT, errorCode: 'SB_ERR_UNKNOWN_RECIPIENT' }, `${JSON.stringify(to).slice(0, 40)} refused`);
    t.equal((await tn.node.inbox.range(to, 0, 0)).head, 0, 'no inbox made');
  }
  t.equal((await alice.chatAndWait('bob', 'hi bob')).messageResponse?.result, true, 'a user with an account is a recipient');
  t.equal((await bob.next(isType(HeadType.MESSAGE_REQUEST))).messageRequest?.content, 'hi bob');
  t.equal(alice.isClosed, false, 'a refusal does not close the connection');
});

t.test('names are folded as user names: @Alice reaches alice', async (t) => {
  const { tn } = await withAccounts(t, 'alice', 'bob');
  const alice = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'));
  const bob = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'));
  for (const to of ['Alice', 'ALICE', 'alice']) {
    t.equal((await bob.chatAndWait(to, `to ${to}`)).messageResponse?.result, true, `${to} accepted`);
    const delivered = (await alice.next(isType(HeadType.MESSAGE_REQUEST))).messageRequest;
    t.equal(delivered?.content, `to ${to}`, `${to} reached alice`);
    t.equal(delivered?.to, 'alice', 'delivered with the uid as recipient');
  }
  t.equal((await tn.node.inbox.range('alice', 0, 0)).head, 3, 'all three in alice\'s inbox');
  t.equal((await tn.node.inbox.range('Alice', 0, 0)).head, 0, 'none in an inbox nobody can read');
});

t.test('a user who registered a moment ago is reachable at once', async (t) => {
  const { tn, users } = await withAccounts(t, 'alice');
  const alice = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'));
  t.equal((await alice.chatAndWait('carol', 'early')).messageResponse?.errorCode, 'SB_ERR_UNKNOWN_RECIPIENT');
  await register(users, 'carol');
  t.equal((await alice.chatAndWait('carol', 'welcome')).messageResponse?.result, true, 'the refusal was not remembered');
  t.equal((await tn.node.inbox.range('carol', 0, 10)).messages.length, 1);
});

t.test('the lookups of new recipients keep the order of the responses', async (t) => {
  const { tn, users } = await withAccounts(t, 'alice', 'bob');
  const alice = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'));
  await alice.chatAndWait('bob', 'bob is known from now on');
  await register(users, 'u-1', 'u-2', 'u-3', 'u-4');
  const plan = ['u-1', 'bob', 'u-2', 'nobody-1', 'bob', 'u-3', 'nobody-2', 'u-4', 'u-1', 'bob'];
  const sequences = plan.map((to, i) => alice.chat(to, `m${i}`));
  await alice.roundTrip();
  const responses = alice.takeResponses();
  t.same(
    responses.map((m) => Number(u64(m.sequence))),
    sequences,
    'one response per message, in the order sent',
  );
  t.same(
    responses.map((m) => m.messageResponse?.result ?? false),
    plan.map((to) => !to.startsWith('nobody')),
  );
});

t.test('without a UserStore any id is a recipient, as written', async (t) => {
  const tn = await startNode(t);
  const alice = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'));
  for (const to of ['Alice', 'x', 'opaque:id/42']) t.equal((await alice.chatAndWait(to, 'hi')).messageResponse?.result, true, `${to} accepted`);
  t.equal((await tn.node.inbox.range('Alice', 0, 0)).head, 1, 'stored under the id as written');
  t.equal((await tn.node.inbox.range('alice', 0, 0)).head, 3, "alice's inbox holds only her own copies");
  t.same((await tn.node.inbox.range('alice', 0, 10)).messages.map((m) => decodeStoredRequest(m.body).to), ['Alice', 'x', 'opaque:id/42']);
});

t.test('the known-users cache is bounded; a forgotten user is looked up again', async (t) => {
  const users = new MemoryUserStore();
  await register(users, 'aaa', 'bbb', 'ccc');
  const check = new RecipientCheck(users, 2);
  for (const uid of ['aaa', 'bbb', 'ccc']) t.equal(await check.exists(uid), true);
  t.equal(check.size, 2, 'at most 2 remembered');
  t.notOk(check.known('aaa'), 'the oldest forgotten');
  t.ok(check.known('ccc'));
  t.equal(await check.exists('aaa'), true, 'looked up again');
  t.equal(await check.exists('zzz'), false);
  t.notOk(check.known('zzz'), 'a user that does not exist is never remembered');
});

t.test('a user store that cannot answer: SB_ERR_STORE_UNAVAILABLE for new recipients, known ones still served', async (t) => {
  const redis = await startRedis(t);
  const users = new RedisUserStore({ url: redis.url, redisOptions: { maxRetriesPerRequest: 0, enableOfflineQueue: false, retryStrategy: () => 1000 } });
  users.redis.on('error', () => {});
  if (users.redis.status !== 'ready') await once(users.redis, 'ready');
  await register(users, 'alice', 'bob', 'carol');
  const lines: Record<string, unknown>[] = [];
  const log = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
  const tn = await startNode(t, {}, { users, log });
  const alice: RawClient = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'));
  t.equal((await alice.chatAndWait('bob', 'before')).messageResponse?.result, true);
  await redis.kill();
  const down = (await alice.chatAndWait('carol', 'during')).messageResponse;
  t.match(down, { result: false, errorCode: 'SB_ERR_STORE_UNAVAILABLE', info: /could not be looked up/ }, 'carol, not yet known, cannot be checked');
  t.ok(lines.some((l) => l.msg === 'recipient lookup failed'), 'logged');
  t.equal((await alice.chatAndWait('bob', 'during')).messageResponse?.result, true, 'bob, known to exist, is still a recipient');
  t.equal(alice.isClosed, false);
});
