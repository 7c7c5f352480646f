// The contract every GroupStore keeps. Run by memory-group-store.test.ts and
// redis-group-store.test.ts; a new implementation adds one such file.

import type { Test } from 'tap';
import { decodeGroupEvent, isGroupId, type GroupEvent, type GroupLimits, type GroupStore } from '../../src/groups/group-store.js';

/** A store with these limits; `now` is the clock it stamps and ages entries by. */
export type MakeGroups = (limits?: Partial<GroupLimits>, now?: () => number) => Promise<GroupStore>;
/** Another client of the same data as `store` (the same store, for one that lives in this process). */
export type TwinGroups = (store: GroupStore) => Promise<GroupStore>;

const body = (text: string) => Buffer.from(text, 'utf8');
const code = (c: string) => ({ code: c });

/** Every event `uid` can read, decoded, with its seq. */
async function eventsOf(s: GroupStore, group: string, uid: string): Promise<(GroupEvent & { seq: number })[]> {
  const { entries } = await s.read(group, uid, 0, 100_000);
  return entries.filter((e) => e.kind === 'event').map((e) => ({ seq: e.seq, ...decodeGroupEvent(e.body) }));
}

async function seqsOf(s: GroupStore, group: string, uid: string, after = 0): Promise<number[]> {
  return (await s.read(group, uid, after, 100_000)).entries.map((e) => e.seq);
}

async function allMembers(s: GroupStore, group: string, uid: string, limit = 100): Promise<{ uid: string; role: string; joined: number }[]> {
  const out = [];
  let after: string | undefined;
  for (;;) {
    const page = await s.members(group, uid, { after, limit });
    out.push(...page.members);
    if (page.next === undefined) return out;
    after = page.next;
  }
}

async function allGroups(s: GroupStore, uid: string, limit = 100): Promise<{ id: string; role: string }[]> {
  const out = [];
  let after: string | undefined;
  for (;;) {
    const page = await s.groupsOf(uid, { after, limit });
    out.push(...page.groups);
    if (page.next === undefined) return out;
    after = page.next;
  }
}

const byteOrder = (a: string, b: string) => Buffer.compare(Buffer.from(a), Buffer.from(b));

