// The gate's login limits as an attacker meets them, on a real gate with its counts in a real
// Redis: wrong passwords from one address lock that address out of that name only; a per-name
// limit bounds guessing spread over many addresses without locking the user out where they
// logged in before; two gates on one Redis count together; X-Forwarded-For names the client
// only when it comes from a configured proxy. Requests go through fastify's inject, which sets
// the socket's remote address.

import t, { type Test } from 'tap';
import { WebGate, DEFAULT_GATE_LIMITS, type GateLimits } from '../../src/gate/web-gate.js';
import { RedisRateLimitStore } from '../../src/gate/redis-rate-limit-store.js';
import type { RateLimitStore } from '../../src/gate/rate-limit-store.js';
import { MemoryUserStore } from '../../src/users/memory-user-store.js';
import { PasswordHasher } from '../../src/auth/password.js';
import { TokenSigner } from '../../src/auth/token.js';
import { StaticRegistry } from '../../src/registry/static-registry.js';
import { silentLogger } from '../../src/log.js';
import { TEST_SECRET } from '../helpers/node.js';
import { startRedis } from '../helpers/redis.js';

const PASSWORD = 'correct horse battery staple';
const CHEAP = { N: 2 ** 10, r: 8, p: 1 };
const hasher = new PasswordHasher(CHEAP);
const redis = await startRedis(t);
let prefixes = 0;

interface Reply {
  status: number;
  retryAfter: number | undefined;
  code: string | undefined;
}

class TestGate {
  constructor(readonly gate: WebGate) {}

  async login(username: string, from: string, password = PASSWORD, xff?: string): Promise<Reply> {
    return this.#post('/api/login', { username, password, deviceId: 'phone' }, from, xff);
  }

  async register(username: string, from: string, xff?: string): Promise<Reply> {
    return this.#post('/api/users', { username, password: PASSWORD }, from, xff);
  }

  async #post(url: string, payload: object, remoteAddress: string, xff?: string): Promise<Reply> {
    const r = await this.gate.app.inject({ method: 'POST', url, payload, remoteAddress, headers: xff ? { 'x-forwarded-for': xff } : {} });
    const retryAfter = r.headers['retry-after'];
    return { status: r.statusCode, retryAfter: retryAfter === undefined ? undefined : Number(retryAfter), code: (r.json() as { error?: { code: string } }).error?.code };
  }
}

interface Setup {
  limits?: Partial<GateLimits>;
  trustProxy?: string[];
  /** Another gate's users and Redis key prefix: the two share accounts and counts. */
  shareWith?: { users: MemoryUserStore; prefix: string };
}

async function startGate(t: Test, setup: Setup = {}): Promise<TestGate & { users: MemoryUserStore; prefix: string; store: RateLimitStore }> {
  const users = setup.shareWith?.users ?? new MemoryUserStore();
  const prefix = setup.shareWith?.prefix ?? `gate-limits-${++prefixes}:`;
  const store = new RedisRateLimitStore({ url: redis.url, keyPrefix: prefix });
  t.teardown(() => store.close());
  const registry = new StaticRegistry();
  await registry.register({ host: '127.0.0.1', port: 1, balance: 0, startedAt: Date.now(), version: 'test', ready: true });
  const gate = new WebGate({
    host: '127.0.0.1',
    port: 0,
    registry,
    users,
    signer: new TokenSigner(TEST_SECRET),
    hasher,
    registration: true,
    // Per-address requests out of the way unless a test sets them: each test sends many from one address.
    limits: { ...DEFAULT_GATE_LIMITS, perIp: { max: 10_000, windowMs: 60_000 }, ...setup.limits },
    rateLimits: store,
    trustProxy: setup.trustProxy,
    log: silentLogger(),
  });
  await gate.app.ready();
  t.teardown(() => gate.close());
  return Object.assign(new TestGate(gate), { users, prefix, store });
}

async function addUser(users: MemoryUserStore, username: string): Promise<void> {
  await users.create({ username, passwordHash: await hasher.hash(PASSWORD), createdAt: Date.now() });
}

const statuses = (replies: Reply[]) => replies.map((r) => r.status);

