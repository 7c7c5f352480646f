// LocalSessionMap: one worker's sessions by user and by user + device.

import t from 'tap';
import { LocalSessionMap } from '../../src/session/local-session-map.js';
import { LocalSession, type Outbound } from '../../src/session/local-session.js';

const outbound: Outbound = { sendFrame() {}, close() {}, congested: false, drained: async () => {}, queuedBytes: 0, handedOffBytes: 0 };
let n = 0;

function session(uid: string, deviceId = `dev-${++n}`): LocalSession {
  return new LocalSession(`sid-${++n}`, uid, deviceId, 0, outbound);
}

t.test('an empty map', async (t) => {
  const map = new LocalSessionMap();
  t.equal(map.size, 0);
  t.equal(map.users, 0);
  t.same(map.byUser('alice'), []);
  t.ok(Object.isFrozen(map.byUser('alice')), 'the empty result cannot be mutated into the map');
  t.equal(map.find('alice', 'phone'), undefined);
  t.same([...map], []);
});

t.test('add, byUser, size and users', async (t) => {
  const map = new LocalSessionMap();
  const a1 = session('alice', 'phone');
  const a2 = session('alice', 'laptop');
  const b1 = session('bob', 'phone');
  map.add(a1);
  map.add(a2);
  map.add(b1);
  t.equal(map.size, 3);
  t.equal(map.users, 2);
  t.equal(map.byUser('alice').length, 2);
  t.ok(map.byUser('alice').includes(a1) && map.byUser('alice').includes(a2), 'the same objects come back');
  t.same(map.byUser('bob'), [b1]);
  t.equal(map.byUser('bob')[0], b1);
  t.same(map.byUser('carol'), []);
});

t.test('find by user and device', async (t) => {
  const map = new LocalSessionMap();
  const a1 = session('alice', 'phone');
  const a2 = session('alice', 'laptop');
  const b1 = session('bob', 'phone');
  map.add(a1);
  map.add(a2);
  map.add(b1);
  t.equal(map.find('alice', 'phone'), a1);
  t.equal(map.find('alice', 'laptop'), a2);
  t.equal(map.find('bob', 'phone'), b1);
  t.equal(map.find('bob', 'laptop'), undefined);
  t.equal(map.find('carol', 'phone'), undefined);
  const noDevice = session('carol', '');
  map.add(noDevice);
  t.equal(map.find('carol', ''), noDevice, 'an empty device id is a device id too');
});

t.test('remove takes exactly that object', async (t) => {
  const map = new LocalSessionMap();
  const a1 = session('alice', 'phone');
  const a2 = session('alice', 'laptop');
  map.add(a1);
  map.add(a2);

  const lookalike = new LocalSession(a1.sessionId, a1.uid, a1.deviceId, a1.platform, a1.outbound, a1.loginAt);
  t.equal(map.remove(lookalike), false, 'an equal but different object is not in the map');
  t.equal(map.size, 2);
  t.equal(map.find('alice', 'phone'), a1);

  t.equal(map.remove(a1), true);
  t.equal(map.remove(a1), false, 'not twice');
  t.equal(map.size, 1);
  t.equal(map.users, 1);
  t.same(map.byUser('alice'), [a2]);
  t.equal(map.find('alice', 'phone'), undefined);

  t.equal(map.remove(session('bob')), false, 'unknown user');
  t.equal(map.size, 1);

  t.equal(map.remove(a2), true);
  t.equal(map.size, 0);
  t.equal(map.users, 0, 'a user without sessions is gone');
  t.same(map.byUser('alice'), []);
});

t.test('a replaced device: old session removed, new one found', async (t) => {
  const map = new LocalSessionMap();
  const old = session('alice', 'phone');
  map.add(old);
  const fresh = session('alice', 'phone');
  map.remove(old);
  map.add(fresh);
  t.equal(map.find('alice', 'phone'), fresh);
  t.equal(map.remove(old), false, 'the old session cannot remove the new one');
  t.equal(map.size, 1);
});

t.test('iteration yields every session once', async (t) => {
  const map = new LocalSessionMap();
  const all = [session('alice'), session('alice'), session('bob'), session('carol'), session('carol'), session('carol')];
  for (const s of all) map.add(s);
  map.remove(all[3]!);
  const expected = all.filter((_, i) => i !== 3);
  const seen = [...map];
  t.equal(seen.length, expected.length);
  t.equal(new Set(seen).size, seen.length, 'no duplicates');
  for (const s of expected) t.ok(seen.includes(s), s.sessionId);
});

t.test('sessions removed during iteration: the walk goes on over the rest', async (t) => {
  // The worker's sweep can drop a slow consumer while it walks the map.
  const map = new LocalSessionMap();
  const a1 = session('alice');
  const a2 = session('alice');
  const b1 = session('bob');
  const c1 = session('carol');
  for (const s of [a1, a2, b1, c1]) map.add(s);
  const seen: LocalSession[] = [];
  for (const s of map) {
    seen.push(s);
    if (s === a1) map.remove(b1);
  }
  t.same(seen, [a1, a2, c1], 'a removed session not reached yet is skipped, the others all come');
  const iterator = map[Symbol.iterator]();
  t.equal(iterator[Symbol.iterator](), iterator, 'the iterator is iterable');
  t.same([...iterator], [a1, a2, c1]);
  t.same(iterator.next(), { value: undefined, done: true }, 'stays done');
});

t.test('prototype-ish user ids are ordinary keys', async (t) => {
  const map = new LocalSessionMap();
  t.same(map.byUser('__proto__'), []);
  t.same(map.byUser('constructor'), []);
  const p = session('__proto__', 'x');
  const c = session('constructor', 'x');
  map.add(p);
  map.add(c);
  t.same(map.byUser('__proto__'), [p]);
  t.same(map.byUser('constructor'), [c]);
  t.equal(map.find('__proto__', 'x'), p);
  t.equal(map.users, 2);
  t.equal(map.remove(p), true);
  t.same(map.byUser('__proto__'), []);
  t.equal(map.size, 1);
});
