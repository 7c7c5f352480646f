import t from 'tap';
import { RedisInboxStore } from '../../src/inbox/redis-inbox-store.js';
import { startRedis } from '../helpers/redis.js';
import { inboxStoreConformance } from './inbox-store.conformance.js';
import { conversationsConformance } from './conversations.conformance.js';

const redis = await startRedis(t);
let n = 0;
// Each test gets its own key prefix on the one server.
inboxStoreConformance(t, async (limits, now) => new RedisInboxStore({ url: redis.url, limits, keyPrefix: `t${++n}:`, now }));
conversationsConformance(t, async (limits, now) => new RedisInboxStore({ url: redis.url, limits, keyPrefix: `t${++n}:`, now }));

const body = (text: string) => Buffer.from(text);

t.test('Redis that lost its data (FLUSHALL): the inbox numbers from 1 again under a new epoch', async (t) => {
  const inbox = new RedisInboxStore({ url: redis.url, keyPrefix: 'wipe:' });
  t.teardown(() => inbox.close());
  const before = await inbox.append({ uid: 'bob', sender: 'alice', msgId: '1', body: body('a') });
  await inbox.append({ uid: 'bob', sender: 'alice', msgId: '2', body: body('b') });
  await inbox.redis.flushall();
  const after = await inbox.append({ uid: 'bob', sender: 'alice', msgId: '3', body: body('c') });
  t.equal(after.seq, 1, 'the sequence starts over');
  t.not(after.epoch, before.epoch, 'in another epoch: a position from before is recognisably from another history');
  t.equal((await inbox.range('bob', 0, 0)).epoch, after.epoch);
});

t.test('an inbox from before epochs (a seq key, no ep key) gets one lazily, without a reset', async (t) => {
  const inbox = new RedisInboxStore({ url: redis.url, keyPrefix: 'old:' });
  t.teardown(() => inbox.close());
  for (let i = 1; i <= 3; i++) await inbox.append({ uid: 'bob', sender: 'alice', msgId: String(i), body: body(`m${i}`) });
  const { epoch } = await inbox.range('bob', 0, 0);
  await inbox.saveCursor('bob', 'phone', 2, epoch);
  // What an inbox written by a version without epochs looks like.
  t.equal(await inbox.redis.del('old:{bob}:ep'), 1);
  const read = await inbox.range('bob', 0, 10);
  t.match(read, { head: 3, oldest: 1 }, 'head and messages as they were');
  t.same(read.messages.map((m) => m.seq), [1, 2, 3]);
  t.ok(read.epoch > 0, 'an epoch now');
  t.equal(await inbox.cursor('bob', 'phone'), 2, 'saved positions stay');
  t.match(await inbox.append({ uid: 'bob', sender: 'alice', msgId: '4', body: body('m4') }), { seq: 4, epoch: read.epoch }, 'the sequence goes on in that epoch');
});

t.test('the epoch round-trips exactly at its largest (2^53 - 1)', async (t) => {
  const inbox = new RedisInboxStore({ url: redis.url, keyPrefix: 'big:' });
  t.teardown(() => inbox.close());
  const largest = 2 ** 53 - 1;
  await inbox.redis.set('big:{bob}:ep', String(largest));
  t.equal((await inbox.append({ uid: 'bob', sender: 'alice', msgId: '1', body: body('a') })).epoch, largest);
  t.equal((await inbox.range('bob', 0, 0)).epoch, largest);
  await inbox.saveCursor('bob', 'phone', 1, largest);
  t.equal(await inbox.cursor('bob', 'phone'), 1, 'saveCursor compares it exactly');
});

t.test("a conversation's keys expire: at least the retention age after its last message, at most a quarter more", async (t) => {
  const maxAgeMs = 400_000;
  const inbox = new RedisInboxStore({ url: redis.url, keyPrefix: 'ttl:', limits: { maxAgeMs } });
  t.teardown(() => inbox.close());
  for (let i = 1; i <= 3; i++) await inbox.append({ uid: 'bob', sender: 'alice', msgId: String(i), body: body(`m${i}`), conversation: 'alice' });
  for (const key of ['ttl:{bob}:cl', 'ttl:{bob}:cv', 'ttl:{bob}:ci:alice']) {
    const ttl = await inbox.redis.pttl(key);
    t.ok(ttl > maxAgeMs - 10_000 && ttl <= maxAgeMs * 1.25, `${key}: ${ttl} ms`);
  }
  t.same((await inbox.conversations('bob', 0, 10)).conversations.map((c) => c.conversation), ['alice'], 'the expiry bookkeeping is no conversation');
});

t.test("dedupe state is a sender's last 1 000 to 1 250 msg_ids, whatever it sends: a resend within the last 1 000 is found, one before them may be stored again", async (t) => {
  const inbox = new RedisInboxStore({ url: redis.url, keyPrefix: 'ring:' });
  t.teardown(() => inbox.close());
  const send = (msgId: number) => inbox.append({ uid: 'bob', sender: 'alice', msgId: String(msgId), body: body(`m${msgId}`) });
  // In bursts of 100, as a busy sender's messages arrive.
  for (let i = 0; i < 1300; i += 100) await Promise.all(Array.from({ length: 100 }, (_, k) => send(i + k + 1)));
  const ring = await inbox.redis.strlen('ring:{bob}:dr:alice');
  // 8 bytes an id, 26 a block (its length, first seq and the header after it): here a block per burst.
  t.ok(ring <= 1250 * 8 + 13 * 26, `bounded: ${ring} bytes for 1 300 messages`);
  t.match(await send(301), { seq: 301, duplicate: true }, '999 newer ones since: still remembered');
  t.match(await send(1300), { seq: 1300, duplicate: true });
  t.match(await send(100), { seq: 1301, duplicate: false }, 'more than 1 250 newer ones since: stored again (the documented bound)');
  t.match(await send(300), { seq: 1302, duplicate: false }, 'the ids past the last 1 000 went together with theirs');
  t.ok((await inbox.redis.pttl('ring:{bob}:dr:alice')) > 0, 'the key expires with the dedupe window');
});

