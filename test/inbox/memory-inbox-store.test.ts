import t from 'tap';
import { MemoryInboxStore } from '../../src/inbox/memory-inbox-store.js';
import { isPromise } from '../../src/inbox/inbox-store.js';
import { inboxStoreConformance } from './inbox-store.conformance.js';
import { conversationsConformance } from './conversations.conformance.js';

inboxStoreConformance(t, async (limits, now) => new MemoryInboxStore(limits, now));
conversationsConformance(t, async (limits, now) => new MemoryInboxStore(limits, now));

const body = (text: string) => Buffer.from(text);

t.test('append answers synchronously (no promise), exactly as awaited', async (t) => {
  const inbox = new MemoryInboxStore();
  const first = inbox.append({ uid: 'bob', sender: 'alice', msgId: '1', body: body('a') });
  t.notOk(isPromise(first), 'a result, not a promise');
  t.match(first, { seq: 1, duplicate: false });
  t.match(await inbox.append({ uid: 'bob', sender: 'alice', msgId: '2', body: body('b') }), { seq: 2, duplicate: false });
  t.match(inbox.append({ uid: 'bob', sender: 'alice', msgId: '2', body: body('again') }), { seq: 2, duplicate: true });
  t.same((await inbox.range('bob', 0, 10)).messages.map((m) => m.body.toString()), ['a', 'b']);
});

t.test('dedupe forgets the oldest ids beyond maxMessages, across many evictions', async (t) => {
  const maxMessages = 100;
  const inbox = new MemoryInboxStore({ maxMessages });
  const total = 10 * maxMessages + 37;
  for (let i = 1; i <= total; i++) inbox.append({ uid: 'bob', sender: 'alice', msgId: String(i), body: body(String(i)) });
  // Newest first, so that no re-append evicts an id checked later.
  for (let i = total; i > total - maxMessages; i--) {
    if (!t.match(inbox.append({ uid: 'bob', sender: 'alice', msgId: String(i), body: body('retry') }), { seq: i, duplicate: true }, `id ${i} remembered`)) break;
  }
  t.match(inbox.append({ uid: 'bob', sender: 'alice', msgId: String(total - maxMessages), body: body('new') }), { seq: total + 1, duplicate: false }, 'the id before them is forgotten');
});

t.test('expired dedupe entries are dropped in order, and later ones are kept', async (t) => {
  let now = 0;
  const inbox = new MemoryInboxStore({ dedupeWindowMs: 100 }, () => now);
  for (let i = 1; i <= 300; i++) {
    now = i;
    inbox.append({ uid: 'bob', sender: 'alice', msgId: String(i), body: body(String(i)) });
  }
  now = 350; // ids 1..250 expired (stored at ≤ 250, window 100)
  t.match(inbox.append({ uid: 'bob', sender: 'alice', msgId: '251', body: body('retry') }), { seq: 251, duplicate: true });
  t.match(inbox.append({ uid: 'bob', sender: 'alice', msgId: '250', body: body('new') }), { seq: 301, duplicate: false });
});

t.test('msg_ids short and long, from several senders: each deduped on its own, evicted in order', async (t) => {
  // 15 digits and fewer are number keys, longer ones string keys: neither may be confused.
  const ids = ['1', '999999999999999', '1000000000000000', '9007199254740993', '18446744073709551615'];
  const inbox = new MemoryInboxStore({ maxMessages: 2 * ids.length });
  let seq = 0;
  for (const sender of ['alice', 'carol']) {
    for (const msgId of ids) t.match(inbox.append({ uid: 'bob', sender, msgId, body: body(`${sender} ${msgId}`) }), { seq: ++seq, duplicate: false }, `${sender} ${msgId} stored`);
  }
  for (const [i, msgId] of ids.entries()) {
    t.match(inbox.append({ uid: 'bob', sender: 'alice', msgId, body: body('again') }), { seq: i + 1, duplicate: true }, `alice ${msgId} deduped`);
    t.match(inbox.append({ uid: 'bob', sender: 'carol', msgId, body: body('again') }), { seq: ids.length + i + 1, duplicate: true }, `carol ${msgId} deduped`);
  }
  // Neighbours of the ids are new messages, not duplicates.
  t.match(inbox.append({ uid: 'bob', sender: 'alice', msgId: '9007199254740992', body: body('n') }), { seq: ++seq, duplicate: false });
  t.match(inbox.append({ uid: 'bob', sender: 'alice', msgId: '18446744073709551614', body: body('n') }), { seq: ++seq, duplicate: false });
  // Those two evicted alice's two oldest ids ('1' and '999999999999999'); carol's stay.
  t.match(inbox.append({ uid: 'bob', sender: 'alice', msgId: '1', body: body('n') }), { seq: ++seq, duplicate: false }, 'alice 1 forgotten');
  t.match(inbox.append({ uid: 'bob', sender: 'carol', msgId: '1', body: body('again') }), { seq: ids.length + 1, duplicate: true }, 'carol 1 remembered');
});

t.test('only the canonical decimal of a msg_id is taken as a number: look-alikes stay distinct', async (t) => {
  const inbox = new MemoryInboxStore();
  const ids = ['16', '016', '0x10', '1.6e1', ' 16', '10', '1e1', '0'];
  // '0' disables dedupe (hasDedupeId): it is stored twice below, the others once.
  for (const [i, msgId] of ids.entries()) t.match(inbox.append({ uid: 'bob', sender: 'alice', msgId, body: body(msgId) }), { seq: i + 1, duplicate: false }, `${JSON.stringify(msgId)} is new`);
  for (const [i, msgId] of ids.entries()) {
    const again = inbox.append({ uid: 'bob', sender: 'alice', msgId, body: body('again') });
    if (msgId === '0') t.equal(again.duplicate, false, '"0" is never deduplicated');
    else t.match(again, { seq: i + 1, duplicate: true }, `${JSON.stringify(msgId)} deduped against itself only`);
  }
});

t.test('a restarted process (a new store) gives every inbox a new epoch; reads of missing inboxes allocate none', async (t) => {
  const before = new MemoryInboxStore();
  const epoch = before.append({ uid: 'bob', sender: 'alice', msgId: '1', body: body('a') }).epoch;
  t.equal((await before.range('carol', 0, 0)).epoch, epoch, 'an inbox not created yet reads as the store epoch, the one it will be created with');
  t.equal(before.append({ uid: 'carol', sender: 'alice', msgId: '1', body: body('a') }).epoch, epoch);
  const after = new MemoryInboxStore();
  t.not((await after.range('bob', 0, 0)).epoch, epoch);
});
