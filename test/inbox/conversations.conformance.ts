// The conversation contract every InboxStore keeps (the chat list, history pages, read marks:
// PROTOCOL.md §14). Run by memory-inbox-store.test.ts and redis-inbox-store.test.ts beside
// inbox-store.conformance.ts.

import type { Test } from 'tap';
import type { AppendRequest, ConversationPage, InboxStore } from '../../src/inbox/inbox-store.js';
import type { MakeInbox } from './inbox-store.conformance.js';

const body = (text: string) => Buffer.from(text, 'utf8');
const texts = (messages: { body: Buffer }[]) => messages.map((m) => m.body.toString('utf8'));
/** What a list shows, without times and bodies. */
const rows = (page: ConversationPage) => page.conversations.map((c) => ({ conversation: c.conversation, lastSeq: c.lastSeq, readSeq: c.readSeq, unread: c.unread }));

let ids = 0;
/** `from` sends `text` to `to`: the message in to's inbox, in the conversation with from. */
function received(inbox: InboxStore, to: string, from: string, text: string, msgId = String(++ids)): Promise<{ seq: number; duplicate: boolean }> {
  return Promise.resolve(inbox.append({ uid: to, sender: from, msgId, body: body(text), conversation: from }));
}
/** The copy of what `uid` sent to `peer`, in uid's own inbox. */
function own(inbox: InboxStore, uid: string, peer: string, text: string, msgId = String(++ids)): Promise<{ seq: number; duplicate: boolean }> {
  return Promise.resolve(inbox.append({ uid, sender: `${uid}\0${peer}`, msgId, body: body(text), conversation: peer, own: true }));
}