t.test('user ids cannot reach another user\'s keys: the hash tag is escaped', async (t) => {
  const inbox = new RedisInboxStore({ url: redis.url, keyPrefix: 'tag:' });
  t.teardown(() => inbox.close());
  // Unescaped, user "x}:dd:y" would have its sequence at tag:{x}:dd:y}:seq: user x's dedupe
  // key for the sender "y}:seq".
  await inbox.append({ uid: 'x', sender: 'y}:seq', msgId: '5', body: body('to x') });
  t.match(await inbox.append({ uid: 'x}:dd:y', sender: 'z', msgId: '1', body: body('to the other') }), { seq: 1, duplicate: false });
  t.match(await inbox.append({ uid: 'x', sender: 'y}:seq', msgId: '5', body: body('to x again') }), { seq: 1, duplicate: true }, "x's dedupe state is intact");
  t.same((await inbox.range('x}:dd:y', 0, 10)).messages.map((m) => m.body.toString()), ['to the other']);
  t.same((await inbox.range('x', 0, 10)).messages.map((m) => m.body.toString()), ['to x']);
  t.ok(await inbox.redis.exists('tag:{x%7D:dd:y}:seq'), 'the other user\'s keys are under its escaped tag');
});

t.test('the log: a chunk is one framed field; entries written with a field per body (earlier versions) read as before', async (t) => {
  const inbox = new RedisInboxStore({ url: redis.url, keyPrefix: 'layout:' });
  t.teardown(() => inbox.close());
  // Three messages in one call: one entry, their bodies framed in field b.
  const bodies = [body('one'), body(''), body('three!')];
  await Promise.all(bodies.map((b, i) => inbox.append({ uid: 'bob', sender: 'alice', msgId: String(i + 1), body: b })));
  const entries = (await inbox.redis.xrangeBuffer('layout:{bob}:lg', '-', '+')) as [Buffer, Buffer[]][];
  t.equal(entries.length, 1, 'one entry');
  const fields = entries[0]![1];
  t.same(fields.slice(0, 3).map(String), ['f', '3', 'b']);
  const framed = Buffer.concat(bodies.flatMap((b) => [Buffer.from([0, 0, 0, b.length]), b]));
  t.same(fields[3], framed, 'each body: 4 bytes of length, then its bytes');

  // Two more as an earlier version stored them: n, <count>, each body, '' to make pairs.
  const stored = await inbox.range('bob', 0, 10);
  const at = stored.messages[0]!.storedAt;
  await inbox.redis.xadd('layout:{bob}:lg', `4-${at}`, 'n', '2', 'old four', 'old five');
  await inbox.redis.xadd('layout:{bob}:lg', `6-${at}`, 'n', '1', 'old six', '');
  await inbox.redis.set('layout:{bob}:seq', '6');
  // And one after them, in the new form.
  t.match(await inbox.append({ uid: 'bob', sender: 'alice', msgId: '7', body: body('seven') }), { seq: 7, duplicate: false });
  const read = await inbox.range('bob', 0, 10);
  t.same(read.messages.map((m) => [m.seq, Buffer.from(m.body).toString()]), [[1, 'one'], [2, ''], [3, 'three!'], [4, 'old four'], [5, 'old five'], [6, 'old six'], [7, 'seven']]);
  t.same((await inbox.range('bob', 2, 2)).messages.map((m) => Buffer.from(m.body).toString()), ['three!', 'old four'], 'a read starting inside either form');
  t.same((await inbox.range('bob', 4, 1)).messages.map((m) => Buffer.from(m.body).toString()), ['old five']);
});

t.test('the log: a run with duplicates stores its fresh bodies framed, 32 to an entry', async (t) => {
  const inbox = new RedisInboxStore({ url: redis.url, keyPrefix: 'fresh:' });
  t.teardown(() => inbox.close());
  await inbox.append({ uid: 'bob', sender: 'alice', msgId: '5', body: body('first') });
  // One run (one call, one sender): a resend of msg_id 5, an empty body, 'b', then 40 without ids.
  const sent = [body('first'), body(''), body('b'), ...Array.from({ length: 40 }, (_, i) => body(`n${i}`))];
  const ids = ['5', '6', '7', ...Array.from({ length: 40 }, () => '0')];
  const results = await Promise.all(sent.map((b, i) => inbox.append({ uid: 'bob', sender: 'alice', msgId: ids[i]!, body: b })));
  t.match(results[0], { seq: 1, duplicate: true });
  t.same(results.slice(1).map((r) => r.seq), Array.from({ length: 42 }, (_, i) => i + 2), 'the fresh ones numbered on');
  const entries = (await inbox.redis.xrangeBuffer('fresh:{bob}:lg', '-', '+')) as [Buffer, Buffer[]][];
  t.same(entries.map(([, f]) => [String(f[0]), Number(String(f[1]))]), [['f', 1], ['f', 32], ['f', 10]], 'entries of 1, 32 and 10');
  const read = await inbox.range('bob', 0, 100);
  t.same(read.messages.map((m) => Buffer.from(m.body).toString()), ['first', '', 'b', ...Array.from({ length: 40 }, (_, i) => `n${i}`)]);
  t.same((await inbox.range('bob', 32, 2)).messages.map((m) => [m.seq, Buffer.from(m.body).toString()]), [[33, 'n29'], [34, 'n30']], 'across the boundary of two entries');
});
