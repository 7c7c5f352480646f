import t, { type Test } from 'tap';
import { Redis } from 'ioredis';
import { GROUP_REDIS_COMMANDS, RedisGroupStore, type RedisGroupStoreOptions } from '../../src/groups/redis-group-store.js';
import type { GroupStore } from '../../src/groups/group-store.js';
import { SWITCHBOARD_ACL, startRedis } from '../helpers/redis.js';
import { groupStoreConformance } from './group-store.conformance.js';

const redis = await startRedis(t);
let n = 0;
const options = new WeakMap<GroupStore, RedisGroupStoreOptions>();
// Each test gets its own key prefix on the one server; a twin is a second connection to it.
groupStoreConformance(
  t,
  async (limits, now) => {
    const o = { url: redis.url, limits, keyPrefix: `t${++n}:`, now };
    const store = new RedisGroupStore(o);
    options.set(store, o);
    return store;
  },
  async (store) => new RedisGroupStore(options.get(store)!),
);

// What only the Redis store has: a layout in slots, user indexes in other slots than the group
// (repaired after a crash between the two), an ACL, a Redis that does not answer, its memory.

type Internals = Record<string, (...args: (string | number)[]) => Promise<unknown>>;

/** A store on its own prefix, closed after the test; `raw` is its connection with the scripts defined. */
function store(t: Test, prefix: string, extra: Partial<RedisGroupStoreOptions> = {}) {
  const s = new RedisGroupStore({ url: redis.url, keyPrefix: prefix, ...extra });
  t.teardown(() => s.close());
  return { s, raw: s.redis, internals: s.redis as unknown as Internals };
}

/** The hash tag of a key as Redis Cluster reads it: from the first '{' to the next '}'. */
function hashTag(key: string): string {
  const open = key.indexOf('{');
  const close = key.indexOf('}', open + 1);
  return open >= 0 && close > open + 1 ? key.slice(open + 1, close) : key;
}

t.test('every key of a group has the tag {g:<id>}, every key of a user {u:<uid>}: one slot each', async (t) => {
  const { s, raw } = store(t, 'slots:');
  const g = await s.create('alice', 'G', ['bob', 'carol']);
  await s.append(g.id, 'bob', '1', Buffer.from('hi'));
  await s.saveCursor(g.id, 'bob', 'phone', 2);
  await s.markRead(g.id, 'alice', 2, true);
  await s.leave(g.id, 'carol');
  const keys = await raw.keys('slots:*');
  const tags = new Map<string, string[]>();
  for (const key of keys) tags.set(hashTag(key), [...(tags.get(hashTag(key)) ?? []), key.slice(key.indexOf('}') + 1)]);
  t.same([...tags.keys()].sort(), [`g:${g.id}`, 'u:alice', 'u:bob', 'u:carol'], 'one tag per group and per user, nothing else');
  t.same(tags.get(`g:${g.id}`)!.sort(), [':cur', ':dd', ':ddq', ':ev', ':former', ':fq', ':info', ':log', ':mem', ':ml', ':rd', ':rv']);
  t.same(tags.get('u:bob')!.sort(), [':groups', ':gs']);
  t.same(tags.get('u:carol')!.sort(), [':departed', ':gs'], 'a user with no group left has no :groups key');
});

t.test("a dissolved group's keys expire maxAgeMs after it, positions saved later too", async (t) => {
  const { s, raw } = store(t, 'expiry:', { limits: { maxAgeMs: 3_600_000 } });
  const g = await s.create('alice', 'G', ['bob']);
  await s.append(g.id, 'bob', '1', Buffer.from('hi'));
  t.equal(await raw.pttl(`expiry:{g:${g.id}}:info`), -1, 'a living group does not expire');
  await s.dissolve(g.id, 'alice');
  await s.saveCursor(g.id, 'bob', 'phone', 3);
  // A read mark after the dissolve is refused: it would make :rd and :rv keys with no expiry.
  await t.rejects(s.markRead(g.id, 'bob', 3, true), { code: 'SB_ERR_GROUP_DISSOLVED' });
  t.same((await raw.keys(`expiry:{g:${g.id}}:r*`)).sort(), [`expiry:{g:${g.id}}:rd`], 'no :rv made (nobody shared a position)');
  for (const key of await raw.keys(`expiry:{g:${g.id}}:*`)) {
    const ttl = await raw.pttl(key);
    t.ok(ttl > 3_500_000 && ttl <= 3_600_000, `${key} expires with the group (${ttl} ms)`);
  }
});