t.test('10 wrong passwords from address A do not keep the right password out from address B (default limits)', async (t) => {
  const g = await startGate(t, { limits: { perUserIp: DEFAULT_GATE_LIMITS.perUserIp, perUser: DEFAULT_GATE_LIMITS.perUser } });
  await addUser(g.users, 'alice');
  const A = '203.0.113.66';
  const wrong: Reply[] = [];
  for (let i = 0; i < 10; i++) wrong.push(await g.login('alice', A, `guess ${i}`));
  t.same(statuses(wrong), Array(10).fill(401), 'ten wrong passwords from A: ten 401s');
  t.equal((await g.login('alice', A, 'guess 11')).status, 429, 'the eleventh from A is refused before the password is checked');
  const fromB = await g.login('alice', '198.51.100.20');
  t.equal(fromB.status, 200, 'alice logs in from B');
  t.equal((await g.login('alice', '198.51.100.20', 'a typo')).status, 401, 'and a typo of hers from B is an ordinary 401');
});

t.test('the per name and address lock-out: that name from that address (IPv6: its /64), nothing else', async (t) => {
  const g = await startGate(t, { limits: { perUserIp: { max: 3, windowMs: 15 * 60_000 } } });
  await addUser(g.users, 'alice');
  await addUser(g.users, 'bob');
  const A = '203.0.113.7';
  t.same(statuses([await g.login('alice', A, 'x1'), await g.login('alice', A, 'x2'), await g.login('ALICE', A, 'x3')]), [401, 401, 401]);
  const locked = await g.login('alice', A);
  t.equal(locked.status, 429, 'the right password from A is refused now');
  t.equal(locked.code, 'SB_ERR_RATE_LIMITED');
  t.ok(locked.retryAfter! >= 1 && locked.retryAfter! <= 900, `retry-after is within the 15-minute window (${locked.retryAfter} s)`);
  t.equal((await g.login('bob', A)).status, 200, 'another name from A is not affected');
  t.equal((await g.login('alice', '203.0.113.8')).status, 200, 'the name from another address is not affected');

  // IPv6: a host picks a fresh address out of its /64 for every guess; the /64 is one address.
  const v6 = ['2001:db8:1:2::1', '2001:db8:1:2::2', '2001:db8:1:2:ffff::3'];
  t.same(statuses(await Promise.all(v6.map((ip, i) => g.login('bob', ip, `y${i}`)))), [401, 401, 401]);
  t.equal((await g.login('bob', '2001:db8:1:2::99')).status, 429, 'a fourth address of the same /64 is locked out');
  t.equal((await g.login('bob', '2001:db8:1:3::1')).status, 200, 'the next /64 is another address');
  t.equal((await g.login('bob', '::ffff:203.0.113.7')).status, 200, 'an IPv4-mapped address counts as its IPv4 address (A, under its own budget for bob)');
});

t.test('the per-name limit bounds guesses from many addresses, and does not lock the user out of where they logged in before', async (t) => {
  const g = await startGate(t, { limits: { perUserIp: { max: 5, windowMs: 15 * 60_000 }, perUser: { max: 20, windowMs: 3600_000 } } });
  await addUser(g.users, 'alice');
  const home = '198.51.100.10';
  t.equal((await g.login('alice', home)).status, 200, 'alice logs in from home: that address is known for her now');

  // Ten attackers, five guesses each (each within its per-address budget): 50 guesses.
  const replies: Reply[] = [];
  for (let a = 1; a <= 10; a++) for (let i = 0; i < 5; i++) replies.push(await g.login('alice', `203.0.113.${a}`, `guess ${a}.${i}`));
  t.equal(replies.filter((r) => r.status === 401).length, 20, 'exactly 20 passwords were checked: the per-name limit');
  t.equal(replies.filter((r) => r.status === 429).length, 30, 'the other 30 were refused unchecked');

  const elsewhere = await g.login('alice', '192.0.2.77');
  t.equal(elsewhere.status, 429, 'from an address never used by alice, even the right password waits');
  t.ok(elsewhere.retryAfter! >= 1 && elsewhere.retryAfter! <= 3600, `for the rest of the hour at most (${elsewhere.retryAfter} s)`);
  t.equal((await g.login('alice', home)).status, 200, 'from home alice still logs in');
  t.equal((await g.login('alice', home, 'a typo')).status, 401, 'and a typo at home is checked (limited only per name and address)');
});

