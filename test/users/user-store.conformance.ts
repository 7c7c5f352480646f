// The abstract conformance suite of UserStore: every implementation (memory for the embedded
// gate, Redis in cluster mode) runs exactly these tests. `makeStore` must return a fresh,
// empty, isolated store on each call.

import type { Test } from 'tap';
import { MAX_DEVICE_REVOCATIONS, type NewFamily, type NewUser, type UserStore } from '../../src/users/user-store.js';

const CREATED_AT = 1_700_000_000_000;

function newUser(username: string, overrides: Partial<NewUser> = {}): NewUser {
  return { username, passwordHash: `scrypt$16384$8$1$salt-of-${username}$key-of-${username}`, createdAt: CREATED_AT, ...overrides };
}

export function userStoreConformance(t: Test, makeStore: () => Promise<UserStore>): void {
  async function fresh(tt: Test): Promise<UserStore> {
    const store = await makeStore();
    tt.teardown(() => store.close());
    return store;
  }

  t.test('ping resolves while the store answers', async (t) => {
    const store = await fresh(t);
    await store.ping();
    t.pass('answered');
  });

  t.test('create then get returns the record, uid = username', async (t) => {
    const store = await fresh(t);
    t.equal(await store.create(newUser('alice', { createdAt: CREATED_AT + 123 })), true);
    t.same(await store.get('alice'), { uid: 'alice', username: 'alice', passwordHash: 'scrypt$16384$8$1$salt-of-alice$key-of-alice', createdAt: CREATED_AT + 123 });
    t.equal(typeof (await store.get('alice'))?.createdAt, 'number', 'createdAt stays a number');
  });

  t.test('get of an unknown name is undefined', async (t) => {
    const store = await fresh(t);
    t.equal(await store.get('nobody'), undefined);
    await store.create(newUser('alice'));
    t.equal(await store.get('nobody'), undefined);
    t.equal(await store.get('alic'), undefined, 'no prefix match');
    t.equal(await store.get('alice2'), undefined);
  });

  t.test('exists says whether get would find the account', async (t) => {
    const store = await fresh(t);
    t.equal(await store.exists('alice'), false, 'before it is created');
    await store.create(newUser('alice'));
    t.equal(await store.exists('alice'), true, 'at once after create');
    t.equal(await store.exists('Alice'), false, 'an exact key: stores do not normalise');
    t.equal(await store.exists('alic'), false, 'no prefix match');
    t.equal(await store.exists('__proto__'), false, 'an ordinary name');
  });

  t.test('a taken name: create resolves false and changes nothing', async (t) => {
    const store = await fresh(t);
    const first = newUser('alice');
    t.equal(await store.create(first), true);
    t.equal(await store.create(newUser('alice', { passwordHash: 'other', createdAt: CREATED_AT + 1 })), false);
    t.equal(await store.create(first), false, 'the identical record again');
    t.same(await store.get('alice'), { uid: 'alice', ...first }, 'the first record is kept');
    t.equal(await store.count(), 1);
  });

  t.test('names are exact keys; stores do not normalise', async (t) => {
    const store = await fresh(t);
    t.equal(await store.create(newUser('bob.b')), true);
    t.equal(await store.create(newUser('bob-b')), true);
    t.equal(await store.create(newUser('bob_b')), true);
    t.equal((await store.get('bob-b'))?.passwordHash, newUser('bob-b').passwordHash);
    t.equal(await store.count(), 3);
  });

  t.test('concurrent creates of one name: exactly one wins, and its record is stored', async (t) => {
    const store = await fresh(t);
    const attempts = Array.from({ length: 20 }, (_, i) => newUser('carol', { passwordHash: `hash-${i}`, createdAt: CREATED_AT + i }));
    const results = await Promise.all(attempts.map((u) => store.create(u)));
    t.equal(results.filter(Boolean).length, 1, 'one true');
    const winner = attempts[results.indexOf(true)]!;
    t.same(await store.get('carol'), { uid: 'carol', ...winner }, 'the winner’s record, whole');
    t.equal(await store.count(), 1);
  });

  t.test('concurrent creates of many names all succeed and are counted', async (t) => {
    const store = await fresh(t);
    const names = Array.from({ length: 50 }, (_, i) => `user${i}`);
    const results = await Promise.all([...names, ...names].map((name) => store.create(newUser(name))));
    t.equal(results.filter(Boolean).length, names.length, 'one win per name');
    t.equal(await store.count(), names.length);
    for (const name of names) t.equal((await store.get(name))?.uid, name);
  });

  t.test('count counts accounts, not attempts', async (t) => {
    const store = await fresh(t);
    t.equal(await store.count(), 0);
    await store.create(newUser('alice'));
    t.equal(await store.count(), 1);
    await store.create(newUser('bob'));
    await store.create(newUser('alice'));
    t.equal(await store.count(), 2);
  });

  t.test('prototype-ish names are ordinary keys', async (t) => {
    const store = await fresh(t);
    const names = ['__proto__', 'constructor', 'hasOwnProperty', 'hasownproperty', 'prototype', 'tostring', 'valueof', '__definegetter__'];
    for (const name of names) t.equal(await store.get(name), undefined, `${name} starts absent`);
    t.equal(await store.count(), 0);

    for (const name of names) t.equal(await store.create(newUser(name)), true, `create(${name})`);
    for (const name of names) t.same(await store.get(name), { uid: name, ...newUser(name) }, `get(${name})`);
    for (const name of names) t.equal(await store.create(newUser(name)), false, `${name} is now taken`);
    t.equal(await store.count(), names.length);
    t.equal(await store.get('nobody'), undefined, 'other names unaffected');
    t.equal(await store.create(newUser('nobody')), true);
  });

  t.test('records are copies in both directions', async (t) => {
    const store = await fresh(t);
    const user = newUser('dave');
    const original = { uid: 'dave', ...user };
    await store.create(user);
    user.passwordHash = 'mutated-after-create';
    user.createdAt = 0;
    t.same(await store.get('dave'), original, 'mutating the created object does not change the store');

    const got = (await store.get('dave'))!;
    got.passwordHash = 'mutated-after-get';
    got.uid = 'eve';
    t.same(await store.get('dave'), original, 'mutating a returned record does not change the store');
    t.equal(await store.get('eve'), undefined);
  });

  t.test('the receipts setting: on by default, off and on again per account; no account, no setting', async (t) => {
    const store = await fresh(t);
    await store.create(newUser('alice'));
    await store.create(newUser('bob'));
    t.equal(await store.receipts('alice'), true, 'on by default');
    t.equal(await store.setReceipts('alice', false), true);
    t.equal(await store.receipts('alice'), false);
    t.equal(await store.receipts('bob'), true, "another user's is unchanged");
    t.equal(await store.setReceipts('alice', true), true);
    t.equal(await store.receipts('alice'), true);
    t.equal(await store.setReceipts('nobody', false), false, 'no account: refused');
    t.equal(await store.receipts('nobody'), true);
    t.equal(await store.exists('nobody'), false, 'and no account was made');
    t.same(await store.get('alice'), { uid: 'alice', ...newUser('alice') }, 'the record is unchanged');
    await store.setReceipts('__proto__', false);
    t.equal(await store.receipts('__proto__'), true, 'a name without an account, even this one');
  });

  // --- refresh families -------------------------------------------------------------------
  const DAY = 86_400_000;
  const h = (n: number | string) => String(n).padStart(64, 'a').replace(/[^0-9a-f]/g, 'b');
  const fam = (id: string, over: Partial<NewFamily> = {}): NewFamily => ({ id, deviceId: 'phone', tokenHash: h(`${id}1`), now: CREATED_AT, expiresAt: CREATED_AT + 30 * DAY, maxFamilies: 5, ...over });
  const rotate = (generation: number, from: string, to: string, now = CREATED_AT + 1000, idleMs = 0) => ({ generation, tokenHash: from, now, idleMs, action: { rotate: to } });

  t.test('setPasswordHash replaces the hash of an account, and only of one', async (t) => {
    const store = await fresh(t);
    await store.create(newUser('alice'));
    t.equal(await store.setPasswordHash('alice', 'new-hash'), true);
    t.equal((await store.get('alice'))?.passwordHash, 'new-hash');
    t.equal(await store.setPasswordHash('nobody', 'x'), false);
    t.equal(await store.exists('nobody'), false, 'no account was made');
  });

  t.test('a family rotates generation by generation; only the current token moves it', async (t) => {
    const store = await fresh(t);
    t.same(await store.createFamily('alice', fam('f1', { deviceId: 'dev|with|bars' })), []);
    const first = await store.useFamily('alice', 'f1', rotate(1, h('f11'), h('f12')));
    t.match(first, { outcome: 'rotated', family: { id: 'f1', deviceId: 'dev|with|bars', generation: 2, createdAt: CREATED_AT, usedAt: CREATED_AT + 1000, expiresAt: CREATED_AT + 30 * DAY } });
    t.match(await store.useFamily('alice', 'f1', rotate(2, h('wrong'), h('x'))), { outcome: 'invalid' }, 'the current generation with another token: a forgery, refused');
    t.match(await store.useFamily('alice', 'f1', rotate(3, h('f12'), h('x'))), { outcome: 'invalid' }, 'a generation from the future: refused');
    t.match(await store.useFamily('alice', 'f1', rotate(2, h('f12'), h('f13'))), { outcome: 'rotated', family: { generation: 3 } }, 'the forgeries changed nothing');
    t.match(await store.useFamily('bob', 'f1', rotate(3, h('f13'), h('x'))), { outcome: 'invalid' }, "another user's name: no such family");
    t.match(await store.useFamily('alice', 'nope', rotate(1, h('f11'), h('x'))), { outcome: 'invalid' });
    t.same((await store.families('alice', CREATED_AT + 2000, 0)).map((f) => [f.id, f.generation]), [['f1', 3]]);
  });

  t.test('reuse of an earlier generation revokes the family for every holder', async (t) => {
    const store = await fresh(t);
    await store.createFamily('alice', fam('f1'));
    await store.createFamily('alice', fam('f2'));
    await store.useFamily('alice', 'f1', rotate(1, h('f11'), h('f12')));
    t.match(await store.useFamily('alice', 'f1', rotate(1, h('f11'), h('evil'))), { outcome: 'reused', family: { id: 'f1', generation: 2 } }, 'the used token again: reuse');
    t.match(await store.useFamily('alice', 'f1', rotate(2, h('f12'), h('f13'))), { outcome: 'invalid' }, 'the legitimate current token is refused too');
    t.match(await store.useFamily('alice', 'f2', rotate(1, h('f21'), h('f22'))), { outcome: 'rotated' }, 'other families are untouched');
  });

  t.test('concurrent uses of one token: exactly one rotates, the rest see reuse', async (t) => {
    const store = await fresh(t);
    await store.createFamily('alice', fam('f1'));
    const results = await Promise.all(Array.from({ length: 10 }, (_, i) => store.useFamily('alice', 'f1', rotate(1, h('f11'), h(`n${i}`)))));
    t.equal(results.filter((r) => r.outcome === 'rotated').length, 1, 'one rotation');
    t.equal(results.filter((r) => r.outcome === 'reused').length, 1, 'the first to come after it is a reuse, which revokes');
    t.equal(results.filter((r) => r.outcome === 'invalid').length, 8, 'the rest find no family');
    t.same(await store.families('alice', CREATED_AT, 0), []);
  });

  t.test('revoke by the current token ends the family; families end at their absolute and idle ends', async (t) => {
    const store = await fresh(t);
    await store.createFamily('alice', fam('f1'));
    t.match(await store.useFamily('alice', 'f1', { generation: 1, tokenHash: h('f11'), now: CREATED_AT, idleMs: 0, action: 'revoke' }), { outcome: 'rotated', family: { id: 'f1' } });
    t.match(await store.useFamily('alice', 'f1', rotate(1, h('f11'), h('x'))), { outcome: 'invalid' }, 'gone');
    await store.createFamily('alice', fam('abs', { expiresAt: CREATED_AT + 5000 }));
    t.match(await store.useFamily('alice', 'abs', rotate(1, h('abs1'), h('x'), CREATED_AT + 5000)), { outcome: 'invalid' }, 'at its absolute end');
    await store.createFamily('alice', fam('idle'));
    t.match(await store.useFamily('alice', 'idle', rotate(1, h('idle1'), h('idle2'), CREATED_AT + 9000, 10_000)), { outcome: 'rotated' }, 'within the idle time');
    t.same((await store.families('alice', CREATED_AT + 19_000, 10_000)).map((f) => f.id), [], 'listed no more once idle');
    t.match(await store.useFamily('alice', 'idle', rotate(2, h('idle2'), h('x'), CREATED_AT + 19_000, 10_000)), { outcome: 'invalid' }, 'idle for 10 s since its last use');
  });

  t.test('families are capped per user: the oldest are evicted', async (t) => {
    const store = await fresh(t);
    for (let i = 1; i <= 5; i++) t.same(await store.createFamily('alice', fam(`f${i}`, { now: CREATED_AT + i, maxFamilies: 5 })), []);
    t.same(await store.createFamily('alice', fam('f6', { now: CREATED_AT + 6, maxFamilies: 5 })), ['f1']);
    t.same(await store.createFamily('alice', fam('f7', { now: CREATED_AT + 7, maxFamilies: 3 })), ['f2', 'f3', 'f4']);
    t.same((await store.families('alice', CREATED_AT + 8, 0)).map((f) => f.id), ['f5', 'f6', 'f7'], 'oldest first');
    t.match(await store.useFamily('alice', 'f1', rotate(1, h('f11'), h('x'))), { outcome: 'invalid' }, 'an evicted family is refused');
    t.same(await store.families('bob', CREATED_AT, 0), [], "another user's are separate");
    t.equal(await store.revokeFamilies('alice'), 3);
    t.same(await store.families('alice', CREATED_AT + 8, 0), []);
    t.equal(await store.revokeFamilies('alice'), 0);
  });

  t.test('revocations: user-wide and per device, the later time wins, devices are bounded', async (t) => {
    const store = await fresh(t);
    t.same([...(await store.revocations(['alice', 'bob']))].map(([u, r]) => [u, r.before, r.devices.size]), [['alice', 0, 0], ['bob', 0, 0]]);
    await store.revoke({ uid: 'alice', before: 500 }, DAY);
    await store.revoke({ uid: 'alice', before: 400 }, DAY);
    await store.revoke({ uid: 'alice', deviceId: 'phone', before: 1000 }, DAY);
    await store.revoke({ uid: 'alice', deviceId: '__proto__', before: 1000 }, DAY);
    const alice = (await store.revocations(['alice'])).get('alice')!;
    t.equal(alice.before, 500, 'an earlier time does not undo a later one');
    t.same([...alice.devices].sort(), [['__proto__', 1000], ['phone', 1000]]);
    t.equal((await store.revocations(['bob'])).get('bob')!.before, 0, 'other users untouched');
    // Device revocations older than keepMs before the newest are dropped, and at most MAX_DEVICE_REVOCATIONS kept.
    await store.revoke({ uid: 'alice', deviceId: 'tablet', before: 1000 + DAY + 1 }, DAY);
    t.same([...(await store.revocations(['alice'])).get('alice')!.devices.keys()], ['tablet'], 'older than keepMs: dropped');
    for (let i = 0; i < MAX_DEVICE_REVOCATIONS + 5; i++) await store.revoke({ uid: 'carol', deviceId: `d${i}`, before: 10_000 + i }, DAY);
    const carol = (await store.revocations(['carol'])).get('carol')!;
    t.equal(carol.devices.size, MAX_DEVICE_REVOCATIONS);
    t.equal(carol.devices.has('d0'), false, 'the oldest went');
    t.equal(carol.devices.get(`d${MAX_DEVICE_REVOCATIONS + 4}`), 10_000 + MAX_DEVICE_REVOCATIONS + 4);
  });
}