t.test('a refused add (a stranger acting) writes nothing to any user index', async (t) => {
  const { s, raw } = store(t, 'refused:');
  const g = await s.create('alice', 'G', ['bob']);
  await t.rejects(s.addMembers(g.id, 'mallory', ['sybil', 'mallory']), { code: 'SB_ERR_GROUP_NOT_MEMBER' });
  await t.rejects(s.addMembers(g.id, 'bob', ['sybil']), { code: 'SB_ERR_GROUP_FORBIDDEN' });
  t.same(await raw.keys('refused:{u:sybil}*'), [], 'no key of the users it named');
  t.same(await raw.keys('refused:{u:mallory}*'), []);
});

t.test('crash repair: a departure the index missed is found and recorded by groupsOf', async (t) => {
  const { s, raw } = store(t, 'repair1:');
  const g = await s.create('alice', 'G', ['bob']);
  const { seq } = await s.removeMembers(g.id, 'alice', ['bob']);
  // The index as it was before the departure reached it (the process died after the group's script).
  await raw.zadd('repair1:{u:bob}:groups', 0, g.id);
  await raw.hset('repair1:{u:bob}:gs', g.id, '1|m');
  await raw.zrem('repair1:{u:bob}:departed', g.id);
  t.same(await s.departedOf('bob'), [], 'the departure is missing');
  t.same((await s.groupsOf('bob', { limit: 10 })).groups, [], 'groupsOf does not list the group: it checked it');
  t.match(await s.departedOf('bob'), [{ id: g.id, seq, reason: 'removed' }], 'and recorded the departure it found, with the group seq');
  t.equal(await raw.zscore('repair1:{u:bob}:groups', g.id), null, 'the index entry is gone');
});

t.test('crash repair: a reservation nobody confirmed is dropped by groupsOf and frees its slot', async (t) => {
  const { s, raw } = store(t, 'repair2:', { limits: { maxGroupsPerUser: 1 } });
  const g = await s.create('alice', 'G');
  const ghost = 'gaaaaaaaaaaaa';
  // A create or add that reserved carol's slot, then died before its group script.
  await raw.zadd('repair2:{u:carol}:groups', 0, ghost);
  await t.rejects(s.addMembers(g.id, 'alice', ['carol']), { code: 'SB_ERR_GROUP_TOO_MANY' }, 'the stale reservation holds the slot');
  t.same((await s.groupsOf('carol', { limit: 10 })).groups, [], 'groupsOf lists nothing');
  t.equal(await raw.zcard('repair2:{u:carol}:groups'), 0, 'it dropped the reservation');
  t.same(await s.departedOf('carol'), [], 'which is no departure');
  t.match(await s.addMembers(g.id, 'alice', ['carol']), { uids: ['carol'] }, 'the slot is free again');
  // One for a group that exists but does not list her.
  const h = await s.create('dave', 'H');
  await raw.zadd('repair2:{u:erin}:groups', 0, h.id);
  t.same((await s.groupsOf('erin', { limit: 10 })).groups, []);
  t.equal(await raw.zcard('repair2:{u:erin}:groups'), 0);
});

t.test('crash repair: a lost confirmation is healed by the retried add', async (t) => {
  const { s, raw } = store(t, 'repair3:');
  const g = await s.create('alice', 'G');
  await s.addMembers(g.id, 'alice', ['bob']);
  await raw.hdel('repair3:{u:bob}:gs', g.id);
  t.same((await s.groupsOf('bob', { limit: 10 })).groups, [{ id: g.id, role: 'member' }], 'the reservation alone lists the group');
  t.same(await s.addMembers(g.id, 'alice', ['bob']), { seq: undefined, uids: [] }, 'the retry changes nothing in the group');
  t.equal(await raw.hget('repair3:{u:bob}:gs', g.id), '2|m', 'and confirms the index entry with the seq bob joined at');
  await raw.zrem('repair3:{u:bob}:groups', g.id);
  await s.addMembers(g.id, 'alice', ['bob']);
  t.same((await s.groupsOf('bob', { limit: 10 })).groups, [{ id: g.id, role: 'member' }], 'even a lost entry comes back');
});

