// The abstract conformance suite of SessionStore: every implementation (memory now, Redis in
// cluster mode) runs exactly these tests, so they all mean the same thing by add, remove,
// byUser and purgeNode. `makeStore` must return a fresh, empty, isolated store on each call.

import type { Test } from 'tap';
import type { SessionRecord, SessionStore } from '../../src/session/session-store.js';
import { sleep } from '../../testkit/wait.js';

let nextId = 0;

function record(uid: string, nodeId: string, overrides: Partial<SessionRecord> = {}): SessionRecord {
  nextId++;
  return { sessionId: `s-${nextId}`, uid, deviceId: `d-${nextId}`, nodeId, platform: nextId % 4, loginAt: 1_700_000_000_000 + nextId, ...overrides };
}

function bySessionId(records: readonly SessionRecord[]): SessionRecord[] {
  return [...records].sort((a, b) => (a.sessionId < b.sessionId ? -1 : a.sessionId > b.sessionId ? 1 : 0));
}

export function sessionStoreConformance(t: Test, makeStore: (options?: { ttlMs?: number }) => Promise<SessionStore>): void {
  async function fresh(tt: Test, options?: { ttlMs?: number }): Promise<SessionStore> {
    const store = await makeStore(options);
    tt.teardown(() => store.close());
    return store;
  }

  t.test('ping resolves while the store answers', async (t) => {
    const store = await fresh(t);
    await store.ping();
    t.pass('answered');
  });

  t.test('records expire after the TTL unless refreshed', async (t) => {
    const store = await fresh(t, { ttlMs: 300 });
    const kept = record('alice', 'n1');
    const dropped = record('alice', 'n2');
    await store.add(kept);
    await store.add(dropped);
    for (let i = 0; i < 6; i++) {
      await sleep(100);
      await store.refresh([kept]);
    }
    t.same(await store.byUser('alice'), [kept], 'the refreshed record stays, the other expired');
    await sleep(450);
    t.same(await store.byUser('alice'), [], 'without refresh everything expires');
  });

  t.test('refresh of several users and nodes at once', async (t) => {
    const store = await fresh(t);
    const rs = [record('alice', 'n1'), record('bob', 'n2'), record('carol', 'n1')];
    await store.refresh(rs);
    await store.refresh([]);
    for (const r of rs) t.same(await store.byUser(r.uid), [r]);
    t.equal(await store.purgeNode('n1'), 2);
  });

  t.test('add then byUser returns the record', async (t) => {
    const store = await fresh(t);
    const r = record('alice', 'n1');
    await store.add(r);
    t.same(await store.byUser('alice'), [r]);
  });

  t.test('a user may hold several sessions', async (t) => {
    const store = await fresh(t);
    const rs = [record('alice', 'n1'), record('alice', 'n2'), record('alice', 'n1')];
    for (const r of rs) await store.add(r);
    await store.add(record('bob', 'n1'));
    t.same(bySessionId(await store.byUser('alice')), bySessionId(rs));
    t.equal((await store.byUser('bob')).length, 1);
  });

  t.test('byUser of an unknown user is an empty array', async (t) => {
    const store = await fresh(t);
    t.same(await store.byUser('nobody'), []);
    await store.add(record('alice', 'n1'));
    t.same(await store.byUser('nobody'), []);
  });

  t.test('remove resolves true once, then false', async (t) => {
    const store = await fresh(t);
    const a = record('alice', 'n1');
    const b = record('alice', 'n1');
    await store.add(a);
    await store.add(b);
    t.equal(await store.remove('alice', a.sessionId), true);
    t.same(await store.byUser('alice'), [b]);
    t.equal(await store.remove('alice', a.sessionId), false, 'already removed');
    t.equal(await store.remove('alice', 'never-added'), false, 'unknown session');
    t.equal(await store.remove('nobody', b.sessionId), false, 'unknown user');
    t.same(await store.byUser('alice'), [b], 'failed removes change nothing');
    t.equal(await store.remove('alice', b.sessionId), true);
    t.same(await store.byUser('alice'), []);
  });

  t.test('remove needs the right user for the session', async (t) => {
    const store = await fresh(t);
    const a = record('alice', 'n1');
    await store.add(a);
    t.equal(await store.remove('bob', a.sessionId), false);
    t.same(await store.byUser('alice'), [a]);
  });

  t.test('adding an existing sessionId overwrites it', async (t) => {
    const store = await fresh(t);
    const first = record('alice', 'n1');
    await store.add(first);
    const second = { ...first, nodeId: 'n2', platform: 9, loginAt: first.loginAt + 1000 };
    await store.add(second);
    t.same(await store.byUser('alice'), [second]);
    t.equal(await store.remove('alice', first.sessionId), true);
    t.same(await store.byUser('alice'), [], 'one record, not two');
  });

  t.test('purgeNode removes exactly that node’s sessions across users and counts them', async (t) => {
    const store = await fresh(t);
    const gone = [record('alice', 'n1'), record('alice', 'n1'), record('bob', 'n1'), record('carol', 'n1')];
    const kept = [record('alice', 'n2'), record('bob', 'n3'), record('dave', 'n2')];
    for (const r of [...gone, ...kept]) await store.add(r);

    t.equal(await store.purgeNode('n1'), gone.length);
    t.same(await store.byUser('alice'), [kept[0]]);
    t.same(await store.byUser('bob'), [kept[1]]);
    t.same(await store.byUser('carol'), []);
    t.same(await store.byUser('dave'), [kept[2]]);

    t.equal(await store.purgeNode('n1'), 0, 'nothing left to purge');
    t.equal(await store.purgeNode('unknown-node'), 0);
    t.same(bySessionId([...(await store.byUser('alice')), ...(await store.byUser('bob')), ...(await store.byUser('dave'))]), bySessionId(kept));
    // A purged session can be recorded again.
    await store.add(gone[2]!);
    t.same(bySessionId(await store.byUser('bob')), bySessionId([kept[1]!, gone[2]!]));
  });

  t.test('purgeNode follows an overwrite to another node', async (t) => {
    const store = await fresh(t);
    const r = record('alice', 'n1');
    await store.add(r);
    await store.add({ ...r, nodeId: 'n2' });
    t.equal(await store.purgeNode('n1'), 0);
    t.equal(await store.purgeNode('n2'), 1);
    t.same(await store.byUser('alice'), []);
  });

  t.test('records are copies in both directions', async (t) => {
    const store = await fresh(t);
    const r = record('alice', 'n1');
    const original = { ...r };
    await store.add(r);
    r.nodeId = 'mutated-after-add';
    r.platform = 99;
    t.same(await store.byUser('alice'), [original], 'mutating the added object does not change the store');

    const [got] = await store.byUser('alice');
    got!.nodeId = 'mutated-after-read';
    got!.deviceId = 'other';
    t.same(await store.byUser('alice'), [original], 'mutating a returned record does not change the store');
    t.equal(await store.purgeNode('mutated-after-read'), 0);
    t.equal(await store.purgeNode('n1'), 1);
  });

  t.test('concurrent adds and removes end consistent', async (t) => {
    const store = await fresh(t);
    const users = ['u0', 'u1', 'u2', 'u3', 'u4'];
    const records = Array.from({ length: 100 }, (_, i) => record(users[i % users.length]!, `n${i % 3}`));
    await Promise.all(records.map((r) => store.add(r)));

    const removed = records.filter((_, i) => i % 2 === 0);
    const added = Array.from({ length: 20 }, (_, i) => record(users[i % users.length]!, 'n9'));
    const results = await Promise.all([...removed.map((r) => store.remove(r.uid, r.sessionId)), ...added.map((r) => store.add(r))]);
    t.same(results.slice(0, removed.length), removed.map(() => true), 'every concurrent remove of a present session succeeds');

    const expected = [...records.filter((_, i) => i % 2 === 1), ...added];
    for (const uid of users) {
      t.same(bySessionId(await store.byUser(uid)), bySessionId(expected.filter((r) => r.uid === uid)), `sessions of ${uid}`);
    }
    t.equal(await store.purgeNode('n9'), added.length);
  });

  t.test('concurrent removes of one session: exactly one wins', async (t) => {
    const store = await fresh(t);
    const r = record('alice', 'n1');
    await store.add(r);
    const results = await Promise.all(Array.from({ length: 10 }, () => store.remove('alice', r.sessionId)));
    t.equal(results.filter(Boolean).length, 1);
    t.same(await store.byUser('alice'), []);
  });

  t.test('concurrent overwrites of one sessionId leave one record', async (t) => {
    const store = await fresh(t);
    const r = record('alice', 'n1');
    await Promise.all(Array.from({ length: 10 }, (_, i) => store.add({ ...r, platform: i })));
    const got = await store.byUser('alice');
    t.equal(got.length, 1);
    t.equal(got[0]?.sessionId, r.sessionId);
  });

  t.test('prototype-ish ids are ordinary keys', async (t) => {
    const store = await fresh(t);
    const names = ['__proto__', 'constructor', 'prototype', 'hasOwnProperty', 'toString', 'valueOf'];
    for (const name of names) t.same(await store.byUser(name), [], `${name} starts empty`);
    t.equal(await store.remove('__proto__', '__proto__'), false);
    t.equal(await store.purgeNode('__proto__'), 0);

    const rs = names.map((name) => record(name, name, { sessionId: name, deviceId: name }));
    for (const r of rs) await store.add(r);
    for (const r of rs) t.same(await store.byUser(r.uid), [r], `byUser(${r.uid})`);
    t.same(await store.byUser('nobody'), [], 'other users unaffected');

    t.equal(await store.remove('constructor', 'constructor'), true);
    t.same(await store.byUser('constructor'), []);
    t.equal(await store.purgeNode('__proto__'), 1);
    t.same(await store.byUser('__proto__'), []);
    t.same(await store.byUser('toString'), [rs[4]]);
  });
}
