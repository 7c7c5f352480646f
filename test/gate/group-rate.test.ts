// The per-user rate limits of the gate's group API (--rate-group-changes, --rate-group-reads), on
// memory stores and on a real Redis: the change past the limit is refused with 429
// SB_ERR_RATE_LIMITED and retry-after and appends nothing; every change route counts; another
// user and reads are unaffected (and reads have a limit of their own); on Redis the counts hold
// across two gates, also for a concurrent flood. Attacks: tokens forged in a victim's name do not
// use up the victim's budget; a rate-limit store that does not answer refuses (503), it does not
// let changes through unlimited.

import t, { type Test } from 'tap';
import { WebGate, DEFAULT_GATE_LIMITS, type GateLimits } from '../../src/gate/web-gate.js';
import { MemoryRateLimitStore } from '../../src/gate/memory-rate-limit-store.js';
import { RedisRateLimitStore } from '../../src/gate/redis-rate-limit-store.js';
import type { RateLimitStore } from '../../src/gate/rate-limit-store.js';
import { MemoryUserStore } from '../../src/users/memory-user-store.js';
import { RedisUserStore } from '../../src/users/redis-user-store.js';
import type { UserStore } from '../../src/users/user-store.js';
import { PasswordHasher } from '../../src/auth/password.js';
import { TokenSigner } from '../../src/auth/token.js';
import { StaticRegistry } from '../../src/registry/static-registry.js';
import { MemoryGroupStore } from '../../src/groups/memory-group-store.js';
import { RedisGroupStore } from '../../src/groups/redis-group-store.js';
import { MemoryGroupNotifier, type GroupChange } from '../../src/groups/group-notifier.js';
import type { GroupStore } from '../../src/groups/group-store.js';
import { GATE_OPTIONS, gateLimitsFrom } from '../../src/cli/common.js';
import { parseOptions } from '../../src/cli/options.js';
import { silentLogger } from '../../src/log.js';
import { TEST_SECRET } from '../helpers/node.js';
import { startRedis } from '../helpers/redis.js';

t.setTimeout(120_000);

const USERS = ['alice', 'bob', 'carol', 'dave'];
const CHANGES = 5;
const READS = 8;
const LIMITS: GateLimits = { ...DEFAULT_GATE_LIMITS, groupChanges: { max: CHANGES, windowMs: 60_000 }, groupReads: { max: READS, windowMs: 60_000 } };

/** What one gate process has: its own connections to the shared stores. */
interface GateStores {
  users: UserStore;
  groups: GroupStore;
  rateLimits: RateLimitStore;
}

/** Stores for one more gate; on Redis every call shares the same keys, in memory they are one set. */
type MakeStores = (t: Test) => Promise<GateStores>;

interface Response {
  status: number;
  body: Record<string, unknown> & { error?: { code: string; message: string }; group?: { id: string; head: number }; seq?: number | null };
  headers: Record<string, unknown>;
}

const signer = new TokenSigner(TEST_SECRET);
const tokenOf = (uid: string) => signer.mint({ uid, ttlMs: 60_000 });

async function startGate(t: Test, stores: GateStores, limits: GateLimits = LIMITS) {
  const published: GroupChange[] = [];
  const notifier = new MemoryGroupNotifier();
  notifier.subscribe({ change: (c) => published.push(c), missed: () => {} });
  const gate = new WebGate({
    host: '127.0.0.1',
    port: 0,
    registry: new StaticRegistry(),
    users: stores.users,
    signer,
    hasher: new PasswordHasher({ N: 2 ** 14, r: 8, p: 1 }),
    registration: true,
    limits,
    rateLimits: stores.rateLimits,
    groups: { store: stores.groups, notifier },
    log: silentLogger(),
  });
  t.teardown(async () => {
    await gate.close();
    await notifier.close();
  });
  await gate.app.ready();
  const call = async (as: string | { token: string }, method: string, url: string, payload?: unknown): Promise<Response> => {
    const token = typeof as === 'string' ? tokenOf(as) : as.token;
    const r = await gate.app.inject({ method: method as 'GET', url, ...(payload === undefined ? {} : { payload: payload as object }), headers: { authorization: `Bearer ${token}` } });
    return { status: r.statusCode, body: r.body === '' ? {} : (JSON.parse(r.body) as Response['body']), headers: r.headers };
  };
  return { gate, call, published };
}