t.test('two gates on one Redis share every count', async (t) => {
  const one = await startGate(t, { limits: { perIp: { max: 8, windowMs: 60_000 }, perUserIp: { max: 4, windowMs: 15 * 60_000 } } });
  const two = await startGate(t, { limits: { perIp: { max: 8, windowMs: 60_000 }, perUserIp: { max: 4, windowMs: 15 * 60_000 } }, shareWith: one });
  await addUser(one.users, 'alice');
  const A = '203.0.113.9';
  t.same(statuses([await one.login('alice', A, 'x1'), await two.login('alice', A, 'x2'), await one.login('alice', A, 'x3'), await two.login('alice', A, 'x4')]), [401, 401, 401, 401], 'four failures, two at each gate');
  t.equal((await one.login('alice', A)).status, 429, 'the first gate refuses the fifth');
  t.equal((await two.login('alice', A)).status, 429, 'and so does the second');

  // Per address: 6 requests so far from A (4 + 2 refused); 2 more are allowed, at either gate.
  t.equal((await two.register('bob', A)).status, 201);
  t.equal((await one.login('bob', A)).status, 200);
  const over = [await one.login('bob', A), await two.register('carol', A)];
  t.same(statuses(over), [429, 429], 'the ninth and tenth requests from A are refused by both gates');
});

t.test('X-Forwarded-For from an address that is not a configured proxy: it neither bypasses nor poisons the limits', async (t) => {
  for (const trustProxy of [undefined, ['10.0.0.1']]) {
    await t.test(trustProxy ? 'with a proxy configured, from elsewhere' : 'with no proxy configured', async (t) => {
      const g = await startGate(t, { trustProxy, limits: { perIp: { max: 3, windowMs: 60_000 }, perUserIp: { max: 2, windowMs: 15 * 60_000 } } });
      await addUser(g.users, 'alice');
      const attacker = '203.0.113.50';
      const victim = '198.51.100.7';
      // Each request claims another client; the victim's address among them.
      const spoofed = [await g.login('alice', attacker, 'g1', victim), await g.login('alice', attacker, 'g2', '192.0.2.1'), await g.login('alice', attacker, PASSWORD, `${victim}, 192.0.2.2`)];
      t.same(statuses(spoofed), [401, 401, 429], 'no bypass: the per name and address limit counts the attacker, whatever the header says');
      t.equal((await g.login('alice', attacker, PASSWORD, '192.0.2.3')).status, 429, 'no bypass of the per-address limit either');
      t.equal((await g.login('alice', victim)).status, 200, 'no poisoning: the victim named in the headers logs in');
    });
  }
});

t.test('X-Forwarded-For from a configured proxy names the client: each client behind it has its own budget', async (t) => {
  const g = await startGate(t, { trustProxy: ['10.0.0.0/8', 'loopback'], limits: { perIp: { max: 3, windowMs: 60_000 }, perUserIp: { max: 2, windowMs: 15 * 60_000 } } });
  await addUser(g.users, 'alice');
  const proxy = '10.0.0.1';
  t.same(statuses([await g.login('alice', proxy, 'g1', '203.0.113.1'), await g.login('alice', proxy, 'g2', '203.0.113.1')]), [401, 401]);
  t.equal((await g.login('alice', proxy, PASSWORD, '203.0.113.1')).status, 429, 'client 203.0.113.1 is locked out of alice');
  t.equal((await g.login('alice', proxy, PASSWORD, '203.0.113.2')).status, 200, 'client 203.0.113.2, behind the same proxy, is not');
  t.equal((await g.login('alice', '127.0.0.1', PASSWORD, '203.0.113.2, 10.0.0.5')).status, 200, 'through two proxies (127.0.0.1, then 10.0.0.5) the client is still 203.0.113.2');
  // What the client puts in the header itself comes first; the proxy appends the address it saw.
  t.equal((await g.login('alice', proxy, PASSWORD, '203.0.113.2, 203.0.113.1')).status, 429, 'a client behind the proxy cannot pose as another: the address the proxy saw counts');
  t.equal((await g.register('bob', proxy, '203.0.113.2')).status, 201, 'registration is counted per client too');
  t.equal((await g.register('carol', proxy, '203.0.113.2')).status, 429, 'the fourth request of 203.0.113.2 is over its per-address limit');
  t.equal((await g.register('carol', proxy, '203.0.113.3')).status, 201, 'another client behind the proxy still registers');
});
