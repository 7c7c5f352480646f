// The gate's group API, on the real gate (Fastify's whole pipeline: hooks, schemas, the error
// handler) with memory stores and with Redis stores (a real Redis, RedisGroupNotifier): create,
// list, get, members paging, add and remove by admins and the owner, roles, transfer, update,
// dissolve, and a refusal of each kind with its code and HTTP status; every change that appended
// an event is published with its {group, seq, added}. Attacks: forged group ids, a member of one
// group acting on another, a flood of creates up to --group-max-per-user, oversized bodies.
// Last, the composition root's gate over real HTTP (createSwitchboard), memory and Redis.

import t, { type Test } from 'tap';
import { WebGate, DEFAULT_GATE_LIMITS } from '../../src/gate/web-gate.js';
import { MemoryUserStore } from '../../src/users/memory-user-store.js';
import { RedisUserStore } from '../../src/users/redis-user-store.js';
import type { UserStore } from '../../src/users/user-store.js';
import { PasswordHasher } from '../../src/auth/password.js';
import { TokenSigner } from '../../src/auth/token.js';
import { StaticRegistry } from '../../src/registry/static-registry.js';
import { MemoryGroupStore } from '../../src/groups/memory-group-store.js';
import { RedisGroupStore } from '../../src/groups/redis-group-store.js';
import { MemoryGroupNotifier, type GroupChange, type GroupNotifier } from '../../src/groups/group-notifier.js';
import { RedisGroupNotifier } from '../../src/groups/redis-group-notifier.js';
import { decodeGroupEvent, type GroupLimits, type GroupStore } from '../../src/groups/group-store.js';
import { createSwitchboard, type WorkerConfig } from '../../src/node.js';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { DEFAULT_HEALTH_SETTINGS } from '../../src/server/store-health.js';
import { DEFAULT_INBOX_LIMITS } from '../../src/inbox/inbox-store.js';
import { silentLogger } from '../../src/log.js';
import { TEST_SECRET } from '../helpers/node.js';
import { startRedis } from '../helpers/redis.js';
import { sleep, until } from '../../testkit/wait.js';

t.setTimeout(120_000);

const USERS = ['alice', 'bob', 'carol', 'dave', 'erin', 'frank', 'mallory'];

interface Stores {
  users: UserStore;
  groups: GroupStore;
  notifier: GroupNotifier;
  /** Resolves once the test's listener hears changes (Redis: subscribed). */
  subscribed(): Promise<void>;
}

type MakeStores = (t: Test, limits: Partial<GroupLimits>) => Promise<Stores>;

interface Response<T = Record<string, unknown>> {
  status: number;
  body: T & { error?: { code: string; message: string } };
  headers: Record<string, unknown>;
}

/** A gate on `make`'s stores with USERS registered, and a listener recording what is published. */
async function gateOn(t: Test, make: MakeStores, limits: Partial<GroupLimits> = {}, checkMembers = true) {
  const stores = await make(t, limits);
  for (const username of USERS) await stores.users.create({ username, passwordHash: 'unused', createdAt: Date.now() });
  const signer = new TokenSigner(TEST_SECRET);
  const gate = new WebGate({
    host: '127.0.0.1',
    port: 0,
    registry: new StaticRegistry(),
    users: stores.users,
    signer,
    hasher: new PasswordHasher({ N: 2 ** 14, r: 8, p: 1 }),
    registration: true,
    limits: DEFAULT_GATE_LIMITS,
    groups: { store: stores.groups, notifier: stores.notifier, limits, checkMembers },
    log: silentLogger(),
  });
  t.teardown(() => gate.close());
  await gate.app.ready();
  const published: GroupChange[] = [];
  stores.notifier.subscribe({ change: (c) => published.push(c), missed: () => {} });
  await stores.subscribed();
  const token = (uid: string, deviceId?: string) => signer.mint({ uid, deviceId, ttlMs: 60_000 });
  const call = async <T = Record<string, unknown>>(as: string | null, method: string, url: string, payload?: unknown, headers: Record<string, string> = {}): Promise<Response<T>> => {
    const r = await gate.app.inject({
      method: method as 'GET',
      url,
      ...(payload === undefined ? {} : { payload: payload as object }),
      headers: { ...(as === null ? {} : { authorization: `Bearer ${token(as)}` }), ...headers },
    });
    return { status: r.statusCode, body: r.body === '' ? ({} as Response<T>['body']) : (JSON.parse(r.body) as Response<T>['body']), headers: r.headers };
  };
  /** The next publications, once `count` are there (Redis delivers them a moment later). */
  const heard = async (count: number) => {
    await until(`${count} changes published (${published.length} so far)`, () => published.length >= count);
    await sleep(20);
    return published.splice(0);
  };
  const create = async (owner: string, members: string[] = [], name = 'team') => {
    const r = await call<{ group: { id: string; head: number } }>(owner, 'POST', '/api/groups', { name, members });
    if (r.status !== 201) throw new Error(`create failed: ${JSON.stringify(r.body)}`);
    await heard(1);
    return r.body.group;
  };
  return { gate, stores, call, token, heard, published, create };
}