export function conversationsConformance(t: Test, make: MakeInbox): void {
  t.test('every append with a conversation keeps its entry: last message, unread, most recent first', async (t) => {
    const inbox = await make();
    t.teardown(() => inbox.close());
    await received(inbox, 'bob', 'alice', 'a1');
    await received(inbox, 'bob', 'carol', 'c1');
    await received(inbox, 'bob', 'alice', 'a2');
    await own(inbox, 'bob', 'dave', 'to dave');
    const page = await inbox.conversations('bob', 0, 10);
    t.same(rows(page), [
      { conversation: 'dave', lastSeq: 4, readSeq: 4, unread: 0 },
      { conversation: 'alice', lastSeq: 3, readSeq: 0, unread: 2 },
      { conversation: 'carol', lastSeq: 2, readSeq: 0, unread: 1 },
    ]);
    t.equal(page.more, false);
    const alice = page.conversations[1]!;
    t.equal(alice.last?.seq, 3);
    t.equal(alice.last?.body.toString(), 'a2', 'the last message itself');
    t.ok(alice.lastAt > 0 && alice.lastAt === alice.last?.storedAt, 'lastAt is its store time');
    t.same(rows(await inbox.conversations('nobody', 0, 10)), [], 'an inbox without conversations lists none');
  });

  t.test('sending marks the conversation read; a duplicate and an entry without conversation change nothing', async (t) => {
    const inbox = await make();
    t.teardown(() => inbox.close());
    await received(inbox, 'bob', 'alice', 'a1', '1');
    await received(inbox, 'bob', 'alice', 'a2', '2');
    t.match(await received(inbox, 'bob', 'alice', 'a2', '2'), { seq: 2, duplicate: true });
    t.same(rows(await inbox.conversations('bob', 0, 10)), [{ conversation: 'alice', lastSeq: 2, readSeq: 0, unread: 2 }], 'the duplicate is not counted');
    await inbox.append({ uid: 'bob', sender: 'x', msgId: '0', body: body('an event') });
    t.same(rows(await inbox.conversations('bob', 0, 10)), [{ conversation: 'alice', lastSeq: 2, readSeq: 0, unread: 2 }], 'nor is an entry of no conversation');
    await own(inbox, 'bob', 'alice', 'reply');
    t.same(rows(await inbox.conversations('bob', 0, 10)), [{ conversation: 'alice', lastSeq: 4, readSeq: 4, unread: 0 }], 'a reply reads what came before');
    await received(inbox, 'bob', 'alice', 'a3');
    t.same(rows(await inbox.conversations('bob', 0, 10)), [{ conversation: 'alice', lastSeq: 5, readSeq: 4, unread: 1 }]);
    await inbox.append({ uid: 'bob', sender: 'bob', msgId: '7', body: body('note'), conversation: 'bob', own: true });
    t.same(rows(await inbox.conversations('bob', 0, 10))[0], { conversation: 'bob', lastSeq: 6, readSeq: 6, unread: 0 }, 'a note to oneself is its own conversation, read');
  });

  t.test('appendPair keeps both inboxes\' entries', async (t) => {
    const inbox = await make();
    t.teardown(() => inbox.close());
    const message: AppendRequest = { uid: 'bob', sender: 'alice', msgId: '5', body: body('hi'), conversation: 'alice' };
    const copy: AppendRequest = { uid: 'alice', sender: 'alice\0bob', msgId: '5', body: body('hi'), conversation: 'bob', own: true };
    await inbox.appendPair(message, copy);
    await inbox.appendPair(message, copy);
    t.same(rows(await inbox.conversations('bob', 0, 10)), [{ conversation: 'alice', lastSeq: 1, readSeq: 0, unread: 1 }]);
    t.same(rows(await inbox.conversations('alice', 0, 10)), [{ conversation: 'bob', lastSeq: 1, readSeq: 1, unread: 0 }]);
  });

  t.test('the list pages by lastSeq', async (t) => {
    const inbox = await make();
    t.teardown(() => inbox.close());
    for (const peer of ['p1', 'p2', 'p3', 'p4', 'p5']) await received(inbox, 'bob', peer, `from ${peer}`);
    await received(inbox, 'bob', 'p2', 'again');
    const first = await inbox.conversations('bob', 0, 2);
    t.same(first.conversations.map((c) => c.conversation), ['p2', 'p5']);
    t.equal(first.more, true);
    const second = await inbox.conversations('bob', first.conversations.at(-1)!.lastSeq, 2);
    t.same(second.conversations.map((c) => c.conversation), ['p4', 'p3']);
    t.equal(second.more, true);
    const third = await inbox.conversations('bob', second.conversations.at(-1)!.lastSeq, 2);
    t.same(third.conversations.map((c) => c.conversation), ['p1']);
    t.equal(third.more, false);
    t.same((await inbox.conversations('bob', 0, 0)).conversations, [], 'limit 0: none');
  });

  t.test('history pages back through one conversation, its own copies included, nothing else', async (t) => {
    const inbox = await make();
    t.teardown(() => inbox.close());
    await received(inbox, 'bob', 'alice', 'a1'); // 1
    await received(inbox, 'bob', 'carol', 'c1'); // 2
    await own(inbox, 'bob', 'alice', 'b1'); // 3
    await inbox.append({ uid: 'bob', sender: 'x', msgId: '0', body: body('event') }); // 4
    await received(inbox, 'bob', 'alice', 'a2'); // 5
    await received(inbox, 'bob', 'alice', 'a3'); // 6
    const page = await inbox.history('bob', 'alice', 0, 2);
    t.same(page.messages.map((m) => m.seq), [5, 6], 'the newest, ascending');
    t.same(texts(page.messages), ['a2', 'a3']);
    t.equal(page.more, true);
    t.equal(page.pruned, false);
    const older = await inbox.history('bob', 'alice', 5, 10);
    t.same(texts(older.messages), ['a1', 'b1']);
    t.equal(older.more, false);
    t.same(texts((await inbox.history('bob', 'alice', 3, 10)).messages), ['a1'], 'before is exclusive');
    t.same(texts((await inbox.history('bob', 'carol', 0, 10)).messages), ['c1']);
    t.match(await inbox.history('bob', 'nobody', 0, 10), { messages: [], more: false, pruned: false });
    t.ok(older.messages.every((m) => m.storedAt > 0));
  });

  t.test('history ends at the retention edge, and says so', async (t) => {
    const inbox = await make({ maxMessages: 5 });
    t.teardown(() => inbox.close());
    await received(inbox, 'bob', 'carol', 'c1'); // 1: pruned later
    for (let i = 1; i <= 7; i++) await received(inbox, 'bob', 'alice', `a${i}`); // 2..8
    const page = await inbox.history('bob', 'alice', 0, 10);
    t.same(page.messages.map((m) => m.seq), [4, 5, 6, 7, 8], 'what is retained');
    t.equal(page.oldest, 4);
    t.equal(page.more, false);
    t.equal(page.pruned, true, 'older messages of alice were pruned');
    t.match(await inbox.history('bob', 'carol', 0, 10), { messages: [], more: false, pruned: true }, 'all of carol pruned');
    const carol = (await inbox.conversations('bob', 0, 10)).conversations.find((c) => c.conversation === 'carol');
    t.equal(carol?.last, undefined, 'the list keeps the entry, without its pruned message');
    t.equal(carol?.lastSeq, 1);
  });

  t.test('markRead: unread counts what was received after the mark; it moves forward only', async (t) => {
    const inbox = await make();
    t.teardown(() => inbox.close());
    await received(inbox, 'bob', 'alice', 'a1'); // 1
    await received(inbox, 'bob', 'alice', 'a2'); // 2
    await own(inbox, 'bob', 'alice', 'b1'); // 3: read up to 3
    await received(inbox, 'bob', 'carol', 'c1'); // 4
    await received(inbox, 'bob', 'alice', 'a3'); // 5
    await received(inbox, 'bob', 'alice', 'a4'); // 6
    await received(inbox, 'bob', 'alice', 'a5'); // 7
    const event = body('read event');
    const mark = await inbox.markRead('bob', 'alice', 5, event);
    t.match(mark, { found: true, readSeq: 5, unread: 2, eventSeq: 8 });
    const { epoch } = await inbox.range('bob', 0, 0);
    t.equal(mark.epoch, epoch);
    const stored = (await inbox.range('bob', 7, 10)).messages;
    t.same(stored.map((m) => [m.seq, m.body.toString()]), [[8, 'read event']], 'the event is in the inbox');
    t.same(rows(await inbox.conversations('bob', 0, 10)), [
      { conversation: 'alice', lastSeq: 7, readSeq: 5, unread: 2 },
      { conversation: 'carol', lastSeq: 4, readSeq: 0, unread: 1 },
    ], 'the event is no conversation\'s last message');
    t.same((await inbox.history('bob', 'alice', 0, 10)).messages.map((m) => m.seq), [1, 2, 3, 5, 6, 7], 'nor in its history');

    t.match(await inbox.markRead('bob', 'alice', 4, event), { found: true, readSeq: 5, unread: 2, eventSeq: undefined }, 'a lower mark changes nothing');
    t.match(await inbox.markRead('bob', 'alice', 5, event), { readSeq: 5, eventSeq: undefined }, 'nor the same one');
    t.equal((await inbox.range('bob', 0, 0)).head, 8, 'and appends no event');
    t.match(await inbox.markRead('bob', 'alice', 1000, event), { found: true, readSeq: 7, unread: 0, eventSeq: 9 }, 'a mark past the last message is clamped to it');
    t.match(await inbox.markRead('bob', 'nobody', 5, event), { found: false, eventSeq: undefined });
    t.equal((await inbox.range('bob', 0, 0)).head, 9, 'no conversation: no event');
    t.match(await inbox.markRead('bob', 'carol', 4, event), { readSeq: 4, unread: 0, eventSeq: 10 });
  });

  t.test('markRead between own messages counts received ones only', async (t) => {
    const inbox = await make();
    t.teardown(() => inbox.close());
    await received(inbox, 'bob', 'alice', 'a1'); // 1
    await own(inbox, 'bob', 'alice', 'b1'); // 2
    await received(inbox, 'bob', 'alice', 'a2'); // 3
    await own(inbox, 'bob', 'alice', 'b2'); // 4: read up to 4
    await received(inbox, 'bob', 'alice', 'a3'); // 5
    await own(inbox, 'bob', 'alice', 'b3'); // 6: read up to 6
    await received(inbox, 'bob', 'alice', 'a4'); // 7
    await received(inbox, 'bob', 'alice', 'a5'); // 8
    t.same(rows(await inbox.conversations('bob', 0, 10)), [{ conversation: 'alice', lastSeq: 8, readSeq: 6, unread: 2 }]);
    t.match(await inbox.markRead('bob', 'alice', 7, body('e')), { readSeq: 7, unread: 1 });
  });

  t.test('a mark below the retention edge counts the pruned messages as read', async (t) => {
    const inbox = await make({ maxMessages: 4 });
    t.teardown(() => inbox.close());
    for (let i = 1; i <= 6; i++) await received(inbox, 'bob', 'alice', `a${i}`); // 1..6, 3..6 retained
    t.same(rows(await inbox.conversations('bob', 0, 10)), [{ conversation: 'alice', lastSeq: 6, readSeq: 0, unread: 6 }], 'unread counts what arrived');
    t.match(await inbox.markRead('bob', 'alice', 1, body('e')), { readSeq: 1, unread: 4 }, 'the retained messages after the mark');
  });

  t.test('conversations age out with retention, and the least recent go beyond maxMessages of them', async (t) => {
    let now = 1_000_000;
    const inbox = await make({ maxMessages: 3, maxAgeMs: 10_000 }, () => now);
    t.teardown(() => inbox.close());
    for (const peer of ['p1', 'p2', 'p3', 'p4']) await received(inbox, 'bob', peer, peer);
    t.same((await inbox.conversations('bob', 0, 10)).conversations.map((c) => c.conversation), ['p4', 'p3', 'p2'], 'three kept');
    now += 6_000;
    await received(inbox, 'bob', 'p5', 'p5');
    now += 6_000;
    const page = await inbox.conversations('bob', 0, 10);
    t.same(page.conversations.map((c) => c.conversation), ['p5'], 'the others are older than the retention age');
    t.equal(page.more, false);
    t.match(await inbox.markRead('bob', 'p3', 3, body('e')), { found: false }, 'an aged-out conversation is gone');
  });

  t.test('concurrent messages from many senders: every one counted once', async (t) => {
    const inbox = await make();
    t.teardown(() => inbox.close());
    const peers = ['p1', 'p2', 'p3', 'p4'];
    const sends: Promise<unknown>[] = [];
    for (let i = 0; i < 50; i++) {
      for (const peer of peers) {
        sends.push(received(inbox, 'bob', peer, `${peer} ${i}`));
        if (i % 10 === 0) sends.push(own(inbox, 'bob', peer, `to ${peer} ${i}`));
      }
    }
    await Promise.all(sends);
    const page = await inbox.conversations('bob', 0, 10);
    t.equal(page.conversations.length, 4);
    // Each peer's unread: its messages after bob's last reply to it.
    for (const c of page.conversations) {
      const history = await inbox.history('bob', c.conversation, 0, 1000);
      t.equal(history.messages.length, 55, `${c.conversation}: 50 received and 5 own`);
      const after = history.messages.filter((m) => m.seq > c.readSeq);
      t.equal(c.unread, after.length, `${c.conversation}: unread is what came after the read position`);
      t.ok(!after.some((m) => m.body.toString().startsWith('to ')), 'and no own message is after it');
      t.equal(c.lastSeq, history.messages.at(-1)!.seq);
    }
  });

  t.test('bursts longer than a stored chunk: range, history pages and read marks across them', async (t) => {
    const inbox = await make();
    t.teardown(() => inbox.close());
    // 70 from alice in one burst (1..70).
    await Promise.all(Array.from({ length: 70 }, (_, i) => received(inbox, 'bob', 'alice', `a${i + 1}`)));
    t.same(rows(await inbox.conversations('bob', 0, 10)), [{ conversation: 'alice', lastSeq: 70, readSeq: 0, unread: 70 }]);
    t.same((await inbox.range('bob', 31, 4)).messages.map((m) => m.body.toString()), ['a32', 'a33', 'a34', 'a35'], 'range across a chunk boundary');
    t.match(await inbox.markRead('bob', 'alice', 40, body('e')), { readSeq: 40, unread: 30, eventSeq: 71 });
    t.match(await inbox.markRead('bob', 'alice', 64, body('e')), { readSeq: 64, unread: 6, eventSeq: 72 });
    // Then 5 replies of bob's and 30 more from alice, in one burst (73..77 own, 78..107).
    await Promise.all([...Array.from({ length: 5 }, (_, i) => own(inbox, 'bob', 'alice', `b${i + 1}`)), ...Array.from({ length: 30 }, (_, i) => received(inbox, 'bob', 'alice', `a${i + 71}`))]);
    t.same(rows(await inbox.conversations('bob', 0, 10)), [{ conversation: 'alice', lastSeq: 107, readSeq: 77, unread: 30 }], 'the replies read what came before');
    t.match(await inbox.markRead('bob', 'alice', 90, body('e')), { readSeq: 90, unread: 17 });
    const newest = await inbox.history('bob', 'alice', 0, 10);
    t.same(texts(newest.messages), ['a91', 'a92', 'a93', 'a94', 'a95', 'a96', 'a97', 'a98', 'a99', 'a100']);
    t.equal(newest.more, true);
    const across = await inbox.history('bob', 'alice', 76, 8);
    t.same(texts(across.messages), ['a66', 'a67', 'a68', 'a69', 'a70', 'b1', 'b2', 'b3'], 'a page across chunks and runs, without the read events between them');
    const all = await inbox.history('bob', 'alice', 0, 1000);
    t.equal(all.messages.length, 105);
    t.same(all.messages.map((m) => m.seq), [...Array.from({ length: 70 }, (_, i) => i + 1), ...Array.from({ length: 35 }, (_, i) => i + 73)]);
    t.match(all, { more: false, pruned: false });
  });

  t.test('a burst past the retention bound: history and read marks count what was pruned', async (t) => {
    const inbox = await make({ maxMessages: 10 });
    t.teardown(() => inbox.close());
    await Promise.all(Array.from({ length: 25 }, (_, i) => received(inbox, 'bob', 'alice', `a${i + 1}`)));
    const page = await inbox.history('bob', 'alice', 0, 100);
    t.same(page.messages.map((m) => m.seq), [16, 17, 18, 19, 20, 21, 22, 23, 24, 25]);
    t.match(page, { oldest: 16, more: false, pruned: true });
    t.match(await inbox.markRead('bob', 'alice', 3, body('e')), { readSeq: 3, unread: 10 }, 'a mark below the bound: the retained messages after it');
    t.match(await inbox.markRead('bob', 'alice', 20, body('e')), { readSeq: 20, unread: 5 });
  });

  t.test('conversation ids are ordinary strings, not object keys or key syntax', async (t) => {
    const inbox = await make();
    t.teardown(() => inbox.close());
    const peers = ['__proto__', 'constructor', 'a}b{c', 'a:b', 'ünï', 'x|y'];
    for (const peer of peers) await received(inbox, 'bob', peer, peer);
    t.same((await inbox.conversations('bob', 0, 10)).conversations.map((c) => c.conversation), [...peers].reverse());
    for (const peer of peers) t.same(texts((await inbox.history('bob', peer, 0, 10)).messages), [peer], peer);
    t.match(await inbox.markRead('bob', '__proto__', 1, body('e')), { found: true, readSeq: 1, unread: 0 });
  });

  t.test('rewrite: a tombstone in place of a message, its seq, time and conversation kept, and its event in the same step', async (t) => {
    const inbox = await make({ maxMessages: 5 });
    t.teardown(() => inbox.close());
    await received(inbox, 'bob', 'alice', 'a1'); // 1
    await received(inbox, 'bob', 'alice', 'a long second message'); // 2
    await received(inbox, 'bob', 'alice', 'a3'); // 3
    const before = (await inbox.range('bob', 1, 1)).messages[0]!;
    const event = { uid: 'bob', sender: 'alice', msgId: '0', body: body('recall event') };
    const done = await inbox.rewrite('bob', 2, body('gone'), event);
    t.match(done, { found: true, rewritten: true, eventSeq: 4 });
    t.equal(done.epoch, (await inbox.range('bob', 0, 0)).epoch);
    const after = (await inbox.range('bob', 1, 10)).messages;
    t.same(after.map((m) => [m.seq, m.body.toString()]), [[2, 'gone'], [3, 'a3'], [4, 'recall event']], 'replaced where it was, the event after the rest');
    t.equal(after[0]!.storedAt, before.storedAt, 'its store time kept');
    t.same(texts((await inbox.history('bob', 'alice', 0, 10)).messages), ['a1', 'gone', 'a3'], 'history shows the tombstone; the event is in no conversation');
    t.same(rows(await inbox.conversations('bob', 0, 10)), [{ conversation: 'alice', lastSeq: 3, readSeq: 0, unread: 3 }], 'the counts stay');

    t.match(await inbox.rewrite('bob', 2, body('gone'), event), { found: true, rewritten: false, eventSeq: undefined }, 'a repeat changes nothing');
    t.equal((await inbox.range('bob', 0, 0)).head, 4, 'and appends nothing');
    await inbox.rewrite('bob', 3, body('a tombstone longer than the message it replaces'), undefined);
    t.same(texts((await inbox.history('bob', 'alice', 0, 10)).messages), ['a1', 'gone', 'a tombstone longer than the message it replaces'], 'longer than the body it replaces, without an event');
    for (let i = 0; i < 4; i++) await received(inbox, 'bob', 'carol', `c${i}`); // 5..8: 1..3 pruned
    t.match(await inbox.rewrite('bob', 2, body('again'), event), { found: false, rewritten: false }, 'a pruned seq: nothing to rewrite');
    t.match(await inbox.rewrite('bob', 99, body('x'), event), { found: false });
    t.match(await inbox.rewrite('nobody', 1, body('x'), event), { found: false });
    t.same((await inbox.range('bob', 0, 10)).messages.map((m) => m.body.toString()), ['recall event', 'c0', 'c1', 'c2', 'c3'], 'pruning went past the rewritten ones');
  });

  t.test('rewrite with an expected body: only over that one, else changed and nothing done (an edit after a recall)', async (t) => {
    const inbox = await make();
    t.teardown(() => inbox.close());
    await received(inbox, 'bob', 'alice', 'hi'); // 1
    const event = { uid: 'bob', sender: 'alice', msgId: '0', body: body('edit event') };
    t.match(await inbox.rewrite('bob', 1, body('hi, edited'), event, body('hi')), { found: true, rewritten: true, changed: false, eventSeq: 2 }, 'over the body expected');
    await inbox.rewrite('bob', 1, body('[recalled]'), undefined);
    t.match(await inbox.rewrite('bob', 1, body('hi, edited again'), event, body('hi, edited')), { found: true, rewritten: false, changed: true, eventSeq: undefined }, 'a tombstone came meanwhile: refused');
    t.same(texts((await inbox.range('bob', 0, 10)).messages), ['[recalled]', 'edit event'], 'the tombstone stays, no event appended');
    t.match(await inbox.rewrite('bob', 1, body('[recalled]'), event, body('hi')), { found: true, rewritten: false, changed: false }, 'the body it is already: a repeat, whatever was expected');
    t.match(await inbox.rewrite('bob', 9, body('x'), event, body('hi')), { found: false, changed: false });
  });
}
