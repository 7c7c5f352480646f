// The pure parts every GroupStore shares: ids, the byte order of uids, the event bodies and
// their decoder, the limits.

import t from 'tap';
import fc from 'fast-check';
import { DEFAULT_GROUP_LIMITS, compareUids, decodeGroupEvent, eventJson, groupLimits, isGroupId, newGroupId } from '../../src/groups/group-store.js';

t.test('group ids: g and 12 base32 characters, random, validated by isGroupId', async (t) => {
  const ids = new Set(Array.from({ length: 10_000 }, () => newGroupId()));
  t.equal(ids.size, 10_000, 'no repeats in 10 000');
  t.ok([...ids].every(isGroupId), 'every one is valid');
  const used = new Set([...ids].join('').replace(/g/g, ''));
  t.ok(used.size >= 31, `the whole alphabet is used (${used.size} characters)`);
  for (const bad of ['', 'g', 'gaaaaaaaaaaa', 'gaaaaaaaaaaaaa', 'Gaaaaaaaaaaaa', 'gaaaaaaaaaaa1', 'gaaaaaaaaaaa8', 'g{aaaaaaaaaa}', 42, null]) t.notOk(isGroupId(bad), `${JSON.stringify(bad)} is not`);
});

t.test('compareUids is the byte order of UTF-8 (what Redis sorts by)', async (t) => {
  const sign = (n: number) => Math.sign(n);
  fc.assert(
    fc.property(fc.string({ unit: 'grapheme' }), fc.string({ unit: 'grapheme' }), (a, b) => sign(compareUids(a, b)) === sign(Buffer.compare(Buffer.from(a), Buffer.from(b)))),
    { numRuns: 5000 },
  );
  t.ok(compareUids('\ue000', '𝔘') < 0, 'a BMP character above the surrogates sorts before an astral one');
  t.ok(compareUids('b', 'ba') < 0);
  t.equal(compareUids('x', 'x'), 0);
});

t.test('eventJson writes the fields in order, and decodeGroupEvent reads back what it wrote', async (t) => {
  const j = JSON.stringify;
  const body = eventJson('role', j('al"ice'), { uids: [j('b\\ob')], role: j('admin') });
  t.equal(body, '{"type":"role","actor":"al\\"ice","uids":["b\\\\ob"],"role":"admin"}');
  t.same(decodeGroupEvent(Buffer.from(body)), { type: 'role', actor: 'al"ice', uids: ['b\\ob'], role: 'admin' });
  const updated = eventJson('updated', j('a'), { name: j('Ünï 🧗'), meta: j({ k: 'v' }) });
  t.same(decodeGroupEvent(Buffer.from(updated)), { type: 'updated', actor: 'a', name: 'Ünï 🧗', meta: { k: 'v' } });
  t.same(decodeGroupEvent(Buffer.from(eventJson('dissolved', j('a')))), { type: 'dissolved', actor: 'a' });
  // What a Redis script's cjson would write for the same event is read the same way.
  t.same(decodeGroupEvent(Buffer.from('{"type":"added","actor":"a\\/b","uids":["c"]}')), { type: 'added', actor: 'a/b', uids: ['c'] });
});

t.test('decodeGroupEvent refuses what is not an event with SB_ERR_BAD_GROUP', async (t) => {
  const bad = ['', 'not json', '[]', 'null', '{"actor":"a"}', '{"type":"exploded","actor":"a"}', '{"type":"left"}', '{"type":"left","actor":1}', '{"type":"added","actor":"a","uids":"b"}', '{"type":"added","actor":"a","uids":[1]}', '{"type":"role","actor":"a","role":"owner"}', '{"type":"updated","actor":"a","name":5}', '{"type":"updated","actor":"a","meta":{"k":1}}', '{"type":"updated","actor":"a","meta":[]}'];
  for (const text of bad) t.throws(() => decodeGroupEvent(Buffer.from(text)), { code: 'SB_ERR_BAD_GROUP' }, JSON.stringify(text));
  t.same(decodeGroupEvent(Buffer.from('{"type":"left","actor":"a","extra":true}')), { type: 'left', actor: 'a' }, 'unknown fields are dropped');
});

t.test('groupLimits: defaults, overrides, and nonsense refused with SB_ERR_CONFIG', async (t) => {
  t.same(groupLimits(), DEFAULT_GROUP_LIMITS);
  t.ok(DEFAULT_GROUP_LIMITS.maxMembers >= 5000, 'groups of 5 000 fit by default');
  t.equal(groupLimits({ maxEntries: 10, dedupeEntries: 100 }).dedupeEntries, 10, 'dedupe never remembers more than the log holds');
  for (const limits of [{ maxMembers: 1 }, { maxEntries: 0 }, { maxAgeMs: 1.5 }, { maxPageSize: Number.NaN }]) t.throws(() => groupLimits(limits), { code: 'SB_ERR_CONFIG' }, JSON.stringify(limits));
});
