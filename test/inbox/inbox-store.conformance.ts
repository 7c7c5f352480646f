// The contract every InboxStore keeps. Run by memory-inbox-store.test.ts and
// redis-inbox-store.test.ts; a new implementation adds one such file.

import type { Test } from 'tap';
import type { InboxLimits, InboxRange, InboxStore } from '../../src/inbox/inbox-store.js';
import { sleep } from '../../testkit/wait.js';

/** A store with these limits; `now` is the clock it stamps and ages messages by. */
export type MakeInbox = (limits?: Partial<InboxLimits>, now?: () => number) => Promise<InboxStore>;

const body = (text: string) => Buffer.from(text, 'utf8');
const texts = (messages: { body: Buffer }[]) => messages.map((m) => m.body.toString('utf8'));
/** A range without its epoch (compared on its own) and bodies. */
const shape = (r: InboxRange) => ({ head: r.head, oldest: r.oldest, seqs: r.messages.map((m) => m.seq) });

export function inboxStoreConformance(t: Test, make: MakeInbox): void {
  t.test('ping resolves while the store answers', async (t) => {
    const inbox = await make();
    t.teardown(() => inbox.close());
    await inbox.ping();
    t.pass('answered');
  });

  t.test('a new inbox is empty', async (t) => {
    const inbox = await make();
    t.teardown(() => inbox.close());
    t.same(shape(await inbox.range('nobody', 0, 10)), { head: 0, oldest: 1, seqs: [] });
    t.equal(await inbox.cursor('nobody', 'phone'), undefined);
  });

  t.test('append assigns 1, 2, 3 per user and range returns them in order', async (t) => {
    const inbox = await make();
    t.teardown(() => inbox.close());
    for (const [i, text] of ['a', 'b', 'c'].entries()) {
      t.match(await inbox.append({ uid: 'bob', sender: 'alice', msgId: String(i + 1), body: body(text) }), { seq: i + 1, duplicate: false });
    }
    t.match(await inbox.append({ uid: 'carol', sender: 'alice', msgId: '1', body: body('x') }), { seq: 1, duplicate: false }, 'sequences are per user');
    const all = await inbox.range('bob', 0, 10);
    t.equal(all.head, 3);
    t.equal(all.oldest, 1);
    t.same(all.messages.map((m) => m.seq), [1, 2, 3]);
    t.same(texts(all.messages), ['a', 'b', 'c']);
    t.ok(all.messages.every((m) => m.storedAt > 0), 'storedAt is set');
  });

  t.test('range reads after a sequence, bounded by limit', async (t) => {
    const inbox = await make();
    t.teardown(() => inbox.close());
    for (let i = 1; i <= 10; i++) await inbox.append({ uid: 'bob', sender: 'alice', msgId: String(i), body: body(`m${i}`) });
    t.same((await inbox.range('bob', 3, 4)).messages.map((m) => m.seq), [4, 5, 6, 7]);
    t.same((await inbox.range('bob', 8, 100)).messages.map((m) => m.seq), [9, 10]);
    t.same((await inbox.range('bob', 10, 100)).messages, []);
    const bounds = await inbox.range('bob', 0, 0);
    t.same({ head: bounds.head, oldest: bounds.oldest, n: bounds.messages.length }, { head: 10, oldest: 1, n: 0 }, 'limit 0 gives bounds only');
  });

  t.test('bodies are binary-safe', async (t) => {
    const inbox = await make();
    t.teardown(() => inbox.close());
    const bytes = Buffer.from([0, 0x7c, 0xff, 0x7c, 0x0a, 0x0d, 0x00, 0x80]);
    await inbox.append({ uid: 'bob', sender: 'alice', msgId: '1', body: bytes });
    t.same([...(await inbox.range('bob', 0, 1)).messages[0]!.body], [...bytes]);
  });

  t.test('concurrent appends get distinct, dense sequences', async (t) => {
    const inbox = await make();
    t.teardown(() => inbox.close());
    const results = await Promise.all(
      Array.from({ length: 200 }, (_, i) => inbox.append({ uid: 'bob', sender: `s${i % 7}`, msgId: String(i + 1), body: body(String(i)) })),
    );
    t.same(
      results.map((r) => r.seq).sort((a, b) => a - b),
      Array.from({ length: 200 }, (_, i) => i + 1),
    );
    // Issued in order on one client, they are also stored in that order.
    t.same(results.map((r) => r.seq), Array.from({ length: 200 }, (_, i) => i + 1));
    const stored = await inbox.range('bob', 0, 1000);
    t.same(texts(stored.messages), Array.from({ length: 200 }, (_, i) => String(i)));
  });

  t.test('dedupe: the same sender and msgId is stored once and keeps its sequence', async (t) => {
    const inbox = await make();
    t.teardown(() => inbox.close());
    t.match(await inbox.append({ uid: 'bob', sender: 'alice', msgId: '42', body: body('first') }), { seq: 1, duplicate: false });
    await inbox.append({ uid: 'bob', sender: 'alice', msgId: '43', body: body('other') });
    t.match(await inbox.append({ uid: 'bob', sender: 'alice', msgId: '42', body: body('retry') }), { seq: 1, duplicate: true });
    t.match(await inbox.append({ uid: 'bob', sender: 'carol', msgId: '42', body: body('carol') }), { seq: 3, duplicate: false }, 'another sender, same id: distinct');
    t.match(await inbox.append({ uid: 'dave', sender: 'alice', msgId: '42', body: body('dave') }), { seq: 1, duplicate: false }, 'another recipient: distinct');
    t.same(texts((await inbox.range('bob', 0, 10)).messages), ['first', 'other', 'carol']);
  });

  t.test('appendPair stores a message and its copy, each in its inbox and sequence, each deduplicated on its own', async (t) => {
    const inbox = await make();
    t.teardown(() => inbox.close());
    await inbox.append({ uid: 'alice', sender: 'bob', msgId: '9', body: body('from bob') });
    // The copy's dedupe sender is (alice, bob), as the chat handler makes it.
    const pair = (msgId: string, text: string) => inbox.appendPair({ uid: 'bob', sender: 'alice', msgId, body: body(text) }, { uid: 'alice', sender: 'alice\0bob', msgId, body: body(`copy of ${text}`) });
    const [first, copy] = await pair('42', 'hi');
    t.match(first, { seq: 1, duplicate: false });
    t.match(copy, { seq: 2, duplicate: false }, "the copy follows what alice's inbox held");
    t.equal(copy.epoch, (await inbox.range('alice', 0, 0)).epoch, "with alice's epoch");
    t.equal(first.epoch, (await inbox.range('bob', 0, 0)).epoch, "and the message with bob's");
    t.same(texts((await inbox.range('alice', 0, 10)).messages), ['from bob', 'copy of hi']);
    t.same(texts((await inbox.range('bob', 0, 10)).messages), ['hi']);

    const [again, copyAgain] = await pair('42', 'hi');
    t.match(again, { seq: 1, duplicate: true }, 'a resend finds both');
    t.match(copyAgain, { seq: 2, duplicate: true });
    // The copy stored before on its own (a message stored, its copy refused): the resend stores the rest.
    await inbox.append({ uid: 'alice', sender: 'alice\0bob', msgId: '43', body: body('copy of later') });
    const [later, laterCopy] = await pair('43', 'later');
    t.match(later, { seq: 2, duplicate: false });
    t.match(laterCopy, { seq: 3, duplicate: true });
    const [legacy, legacyCopy] = await pair('0', 'not deduplicated');
    const [legacy2, legacyCopy2] = await pair('0', 'not deduplicated');
    t.same([legacy.seq, legacyCopy.seq, legacy2.seq, legacyCopy2.seq], [3, 4, 4, 5], 'msgId 0: stored every time');
    t.equal(legacy2.duplicate || legacyCopy2.duplicate, false);
    // Another sender key in the same inbox (a note to oneself, keyed by 'alice') is another message.
    t.match(await inbox.append({ uid: 'alice', sender: 'alice', msgId: '42', body: body('note') }), { seq: 6, duplicate: false });
  });

  t.test('a burst issued at once is stored as if one by one: resends in it and after it found, whatever the id order', async (t) => {
    const inbox = await make();
    t.teardown(() => inbox.close());
    const send = (msgId: string, text: string) => Promise.resolve(inbox.append({ uid: 'bob', sender: 'alice', msgId, body: body(text) }));
    // Rising, a resend inside the burst, an older id never sent, ids that are not deduplicated, a resend of the first.
    const first = await Promise.all([send('5', 'a'), send('6', 'b'), send('7', 'c'), send('6', 'b again'), send('3', 'd'), send('0', 'e'), send('', 'f'), send('8', 'g'), send('5', 'a again')]);
    t.same(first.map((r) => [r.seq, r.duplicate]), [[1, false], [2, false], [3, false], [2, true], [4, false], [5, false], [6, false], [7, false], [1, true]]);
    const second = await Promise.all([send('8', 'g again'), send('9', 'h'), send('3', 'd again'), send('10', 'i'), send('4', 'j')]);
    t.same(second.map((r) => [r.seq, r.duplicate]), [[7, true], [8, false], [4, true], [9, false], [10, false]], 'and in the next one');
    t.same(texts((await inbox.range('bob', 0, 100)).messages), ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j'], 'each stored once, in order');
    // Ids past 2^53, and ids that are no number at all (a caller of the store may make one).
    const big = await Promise.all([send('18446744073709551615', 'max'), send('9007199254740993', 'past 2^53'), send('18446744073709551615', 'max again'), send('x-1', 'not a number'), send('x-1', 'again')]);
    t.same(big.map((r) => [r.seq, r.duplicate]), [[11, false], [12, false], [11, true], [13, false], [13, true]]);
  });

  t.test('retention by count holds for a burst larger than the bound', async (t) => {
    const inbox = await make({ maxMessages: 10 });
    t.teardown(() => inbox.close());
    await Promise.all(Array.from({ length: 25 }, (_, i) => inbox.append({ uid: 'bob', sender: 'alice', msgId: String(i + 1), body: body(`m${i + 1}`) })));
    const r = await inbox.range('bob', 0, 100);
    t.same(shape(r), { head: 25, oldest: 16, seqs: [16, 17, 18, 19, 20, 21, 22, 23, 24, 25] });
    t.same(texts((await inbox.range('bob', 20, 2)).messages), ['m21', 'm22']);
    t.same((await inbox.range('bob', 3, 2)).messages.map((m) => m.seq), [16, 17], 'a position below the bound reads from the oldest retained');
  });

  t.test('msgId 0 or empty is never deduplicated', async (t) => {
    const inbox = await make();
    t.teardown(() => inbox.close());
    for (const msgId of ['0', '0', '', '']) await inbox.append({ uid: 'bob', sender: 'alice', msgId, body: body(msgId) });
    t.equal((await inbox.range('bob', 0, 10)).messages.length, 4);
  });

  t.test('dedupe ends after the window', async (t) => {
    const inbox = await make({ dedupeWindowMs: 100 });
    t.teardown(() => inbox.close());
    await inbox.append({ uid: 'bob', sender: 'alice', msgId: '7', body: body('a') });
    await sleep(250);
    t.match(await inbox.append({ uid: 'bob', sender: 'alice', msgId: '7', body: body('b') }), { seq: 2, duplicate: false });
  });

  t.test('retention by count keeps the newest messages and reports the oldest retained', async (t) => {
    const inbox = await make({ maxMessages: 5 });
    t.teardown(() => inbox.close());
    for (let i = 1; i <= 12; i++) await inbox.append({ uid: 'bob', sender: 'alice', msgId: String(i), body: body(`m${i}`) });
    const r = await inbox.range('bob', 0, 100);
    t.equal(r.head, 12);
    t.equal(r.oldest, 8);
    t.same(r.messages.map((m) => m.seq), [8, 9, 10, 11, 12]);
    t.same((await inbox.range('bob', 9, 100)).messages.map((m) => m.seq), [10, 11, 12]);
  });

  t.test('retention by age prunes expired messages, and the sequence keeps counting', async (t) => {
    // A clock of the test's own: how long the machine takes between calls cannot age a message.
    let now = 1_700_000_000_000;
    const inbox = await make({ maxAgeMs: 60_000 }, () => now);
    t.teardown(() => inbox.close());
    await inbox.append({ uid: 'bob', sender: 'alice', msgId: '1', body: body('old') });
    now += 30_000;
    await inbox.append({ uid: 'bob', sender: 'alice', msgId: '2', body: body('old') });
    now += 40_000;
    t.same(shape(await inbox.range('bob', 0, 10)), { head: 2, oldest: 2, seqs: [2] }, 'the first is older than maxAgeMs, the second not yet');
    now += 30_000;
    t.same(shape(await inbox.range('bob', 0, 10)), { head: 2, oldest: 3, seqs: [] }, 'everything expired');
    t.match(await inbox.append({ uid: 'bob', sender: 'alice', msgId: '3', body: body('new') }), { seq: 3, duplicate: false });
    const r = await inbox.range('bob', 0, 10);
    t.same([r.oldest, r.messages.map((m) => m.seq)], [3, [3]]);
  });

  t.test('thousands of messages aged out at once: the message after them is read, from a login and by history', async (t) => {
    let now = 1_700_000_000_000;
    const inbox = await make({ maxMessages: 5000, maxAgeMs: 60_000 }, () => now);
    t.teardown(() => inbox.close());
    // 2 100 messages of two senders in one burst, then a quiet period past the retention age.
    await Promise.all(Array.from({ length: 2100 }, (_, i) => inbox.append({ uid: 'bob', sender: `s${i % 2}`, msgId: '', body: body(`old ${i}`) })));
    now += 61_000;
    t.match(await inbox.append({ uid: 'bob', sender: 'carol', msgId: '1', body: body('new'), conversation: 'carol' }), { seq: 2101 });
    t.same(shape(await inbox.range('bob', 0, 0)), { head: 2101, oldest: 2101, seqs: [] }, 'what a login reads first: the new message is the oldest retained');
    t.same(texts((await inbox.range('bob', 0, 10)).messages), ['new']);
    t.same(texts((await inbox.history('bob', 'carol', 0, 10)).messages), ['new']);
    t.equal((await inbox.conversations('bob', 0, 10)).conversations[0]?.last?.seq, 2101, "the chat list's last message");
  });

  t.test('cursors are per device and only move forward', async (t) => {
    const inbox = await make();
    t.teardown(() => inbox.close());
    let epoch = 0;
    for (let i = 1; i <= 6; i++) epoch = (await inbox.append({ uid: 'bob', sender: 'alice', msgId: String(i), body: body(`m${i}`) })).epoch;
    await inbox.saveCursor('bob', 'phone', 5, epoch);
    await inbox.saveCursor('bob', 'laptop', 2, epoch);
    await inbox.saveCursor('bob', 'phone', 3, epoch);
    t.equal(await inbox.cursor('bob', 'phone'), 5);
    t.equal(await inbox.cursor('bob', 'laptop'), 2);
    t.equal(await inbox.cursor('bob', 'tablet'), undefined);
    await inbox.saveCursor('bob', 'tablet', 0, epoch);
    t.equal(await inbox.cursor('bob', 'tablet'), 0, 'position 0 is a position');
  });

  t.test('a saved position never exceeds the head: it is clamped to it', async (t) => {
    const inbox = await make();
    t.teardown(() => inbox.close());
    const { epoch } = await inbox.append({ uid: 'bob', sender: 'alice', msgId: '1', body: body('a') });
    await inbox.append({ uid: 'bob', sender: 'alice', msgId: '2', body: body('b') });
    await inbox.saveCursor('bob', 'phone', 1_000_000, epoch);
    t.equal(await inbox.cursor('bob', 'phone'), 2, 'a position beyond the head is saved as the head');
    await inbox.append({ uid: 'bob', sender: 'alice', msgId: '3', body: body('c') });
    await inbox.saveCursor('bob', 'phone', 3, epoch);
    t.equal(await inbox.cursor('bob', 'phone'), 3, 'and moves on once the head has');
    const empty = await inbox.range('nobody', 0, 0);
    await inbox.saveCursor('nobody', 'phone', 7, empty.epoch);
    t.notOk(((await inbox.cursor('nobody', 'phone')) ?? 0) > 0, 'an empty inbox keeps no position above 0');
  });

  t.test('an inbox has one epoch: the same in every append and read, another in another store or inbox', async (t) => {
    const inbox = await make();
    t.teardown(() => inbox.close());
    const before = await inbox.range('bob', 0, 0);
    t.ok(Number.isSafeInteger(before.epoch) && before.epoch > 0, 'reading an inbox that does not exist gives an epoch');
    const first = await inbox.append({ uid: 'bob', sender: 'alice', msgId: '1', body: body('a') });
    t.equal(first.epoch, before.epoch, 'the first append keeps it');
    t.equal((await inbox.append({ uid: 'bob', sender: 'alice', msgId: '2', body: body('b') })).epoch, first.epoch);
    t.equal((await inbox.append({ uid: 'bob', sender: 'alice', msgId: '1', body: body('again') })).epoch, first.epoch, 'a duplicate reports it too');
    t.equal((await inbox.range('bob', 0, 10)).epoch, first.epoch);
    const other = await make();
    t.teardown(() => other.close());
    t.not((await other.append({ uid: 'bob', sender: 'alice', msgId: '1', body: body('a') })).epoch, first.epoch, 'an inbox made anew (another store) has another epoch');
  });

  t.test('resetEpoch: a new epoch once, saved positions forgotten, the sequence goes on', async (t) => {
    const inbox = await make();
    t.teardown(() => inbox.close());
    let epoch = 0;
    for (let i = 1; i <= 3; i++) epoch = (await inbox.append({ uid: 'bob', sender: 'alice', msgId: String(i), body: body(`m${i}`) })).epoch;
    await inbox.saveCursor('bob', 'phone', 3, epoch);
    const next = await inbox.resetEpoch('bob', epoch);
    t.not(next, epoch, 'a new epoch');
    t.ok(Number.isSafeInteger(next) && next > 0);
    t.equal(await inbox.resetEpoch('bob', epoch), next, 'a second reset from the old epoch changes nothing: both callers see the same new one');
    t.equal(await inbox.cursor('bob', 'phone'), undefined, 'positions of the old epoch are gone');
    await inbox.saveCursor('bob', 'phone', 2, epoch);
    t.equal(await inbox.cursor('bob', 'phone'), undefined, 'and a position of the old epoch is not saved any more');
    await inbox.saveCursor('bob', 'phone', 2, next);
    t.equal(await inbox.cursor('bob', 'phone'), 2, 'one of the new epoch is');
    const after = await inbox.append({ uid: 'bob', sender: 'alice', msgId: '4', body: body('m4') });
    t.match(after, { seq: 4, epoch: next }, 'the sequence continues in the new epoch');
    const r = await inbox.range('bob', 0, 10);
    t.match(r, { head: 4, oldest: 1, epoch: next });
    t.same(texts(r.messages), ['m1', 'm2', 'm3', 'm4'], 'the messages stay');
  });

  t.test('user ids are ordinary strings, not object keys or key syntax', async (t) => {
    const inbox = await make();
    t.teardown(() => inbox.close());
    for (const uid of ['__proto__', 'constructor', 'a}b{c', 'a:b', 'ünï']) {
      t.match(await inbox.append({ uid, sender: 'x', msgId: '1', body: body(uid) }), { seq: 1, duplicate: false }, uid);
      t.same(texts((await inbox.range(uid, 0, 10)).messages), [uid]);
    }
  });
}