async function withUsers(stores: GateStores): Promise<GateStores> {
  for (const username of USERS) await stores.users.create({ username, passwordHash: 'unused', createdAt: Date.now() });
  return stores;
}

const limited = (r: Response) => ({ status: r.status, code: r.body.error?.code, retryAfter: Number(r.headers['retry-after']) });

/** Every change route once, by `as`, on group `id` (with bob and carol in it). */
function everyChange(call: Awaited<ReturnType<typeof startGate>>['call'], as: string, id: string): [string, Promise<Response>][] {
  return [
    ['create', call(as, 'POST', '/api/groups', { name: 'another' })],
    ['update', call(as, 'PATCH', `/api/groups/${id}`, { name: 'renamed' })],
    ['add', call(as, 'POST', `/api/groups/${id}/members`, { uids: ['dave'] })],
    ['remove', call(as, 'POST', `/api/groups/${id}/members/remove`, { uids: ['carol'] })],
    ['role', call(as, 'PUT', `/api/groups/${id}/members/bob/role`, { role: 'admin' })],
    ['transfer', call(as, 'POST', `/api/groups/${id}/transfer`, { uid: 'bob' })],
    ['leave', call(as, 'POST', `/api/groups/${id}/leave`)],
    ['dissolve', call(as, 'DELETE', `/api/groups/${id}`)],
  ];
}