const refused = (r: Response, status: number, code: string) => ({ status: r.status, code: r.body.error?.code, want: `${status} ${code}` });

function suite(t: Test, make: MakeStores): void {
  t.test('create, get, list: the creator owns it, members are added, the change is published', async (t) => {
    const { call, heard } = await gateOn(t, make);
    const r = await call<{ group: Record<string, unknown> & { id: string } }>('alice', 'POST', '/api/groups', { name: 'Team', members: ['bob', 'Carol', 'alice'], meta: { topic: 'launch' } });
    t.equal(r.status, 201);
    const group = r.body.group;
    t.match(group, { name: 'Team', meta: { topic: 'launch' }, owner: 'alice', memberCount: 3, head: 1, dissolved: false }, 'names folded to their uids, the owner not twice');
    t.match(group.id, /^g[a-z2-7]{12}$/);
    t.same(await heard(1), [{ group: group.id, seq: 1, added: ['alice', 'bob', 'carol'] }], 'published: the created event, every member it added');

    const got = await call<{ group: Record<string, unknown> }>('bob', 'GET', `/api/groups/${group.id}`);
    t.equal(got.status, 200);
    t.match(got.body.group, { id: group.id, name: 'Team', role: 'member', joined: 1, left: null, owner: 'alice' }, "a member's view");

    await call('alice', 'POST', '/api/groups', { name: 'Second' });
    await heard(1);
    const mine = await call<{ groups: { id: string; role: string }[]; next: string | null }>('alice', 'GET', '/api/groups');
    t.equal(mine.status, 200);
    t.equal(mine.body.groups.length, 2);
    t.ok(mine.body.groups.every((g) => g.role === 'owner'));
    t.equal(mine.body.next, null, 'one page');
    const firstPage = await call<{ groups: { id: string }[]; next: string | null }>('alice', 'GET', '/api/groups?limit=1');
    t.equal(firstPage.body.groups.length, 1);
    const second = await call<{ groups: { id: string }[]; next: string | null }>('alice', 'GET', `/api/groups?limit=1&after=${firstPage.body.next!}`);
    t.equal(second.body.groups.length, 1);
    t.not(second.body.groups[0]!.id, firstPage.body.groups[0]!.id, 'paged by after');
    const bobs = await call<{ groups: { id: string; role: string }[] }>('bob', 'GET', '/api/groups');
    t.same(bobs.body.groups, [{ id: group.id, role: 'member' }], "bob's groups: only the one he is in");
  });

  t.test('members: paged, members only', async (t) => {
    const { call, create } = await gateOn(t, make);
    const g = await create('alice', ['bob', 'carol', 'dave', 'erin']);
    const all: { uid: string; role: string; joined: number }[] = [];
    let after: string | null = null;
    let pages = 0;
    do {
      const r: Response<{ members: { uid: string; role: string; joined: number }[]; next: string | null }> = await call('bob', 'GET', `/api/groups/${g.id}/members?limit=2${after ? `&after=${after}` : ''}`);
      t.equal(r.status, 200);
      t.ok(r.body.members.length <= 2);
      all.push(...r.body.members);
      after = r.body.next;
      pages++;
    } while (after !== null);
    t.equal(pages, 3, 'five members in pages of two');
    t.same(all.map((m) => m.uid), ['alice', 'bob', 'carol', 'dave', 'erin'], 'in byte order');
    t.match(all[0], { role: 'owner', joined: 1 });
    const stranger = await call('mallory', 'GET', `/api/groups/${g.id}/members`);
    t.match(refused(stranger, 403, 'SB_ERR_GROUP_NOT_MEMBER'), { status: 403, code: 'SB_ERR_GROUP_NOT_MEMBER' }, 'a non-member reads no member list');
    t.notMatch(JSON.stringify(stranger.body), /alice|bob|carol/, 'and learns no name from the refusal');
    const noGroup = await call('mallory', 'GET', `/api/groups/${g.id}`);
    t.equal(noGroup.status, 403, "nor the group's view");
    t.equal((await call('bob', 'GET', `/api/groups/${g.id}/members?limit=abc`)).status, 400, 'a limit that is not a number');
    t.equal((await call('bob', 'GET', `/api/groups/${g.id}/members?limit=0`)).status, 200, 'limit 0 is read as 1');
  });

  t.test('add and remove: by the owner and admins, published with the right seq and added', async (t) => {
    const { call, heard, create } = await gateOn(t, make);
    const g = await create('alice', ['bob']);
    const add = await call('alice', 'POST', `/api/groups/${g.id}/members`, { uids: ['carol', 'dave'] });
    t.same({ status: add.status, body: add.body }, { status: 200, body: { seq: 2, uids: ['carol', 'dave'] } }, 'the owner adds');
    t.same(await heard(1), [{ group: g.id, seq: 2, added: ['carol', 'dave'] }]);

    const again = await call('alice', 'POST', `/api/groups/${g.id}/members`, { uids: ['carol'] });
    t.same(again.body, { seq: null, uids: [] }, 'adding a member again changes nothing: seq null');
    await sleep(50);
    t.same(await heard(0), [], 'and nothing is published');

    const byMember = await call('bob', 'POST', `/api/groups/${g.id}/members`, { uids: ['erin'] });
    t.match(refused(byMember, 403, 'SB_ERR_GROUP_FORBIDDEN'), { status: 403, code: 'SB_ERR_GROUP_FORBIDDEN' }, 'a member (not admin) may not add');

    const role = await call('alice', 'PUT', `/api/groups/${g.id}/members/bob/role`, { role: 'admin' });
    t.same(role.body, { seq: 3 }, 'the owner makes bob an admin');
    t.same(await heard(1), [{ group: g.id, seq: 3 }], 'published without added');
    const byAdmin = await call('bob', 'POST', `/api/groups/${g.id}/members`, { uids: ['erin'] });
    t.same(byAdmin.body, { seq: 4, uids: ['erin'] }, 'an admin adds');
    t.same(await heard(1), [{ group: g.id, seq: 4, added: ['erin'] }]);
    const roleByAdmin = await call('bob', 'PUT', `/api/groups/${g.id}/members/carol/role`, { role: 'admin' });
    t.equal(roleByAdmin.status, 403, 'only the owner sets roles');

    const removeOwner = await call('bob', 'POST', `/api/groups/${g.id}/members/remove`, { uids: ['alice'] });
    t.match(refused(removeOwner, 403, 'SB_ERR_GROUP_FORBIDDEN'), { status: 403, code: 'SB_ERR_GROUP_FORBIDDEN' }, 'an admin may not remove the owner');
    const remove = await call('bob', 'POST', `/api/groups/${g.id}/members/remove`, { uids: ['dave', 'nobody'] });
    t.same(remove.body, { seq: 5, uids: ['dave'] }, 'an admin removes a member; a non-member named is ignored');
    t.same(await heard(1), [{ group: g.id, seq: 5 }]);
    const daveReads = await call<{ group: { left: number; role: unknown } }>('dave', 'GET', `/api/groups/${g.id}`);
    t.match(daveReads.body.group, { left: 5, role: null }, 'the removed member sees up to its removal');

    const ownerLeaves = await call('alice', 'POST', `/api/groups/${g.id}/leave`);
    t.match(refused(ownerLeaves, 409, 'SB_ERR_GROUP_OWNER_CANNOT_LEAVE'), { status: 409, code: 'SB_ERR_GROUP_OWNER_CANNOT_LEAVE' }, 'the owner cannot leave');
    const leave = await call('carol', 'POST', `/api/groups/${g.id}/leave`);
    t.same(leave.body, { seq: 6 }, 'a member leaves');
    t.same(await heard(1), [{ group: g.id, seq: 6 }]);

    const update = await call('bob', 'PATCH', `/api/groups/${g.id}`, { name: 'Renamed', meta: { a: 'b' } });
    t.same(update.body, { seq: 7 }, 'an admin renames');
    t.same(await heard(1), [{ group: g.id, seq: 7 }]);
    t.equal((await call('bob', 'PATCH', `/api/groups/${g.id}`, {})).status, 400, 'an update that names nothing');

    const transferByAdmin = await call('bob', 'POST', `/api/groups/${g.id}/transfer`, { uid: 'bob' });
    t.equal(transferByAdmin.status, 403, 'only the owner transfers');
    const transfer = await call('alice', 'POST', `/api/groups/${g.id}/transfer`, { uid: 'erin' });
    t.same(transfer.body, { seq: 8 }, 'the owner transfers to a member');
    t.same(await heard(1), [{ group: g.id, seq: 8 }]);
    const toStranger = await call('erin', 'POST', `/api/groups/${g.id}/transfer`, { uid: 'mallory' });
    t.match(refused(toStranger, 403, 'SB_ERR_GROUP_NOT_MEMBER'), { status: 403, code: 'SB_ERR_GROUP_NOT_MEMBER' }, 'not to a non-member');

    const dissolveByOld = await call('alice', 'DELETE', `/api/groups/${g.id}`);
    t.equal(dissolveByOld.status, 403, 'the old owner (an admin now) may not dissolve');
    const dissolve = await call('erin', 'DELETE', `/api/groups/${g.id}`);
    t.same(dissolve.body, { seq: 9 }, 'the owner dissolves');
    t.same(await heard(1), [{ group: g.id, seq: 9 }]);
    for (const [what, method, url, payload] of [
      ['add', 'POST', `/api/groups/${g.id}/members`, { uids: ['frank'] }],
      ['remove', 'POST', `/api/groups/${g.id}/members/remove`, { uids: ['bob'] }],
      ['update', 'PATCH', `/api/groups/${g.id}`, { name: 'x' }],
      ['leave', 'POST', `/api/groups/${g.id}/leave`, undefined],
      ['dissolve again', 'DELETE', `/api/groups/${g.id}`, undefined],
    ] as const) {
      const r = await call(what === 'leave' ? 'bob' : 'erin', method, url, payload);
      t.match(refused(r, 410, 'SB_ERR_GROUP_DISSOLVED'), { status: 410, code: 'SB_ERR_GROUP_DISSOLVED' }, `dissolved: ${what} refused`);
    }
    const view = await call<{ group: { dissolved: boolean } }>('bob', 'GET', `/api/groups/${g.id}`);
    t.equal(view.body.group.dissolved, true, 'a dissolved group can still be read by its members');
    await sleep(50);
    t.same(await heard(0), [], 'no refusal published anything');

  });

  t.test('refusals: no token, a bad token, an expired one, another scheme, a token of another user', async (t) => {
    const { call, create, token } = await gateOn(t, make);
    const g = await create('alice', ['bob']);
    const url = `/api/groups/${g.id}/members`;
    const none = await call(null, 'GET', url);
    t.match(refused(none, 401, 'SB_ERR_NO_TOKEN'), { status: 401, code: 'SB_ERR_NO_TOKEN' });
    t.equal(none.headers['www-authenticate'], 'Bearer');
    const other = new TokenSigner('another secret entirely').mint({ uid: 'alice', ttlMs: 60_000 });
    t.match(refused(await call(null, 'GET', url, undefined, { authorization: `Bearer ${other}` }), 401, 'SB_ERR_TOKEN_INVALID'), { status: 401, code: 'SB_ERR_TOKEN_INVALID' }, 'a token of another secret');
    t.match(refused(await call(null, 'GET', url, undefined, { authorization: `Bearer ${token('alice')}x` }), 401, 'SB_ERR_TOKEN_INVALID'), { status: 401, code: 'SB_ERR_TOKEN_INVALID' }, 'a token altered');
    t.match(refused(await call(null, 'GET', url, undefined, { authorization: `Basic ${Buffer.from('alice:pw').toString('base64')}` }), 401, 'SB_ERR_TOKEN_INVALID'), { status: 401, code: 'SB_ERR_TOKEN_INVALID' }, 'another scheme');
    const expired = new TokenSigner(TEST_SECRET).mint({ uid: 'alice', ttlMs: 1_000, now: Date.now() - 10_000 });
    t.match(refused(await call(null, 'GET', url, undefined, { authorization: `Bearer ${expired}` }), 401, 'SB_ERR_TOKEN_EXPIRED'), { status: 401, code: 'SB_ERR_TOKEN_EXPIRED' }, 'an expired token');
    const device = new TokenSigner(TEST_SECRET).mint({ uid: 'bob', deviceId: 'phone', ttlMs: 60_000 });
    t.equal((await call(null, 'GET', url, undefined, { authorization: `Bearer ${device}` })).status, 200, "a token of one of the user's devices is fine");
    const noBody = await call(null, 'POST', '/api/groups', { name: 5 });
    t.equal(noBody.status, 401, 'the token is checked before the body');
    const mallory = await call('mallory', 'POST', `/api/groups/${g.id}/members`, { uids: ['mallory'] });
    t.match(refused(mallory, 403, 'SB_ERR_GROUP_NOT_MEMBER'), { status: 403, code: 'SB_ERR_GROUP_NOT_MEMBER' }, "a token of another user does not act for alice: mallory cannot add herself");
  });

  t.test('members added must have accounts: a coded 404 naming only the unknown uids given', async (t) => {
    const { call, heard, create } = await gateOn(t, make);
    const created = await call('alice', 'POST', '/api/groups', { name: 'x', members: ['bob', 'ghost'] });
    t.match(refused(created, 404, 'SB_ERR_UNKNOWN_RECIPIENT'), { status: 404, code: 'SB_ERR_UNKNOWN_RECIPIENT' }, 'create with an unknown member');
    t.match(created.body.error!.message, /"ghost"/);
    t.notMatch(created.body.error!.message, /bob|carol|dave/, 'no other user is named');
    t.same((await call<{ groups: unknown[] }>('alice', 'GET', '/api/groups')).body.groups, [], 'nothing was created');
    const g = await create('alice');
    const add = await call('alice', 'POST', `/api/groups/${g.id}/members`, { uids: ['carol', 'Not A Name!', 'ghost2'] });
    t.match(refused(add, 404, 'SB_ERR_UNKNOWN_RECIPIENT'), { status: 404, code: 'SB_ERR_UNKNOWN_RECIPIENT' }, 'add with unknown uids');
    t.match(add.body.error!.message, /^2 uids have no account/);
    t.same((await call<{ members: unknown[] }>('alice', 'GET', `/api/groups/${g.id}/members`)).body.members.length, 1, 'all or nothing: carol was not added');
    await sleep(50);
    t.same(await heard(0), [], 'nothing published');
  });

  t.test('a gate whose users live outside switchboard (--allow-unknown-recipients) adds any uid, as written', async (t) => {
    const { call, heard, create } = await gateOn(t, make, {}, false);
    const g = await create('alice', ['Ghost']);
    t.same((await call<{ members: { uid: string }[] }>('alice', 'GET', `/api/groups/${g.id}/members`)).body.members.map((m) => m.uid), ['Ghost', 'alice'], 'no account needed, and the uid is not folded');
    const add = await call<{ seq: number; uids: string[] }>('alice', 'POST', `/api/groups/${g.id}/members`, { uids: ['ext-42', 'ext-42', 'bob'] });
    t.equal(add.status, 200);
    t.same(add.body.uids, ['ext-42', 'bob'], 'repeats named once');
    t.same(await heard(1), [{ group: g.id, seq: add.body.seq, added: ['ext-42', 'bob'] }], 'published as any add');
    for (const [what, uid, code] of [
      ['empty', '', 'SB_ERR_BAD_REQUEST'],
      ['over 64 characters', 'x'.repeat(65), 'SB_ERR_BAD_REQUEST'],
      ['a control character', 'eve\u0000', 'SB_ERR_BAD_GROUP'],
    ] as const) {
      t.match(refused(await call('alice', 'POST', `/api/groups/${g.id}/members`, { uids: [uid] }), 400, code), { status: 400, code }, `a uid that is not one is still refused: ${what}`);
    }
    t.match(refused(await call('mallory', 'POST', `/api/groups/${g.id}/members`, { uids: ['mallory'] }), 403, 'SB_ERR_GROUP_NOT_MEMBER'), { status: 403 }, 'and only admins add');
    // Named as written everywhere else too: not folded to a lower-case uid that is not there.
    t.equal((await call('alice', 'PUT', `/api/groups/${g.id}/members/Ghost/role`, { role: 'admin' })).status, 200, 'Ghost made an admin');
    t.same((await call<{ uids: string[] }>('alice', 'POST', `/api/groups/${g.id}/members/remove`, { uids: ['ext-42'] })).body.uids, ['ext-42'], 'ext-42 removed');
    t.equal((await call('alice', 'POST', `/api/groups/${g.id}/transfer`, { uid: 'Ghost' })).status, 200, 'the group handed to Ghost');
  });

  t.test('attacks: forged group ids', async (t) => {
    const { call } = await gateOn(t, make);
    for (const [what, id, status] of [
      ['a path climb', '..%2F..%2Fadmin', 400],
      ['a dot-dot (the URL is normalised: no group route)', '..', 404],
      ['unicode', encodeURIComponent('gébc→234567ab'), 400],
      ['upper case', 'GAAAAAAAAAAAA', 400],
      ['too long (the router refuses it)', `g${'a'.repeat(200)}`, 414],
      ['a NUL', 'g%00aaaaaaaaaaa', 400],
      ['another user prefix trick', '{u:alice}:groups', 400],
    ] as const) {
      for (const [method, suffix, payload] of [
        ['GET', '', undefined],
        ['GET', '/members', undefined],
        ['POST', '/members', { uids: ['bob'] }],
        ['DELETE', '', undefined],
      ] as const) {
        const r = await call('alice', method, `/api/groups/${id}${suffix}`, payload);
        t.equal(r.status, status, `${what}: ${method} ${suffix || '/'} → ${status}`);
        t.ok(r.body.error && /^SB_ERR_(BAD_GROUP|NOT_FOUND|BAD_REQUEST)$/.test(r.body.error.code), `with a code (${r.body.error?.code})`);
      }
    }
    const missing = await call('alice', 'GET', '/api/groups/gaaaaaaaaaaaa');
    t.match(refused(missing, 404, 'SB_ERR_GROUP_NOT_FOUND'), { status: 404, code: 'SB_ERR_GROUP_NOT_FOUND' }, 'a well-formed id of no group');
    const nonGroupUid = await call('alice', 'PUT', `/api/groups/gaaaaaaaaaaaa/members/${'x'.repeat(65)}/role`, { role: 'admin' });
    t.equal(nonGroupUid.status, 400, 'a uid past its bound');
  });

  t.test('attacks: a member of group A acting on group B', async (t) => {
    const { call, heard, create } = await gateOn(t, make);
    const a = await create('mallory', ['bob']);
    const b = await create('alice', ['carol']);
    for (const [what, method, url, payload] of [
      ['read B', 'GET', `/api/groups/${b.id}`, undefined],
      ['read its members', 'GET', `/api/groups/${b.id}/members`, undefined],
      ['add herself', 'POST', `/api/groups/${b.id}/members`, { uids: ['mallory'] }],
      ['remove carol', 'POST', `/api/groups/${b.id}/members/remove`, { uids: ['carol'] }],
      ['promote herself', 'PUT', `/api/groups/${b.id}/members/mallory/role`, { role: 'admin' }],
      ['take it over', 'POST', `/api/groups/${b.id}/transfer`, { uid: 'mallory' }],
      ['rename it', 'PATCH', `/api/groups/${b.id}`, { name: 'pwned' }],
      ['dissolve it', 'DELETE', `/api/groups/${b.id}`, undefined],
      ['leave it', 'POST', `/api/groups/${b.id}/leave`, undefined],
    ] as const) {
      const r = await call('mallory', method, url, payload);
      t.match(refused(r, 403, 'SB_ERR_GROUP_NOT_MEMBER'), { status: 403, code: 'SB_ERR_GROUP_NOT_MEMBER' }, `mallory, owner of A, may not ${what} of B`);
    }
    const view = await call<{ group: { name: string; memberCount: number; owner: string } }>('alice', 'GET', `/api/groups/${b.id}`);
    t.match(view.body.group, { name: 'team', memberCount: 2, owner: 'alice' }, 'B is unchanged');
    await sleep(50);
    t.same(await heard(0), [], 'nothing published');
    t.equal((await call('mallory', 'GET', `/api/groups/${a.id}/members`)).status, 200, 'her own group she reads');
  });

  t.test('attacks: a flood of creates stops at --group-max-per-user; oversized bodies', async (t) => {
    const { call, heard } = await gateOn(t, make, { maxGroupsPerUser: 5, maxUidsPerCall: 20 });
    const results = await Promise.all(Array.from({ length: 30 }, (_, i) => call('mallory', 'POST', '/api/groups', { name: `spam ${i}` })));
    const created = results.filter((r) => r.status === 201).length;
    t.equal(created, 5, 'five created');
    t.ok(results.filter((r) => r.status !== 201).every((r) => r.status === 409 && r.body.error?.code === 'SB_ERR_GROUP_TOO_MANY'), 'the rest: 409 SB_ERR_GROUP_TOO_MANY');
    t.equal((await heard(5)).length, 5, 'only the five published');
    const intoFull = await call('alice', 'POST', '/api/groups', { name: 'x', members: ['mallory'] });
    t.match(refused(intoFull, 409, 'SB_ERR_GROUP_TOO_MANY'), { status: 409, code: 'SB_ERR_GROUP_TOO_MANY' }, 'nor can she be added to one more');
    const tooMany = await call('alice', 'POST', '/api/groups', { name: 'x', members: Array.from({ length: 21 }, (_, i) => `user${i}`) });
    t.equal(tooMany.status, 400, 'more uids than one call may name: refused by the schema');
    const huge = await call('alice', 'POST', '/api/groups', { name: 'x', meta: { k: 'v'.repeat(200_000) } });
    t.equal(huge.status, 413, 'a body past the bound: 413');
    t.equal(huge.body.error?.code, 'SB_ERR_BAD_REQUEST');
    const extra = await call('alice', 'POST', '/api/groups', { name: 'x', owner: 'mallory' });
    t.equal(extra.status, 400, 'an unknown field (owner) is refused, not ignored');
    const badMeta = await call('alice', 'POST', '/api/groups', { name: 'x', meta: { k: 1 } });
    t.equal(badMeta.status, 400, 'meta values are strings');
    const badName = await call('alice', 'POST', '/api/groups', { name: '   ' });
    t.match(refused(badName, 400, 'SB_ERR_BAD_GROUP'), { status: 400, code: 'SB_ERR_BAD_GROUP' }, 'a blank name');
  });
}

