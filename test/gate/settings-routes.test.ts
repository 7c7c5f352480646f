// The gate's settings routes (GET/PUT /api/settings, PROTOCOL.md §14) on the real gate (Fastify's
// whole pipeline): the receipts setting of the token's user only. Attacks: no token, a forged
// one, a body that is not the setting, a token of a user without an account, a flood.

import t, { type Test } from 'tap';
import { WebGate, DEFAULT_GATE_LIMITS, type GateLimits } from '../../src/gate/web-gate.js';
import { MemoryUserStore } from '../../src/users/memory-user-store.js';
import { PasswordHasher } from '../../src/auth/password.js';
import { TokenSigner } from '../../src/auth/token.js';
import { StaticRegistry } from '../../src/registry/static-registry.js';
import { silentLogger } from '../../src/log.js';
import { TEST_SECRET } from '../helpers/node.js';
import { MemoryGroupStore } from '../../src/groups/memory-group-store.js';
import { MemoryGroupNotifier } from '../../src/groups/group-notifier.js';

async function gateOn(t: Test, limits: Partial<GateLimits> = {}, groups = new MemoryGroupStore()) {
  const signer = new TokenSigner(TEST_SECRET);
  const users = new MemoryUserStore();
  for (const username of ['alice', 'bob']) await users.create({ username, passwordHash: 'x', createdAt: 1 });
  const gate = new WebGate({
    host: '127.0.0.1',
    port: 0,
    registry: new StaticRegistry(),
    users,
    signer,
    hasher: new PasswordHasher({ N: 2 ** 14, r: 8, p: 1 }),
    registration: true,
    limits: { ...DEFAULT_GATE_LIMITS, ...limits },
    groups: { store: groups, notifier: new MemoryGroupNotifier() },
    log: silentLogger(),
  });
  t.teardown(() => gate.close());
  await gate.app.ready();
  const call = async (method: 'GET' | 'PUT', as: string | null, payload?: unknown, authorization?: string) => {
    const headers: Record<string, string> = authorization ? { authorization } : as === null ? {} : { authorization: `Bearer ${signer.mint({ uid: as, ttlMs: 60_000 })}` };
    const r = await gate.app.inject({ method, url: '/api/settings', headers, ...(payload === undefined ? {} : { payload: payload as object }) });
    const body = JSON.parse(r.body) as Record<string, any>;
    return { status: r.statusCode, body, code: body.error?.code as string | undefined, headers: r.headers };
  };
  return { call, users };
}

t.test("a user reads and changes their own receipts setting, no one else's", async (t) => {
  const { call, users } = await gateOn(t);
  t.same((await call('GET', 'alice')).body, { receipts: true });
  t.same(await call('PUT', 'alice', { receipts: false }).then((r) => [r.status, r.body]), [200, { receipts: false }]);
  t.equal(await users.receipts('alice'), false, 'stored');
  t.equal(await users.receipts('bob'), true, "bob's is his own");
  t.same((await call('GET', 'bob')).body, { receipts: true });
  t.same((await call('PUT', 'alice', { receipts: true })).body, { receipts: true });
  t.equal(await users.receipts('alice'), true);
});

t.test("receipts turned off withdraw the user's shared read positions in every group at once", async (t) => {
  const groups = new MemoryGroupStore();
  const { call } = await gateOn(t, {}, groups);
  const a = await groups.create('alice', 'A', ['bob']);
  const b = await groups.create('bob', 'B', ['alice']);
  const { seq } = await groups.append(a.id, 'bob', '1', Buffer.from('hi'), true);
  await groups.markRead(b.id, 'alice', 1, true);
  await groups.markRead(b.id, 'bob', 1, true);
  t.same(await groups.readCount(a.id, 'alice', seq), { read: 1, of: 1 }, "bob's send shared his position");
  t.equal((await call('PUT', 'bob', { receipts: false })).status, 200);
  t.same(await groups.readCount(a.id, 'alice', seq), { read: 0, of: 1 }, 'withdrawn in A');
  t.same(await groups.readCount(b.id, 'alice', 1), { read: 0, of: 1 }, 'and in B');
  t.same(await groups.readCount(b.id, 'bob', 1), { read: 1, of: 1 }, "alice's stays");
});

t.test('refusals: no token, a bad one, a body that is not the setting, no account', async (t) => {
  const { call, users } = await gateOn(t);
  const none = await call('GET', null);
  t.match([none.status, none.code, none.headers['www-authenticate']], [401, 'SB_ERR_NO_TOKEN', 'Bearer']);
  t.match([(await call('PUT', null, { receipts: false }, 'Bearer forged.token.here')).status], [401]);
  for (const body of [{}, { receipts: 'no' }, { receipts: false, admin: true }, [false]]) {
    const r = await call('PUT', 'alice', body);
    t.same([r.status, r.code], [400, 'SB_ERR_BAD_REQUEST'], JSON.stringify(body));
  }
  t.equal(await users.receipts('alice'), true, 'nothing changed');
  const ghost = await call('PUT', 'ghost', { receipts: false });
  t.same([ghost.status, ghost.code], [404, 'SB_ERR_UNKNOWN_RECIPIENT'], 'a token for a uid without an account');
  t.equal(await users.exists('ghost'), false, 'and no account was made');
});

t.test('a flood past the per-user rate is refused with retry-after; other users are unaffected', async (t) => {
  const { call } = await gateOn(t, { settingsRequests: { max: 3, windowMs: 60_000 } });
  for (let i = 0; i < 3; i++) t.equal((await call('GET', 'alice')).status, 200);
  const refused = await call('PUT', 'alice', { receipts: false });
  t.same([refused.status, refused.code], [429, 'SB_ERR_RATE_LIMITED']);
  t.ok(Number(refused.headers['retry-after']) >= 1);
  t.equal((await call('GET', 'bob')).status, 200, 'bob has his own budget');
});
