// Socket attributes: typed slots that compare keys by identity.

import t from 'tap';
import { Socket } from 'node:net';
import { AttributeKey, AttributeMap, attrs } from '../../src/server/attributes.js';

t.test('get, set, overwrite and delete', async (t) => {
  const map = new AttributeMap();
  const a = new AttributeKey<number>('a');
  const b = new AttributeKey<string>('b');
  t.equal(map.get(a), undefined, 'empty');
  t.equal(map.delete(a), false, 'nothing to delete');
  map.set(a, 1);
  map.set(b, 'x');
  t.equal(map.get(a), 1);
  t.equal(map.get(b), 'x');
  map.set(a, 2);
  t.equal(map.get(a), 2, 'set again overwrites');
  t.equal(map.delete(a), true);
  t.equal(map.delete(a), false, 'deleted once');
  t.equal(map.get(a), undefined);
  t.equal(map.get(b), 'x', 'the other key is untouched');
  map.set(a, 3);
  t.equal(map.get(a), 3, 'set after delete');
});

t.test('keys with the same name are different keys', async (t) => {
  const map = new AttributeMap();
  const one = new AttributeKey<string>('session');
  const other = new AttributeKey<string>('session');
  map.set(one, 'one');
  t.equal(map.get(other), undefined);
  map.set(other, 'other');
  t.equal(map.get(one), 'one');
  t.equal(map.get(other), 'other');
});

t.test('a socket has one attribute map', async (t) => {
  const socket = new Socket();
  t.equal(attrs(socket), attrs(socket));
  t.not(attrs(socket), attrs(new Socket()));
});