t.test('crash repair: a dissolve that wrote only some departures is completed user by user', async (t) => {
  const { s, raw } = store(t, 'repair4:');
  const g = await s.create('alice', 'G', ['bob', 'carol']);
  const seq = await s.dissolve(g.id, 'alice');
  for (const uid of ['bob', 'carol']) {
    await raw.zadd(`repair4:{u:${uid}}:groups`, 0, g.id);
    await raw.hset(`repair4:{u:${uid}}:gs`, g.id, '1|m');
    await raw.zrem(`repair4:{u:${uid}}:departed`, g.id);
  }
  t.same((await s.groupsOf('bob', { limit: 10 })).groups, []);
  t.match(await s.departedOf('bob'), [{ id: g.id, seq, reason: 'dissolved' }]);
  t.same(await s.departedOf('carol'), [], 'carol has not looked yet');
  t.same((await s.groupsOf('carol', { limit: 10 })).groups, []);
  t.match(await s.departedOf('carol'), [{ id: g.id, seq, reason: 'dissolved' }]);
});

t.test('index writes that arrive out of order converge on the latest group event', async (t) => {
  const { s, internals } = store(t, 'order:');
  const g = await s.create('alice', 'G', ['bob']);
  const { seq: removed } = await s.removeMembers(g.id, 'alice', ['bob']);
  const { seq: added } = await s.addMembers(g.id, 'alice', ['bob']);
  const keys = ['order:{u:bob}:groups', 'order:{u:bob}:departed', 'order:{u:bob}:gs'];
  // A second gate's departure write for the removal, arriving after the re-add's confirmation.
  t.equal(await internals.sbUserDepart!(...keys, g.id, removed!, 'r', Date.now()), 0, 'an older departure is ignored');
  t.same((await s.groupsOf('bob', { limit: 10 })).groups, [{ id: g.id, role: 'member' }]);
  t.same(await s.departedOf('bob'), []);
  // And the re-add's confirmation arriving after a later removal.
  const { seq: again } = await s.removeMembers(g.id, 'alice', ['bob']);
  t.equal(await internals.sbUserConfirm!(...keys, g.id, added!), 0, 'an older join is ignored');
  t.same((await s.groupsOf('bob', { limit: 10 })).groups, []);
  t.match(await s.departedOf('bob'), [{ id: g.id, seq: again }]);
});