t.test('on memory stores', async (t) => {
  suite(t, async (t, limits) => {
    const groups = new MemoryGroupStore(limits);
    const notifier = new MemoryGroupNotifier();
    t.teardown(async () => {
      await notifier.close();
      await groups.close();
    });
    return { users: new MemoryUserStore(), groups, notifier, subscribed: async () => {} };
  });
});

const redis = await startRedis(t);
let n = 0;

t.test('on Redis (RedisUserStore, RedisGroupStore, RedisGroupNotifier)', async (t) => {
  suite(t, async (t, limits) => {
    const keyPrefix = `t${++n}:`;
    const users = new RedisUserStore({ url: redis.url, keyPrefix });
    const groups = new RedisGroupStore({ url: redis.url, keyPrefix, limits });
    const notifier = new RedisGroupNotifier({ url: redis.url, keyPrefix, log: silentLogger() });
    t.teardown(async () => {
      await notifier.close();
      await groups.close();
      await users.close();
    });
    const subscribed = () => until('subscribed', async () => ((await notifier.redis.call('PUBSUB', 'NUMSUB', notifier.channel)) as [string, number])[1] === 1);
    return { users, groups, notifier, subscribed };
  });
});

const WORKER: WorkerConfig = {
  host: '127.0.0.1',
  port: 0,
  limits: { ...DEFAULT_LIMITS, closeGraceMs: 200 },
  health: DEFAULT_HEALTH_SETTINGS,
  inboxLimits: DEFAULT_INBOX_LIMITS,
  memoryInboxBytes: 16 * 1024 * 1024,
  checkRecipients: true,
};

