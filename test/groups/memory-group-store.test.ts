import t from 'tap';
import { MemoryGroupStore } from '../../src/groups/memory-group-store.js';
import { groupStoreConformance } from './group-store.conformance.js';

groupStoreConformance(
  t,
  async (limits, now) => new MemoryGroupStore(limits, now),
  async (store) => store,
);

// What only the memory store has: its accounting against maxBytes, and the sweep.

const body = (text: string) => Buffer.from(text);

t.test('the accounting follows every change exactly (bytes equals a recount) and gives memory back', async (t) => {
  let now = 1_700_000_000_000;
  const s = new MemoryGroupStore({ maxEntries: 50, maxAgeMs: 60_000, maxFormerMembers: 5 }, () => now);
  t.teardown(() => s.close());
  const empty = s.bytes;
  const g = await s.create('alice', 'G', ['bob', 'carol'], { topic: 'x' });
  for (let i = 0; i < 200; i++) {
    await s.append(g.id, i % 2 ? 'bob' : 'carol', String(i + 1), body(`message ${i}`.repeat(i % 7)));
    if (i % 10 === 0) await s.addMembers(g.id, 'alice', [`u${i}`, `v${i}`]);
    if (i % 10 === 5) await s.removeMembers(g.id, 'alice', [`u${i - 5}`]);
    if (i % 13 === 0) await s.saveCursor(g.id, 'bob', `device${i % 4}`, i);
    if (i % 17 === 0) await s.update(g.id, 'alice', { name: `G${i}`, meta: { n: String(i) } });
    t.equal(s.bytes, s.audit(), `after step ${i}`);
  }
  t.ok(s.bytes > empty);
  const full = s.bytes;
  now += 120_000;
  s.sweep();
  t.equal(s.bytes, s.audit(), 'after the sweep');
  t.ok(s.bytes < full, `pruning gave memory back (${full} -> ${s.bytes})`);
  await s.dissolve(g.id, 'alice');
  now += 120_000;
  s.sweep();
  t.equal(s.bytes, s.audit());
  await t.rejects(s.get(g.id, 'alice'), { code: 'SB_ERR_GROUP_NOT_FOUND' }, 'the sweep forgot the dissolved group');
});

t.test('at maxBytes: creates, adds and messages are refused with SB_ERR_STORE_FULL; departures never', async (t) => {
  const s = new MemoryGroupStore({ maxBytes: 64 * 1024 });
  t.teardown(() => s.close());
  const g = await s.create('alice', 'G', ['bob', 'carol']);
  let refused: unknown;
  for (let i = 1; i <= 1000 && refused === undefined; i++) await s.append(g.id, 'bob', String(i), Buffer.alloc(1000)).catch((err: unknown) => (refused = err));
  t.match(refused, { code: 'SB_ERR_STORE_FULL' }, 'messages, once full');
  t.ok(s.bytes <= 64 * 1024, `never past the bound (${s.bytes})`);
  // The room left may still fit something small: each kind is refused once it does not.
  let groups = 0;
  refused = undefined;
  for (let i = 0; i < 100 && refused === undefined; i++) await s.create(`owner${i}`, 'H').then(() => groups++, (err: unknown) => (refused = err));
  t.match(refused, { code: 'SB_ERR_STORE_FULL' }, `new groups (${groups} fitted)`);
  const head = (await s.get(g.id, 'alice')).head;
  await t.rejects(s.addMembers(g.id, 'alice', Array.from({ length: 200 }, (_, i) => `new${i}`)), { code: 'SB_ERR_STORE_FULL' }, 'members');
  t.equal((await s.get(g.id, 'alice')).head, head, 'nothing was appended by the refusal');
  t.ok(s.bytes <= 64 * 1024, `never past the bound (${s.bytes})`);
  t.equal(typeof (await s.leave(g.id, 'carol')), 'number', 'a member still leaves');
  t.match(await s.removeMembers(g.id, 'alice', ['bob']), { uids: ['bob'] }, 'and is removed');
  t.equal(typeof (await s.dissolve(g.id, 'alice')), 'number', 'and the group dissolves');
  t.equal(s.bytes, s.audit());
});

t.test('operations are synchronous inside: a call made while another is pending sees its effect', async (t) => {
  const s = new MemoryGroupStore();
  t.teardown(() => s.close());
  const g = await s.create('alice', 'G');
  // Not awaited: each promise is already settled by its own synchronous body.
  const add = s.addMembers(g.id, 'alice', ['bob']);
  const send = s.append(g.id, 'bob', '1', body('at once'));
  t.match(await send, { seq: 3 }, 'the append after an unawaited add is by a member');
  t.match(await add, { seq: 2 });
});