t.test('an ACL user with the documented commands and GROUP_REDIS_COMMANDS runs every group operation', async (t) => {
  const admin = 'group-admin-password-for-tests';
  const app = 'group-app-password-for-tests';
  const server = await startRedis(t, [], { password: admin });
  const root = new Redis(server.url, { maxRetriesPerRequest: 1 });
  t.teardown(() => root.disconnect());
  const extras = GROUP_REDIS_COMMANDS.map((c) => `+${c}`);
  // The documented line holds the group commands (test/helpers/redis.ts): the other stores' part of it.
  t.ok(extras.every((c) => SWITCHBOARD_ACL('sb:', app).includes(c)), 'the documented ACL holds every GROUP_REDIS_COMMANDS');
  const others = (prefix: string) => SWITCHBOARD_ACL(prefix, app).filter((rule) => !extras.includes(rule));
  t.equal(await root.call('ACL', 'SETUSER', 'switchboard', ...SWITCHBOARD_ACL('sb:', app)), 'OK');
  t.equal(await root.call('ACL', 'SETUSER', 'without', ...others('sb:')), 'OK');
  const url = (user: string) => `redis://${user}:${app}@127.0.0.1:${server.port}`;
  const s = new RedisGroupStore({ url: url('switchboard'), limits: { maxEntries: 3, maxFormerMembers: 1, maxDeparted: 1, dedupeEntries: 2 } });
  t.teardown(() => s.close());
  await everything(s);
  t.pass('no refusal');
  const without = new RedisGroupStore({ url: url('without'), redisOptions: { maxRetriesPerRequest: 1 } });
  t.teardown(() => without.close());
  await t.rejects(without.create('alice', 'G'), { code: 'SB_ERR_STORE_UNAVAILABLE', message: /NOPERM|can't run this command/ }, 'the other stores\' commands alone do not suffice');
  for (const missing of GROUP_REDIS_COMMANDS) {
    t.equal(await root.call('ACL', 'SETUSER', `no-${missing}`, ...others('sb:'), ...extras.filter((c) => c !== `+${missing}`)), 'OK');
    const lacking = new RedisGroupStore({ url: url(`no-${missing}`), keyPrefix: `sb:${missing}:`, limits: { maxEntries: 3, maxFormerMembers: 1, maxDeparted: 1, dedupeEntries: 2 } });
    await t.rejects(everything(lacking), { code: 'SB_ERR_STORE_UNAVAILABLE' }, `${missing} is needed`);
    await lacking.close();
  }
});

/** Every operation, in a way that reaches every command the scripts may send. */
async function everything(s: RedisGroupStore): Promise<void> {
  const g = await s.create('alice', 'G', ['bob', 'carol'], { k: 'v' });
  await s.addMembers(g.id, 'alice', ['dave', 'erin']);
  await s.setRole(g.id, 'alice', 'bob', 'admin');
  for (let i = 1; i <= 4; i++) await s.append(g.id, 'bob', String(i), Buffer.from(`m${i}`));
  t.match(await s.append(g.id, 'bob', '4', Buffer.from('retry')), { duplicate: true });
  await s.removeMembers(g.id, 'bob', ['dave']);
  await s.leave(g.id, 'erin');
  await s.update(g.id, 'bob', { name: 'H', meta: {} });
  await s.saveCursor(g.id, 'carol', 'phone', 3);
  await s.cursor(g.id, 'carol', 'phone');
  await s.read(g.id, 'erin', 0, 10);
  await s.members(g.id, 'carol', { limit: 2 });
  await s.markRead(g.id, 'carol', 3, true);
  await s.readers(g.id, 'carol', { limit: 2 });
  await s.readCount(g.id, 'bob', 2);
  await s.summary(g.id, 'carol');
  await s.chatGroups('carol');
  await s.get(g.id, 'carol');
  await s.transfer(g.id, 'alice', 'bob');
  await s.groupsOf('carol', { limit: 10 });
  await s.dissolve(g.id, 'bob');
  await s.departedOf('carol');
  await s.saveCursor(g.id, 'carol', 'laptop', 4);
  await s.ping();
}

t.test('a frozen Redis: group calls fail with SB_ERR_STORE_UNAVAILABLE within the timeout', async (t) => {
  const server = await startRedis(t);
  const s = new RedisGroupStore({ url: server.url, timeoutMs: 300 });
  t.teardown(() => s.close());
  const g = await s.create('alice', 'G', ['bob']);
  server.freeze();
  try {
    const started = Date.now();
    const calls: [string, () => Promise<unknown>][] = [
      ['create', () => s.create('carol', 'H')],
      ['append', () => s.append(g.id, 'bob', '1', Buffer.from('x'))],
      ['read', () => s.read(g.id, 'bob', 0, 10)],
      ['addMembers', () => s.addMembers(g.id, 'alice', ['dave'])],
      ['groupsOf', () => s.groupsOf('bob', { limit: 10 })],
      ['ping', () => s.ping()],
    ];
    for (const [name, call] of calls) {
      await t.rejects(call(), { code: 'SB_ERR_STORE_UNAVAILABLE' }, name);
    }
    t.ok(Date.now() - started < 6 * 300 * 4, 'each within its bound');
  } finally {
    server.thaw();
  }
  t.match(await s.append(g.id, 'bob', '2', Buffer.from('y')), { duplicate: false }, 'and works again after the thaw');
});

t.test('memory: what Redis holds per entry, per member and per index entry (reported)', async (t) => {
  const { s, raw } = store(t, 'mem:');
  const g = await s.create('owner', 'G');
  const usage = async (key: string) => Number(await raw.call('MEMORY', 'USAGE', key, 'SAMPLES', '0'));
  for (let slice = 0; slice < 4; slice++) await s.addMembers(g.id, 'owner', Array.from({ length: 500 }, (_, i) => `member${slice * 500 + i}`));
  const body = Buffer.alloc(100, 0x61);
  const entriesBefore = await usage(`mem:{g:${g.id}}:log`);
  for (let i = 1; i <= 2000; i++) await s.append(g.id, `member${i % 2000}`, String(i), body);
  const log = (await usage(`mem:{g:${g.id}}:log`)) - entriesBefore;
  const dedupe = (await usage(`mem:{g:${g.id}}:dd`)) + (await usage(`mem:{g:${g.id}}:ddq`));
  const members = (await usage(`mem:{g:${g.id}}:mem`)) + (await usage(`mem:{g:${g.id}}:ml`));
  const index = (await usage('mem:{u:member7}:groups')) + (await usage('mem:{u:member7}:gs'));
  t.comment(`per entry of a 100-byte body from a 10-character sender: ${(log / 2000).toFixed(0)} bytes in the log, ${(dedupe / 1000).toFixed(0)} bytes of dedupe per remembered id (1 000 kept)`);
  t.comment(`per member: ${(members / 2001).toFixed(0)} bytes in the group; a user index holding one group: ${index} bytes`);
  t.ok(log / 2000 < 400, 'an entry costs less than 4 times its body');
  t.ok(members / 2001 < 200, 'a member less than 200 bytes');
});