function suite(t: Test, make: MakeStores): void {
  t.test('the change past the limit is refused with 429 and retry-after, whatever its route, and appends nothing', async (t) => {
    const stores = await withUsers(await make(t));
    const { call, published } = await startGate(t, stores);
    const created = await call('alice', 'POST', '/api/groups', { name: 'team', members: ['bob', 'carol'] });
    t.equal(created.status, 201, 'change 1: create');
    const id = created.body.group!.id;
    for (let i = 2; i <= CHANGES; i++) t.equal((await call('alice', 'PATCH', `/api/groups/${id}`, { name: `name ${i}` })).status, 200, `change ${i}: update`);
    const head = (await stores.groups.get(id, 'alice')).head;
    t.equal(head, CHANGES, 'every admitted change appended its event');
    const before = published.length;

    for (const [what, reply] of everyChange(call, 'alice', id)) {
      const r = await reply;
      t.match(limited(r), { status: 429, code: 'SB_ERR_RATE_LIMITED' }, `${what} past the limit: 429 SB_ERR_RATE_LIMITED`);
      t.ok(r.headers['retry-after'] !== undefined && limited(r).retryAfter >= 1 && limited(r).retryAfter <= 60, `${what}: retry-after in whole seconds within the window (${String(r.headers['retry-after'])})`);
    }
    const after = await stores.groups.get(id, 'alice');
    t.equal(after.head, head, "nothing was appended to the group's log");
    t.match(after, { name: `name ${CHANGES}`, owner: 'alice', memberCount: 3, dissolved: false }, 'nothing changed');
    t.equal((await stores.groups.groupsOf('alice', { limit: 10 })).groups.length, 1, 'the refused create made no group');
    t.equal(published.length, before, 'nothing was published');
  });

  t.test('another user is unaffected; reads are not counted as changes', async (t) => {
    const stores = await withUsers(await make(t));
    const { call } = await startGate(t, stores);
    const id = (await call('alice', 'POST', '/api/groups', { name: 'team', members: ['bob', 'carol'] })).body.group!.id;
    for (let i = 2; i <= CHANGES; i++) await call('alice', 'PATCH', `/api/groups/${id}`, { name: `name ${i}` });
    t.equal((await call('alice', 'PATCH', `/api/groups/${id}`, { name: 'more' })).status, 429, 'alice is at her limit');

    t.equal((await call('bob', 'POST', '/api/groups', { name: "bob's" })).status, 201, 'bob creates');
    const left = await call('bob', 'POST', `/api/groups/${id}/leave`);
    t.equal(left.status, 200, "bob leaves alice's group");
    t.equal(left.body.seq, CHANGES + 1, "bob's change appended to the group alice may not change");

    t.equal((await call('alice', 'GET', `/api/groups/${id}`)).status, 200, 'alice still reads the group');
    t.equal((await call('alice', 'GET', `/api/groups/${id}/members`)).status, 200, 'and its members');
    t.equal((await call('alice', 'GET', '/api/groups')).status, 200, 'and her groups');
  });

  t.test('reads have a limit of their own, which changes do not use', async (t) => {
    const stores = await withUsers(await make(t));
    const { call } = await startGate(t, stores);
    const id = (await call('carol', 'POST', '/api/groups', { name: 'mine' })).body.group!.id;
    const urls = ['/api/groups', `/api/groups/${id}`, `/api/groups/${id}/members`];
    for (let i = 0; i < READS; i++) t.equal((await call('carol', 'GET', urls[i % urls.length]!)).status, 200, `read ${i + 1}`);
    for (const url of urls) t.match(limited(await call('carol', 'GET', url)), { status: 429, code: 'SB_ERR_RATE_LIMITED' }, `GET ${url} past the read limit`);
    const patched = await call('carol', 'PATCH', `/api/groups/${id}`, { name: 'still mine' });
    t.equal(patched.status, 200, 'changes are still admitted (change 2 of her budget)');
    t.equal((await call('bob', 'GET', '/api/groups')).status, 200, "bob's reads are his own");
  });

  t.test('a flood of concurrent changes: exactly the limit gets through', async (t) => {
    const stores = await withUsers(await make(t));
    const { call } = await startGate(t, stores);
    const id = (await call('alice', 'POST', '/api/groups', { name: 'team' })).body.group!.id;
    const replies = await Promise.all(Array.from({ length: 100 }, (_, i) => call('alice', 'PATCH', `/api/groups/${id}`, { name: `flood ${i}` })));
    t.equal(replies.filter((r) => r.status === 200).length, CHANGES - 1, 'the rest of the budget, not one more');
    t.ok(replies.every((r) => r.status === 200 || limited(r).code === 'SB_ERR_RATE_LIMITED'), 'the others refused with SB_ERR_RATE_LIMITED');
    t.equal((await stores.groups.get(id, 'alice')).head, CHANGES, 'the log holds the admitted changes only');
  });

  t.test("attack: tokens forged in alice's name use none of her budget", async (t) => {
    const stores = await withUsers(await make(t));
    const { call } = await startGate(t, stores);
    const forged = { token: new TokenSigner('f'.repeat(32)).mint({ uid: 'alice', ttlMs: 60_000 }) };
    for (let i = 0; i < 3 * CHANGES; i++) t.equal((await call(forged, 'POST', '/api/groups', { name: 'x' })).status, 401);
    for (let i = 0; i < 2 * READS; i++) t.equal((await call(forged, 'GET', '/api/groups')).status, 401);
    for (let i = 1; i <= CHANGES; i++) t.equal((await call('alice', 'POST', '/api/groups', { name: `g${i}` })).status, 201, `alice's change ${i}`);
    t.equal((await call('alice', 'GET', '/api/groups')).status, 200, 'and her reads');
  });

  t.test('the limit ends with its window', async (t) => {
    const stores = await withUsers(await make(t));
    const { call } = await startGate(t, stores, { ...LIMITS, groupChanges: { max: 2, windowMs: 1_000 } });
    t.equal((await call('dave', 'POST', '/api/groups', { name: 'a' })).status, 201);
    t.equal((await call('dave', 'POST', '/api/groups', { name: 'b' })).status, 201);
    const r = await call('dave', 'POST', '/api/groups', { name: 'c' });
    t.match(limited(r), { status: 429, code: 'SB_ERR_RATE_LIMITED', retryAfter: 1 });
    await new Promise((resolve) => setTimeout(resolve, limited(r).retryAfter * 1000 + 50));
    t.equal((await call('dave', 'POST', '/api/groups', { name: 'c' })).status, 201, 'admitted again after retry-after');
  });
}

t.test('on memory stores', async (t) => {
  suite(t, async (t) => {
    const groups = new MemoryGroupStore();
    const rateLimits = new MemoryRateLimitStore();
    t.teardown(async () => {
      await groups.close();
      await rateLimits.close();
    });
    return { users: new MemoryUserStore(), groups, rateLimits };
  });
});

const redis = await startRedis(t);
let n = 0;

/** A gate's own connections to the stores under `keyPrefix` (as node.ts makes them). */
function redisStores(t: Test, keyPrefix: string): GateStores {
  const users = new RedisUserStore({ url: redis.url, keyPrefix });
  const groups = new RedisGroupStore({ url: redis.url, keyPrefix });
  const rateLimits = new RedisRateLimitStore({ url: redis.url, keyPrefix: `${keyPrefix}rl:` });
  t.teardown(async () => {
    await rateLimits.close();
    await groups.close();
    await users.close();
  });
  return { users, groups, rateLimits };
}

