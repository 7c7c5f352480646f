// The abstract conformance suite of UserStore: every implementation (memory for the embedded
// gate, Redis in cluster mode) runs exactly these tests. `makeStore` must return a fresh,
// empty, isolated store on each call.

import type { Test } from 'tap';
import type { NewUser, UserStore } from '../../src/users/user-store.js';

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
}