export function groupStoreConformance(t: Test, make: MakeGroups, twin: TwinGroups): void {
  /** A store, closed after the test. */
  const open = async (t: Test, limits?: Partial<GroupLimits>, now?: () => number) => {
    const s = await make(limits, now);
    t.teardown(() => s.close());
    return s;
  };

  t.test('ping resolves while the store answers', async (t) => {
    const s = await open(t);
    await s.ping();
    t.pass('answered');
  });

  t.test('create: the creator owns it, seq 1 is the created event listing the members, every member has it in groupsOf', async (t) => {
    const before = Date.now();
    const s = await open(t);
    const g = await s.create('alice', 'Climbing', ['bob', 'carol', 'alice', 'bob'], { topic: 'crags' });
    t.ok(isGroupId(g.id), `a group id: ${g.id}`);
    t.match(g, { name: 'Climbing', meta: { topic: 'crags' }, owner: 'alice', memberCount: 3, head: 1, dissolved: false });
    t.ok(g.createdAt >= before && g.createdAt <= Date.now() + 1000, 'createdAt is the store time');
    t.same(await eventsOf(s, g.id, 'bob'), [{ seq: 1, type: 'created', actor: 'alice', uids: ['bob', 'carol'], name: 'Climbing', meta: { topic: 'crags' } }], 'the owner is the actor, the others are listed once');
    const [created] = (await s.read(g.id, 'alice', 0, 10)).entries;
    t.match(created, { seq: 1, kind: 'event', sender: 'alice' });
    t.same(await allMembers(s, g.id, 'carol'), [
      { uid: 'alice', role: 'owner', joined: 1 },
      { uid: 'bob', role: 'member', joined: 1 },
      { uid: 'carol', role: 'member', joined: 1 },
    ]);
    for (const [uid, role] of [['alice', 'owner'], ['bob', 'member'], ['carol', 'member']] as const) t.same((await s.groupsOf(uid, { limit: 10 })).groups, [{ id: g.id, role }], `${uid}'s groups`);
    t.match(await s.get(g.id, 'bob'), { id: g.id, name: 'Climbing', owner: 'alice', memberCount: 3, head: 1, role: 'member', joined: 1, left: undefined });
    const solo = await s.create('dave', 'Notes');
    t.match(solo, { memberCount: 1, head: 1, meta: {} });
    t.same(await eventsOf(s, solo.id, 'dave'), [{ seq: 1, type: 'created', actor: 'dave', uids: [], name: 'Notes' }], 'no meta: none in the event');
    t.not(solo.id, g.id, 'ids differ');
  });

  t.test('create refuses bad names, meta and member lists with SB_ERR_BAD_GROUP, and leaves nothing behind', async (t) => {
    const s = await open(t);
    for (const name of ['', '   ', 'x'.repeat(65), 'tab\there', 'nul\u0000', 'lone \ud800', 42 as unknown as string]) {
      await t.rejects(s.create('alice', name), code('SB_ERR_BAD_GROUP'), `name ${JSON.stringify(name)}`);
    }
    t.match(await s.create('alice', '🧗'.repeat(64)), { name: '🧗'.repeat(64) }, '64 characters (code points) are a name, of any script');
    const metas: unknown[] = [
      Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, 'v'])),
      { big: 'x'.repeat(1022) },
      { n: 1 },
      ['a'],
      { '': 'empty key' },
      null,
    ];
    for (const meta of metas) await t.rejects(s.create('alice', 'G', [], meta as Record<string, string>), code('SB_ERR_BAD_GROUP'), `meta ${JSON.stringify(meta)?.slice(0, 40)}`);
    t.match(await s.create('alice', 'G', [], { big: 'x'.repeat(1021) }), { memberCount: 1 }, '1 KiB of meta in all (key and value) is accepted');
    t.match(await s.create('alice', 'G', [], Object.fromEntries(Array.from({ length: 16 }, (_, i) => [`k${i}`, 'v']))), { memberCount: 1 }, '16 keys are');
    for (const members of [Array.from({ length: 501 }, (_, i) => `u${i}`), [''], ['x'.repeat(65)], ['bad\nuid'], 'bob' as unknown as string[]]) {
      await t.rejects(s.create('alice', 'G', members), code('SB_ERR_BAD_GROUP'), `members ${JSON.stringify(members).slice(0, 40)}`);
    }
    await t.rejects(s.create('', 'G'), code('SB_ERR_BAD_GROUP'), 'an empty owner');
    t.equal((await allGroups(s, 'alice')).length, 3, 'only the three accepted groups exist for alice');
    t.same(await s.groupsOf('u1', { limit: 10 }), { groups: [], next: undefined }, 'a refused member list added nobody');
  });

  t.test('unknown and malformed group ids: SB_ERR_GROUP_NOT_FOUND and SB_ERR_BAD_GROUP, for every operation', async (t) => {
    const s = await open(t);
    const unknown = 'gaaaaaaaaaaaa';
    const calls: [string, (g: string) => Promise<unknown>][] = [
      ['get', (g) => s.get(g, 'alice')],
      ['addMembers', (g) => s.addMembers(g, 'alice', ['bob'])],
      ['removeMembers', (g) => s.removeMembers(g, 'alice', ['bob'])],
      ['leave', (g) => s.leave(g, 'alice')],
      ['setRole', (g) => s.setRole(g, 'alice', 'bob', 'admin')],
      ['transfer', (g) => s.transfer(g, 'alice', 'bob')],
      ['update', (g) => s.update(g, 'alice', { name: 'x' })],
      ['dissolve', (g) => s.dissolve(g, 'alice')],
      ['append', (g) => s.append(g, 'alice', '1', body('x'))],
      ['read', (g) => s.read(g, 'alice', 0, 10)],
      ['members', (g) => s.members(g, 'alice', { limit: 10 })],
      ['cursor', (g) => s.cursor(g, 'alice', 'phone')],
      ['saveCursor', (g) => s.saveCursor(g, 'alice', 'phone', 1)],
    ];
    for (const [name, call] of calls) {
      await t.rejects(call(unknown), code('SB_ERR_GROUP_NOT_FOUND'), `${name} of an unknown group`);
      for (const bad of ['', 'g', 'gAAAAAAAAAAAA', 'g}{x', 'gaaaaaaaaaaaa:log', 'gaaaaaaaaaaa1']) await t.rejects(call(bad), code('SB_ERR_BAD_GROUP'), `${name} of ${JSON.stringify(bad)}`);
    }
  });

  t.test('addMembers: by an admin or the owner, at the added event, idempotent for members', async (t) => {
    const s = await open(t);
    const g = await s.create('alice', 'G', ['bob']);
    t.same(await s.addMembers(g.id, 'alice', ['carol', 'dave']), { seq: 2, uids: ['carol', 'dave'] });
    t.same(await s.addMembers(g.id, 'alice', ['carol', 'erin', 'alice']), { seq: 3, uids: ['erin'] }, 'members already are ignored');
    t.same(await s.addMembers(g.id, 'alice', ['carol', 'erin']), { seq: undefined, uids: [] }, 'all members already: nothing appended');
    t.match(await s.get(g.id, 'alice'), { head: 3, memberCount: 5 });
    await t.rejects(s.addMembers(g.id, 'bob', ['frank']), code('SB_ERR_GROUP_FORBIDDEN'), 'a member does not add');
    await s.setRole(g.id, 'alice', 'bob', 'admin');
    t.same(await s.addMembers(g.id, 'bob', ['frank']), { seq: 5, uids: ['frank'] }, 'an admin does');
    t.same((await eventsOf(s, g.id, 'alice')).slice(1), [
      { seq: 2, type: 'added', actor: 'alice', uids: ['carol', 'dave'] },
      { seq: 3, type: 'added', actor: 'alice', uids: ['erin'] },
      { seq: 4, type: 'role', actor: 'alice', uids: ['bob'], role: 'admin' },
      { seq: 5, type: 'added', actor: 'bob', uids: ['frank'] },
    ]);
    t.match(await allMembers(s, g.id, 'frank'), [{ uid: 'alice' }, { uid: 'bob', role: 'admin', joined: 1 }, { uid: 'carol', joined: 2 }, { uid: 'dave', joined: 2 }, { uid: 'erin', joined: 3 }, { uid: 'frank', role: 'member', joined: 5 }]);
    t.same((await s.groupsOf('frank', { limit: 10 })).groups, [{ id: g.id, role: 'member' }]);
    await t.rejects(s.addMembers(g.id, 'alice', []), code('SB_ERR_BAD_GROUP'), 'an empty list');
    await t.rejects(s.addMembers(g.id, 'alice', Array.from({ length: 501 }, (_, i) => `u${i}`)), code('SB_ERR_BAD_GROUP'), 'more than maxUidsPerCall');
    t.equal((await s.get(g.id, 'alice')).head, 5, 'refusals appended nothing');
  });

  t.test('removeMembers: admins remove members, only the owner removes admins, nobody removes the owner', async (t) => {
    const s = await open(t);
    const g = await s.create('owner', 'G', ['admin1', 'admin2', 'm1', 'm2', 'm3']);
    await s.setRole(g.id, 'owner', 'admin1', 'admin');
    await s.setRole(g.id, 'owner', 'admin2', 'admin');
    const head = (await s.get(g.id, 'owner')).head;
    await t.rejects(s.removeMembers(g.id, 'm1', ['m2']), code('SB_ERR_GROUP_FORBIDDEN'), 'a member removes nobody');
    await t.rejects(s.removeMembers(g.id, 'admin1', ['m1', 'admin2']), code('SB_ERR_GROUP_FORBIDDEN'), 'an admin does not remove an admin: the whole call is refused');
    await t.rejects(s.removeMembers(g.id, 'admin1', ['owner']), code('SB_ERR_GROUP_FORBIDDEN'), 'an admin does not remove the owner');
    await t.rejects(s.removeMembers(g.id, 'owner', ['owner']), code('SB_ERR_GROUP_FORBIDDEN'), 'nor does the owner itself');
    t.equal((await s.get(g.id, 'owner')).head, head, 'refusals appended nothing');
    t.equal((await s.get(g.id, 'owner')).memberCount, 6, 'and removed nobody');
    t.same(await s.removeMembers(g.id, 'admin1', ['m1', 'nobody', 'm2']), { seq: head + 1, uids: ['m1', 'm2'] }, 'non-members are ignored');
    t.same(await s.removeMembers(g.id, 'owner', ['admin2']), { seq: head + 2, uids: ['admin2'] }, 'the owner removes an admin');
    t.same(await s.removeMembers(g.id, 'owner', ['m1', 'nobody']), { seq: undefined, uids: [] }, 'nobody to remove: nothing appended');
    t.same((await eventsOf(s, g.id, 'owner')).slice(-2), [
      { seq: head + 1, type: 'removed', actor: 'admin1', uids: ['m1', 'm2'] },
      { seq: head + 2, type: 'removed', actor: 'owner', uids: ['admin2'] },
    ]);
    t.same((await allMembers(s, g.id, 'owner')).map((m) => m.uid), ['admin1', 'm3', 'owner']);
    t.equal((await s.get(g.id, 'owner')).memberCount, 3);
    t.same(await s.groupsOf('m1', { limit: 10 }), { groups: [], next: undefined }, 'a removed member no longer has the group');
    t.match(await s.departedOf('m1'), [{ id: g.id, seq: head + 1, reason: 'removed' }], 'it is among its departures');
    t.match(await s.departedOf('admin2'), [{ id: g.id, seq: head + 2, reason: 'removed' }]);
  });

  t.test('leave: any member but the owner, at the left event', async (t) => {
    const s = await open(t);
    const g = await s.create('alice', 'G', ['bob']);
    t.equal(await s.leave(g.id, 'bob'), 2);
    t.same((await eventsOf(s, g.id, 'alice')).slice(1), [{ seq: 2, type: 'left', actor: 'bob' }]);
    await t.rejects(s.leave(g.id, 'bob'), code('SB_ERR_GROUP_NOT_MEMBER'), 'once');
    await t.rejects(s.leave(g.id, 'carol'), code('SB_ERR_GROUP_NOT_MEMBER'), 'a stranger');
    await t.rejects(s.leave(g.id, 'alice'), code('SB_ERR_GROUP_OWNER_CANNOT_LEAVE'));
    t.match(await s.get(g.id, 'alice'), { head: 2, memberCount: 1 });
    t.match(await s.departedOf('bob'), [{ id: g.id, seq: 2, reason: 'left' }]);
    t.match(await s.get(g.id, 'bob'), { role: undefined, joined: 1, left: 2, head: 2 }, 'a former member still sees the group, up to its departure');
  });

  t.test('setRole: by the owner only, of a member other than the owner', async (t) => {
    const s = await open(t);
    const g = await s.create('alice', 'G', ['bob', 'carol']);
    t.same(await s.setRole(g.id, 'alice', 'bob', 'admin'), { seq: 2, uids: ['bob'] });
    t.same(await s.setRole(g.id, 'alice', 'bob', 'admin'), { seq: undefined, uids: [] }, 'the same role: nothing appended');
    await t.rejects(s.setRole(g.id, 'bob', 'carol', 'admin'), code('SB_ERR_GROUP_FORBIDDEN'), 'an admin does not promote');
    await t.rejects(s.setRole(g.id, 'carol', 'carol', 'admin'), code('SB_ERR_GROUP_FORBIDDEN'), 'a member does not promote itself');
    await t.rejects(s.setRole(g.id, 'alice', 'alice', 'member'), code('SB_ERR_GROUP_FORBIDDEN'), "the owner's role changes only by a transfer");
    await t.rejects(s.setRole(g.id, 'alice', 'dave', 'admin'), code('SB_ERR_GROUP_NOT_MEMBER'), 'of a member only');
    await t.rejects(s.setRole(g.id, 'alice', 'bob', 'owner' as 'admin'), code('SB_ERR_BAD_GROUP'), "'owner' is not a role one sets");
    t.same(await s.setRole(g.id, 'alice', 'bob', 'member'), { seq: 3, uids: ['bob'] }, 'and back');
    t.same((await eventsOf(s, g.id, 'carol')).slice(1), [
      { seq: 2, type: 'role', actor: 'alice', uids: ['bob'], role: 'admin' },
      { seq: 3, type: 'role', actor: 'alice', uids: ['bob'], role: 'member' },
    ]);
    t.same((await s.groupsOf('bob', { limit: 10 })).groups, [{ id: g.id, role: 'member' }], 'groupsOf has the role as it is');
  });

  t.test('transfer: by the owner to a member; the old owner becomes an admin and may then leave', async (t) => {
    const s = await open(t);
    const g = await s.create('alice', 'G', ['bob', 'carol']);
    await t.rejects(s.transfer(g.id, 'bob', 'bob'), code('SB_ERR_GROUP_FORBIDDEN'), 'a member does not take the group');
    await t.rejects(s.transfer(g.id, 'alice', 'dave'), code('SB_ERR_GROUP_NOT_MEMBER'), 'to a member only');
    t.same(await s.transfer(g.id, 'alice', 'alice'), { seq: undefined, uids: [] }, 'to itself: nothing');
    t.same(await s.transfer(g.id, 'alice', 'bob'), { seq: 2, uids: ['bob'] });
    t.match(await s.get(g.id, 'carol'), { owner: 'bob', head: 2 });
    t.match(await allMembers(s, g.id, 'carol'), [{ uid: 'alice', role: 'admin' }, { uid: 'bob', role: 'owner' }, { uid: 'carol', role: 'member' }]);
    t.same((await eventsOf(s, g.id, 'carol')).slice(1), [{ seq: 2, type: 'transferred', actor: 'alice', uids: ['bob'] }]);
    await t.rejects(s.transfer(g.id, 'alice', 'carol'), code('SB_ERR_GROUP_FORBIDDEN'), 'the old owner no longer may');
    await t.rejects(s.removeMembers(g.id, 'alice', ['bob']), code('SB_ERR_GROUP_FORBIDDEN'), 'nor remove the new owner');
    t.equal(await s.leave(g.id, 'alice'), 3, 'and it may leave now');
    t.same((await s.groupsOf('bob', { limit: 10 })).groups, [{ id: g.id, role: 'owner' }]);
  });

  t.test('update: name and meta by an admin or the owner, as an event', async (t) => {
    const s = await open(t);
    const g = await s.create('alice', 'G', ['bob', 'carol'], { a: '1' });
    await s.setRole(g.id, 'alice', 'bob', 'admin');
    t.equal(await s.update(g.id, 'bob', { name: 'Renamed' }), 3);
    t.equal(await s.update(g.id, 'alice', { meta: { b: '2' } }), 4);
    t.equal(await s.update(g.id, 'alice', { name: 'Both', meta: {} }), 5);
    await t.rejects(s.update(g.id, 'carol', { name: 'Mine' }), code('SB_ERR_GROUP_FORBIDDEN'), 'a member does not');
    await t.rejects(s.update(g.id, 'alice', {}), code('SB_ERR_BAD_GROUP'), 'an update changes something');
    await t.rejects(s.update(g.id, 'alice', { meta: { huge: 'x'.repeat(2000) } }), code('SB_ERR_BAD_GROUP'), 'meta is bounded');
    await t.rejects(s.update(g.id, 'alice', { name: '' }), code('SB_ERR_BAD_GROUP'));
    t.match(await s.get(g.id, 'carol'), { name: 'Both', meta: {}, head: 5 });
    t.same((await eventsOf(s, g.id, 'carol')).slice(2), [
      { seq: 3, type: 'updated', actor: 'bob', name: 'Renamed' },
      { seq: 4, type: 'updated', actor: 'alice', meta: { b: '2' } },
      { seq: 5, type: 'updated', actor: 'alice', name: 'Both', meta: {} },
    ]);
  });

  t.test('dissolve: by the owner; no write after it, reads by its members go on', async (t) => {
    const s = await open(t);
    const g = await s.create('alice', 'G', ['bob', 'carol']);
    await s.append(g.id, 'bob', '1', body('hello'));
    await s.setRole(g.id, 'alice', 'bob', 'admin');
    await t.rejects(s.dissolve(g.id, 'bob'), code('SB_ERR_GROUP_FORBIDDEN'), 'an admin does not dissolve');
    await t.rejects(s.dissolve(g.id, 'dave'), code('SB_ERR_GROUP_NOT_MEMBER'));
    t.equal(await s.dissolve(g.id, 'alice'), 4);
    const writes: [string, () => Promise<unknown>][] = [
      ['append', () => s.append(g.id, 'bob', '2', body('late'))],
      ['addMembers', () => s.addMembers(g.id, 'alice', ['dave'])],
      ['removeMembers', () => s.removeMembers(g.id, 'alice', ['carol'])],
      ['leave', () => s.leave(g.id, 'carol')],
      ['setRole', () => s.setRole(g.id, 'alice', 'carol', 'admin')],
      ['transfer', () => s.transfer(g.id, 'alice', 'bob')],
      ['update', () => s.update(g.id, 'alice', { name: 'x' })],
      ['dissolve', () => s.dissolve(g.id, 'alice')],
    ];
    for (const [name, write] of writes) await t.rejects(write(), code('SB_ERR_GROUP_DISSOLVED'), name);
    await t.rejects(s.append(g.id, 'dave', '1', body('x')), code('SB_ERR_GROUP_NOT_MEMBER'), 'a stranger is told it is not a member');
    t.match(await s.get(g.id, 'carol'), { dissolved: true, head: 4, memberCount: 3, role: 'member' });
    t.same(await seqsOf(s, g.id, 'carol'), [1, 2, 3, 4], 'the whole history reads on');
    t.same((await eventsOf(s, g.id, 'carol')).at(-1), { seq: 4, type: 'dissolved', actor: 'alice' });
    t.same((await allMembers(s, g.id, 'carol')).map((m) => m.uid), ['alice', 'bob', 'carol'], 'the members at the end');
    await s.saveCursor(g.id, 'carol', 'phone', 4);
    t.equal(await s.cursor(g.id, 'carol', 'phone'), 4, 'positions are saved still');
    for (const uid of ['alice', 'bob', 'carol']) {
      t.same(await s.groupsOf(uid, { limit: 10 }), { groups: [], next: undefined }, `${uid} no longer lists it`);
      t.match(await s.departedOf(uid), [{ id: g.id, seq: 4, reason: 'dissolved' }], `${uid} has the departure`);
    }
  });

  t.test('append and read: messages and events in one order, binary bodies, bounds', async (t) => {
    const s = await open(t);
    const g = await s.create('alice', 'G', ['bob']);
    const bytes = Buffer.from([0, 0x7c, 0xff, 0x7c, 0x0a, 0x0d, 0x00, 0x80, 0x7b, 0x7d]);
    const first = await s.append(g.id, 'bob', '1', bytes);
    t.match(first, { seq: 2, duplicate: false });
    t.ok(first.storedAt > 0, 'storedAt is set');
    await s.addMembers(g.id, 'alice', ['carol']);
    t.match(await s.append(g.id, 'carol', '1', body('hi')), { seq: 4, duplicate: false });
    t.match(await s.append(g.id, 'alice', '1', Buffer.alloc(0)), { seq: 5 }, 'an empty body');
    const read = await s.read(g.id, 'alice', 0, 100);
    t.match(read, { head: 5, oldest: 1, joined: 1 });
    t.same(read.entries.map((e) => [e.seq, e.kind, e.sender]), [[1, 'event', 'alice'], [2, 'message', 'bob'], [3, 'event', 'alice'], [4, 'message', 'carol'], [5, 'message', 'alice']]);
    t.same([...read.entries[1]!.body], [...bytes], 'binary-safe');
    t.equal(read.entries[1]!.storedAt, first.storedAt);
    t.equal(read.entries[4]!.body.length, 0);
    t.same(await seqsOf(s, g.id, 'alice', 2), [3, 4, 5], 'after a seq');
    t.same((await s.read(g.id, 'alice', 1, 2)).entries.map((e) => e.seq), [2, 3], 'bounded by limit');
    t.match(await s.read(g.id, 'alice', 0, 0), { entries: [], head: 5, oldest: 1 }, 'limit 0: bounds only');
    t.same((await s.read(g.id, 'alice', 5, 10)).entries, [], 'nothing after the head');
    await t.rejects(s.append(g.id, 'bob', '9', Buffer.alloc(64 * 1024 + 1)), code('SB_ERR_MESSAGE_TOO_LARGE'), 'maxBodyBytes');
    t.match(await s.append(g.id, 'bob', '9', Buffer.alloc(64 * 1024)), { seq: 6 }, 'up to it');
    await t.rejects(s.read(g.id, 'alice', -1, 10), code('SB_ERR_BAD_GROUP'), 'a negative position');
  });

  t.test('dedupe: the same sender and msgId is stored once and keeps its seq and store time', async (t) => {
    let now = 1_700_000_000_000;
    const s = await open(t, { dedupeWindowMs: 60_000 }, () => now);
    const g = await s.create('alice', 'G', ['bob', 'carol']);
    const a = await s.append(g.id, 'bob', '42', body('first'));
    now += 1000;
    await s.append(g.id, 'bob', '43', body('other'));
    t.same(await s.append(g.id, 'bob', '42', body('retry')), { seq: a.seq, storedAt: a.storedAt, duplicate: true });
    t.match(await s.append(g.id, 'carol', '42', body('carol')), { seq: 4, duplicate: false }, 'another sender, same id: distinct');
    const other = await s.create('alice', 'H', ['bob']);
    t.match(await s.append(other.id, 'bob', '42', body('elsewhere')), { seq: 2, duplicate: false }, 'another group: distinct');
    for (const msgId of ['0', '0', '', '']) t.match(await s.append(g.id, 'bob', msgId, body(msgId)), { duplicate: false }, `msgId ${JSON.stringify(msgId)} is never deduplicated`);
    t.same((await s.read(g.id, 'alice', 0, 100)).entries.filter((e) => e.kind === 'message').map((e) => e.body.toString()), ['first', 'other', 'carol', '0', '0', '', '']);
    now += 60_000;
    t.match(await s.append(g.id, 'bob', '42', body('later')), { seq: 9, duplicate: false }, 'after the window, the id is new again');
    t.match(await s.append(g.id, 'bob', '43', body('later')), { seq: 10, duplicate: false });
  });

  t.test('dedupe is bounded: the last dedupeEntries deduplicated messages of a group are remembered', async (t) => {
    const s = await open(t, { dedupeEntries: 5, maxEntries: 100 });
    const g = await s.create('alice', 'G', ['bob', 'carol']);
    for (let i = 1; i <= 8; i++) await s.append(g.id, i % 2 ? 'bob' : 'carol', String(i), body(String(i)));
    // Ids 1..3 were forgotten (8 entries, 5 kept): ids 4..8 (seqs 5..9) are duplicates.
    for (let i = 8; i >= 4; i--) t.match(await s.append(g.id, i % 2 ? 'bob' : 'carol', String(i), body('retry')), { seq: i + 1, duplicate: true }, `id ${i} remembered`);
    t.match(await s.append(g.id, 'bob', '3', body('new')), { seq: 10, duplicate: false }, 'id 3 forgotten');
    // Out-of-order and non-numeric ids are remembered too.
    for (const id of ['zz', '100', '50']) await s.append(g.id, 'bob', id, body(id));
    t.match(await s.append(g.id, 'bob', '50', body('retry')), { seq: 13, duplicate: true });
    t.match(await s.append(g.id, 'bob', 'zz', body('retry')), { seq: 11, duplicate: true });
  });

  t.test('visibility: a member added later reads from its added event; one removed reads up to its removal', async (t) => {
    const s = await open(t);
    const g = await s.create('alice', 'G', ['bob']);
    await s.append(g.id, 'alice', '1', body('before carol')); // 2
    const { seq: added } = await s.addMembers(g.id, 'alice', ['carol']); // 3
    await s.append(g.id, 'bob', '1', body('with carol')); // 4
    t.same(await seqsOf(s, g.id, 'carol'), [3, 4], 'carol reads from her added event on, nothing before');
    t.match(await s.read(g.id, 'carol', 0, 10), { joined: added, head: 4, oldest: 1 });
    t.same(await seqsOf(s, g.id, 'carol', 1), [3, 4], 'whatever position she asks from');
    const { seq: removed } = await s.removeMembers(g.id, 'alice', ['bob']); // 5
    await s.append(g.id, 'alice', '2', body('after bob')); // 6
    t.same(await seqsOf(s, g.id, 'bob'), [1, 2, 3, 4, 5], 'bob reads up to his removal, included');
    t.match(await s.read(g.id, 'bob', 0, 10), { head: removed, joined: 1 }, 'his head is his removal');
    t.same(await seqsOf(s, g.id, 'bob', 5), [], 'nothing after it');
    t.same(await seqsOf(s, g.id, 'carol'), [3, 4, 5, 6]);
    await t.rejects(s.read(g.id, 'dave', 0, 10), code('SB_ERR_GROUP_NOT_MEMBER'), 'a uid that never was a member is refused');
    await t.rejects(s.append(g.id, 'bob', '9', body('still here?')), code('SB_ERR_GROUP_NOT_MEMBER'), 'a removed member does not append');
    await t.rejects(s.members(g.id, 'bob', { limit: 10 }), code('SB_ERR_GROUP_NOT_MEMBER'), 'nor list the members');
    t.equal((await s.get(g.id, 'alice')).head, 6, 'its attempt appended nothing');
    // Re-added: a new period, from the new added event only.
    const { seq: again } = await s.addMembers(g.id, 'alice', ['bob']); // 7
    await s.append(g.id, 'carol', '2', body('bob is back')); // 8
    t.same(await seqsOf(s, g.id, 'bob'), [7, 8], 'a re-added member reads its new period only');
    t.match(await s.get(g.id, 'bob'), { role: 'member', joined: again, left: undefined });
    t.same(await s.departedOf('bob'), [], 're-added, the group is no longer a departure');
  });

  t.test('retention by count keeps the newest entries; the retention edge is reported; the seq goes on', async (t) => {
    const s = await open(t, { maxEntries: 5 });
    const g = await s.create('alice', 'G', ['bob']);
    for (let i = 1; i <= 11; i++) await s.append(g.id, 'bob', String(i), body(`m${i}`));
    const r = await s.read(g.id, 'alice', 0, 100);
    t.match(r, { head: 12, oldest: 8, joined: 1 });
    t.same(r.entries.map((e) => e.seq), [8, 9, 10, 11, 12]);
    t.same(await seqsOf(s, g.id, 'alice', 9), [10, 11, 12]);
    t.match(await s.append(g.id, 'bob', '12', body('m12')), { seq: 13 });
  });

  t.test('retention by age prunes old entries; former members whose entries all aged out are forgotten', async (t) => {
    let now = 1_700_000_000_000;
    const s = await open(t, { maxAgeMs: 60_000 }, () => now);
    const g = await s.create('alice', 'G', ['bob', 'carol']);
    await s.append(g.id, 'bob', '1', body('old')); // 2
    await s.leave(g.id, 'bob'); // 3
    now += 30_000;
    await s.append(g.id, 'carol', '1', body('newer')); // 4
    t.same(await seqsOf(s, g.id, 'bob'), [1, 2, 3], 'bob reads up to his departure');
    now += 40_000;
    t.match(await s.read(g.id, 'carol', 0, 10), { head: 4, oldest: 4 }, 'the first three aged out');
    t.same(await seqsOf(s, g.id, 'carol'), [4]);
    await t.rejects(s.read(g.id, 'bob', 0, 10), code('SB_ERR_GROUP_NOT_MEMBER'), 'bob can read nothing any more: forgotten');
    now += 30_000;
    t.match(await s.read(g.id, 'carol', 0, 10), { head: 4, oldest: 5, entries: [] }, 'everything aged out');
    t.match(await s.append(g.id, 'carol', '2', body('new')), { seq: 5 }, 'the seq goes on');
    t.match(await s.get(g.id, 'carol'), { memberCount: 2, head: 5 }, 'the group itself stays');
  });

  t.test('a dissolved group is gone once its log aged out', async (t) => {
    let now = 1_700_000_000_000;
    const s = await open(t, { maxAgeMs: 60_000 }, () => now);
    const g = await s.create('alice', 'G', ['bob']);
    await s.dissolve(g.id, 'alice');
    now += 30_000;
    t.same(await seqsOf(s, g.id, 'bob'), [1, 2]);
    now += 40_000;
    await t.rejects(s.read(g.id, 'bob', 0, 10), code('SB_ERR_GROUP_NOT_FOUND'));
    await t.rejects(s.get(g.id, 'alice'), code('SB_ERR_GROUP_NOT_FOUND'));
    t.match(await s.departedOf('bob'), [{ id: g.id, reason: 'dissolved', seq: 2 }], 'the departure is remembered still');
  });

  t.test('members: paged in byte order of the uids, only for members', async (t) => {
    const s = await open(t);
    const uids = ['zoe', 'Ünï', 'émile', 'a}b{c', '__proto__', 'constructor', 'a:b', 'bob', 'b', 'ba', '𝔘', '\ue000'];
    const g = await s.create('owner', 'G', uids);
    const expected = ['owner', ...uids].sort(byteOrder);
    for (const limit of [1, 3, 5, 100]) t.same((await allMembers(s, g.id, 'zoe', limit)).map((m) => m.uid), expected, `pages of ${limit}`);
    const first = await s.members(g.id, 'zoe', { limit: 4 });
    t.equal(first.members.length, 4);
    t.equal(first.next, expected[3]);
    const last = await s.members(g.id, 'zoe', { after: expected[expected.length - 2], limit: 4 });
    t.same(last, { members: [{ uid: expected.at(-1), role: 'member', joined: 1 }], next: undefined });
    t.same(await s.members(g.id, 'zoe', { after: expected.at(-1), limit: 4 }), { members: [], next: undefined });
    t.same((await s.members(g.id, 'zoe', { limit: 0 })).members, [], 'limit 0');
    await t.rejects(s.members(g.id, 'stranger', { limit: 10 }), code('SB_ERR_GROUP_NOT_MEMBER'));
    for (const uid of uids) t.same((await s.groupsOf(uid, { limit: 10 })).groups, [{ id: g.id, role: 'member' }], `${JSON.stringify(uid)} is an ordinary string`);
  });

  t.test('maxPageSize bounds a read and a page, whatever limit asks', async (t) => {
    const s = await open(t, { maxPageSize: 3 });
    const g = await s.create('alice', 'G', ['bob', 'carol', 'dave', 'erin']);
    for (let i = 1; i <= 5; i++) await s.append(g.id, 'bob', String(i), body(String(i)));
    t.same((await s.read(g.id, 'alice', 0, 100)).entries.map((e) => e.seq), [1, 2, 3]);
    const page = await s.members(g.id, 'alice', { limit: 100 });
    t.same([page.members.length, page.next], [3, 'carol']);
    for (let i = 0; i < 4; i++) await s.create('erin', `E${i}`);
    const groups = await s.groupsOf('erin', { limit: 100 });
    t.equal(groups.groups.length, 3);
    t.ok(groups.next !== undefined, 'and says there is more');
  });

  t.test('groupsOf: paged in byte order of the ids, with the role', async (t) => {
    const s = await open(t);
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) ids.push((await s.create(i % 2 ? 'alice' : 'bob', `G${i}`, ['alice', 'bob'])).id);
    const left = ids[3]!;
    await s.leave(left, 'bob');
    const expected = ids.filter((id) => id !== left).sort();
    for (const limit of [1, 2, 100]) t.same((await allGroups(s, 'bob', limit)).map((g) => g.id), expected, `pages of ${limit}`);
    const roles = Object.fromEntries((await allGroups(s, 'alice')).map((g) => [g.id, g.role]));
    t.same(Object.values(roles).sort(), ['member', 'member', 'member', 'member', 'owner', 'owner', 'owner']);
    t.same(await s.groupsOf('nobody', { limit: 10 }), { groups: [], next: undefined });
  });

  t.test('departedOf: most recent first, bounded by maxDeparted', async (t) => {
    let now = 1_700_000_000_000;
    const s = await open(t, { maxDeparted: 3 }, () => now);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const g = await s.create('alice', `G${i}`, ['bob']);
      ids.push(g.id);
      now += 1000;
      await s.leave(g.id, 'bob');
    }
    const departed = await s.departedOf('bob');
    t.same(departed.map((d) => d.id), [ids[4], ids[3], ids[2]], 'the three most recent');
    t.match(departed[0], { seq: 2, reason: 'left', at: now });
  });

  t.test('device positions: per device, monotonic, clamped to what the reader may read', async (t) => {
    const s = await open(t, { maxDevicesPerMember: 3 });
    const g = await s.create('alice', 'G', ['bob']);
    for (let i = 1; i <= 5; i++) await s.append(g.id, 'alice', String(i), body(String(i)));
    t.equal(await s.cursor(g.id, 'bob', 'phone'), undefined);
    await s.saveCursor(g.id, 'bob', 'phone', 4);
    await s.saveCursor(g.id, 'bob', 'laptop', 2);
    await s.saveCursor(g.id, 'bob', 'phone', 3);
    t.equal(await s.cursor(g.id, 'bob', 'phone'), 4, 'never back');
    t.equal(await s.cursor(g.id, 'bob', 'laptop'), 2);
    await s.saveCursor(g.id, 'bob', 'tablet', 1_000_000);
    t.equal(await s.cursor(g.id, 'bob', 'tablet'), 6, 'clamped to the head');
    t.equal(await s.cursor(g.id, 'alice', 'phone'), undefined, 'per member');
    await s.saveCursor(g.id, 'bob', 'watch', 5);
    t.equal(await s.cursor(g.id, 'bob', 'laptop'), undefined, 'a fourth device replaced the least advanced');
    t.equal(await s.cursor(g.id, 'bob', 'watch'), 5);
    t.equal(await s.cursor(g.id, 'bob', 'phone'), 4);
    await s.removeMembers(g.id, 'alice', ['bob']); // 7
    await s.append(g.id, 'alice', '6', body('after')); // 8
    await s.saveCursor(g.id, 'bob', 'phone', 100);
    t.equal(await s.cursor(g.id, 'bob', 'phone'), 7, 'a former member: clamped to its departure');
    await t.rejects(s.saveCursor(g.id, 'mallory', 'phone', 1), code('SB_ERR_GROUP_NOT_MEMBER'), 'a stranger saves no position');
    await t.rejects(s.cursor(g.id, 'mallory', 'phone'), code('SB_ERR_GROUP_NOT_MEMBER'));
    await t.rejects(s.saveCursor(g.id, 'alice', '', 1), code('SB_ERR_BAD_GROUP'), 'a device id is not empty');
    await t.rejects(s.saveCursor(g.id, 'alice', 'phone', -1), code('SB_ERR_BAD_GROUP'));
    await s.saveCursor(g.id, 'alice', 'phone', 0);
    t.equal(await s.cursor(g.id, 'alice', 'phone'), 0, 'position 0 is a position');
  });

  t.test('limits: maxMembers and maxGroupsPerUser are exact, and refused changes are all or nothing', async (t) => {
    const s = await open(t, { maxMembers: 4, maxGroupsPerUser: 2 });
    const g = await s.create('alice', 'G', ['bob']);
    await t.rejects(s.addMembers(g.id, 'alice', ['carol', 'dave', 'erin']), code('SB_ERR_GROUP_FULL'), 'one too many');
    t.match(await s.get(g.id, 'alice'), { memberCount: 2, head: 1 }, 'nobody was added');
    t.same(await s.addMembers(g.id, 'alice', ['carol', 'dave', 'bob']), { seq: 2, uids: ['carol', 'dave'] }, 'up to the limit, members ignored');
    await t.rejects(s.addMembers(g.id, 'alice', ['erin']), code('SB_ERR_GROUP_FULL'));
    await t.rejects(s.create('alice', 'Big', ['b', 'c', 'd', 'e']), code('SB_ERR_GROUP_FULL'), 'at create too');
    await s.create('erin', 'E1');
    await s.create('erin', 'E2');
    await t.rejects(s.create('erin', 'E3'), code('SB_ERR_GROUP_TOO_MANY'), 'the owner has its limit');
    await t.rejects(s.create('frank', 'F', ['erin']), code('SB_ERR_GROUP_TOO_MANY'), 'a member has its limit');
    t.same(await s.groupsOf('frank', { limit: 10 }), { groups: [], next: undefined }, 'the refused create left frank nothing');
    const h = await s.create('frank', 'H');
    await t.rejects(s.addMembers(h.id, 'frank', ['gina', 'erin']), code('SB_ERR_GROUP_TOO_MANY'), 'all or nothing');
    t.match(await s.get(h.id, 'frank'), { memberCount: 1, head: 1 });
    t.same(await s.groupsOf('gina', { limit: 10 }), { groups: [], next: undefined });
  });

  t.test('limits: a slot freed by a departure is usable again', async (t) => {
    const s = await open(t, { maxMembers: 3, maxGroupsPerUser: 1 });
    const g = await s.create('alice', 'G', ['bob', 'carol']);
    await s.leave(g.id, 'carol');
    t.same(await s.addMembers(g.id, 'alice', ['dave']), { seq: 3, uids: ['dave'] }, 'a member slot');
    const other = await s.create('erin', 'E');
    await t.rejects(s.addMembers(other.id, 'erin', ['bob']), code('SB_ERR_GROUP_TOO_MANY'));
    await s.leave(g.id, 'bob');
    t.match(await s.addMembers(other.id, 'erin', ['bob']), { uids: ['bob'] }, 'a group slot');
  });

  t.test('former members are bounded: the earliest departures are forgotten past maxFormerMembers', async (t) => {
    const s = await open(t, { maxFormerMembers: 2 });
    const g = await s.create('alice', 'G', ['u1', 'u2', 'u3']);
    for (const uid of ['u1', 'u2', 'u3']) await s.leave(g.id, uid);
    await t.rejects(s.read(g.id, 'u1', 0, 10), code('SB_ERR_GROUP_NOT_MEMBER'), 'u1, the earliest, is forgotten');
    t.same(await seqsOf(s, g.id, 'u2'), [1, 2, 3]);
    t.same(await seqsOf(s, g.id, 'u3'), [1, 2, 3, 4]);
  });

  t.test('concurrency: racing adds, appends and leaves lose no seq and repeat none; memberCount stays right', async (t) => {
    const s = await open(t);
    const other = await twin(s);
    if (other !== s) t.teardown(() => other.close());
    const g = await s.create('owner', 'G', ['admin1', 'admin2', 'talker']);
    await s.setRole(g.id, 'owner', 'admin1', 'admin');
    await s.setRole(g.id, 'owner', 'admin2', 'admin');
    const base = (await s.get(g.id, 'owner')).head;
    const ops: Promise<{ seq: number | undefined }>[] = [];
    for (let i = 0; i < 40; i++) {
      const client = i % 2 ? s : other;
      // Every uid is named by two admins at once: it is added by exactly one event.
      ops.push(client.addMembers(g.id, 'admin1', [`u${i}`, `u${i + 1}`]));
      ops.push(client.addMembers(g.id, 'admin2', [`u${i + 1}`, `u${i}`]));
      ops.push(client.append(g.id, 'talker', String(i + 1), body(`m${i}`)));
      ops.push(client.append(g.id, 'talker', String(i + 1), body(`retry m${i}`)));
    }
    const results = await Promise.all(ops);
    const head = (await s.get(g.id, 'owner')).head;
    const read = await s.read(g.id, 'owner', 0, 10_000);
    t.same(read.entries.map((e) => e.seq), Array.from({ length: head }, (_, i) => i + 1), 'the log is dense: no lost seq');
    const appended: number[] = [];
    for (let i = 0; i < 40; i++) {
      const [a, b, first, retry] = results.slice(i * 4, i * 4 + 4) as [{ seq?: number }, { seq?: number }, { seq: number; duplicate: boolean }, { seq: number; duplicate: boolean }];
      t.same([first.duplicate, retry.duplicate, retry.seq], [false, true, first.seq], `message ${i} stored once, its retry a duplicate of it`);
      appended.push(first.seq);
      for (const change of [a, b]) if (change.seq !== undefined) appended.push(change.seq);
    }
    t.same([...appended].sort((x, y) => x - y), Array.from({ length: head - base }, (_, i) => base + i + 1), 'every seq handed out is one entry, none twice');
    const messages = read.entries.filter((e) => e.kind === 'message');
    t.equal(messages.length, 40, 'each message stored once');
    t.same(new Set(messages.map((e) => e.body.toString())).size, 40);
    const addedBy = new Map<string, number>();
    for (const e of read.entries) {
      if (e.kind !== 'event' || e.seq <= base) continue;
      const event = decodeGroupEvent(e.body);
      t.equal(event.type, 'added');
      for (const uid of event.uids!) {
        t.notOk(addedBy.has(uid), `${uid} added once`);
        addedBy.set(uid, e.seq);
      }
    }
    t.equal(addedBy.size, 41, 'u0..u40 added');
    const members = await allMembers(s, g.id, 'owner');
    t.equal((await s.get(g.id, 'owner')).memberCount, members.length, 'memberCount is the number of members');
    t.equal(members.length, 4 + 41);
    for (const m of members) if (m.uid.startsWith('u')) t.equal(m.joined, addedBy.get(m.uid), `${m.uid} joined at the event that added it`);
    // Racing leaves and appends.
    const leaves = await Promise.all([...Array.from({ length: 41 }, (_, i) => (i % 2 ? s : other).leave(g.id, `u${i}`)), ...Array.from({ length: 20 }, (_, i) => s.append(g.id, 'talker', `x${i}`, body('x')).then((r) => r.seq))]);
    t.equal(new Set(leaves).size, leaves.length, 'distinct seqs');
    t.match(await s.get(g.id, 'owner'), { memberCount: 4, head: head + 61 });
    for (let i = 0; i <= 40; i++) t.same(await s.groupsOf(`u${i}`, { limit: 10 }), { groups: [], next: undefined }, `u${i}'s index follows`);
  });

  t.test('attacks: forged actors, self-promotion, departed members, other groups, oversized input', async (t) => {
    const s = await open(t);
    const g = await s.create('alice', 'Ours', ['bob', 'carol']);
    const theirs = await s.create('mallory', 'Theirs', ['eve']);
    await s.setRole(g.id, 'alice', 'bob', 'admin');
    const head = (await s.get(g.id, 'alice')).head;
    await t.rejects(s.addMembers(g.id, 'mallory', ['mallory']), code('SB_ERR_GROUP_NOT_MEMBER'), 'a stranger adding itself');
    await t.rejects(s.addMembers(g.id, 'eve', ['eve', 'mallory']), code('SB_ERR_GROUP_NOT_MEMBER'), "a member of another group adding itself");
    await t.rejects(s.addMembers(g.id, 'carol', ['mallory']), code('SB_ERR_GROUP_FORBIDDEN'), 'a member adding a friend');
    await t.rejects(s.setRole(g.id, 'bob', 'bob', 'admin'), code('SB_ERR_GROUP_FORBIDDEN'), 'an admin re-promoting itself');
    await t.rejects(s.setRole(g.id, 'carol', 'carol', 'admin'), code('SB_ERR_GROUP_FORBIDDEN'), 'a member promoting itself');
    await t.rejects(s.transfer(g.id, 'bob', 'bob'), code('SB_ERR_GROUP_FORBIDDEN'), 'an admin taking the ownership');
    await t.rejects(s.dissolve(g.id, 'bob'), code('SB_ERR_GROUP_FORBIDDEN'));
    await t.rejects(s.removeMembers(g.id, 'carol', ['bob', 'alice']), code('SB_ERR_GROUP_FORBIDDEN'));
    await t.rejects(s.update(g.id, 'mallory', { name: 'pwned' }), code('SB_ERR_GROUP_NOT_MEMBER'));
    await t.rejects(s.update(g.id, 'bob', { meta: Object.fromEntries(Array.from({ length: 1000 }, (_, i) => [`k${i}`, 'x'.repeat(100)])) }), code('SB_ERR_BAD_GROUP'), 'a huge meta');
    await t.rejects(s.update(g.id, 'bob', { meta: { k: 'x'.repeat(1_000_000) } }), code('SB_ERR_BAD_GROUP'), 'a huge meta value');
    await t.rejects(s.update(g.id, 'bob', { name: 'x'.repeat(100_000) }), code('SB_ERR_BAD_GROUP'), 'a huge name');
    await t.rejects(s.read(g.id, 'eve', 0, 10), code('SB_ERR_GROUP_NOT_MEMBER'), "reading another group's log");
    await t.rejects(s.read(theirs.id, 'alice', 0, 10), code('SB_ERR_GROUP_NOT_MEMBER'));
    await t.rejects(s.append(theirs.id, 'alice', '1', body('spam')), code('SB_ERR_GROUP_NOT_MEMBER'));
    await t.rejects(s.members(theirs.id, 'alice', { limit: 10 }), code('SB_ERR_GROUP_NOT_MEMBER'));
    await t.rejects(s.get(theirs.id, 'alice'), code('SB_ERR_GROUP_NOT_MEMBER'));
    await t.rejects(s.saveCursor(theirs.id, 'alice', 'phone', 1), code('SB_ERR_GROUP_NOT_MEMBER'));
    await t.rejects(s.addMembers(g.id, 'alice', ['x'.repeat(10_000)]), code('SB_ERR_BAD_GROUP'), 'a huge uid');
    await t.rejects(s.saveCursor(g.id, 'alice', 'd'.repeat(129), 1), code('SB_ERR_BAD_GROUP'), 'a huge device id');
    t.equal((await s.get(g.id, 'alice')).head, head, 'nothing was appended to ours');
    t.equal((await s.get(theirs.id, 'mallory')).head, 1, 'nor to theirs');
    t.same((await allMembers(s, g.id, 'alice')).map((m) => [m.uid, m.role]), [['alice', 'owner'], ['bob', 'admin'], ['carol', 'member']], 'roles unchanged');
    // A removed member: nothing after its removal, no writes.
    await s.removeMembers(g.id, 'bob', ['carol']);
    await s.append(g.id, 'alice', '1', body('secret plan'));
    t.notOk((await s.read(g.id, 'carol', 0, 100)).entries.some((e) => e.body.toString() === 'secret plan'), 'the removed member never reads what came after');
    await t.rejects(s.append(g.id, 'carol', '1', body('let me in')), code('SB_ERR_GROUP_NOT_MEMBER'));
    await t.rejects(s.addMembers(g.id, 'carol', ['carol']), code('SB_ERR_GROUP_NOT_MEMBER'), 'nor adds itself back');
    await t.rejects(s.leave(g.id, 'carol'), code('SB_ERR_GROUP_NOT_MEMBER'));
  });

  t.test('a 5 000-member group, added in slices of 500 (the time is reported, not asserted)', async (t) => {
    const s = await open(t);
    const g = await s.create('owner', 'Big');
    const started = process.hrtime.bigint();
    for (let slice = 0; slice < 10; slice++) {
      const uids = Array.from({ length: 500 }, (_, i) => `user${String(slice * 500 + i).padStart(4, '0')}`);
      const change = await s.addMembers(g.id, 'owner', uids);
      t.equal(change.uids.length, 500);
    }
    const ms = Number(process.hrtime.bigint() - started) / 1e6;
    t.comment(`5 000 members added in 10 slices of 500: ${ms.toFixed(1)} ms`);
    t.match(await s.get(g.id, 'owner'), { memberCount: 5001, head: 11 });
    const members = await allMembers(s, g.id, 'user4999', 1000);
    t.equal(members.length, 5001);
    t.same(members.map((m) => m.uid), [...members.map((m) => m.uid)].sort(byteOrder), 'in byte order');
    t.match(await s.append(g.id, 'user0000', '1', body('hello, everyone')), { seq: 12 });
    t.same(await seqsOf(s, g.id, 'user4999'), [11, 12], 'the last slice reads from its event');
    t.same((await s.groupsOf('user2500', { limit: 10 })).groups, [{ id: g.id, role: 'member' }]);
    const removing = process.hrtime.bigint();
    await s.dissolve(g.id, 'owner');
    t.comment(`dissolving it (5 001 departures): ${(Number(process.hrtime.bigint() - removing) / 1e6).toFixed(1)} ms`);
    t.match(await s.departedOf('user1234'), [{ id: g.id, reason: 'dissolved', seq: 13 }]);
  });

  t.test('read positions: unread counts messages after the position, not events; marks move forward only and clamp to the head; a send marks up to itself', async (t) => {
    const s = await open(t);
    const g = await s.create('alice', 'Reads', ['bob', 'carol']); // seq 1
    for (const n of [1, 2, 3]) await s.append(g.id, 'alice', String(n), body(`m${n}`)); // 2, 3, 4
    t.match(await s.summary(g.id, 'bob'), { id: g.id, name: 'Reads', memberCount: 3, dissolved: false, head: 4, readSeq: 0, unread: 3 }, 'the created event is not unread');
    t.equal((await s.summary(g.id, 'bob')).last?.body.toString(), 'm3', 'the last entry');
    t.match(await s.summary(g.id, 'alice'), { readSeq: 4, unread: 0 }, "the sender's own messages moved its position");
    t.same(await s.markRead(g.id, 'bob', 3, true), { readSeq: 3, unread: 1, moved: true });
    t.same(await s.markRead(g.id, 'bob', 2, true), { readSeq: 3, unread: 1, moved: false }, 'never back');
    t.same(await s.markRead(g.id, 'bob', 3, true), { readSeq: 3, unread: 1, moved: false }, 'a repeat moves nothing');
    await s.addMembers(g.id, 'alice', ['dave']); // 5
    await s.update(g.id, 'alice', { name: 'Reads 2' }); // 6
    await s.append(g.id, 'carol', 'c1', body('from carol')); // 7
    t.match(await s.summary(g.id, 'bob'), { name: 'Reads 2', head: 7, readSeq: 3, unread: 2 }, 'm3 and carol: the two events between are not counted');
    t.match(await s.summary(g.id, 'dave'), { readSeq: 0, unread: 1 }, 'a new member counts from its joining: only what came after');
    t.match(await s.summary(g.id, 'carol'), { readSeq: 7, unread: 0 });
    t.match(await s.summary(g.id, 'alice'), { readSeq: 4, unread: 1 });
    t.same(await s.markRead(g.id, 'bob', 1_000_000, false), { readSeq: 7, unread: 0, moved: true }, 'clamped to the head');
    t.match(await s.append(g.id, 'alice', '1', body('m1 again')), { duplicate: true });
    t.match(await s.summary(g.id, 'alice'), { readSeq: 4 }, 'a duplicate moves nothing');
    t.equal((await s.summary(g.id, 'dave')).last?.body.toString(), 'from carol');
  });

  t.test('readers and readCount show shared positions only, of members only; a departure takes its position along, a re-added member starts again', async (t) => {
    const s = await open(t);
    const g = await s.create('alice', 'Receipts', ['bob', 'carol', 'dave']);
    const { seq } = await s.append(g.id, 'alice', '1', body('did you read this?'), true); // 2
    t.same(await s.readCount(g.id, 'alice', seq), { read: 0, of: 3 }, 'the sender does not count itself');
    await s.markRead(g.id, 'bob', seq, true);
    await s.markRead(g.id, 'carol', seq, false); // private: only its own unread follows
    t.same(await s.readCount(g.id, 'alice', seq), { read: 1, of: 3 });
    t.match(await s.summary(g.id, 'carol'), { readSeq: 2, unread: 0 }, "carol's own position moved");
    t.same(await s.readCount(g.id, 'bob', seq), { read: 1, of: 3 }, 'bob asking: alice shared her send, bob is not counted');
    t.same(await s.readCount(g.id, 'carol', seq), { read: 2, of: 3 }, 'carol asking: alice and bob');
    const { seq: second } = await s.append(g.id, 'bob', '1', body('yes'), false); // 3: bob's own moves; without share its shared one is withdrawn
    t.same(await s.readCount(g.id, 'alice', second), { read: 0, of: 3 });
    t.same(await s.readers(g.id, 'dave', { limit: 10 }), { readers: [{ uid: 'alice', readSeq: 2 }, { uid: 'bob', readSeq: 0 }, { uid: 'carol', readSeq: 0 }, { uid: 'dave', readSeq: 0 }], next: undefined });
    const page = await s.readers(g.id, 'dave', { limit: 2 });
    t.same(page, { readers: [{ uid: 'alice', readSeq: 2 }, { uid: 'bob', readSeq: 0 }], next: 'bob' });
    t.same((await s.readers(g.id, 'dave', { after: page.next, limit: 2 })).readers.map((r) => r.uid), ['carol', 'dave']);
    await s.removeMembers(g.id, 'alice', ['bob']); // 4
    t.same(await s.readCount(g.id, 'alice', seq), { read: 0, of: 2 }, "bob's position went with him");
    t.match(await s.summary(g.id, 'bob'), { head: 4, readSeq: 0 }, 'a former member still sees up to its removal');
    await s.addMembers(g.id, 'alice', ['bob']); // 5
    t.match(await s.summary(g.id, 'bob'), { readSeq: 0, unread: 0 }, 're-added: from its new joining');
    t.same(await s.readCount(g.id, 'alice', seq), { read: 0, of: 3 });
  });

  t.test('attacks on read positions: strangers, former members, forged ids and marks are refused and change nothing', async (t) => {
    const s = await open(t);
    const g = await s.create('alice', 'Private', ['bob']);
    const { seq } = await s.append(g.id, 'alice', '1', body('hi'), true);
    await t.rejects(s.markRead(g.id, 'mallory', seq, true), code('SB_ERR_GROUP_NOT_MEMBER'));
    await t.rejects(s.readers(g.id, 'mallory', { limit: 10 }), code('SB_ERR_GROUP_NOT_MEMBER'));
    await t.rejects(s.readCount(g.id, 'mallory', seq), code('SB_ERR_GROUP_NOT_MEMBER'));
    await t.rejects(s.summary(g.id, 'mallory'), code('SB_ERR_GROUP_NOT_MEMBER'));
    await s.addMembers(g.id, 'alice', ['carol']);
    await s.leave(g.id, 'carol');
    await t.rejects(s.markRead(g.id, 'carol', seq, true), code('SB_ERR_GROUP_NOT_MEMBER'), 'a former member marks nothing');
    await t.rejects(s.readCount(g.id, 'carol', seq), code('SB_ERR_GROUP_NOT_MEMBER'));
    await t.rejects(s.markRead('not-a-group', 'alice', 1, true), code('SB_ERR_BAD_GROUP'));
    await t.rejects(s.summary('g' + 'a'.repeat(12), 'alice'), code('SB_ERR_GROUP_NOT_FOUND'));
    await t.rejects(s.markRead(g.id, 'bob', -1, true), code('SB_ERR_BAD_GROUP'));
    await t.rejects(s.markRead(g.id, 'bob', 1.5, true), code('SB_ERR_BAD_GROUP'));
    await t.rejects(s.readCount(g.id, 'bob', 0), code('SB_ERR_BAD_GROUP'));
    t.same(await s.readCount(g.id, 'bob', seq), { read: 1, of: 1 }, 'nothing moved: alice only');
    t.match(await s.summary(g.id, 'bob'), { readSeq: 0, unread: 1 });
  });

  t.test('receipts off: a mark or a send without share withdraws a shared position; unshare withdraws them in every group', async (t) => {
    const s = await open(t);
    const g = await s.create('alice', 'Private', ['bob', 'carol']);
    const h = await s.create('carol', 'Other', ['bob']);
    for (let n = 1; n <= 4; n++) await s.append(g.id, 'alice', String(n), body(`m${n}`), true); // 2..5
    await s.markRead(g.id, 'bob', 3, true);
    t.same(await s.readCount(g.id, 'alice', 3), { read: 1, of: 2 });
    t.same(await s.markRead(g.id, 'bob', 5, false), { readSeq: 5, unread: 0, moved: true }, 'its own position follows');
    t.same((await s.readers(g.id, 'alice', { limit: 10 })).readers.find((r) => r.uid === 'bob'), { uid: 'bob', readSeq: 0 }, 'the one it shared at 3 is gone');
    t.same(await s.readCount(g.id, 'alice', 3), { read: 0, of: 2 });
    await s.markRead(g.id, 'bob', 5, true);
    await s.append(g.id, 'bob', '1', body('me'), false); // 6
    t.same(await s.readCount(g.id, 'alice', 5), { read: 0, of: 2 }, 'a send without share withdraws it too');
    await s.markRead(g.id, 'bob', 6, true);
    await s.append(h.id, 'carol', '1', body('x'), true); // 2
    await s.markRead(h.id, 'bob', 2, true);
    await s.markRead(g.id, 'carol', 6, true);
    await s.unshare('bob');
    t.same(await s.readCount(g.id, 'alice', 6), { read: 1, of: 2 }, 'bob withdrawn in one group, carol still counted');
    t.same(await s.readCount(h.id, 'carol', 2), { read: 0, of: 1 }, 'and in the other');
    t.match(await s.summary(g.id, 'bob'), { readSeq: 6, unread: 0 }, 'its own position stays');
    await s.unshare('nobody');
  });

  t.test('a dissolved group takes no read marks; a departed member none either', async (t) => {
    const s = await open(t);
    const g = await s.create('alice', 'Gone', ['bob']);
    const { seq } = await s.append(g.id, 'alice', '1', body('bye'));
    await s.dissolve(g.id, 'alice');
    await t.rejects(s.markRead(g.id, 'bob', seq, true), code('SB_ERR_GROUP_DISSOLVED'));
    t.match(await s.summary(g.id, 'bob'), { readSeq: 0 }, 'nothing moved');
    await t.rejects(s.markRead(g.id, 'mallory', seq, true), code('SB_ERR_GROUP_NOT_MEMBER'), 'a stranger hears not-a-member first');
  });

  t.test('unread stays within retention: pruned messages and events are not counted', async (t) => {
    const s = await open(t, { maxEntries: 5 });
    const g = await s.create('alice', 'Short', ['bob']); // 1
    await s.addMembers(g.id, 'alice', ['carol']); // 2
    for (let n = 1; n <= 4; n++) await s.append(g.id, 'alice', String(n), body(`m${n}`)); // 3..6: seq 1 pruned
    t.match(await s.summary(g.id, 'bob'), { head: 6, unread: 4 }, 'the retained event is left out');
    for (let n = 5; n <= 12; n++) await s.append(g.id, 'alice', String(n), body(`m${n}`)); // 7..14
    t.match(await s.summary(g.id, 'bob'), { head: 14, readSeq: 0, unread: 5 }, 'only the five retained');
    t.same(await s.markRead(g.id, 'bob', 12, true), { readSeq: 12, unread: 2, moved: true });
    await s.addMembers(g.id, 'alice', ['dave']); // 15: an event, after the position
    t.match(await s.summary(g.id, 'bob'), { unread: 2 });
  });

  t.test('chatGroups: a summary of every group the user is a member of, as summary() gives it; not those it left or saw dissolved; pruned by age without a write', async (t) => {
    let now = 1_700_000_000_000;
    const s = await open(t, { maxAgeMs: 60_000 }, () => now);
    const a = await s.create('alice', 'A', ['bob']);
    const b = await s.create('carol', 'B', ['bob']);
    const c = await s.create('dave', 'C', ['bob']);
    const d = await s.create('erin', 'D', ['bob']);
    await s.append(a.id, 'alice', '1', body('in A'));
    await s.append(b.id, 'carol', '1', body('in B'));
    await s.markRead(b.id, 'bob', 2, true);
    await s.leave(c.id, 'bob');
    await s.dissolve(d.id, 'erin');
    const listed = (await s.chatGroups('bob')).sort((x, y) => (x.id < y.id ? -1 : 1));
    t.same(listed.map((g) => g.id), [a.id, b.id].sort(), 'A and B: not the one left, not the dissolved one');
    for (const g of listed) t.same(g, await s.summary(g.id, 'bob'), `${g.name} as summary() gives it`);
    t.match(listed.find((g) => g.id === a.id), { name: 'A', unread: 1, readSeq: 0, head: 2 });
    t.match(listed.find((g) => g.id === b.id), { unread: 0, readSeq: 2 });
    t.same(await s.chatGroups('nobody'), []);
    // Everything ages out with no write since: nothing unread, no last entry.
    now += 120_000;
    const aged = (await s.chatGroups('bob')).find((g) => g.id === a.id)!;
    t.match(aged, { head: 2, unread: 0, last: undefined });
    now -= 90_000; // 30 s after the messages: the created event (and its age) is back within the window only if younger
    await s.append(a.id, 'alice', '2', body('again')); // seq 3
    now += 50_000; // seq 1 and 2 are now past the age, seq 3 is not
    t.match((await s.chatGroups('bob')).find((g) => g.id === a.id), { head: 3, unread: 1 }, 'only the retained message counts');
  });
}