t.test('on Redis (RedisRateLimitStore, RedisGroupStore, RedisUserStore)', async (t) => {
  suite(t, async (t) => redisStores(t, `t${++n}:`));

  t.test('two gates on one Redis share the counts: the limit holds across them, concurrently too', async (t) => {
    const keyPrefix = `two${++n}:`;
    const a = await startGate(t, await withUsers(redisStores(t, keyPrefix)));
    const bStores = redisStores(t, keyPrefix);
    const b = await startGate(t, bStores);
    const id = (await a.call('alice', 'POST', '/api/groups', { name: 'team', members: ['bob'] })).body.group!.id;
    t.equal((await b.call('alice', 'PATCH', `/api/groups/${id}`, { name: 'on b' })).status, 200, 'change 2, on gate b');
    t.equal((await a.call('alice', 'PATCH', `/api/groups/${id}`, { name: 'on a' })).status, 200, 'change 3, on gate a');
    const flood = await Promise.all(Array.from({ length: 40 }, (_, i) => (i % 2 ? a : b).call('alice', 'PATCH', `/api/groups/${id}`, { name: `flood ${i}` })));
    t.equal(flood.filter((r) => r.status === 200).length, CHANGES - 3, 'the flood on both gates together gets the rest of the budget');
    t.match(limited(await a.call('alice', 'POST', '/api/groups', { name: 'x' })), { status: 429, code: 'SB_ERR_RATE_LIMITED' }, 'refused on gate a');
    t.match(limited(await b.call('alice', 'POST', '/api/groups', { name: 'x' })), { status: 429, code: 'SB_ERR_RATE_LIMITED' }, 'refused on gate b');
    t.equal((await bStores.groups.get(id, 'alice')).head, CHANGES, 'the log holds the admitted changes only');

    for (let i = 0; i < READS; i++) t.equal((await (i % 2 ? a : b).call('bob', 'GET', `/api/groups/${id}`)).status, 200, `bob's read ${i + 1}`);
    t.equal((await a.call('bob', 'GET', '/api/groups')).status, 429, "bob's reads are counted across both gates");
    t.equal((await b.call('bob', 'POST', `/api/groups/${id}/leave`)).status, 200, 'his changes are not');
  });

  t.test('a rate-limit store that does not answer refuses changes (503), it does not wave them through', async (t) => {
    const stores = await withUsers({ users: new MemoryUserStore(), groups: new MemoryGroupStore(), rateLimits: new MemoryRateLimitStore() });
    const id = (await stores.groups.create('alice', 'team', [], {})).id;
    const dead = new RedisRateLimitStore({ url: redis.url, keyPrefix: 'dead:', timeoutMs: 200 });
    t.teardown(() => dead.close());
    redis.freeze();
    try {
      const { call } = await startGate(t, { ...stores, rateLimits: dead });
      const r = await call('alice', 'PATCH', `/api/groups/${id}`, { name: 'unlimited?' });
      t.match({ status: r.status, code: r.body.error?.code }, { status: 503, code: 'SB_ERR_STORE_UNAVAILABLE' });
    } finally {
      redis.thaw();
    }
    t.equal((await stores.groups.get(id, 'alice')).head, 1, 'nothing appended');
  });
});

t.test('flags: --rate-group-changes and --rate-group-reads (and their variables) set the limits per minute', async (t) => {
  const defaults = gateLimitsFrom(parseOptions(GATE_OPTIONS, [], {}), false);
  t.same([defaults.groupChanges, defaults.groupReads], [{ max: 60, windowMs: 60_000 }, { max: 600, windowMs: 60_000 }], 'defaults: 60 changes and 600 reads a minute');
  const set = gateLimitsFrom(parseOptions(GATE_OPTIONS, ['--rate-group-changes', '7'], { SWITCHBOARD_RATE_GROUP_READS: '70' }), false);
  t.same([set.groupChanges, set.groupReads], [{ max: 7, windowMs: 60_000 }, { max: 70, windowMs: 60_000 }]);
  t.throws(() => parseOptions(GATE_OPTIONS, ['--rate-group-changes', '0'], {}), 'at least 1');
});