for (const withRedis of [false, true]) {
  t.test(`the composition root's gate over HTTP (${withRedis ? 'Redis' : 'memory'}): register, log in, create, the node's store and notifier see it`, async (t) => {
    const switchboard = createSwitchboard({
      secret: TEST_SECRET,
      log: silentLogger(),
      ...(withRedis ? { redis: { url: redis.url, keyPrefix: `http${withRedis}:`, timeoutMs: 1_000 } } : {}),
      worker: WORKER,
      gate: { host: '127.0.0.1', port: 0, limits: DEFAULT_GATE_LIMITS, registration: true, trustProxy: [] },
    });
    t.teardown(() => switchboard.stop());
    const { gate } = await switchboard.start();
    const base = `http://127.0.0.1:${gate!.port}`;
    const post = async (path: string, body: unknown, token?: string) => {
      const r = await fetch(base + path, { method: 'POST', headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) }, body: JSON.stringify(body) });
      return { status: r.status, body: (await r.json()) as Record<string, unknown> };
    };
    for (const username of ['alice', 'bob']) t.equal((await post('/api/users', { username, password: 'a password long enough' })).status, 201);
    const login = await post('/api/login', { username: 'alice', password: 'a password long enough', deviceId: 'laptop' });
    const heard: GroupChange[] = [];
    switchboard.node!.groupNotifier.subscribe({ change: (c) => heard.push(c), missed: () => {} });
    if (withRedis) await sleep(300);
    const created = await post('/api/groups', { name: 'Launch', members: ['bob'] }, login.body.token as string);
    t.equal(created.status, 201, 'created with the token /api/login issued');
    const id = (created.body.group as { id: string }).id;
    await until('the worker side heard it', () => heard.length === 1);
    t.same(heard, [{ group: id, seq: 1, added: ['alice', 'bob'] }]);
    const { entries } = await switchboard.node!.groups.read(id, 'bob', 0, 10);
    t.match(decodeGroupEvent(entries[0]!.body), { type: 'created', actor: 'alice', uids: ['bob'] }, "the worker's store holds the event");
    t.equal((await post('/api/groups', { name: 'x' })).status, 401, 'no token, no group');
  });
}

t.test("the composition root's gate with checkMembers false (start/gate --allow-unknown-recipients) adds a uid without an account", async (t) => {
  const switchboard = createSwitchboard({
    secret: TEST_SECRET,
    log: silentLogger(),
    worker: { ...WORKER, checkRecipients: false },
    gate: { host: '127.0.0.1', port: 0, limits: DEFAULT_GATE_LIMITS, registration: true, trustProxy: [], checkMembers: false },
  });
  t.teardown(() => switchboard.stop());
  const { gate } = await switchboard.start();
  const token = new TokenSigner(TEST_SECRET).mint({ uid: 'ext-alice', ttlMs: 60_000 });
  const r = await fetch(`http://127.0.0.1:${gate!.port}/api/groups`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` }, body: JSON.stringify({ name: 'x', members: ['ext-bob'] }) });
  t.equal(r.status, 201, 'neither the owner nor the member has an account');
  const id = ((await r.json()) as { group: { id: string } }).group.id;
  t.same((await switchboard.node!.groups.members(id, 'ext-bob', { limit: 10 })).members.map((m) => m.uid), ['ext-alice', 'ext-bob']);
});
