import t from 'tap';
import { MemoryInboxStore } from '../../src/inbox/memory-inbox-store.js';
import { inboxStoreConformance } from './inbox-store.conformance.js';

inboxStoreConformance(t, async (limits) => new MemoryInboxStore(limits));

const body = (text: string) => Buffer.from(text);

t.test('appendNow stores synchronously, exactly as append does', async (t) => {
  const inbox = new MemoryInboxStore();
  t.same(inbox.appendNow({ uid: 'bob', sender: 'alice', msgId: '1', body: body('a') }), { seq: 1, duplicate: false });
  t.same(await inbox.append({ uid: 'bob', sender: 'alice', msgId: '2', body: body('b') }), { seq: 2, duplicate: false });
  t.same(inbox.appendNow({ uid: 'bob', sender: 'alice', msgId: '2', body: body('again') }), { seq: 2, duplicate: true });
  t.same((await inbox.range('bob', 0, 10)).messages.map((m) => m.body.toString()), ['a', 'b']);
});

t.test('dedupe forgets the oldest ids beyond maxMessages, across many evictions', async (t) => {
  const maxMessages = 100;
  const inbox = new MemoryInboxStore({ maxMessages });
  const total = 10 * maxMessages + 37;
  for (let i = 1; i <= total; i++) inbox.appendNow({ uid: 'bob', sender: 'alice', msgId: String(i), body: body(String(i)) });
  // Newest first, so that no re-append evicts an id checked later.
  for (let i = total; i > total - maxMessages; i--) {
    if (!t.same(inbox.appendNow({ uid: 'bob', sender: 'alice', msgId: String(i), body: body('retry') }), { seq: i, duplicate: true }, `id ${i} remembered`)) break;
  }
  t.same(inbox.appendNow({ uid: 'bob', sender: 'alice', msgId: String(total - maxMessages), body: body('new') }), { seq: total + 1, duplicate: false }, 'the id before them is forgotten');
});

t.test('expired dedupe entries are dropped in order, and later ones are kept', async (t) => {
  let now = 0;
  const inbox = new MemoryInboxStore({ dedupeWindowMs: 100 }, () => now);
  for (let i = 1; i <= 300; i++) {
    now = i;
    inbox.appendNow({ uid: 'bob', sender: 'alice', msgId: String(i), body: body(String(i)) });
  }
  now = 350; // ids 1..250 expired (stored at ≤ 250, window 100)
  t.same(inbox.appendNow({ uid: 'bob', sender: 'alice', msgId: '251', body: body('retry') }), { seq: 251, duplicate: true });
  t.same(inbox.appendNow({ uid: 'bob', sender: 'alice', msgId: '250', body: body('new') }), { seq: 301, duplicate: false });
});
