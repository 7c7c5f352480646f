// The gate's conversation reads (PROTOCOL.md §14, "Over HTTP"): GET /api/conversations (with
// groups=1 too), GET /api/conversations/:peer/messages, and a group's messages and readers on the real gate (Fastify's whole pipeline), with the
// memory inbox and a real Redis one. Attacks: no token, a forged token, another user's
// conversations, malformed pages, a flood past the per-user rate.

import t, { type Test } from 'tap';
import { WebGate, DEFAULT_GATE_LIMITS, type GateLimits } from '../../src/gate/web-gate.js';
import { MemoryUserStore } from '../../src/users/memory-user-store.js';
import { PasswordHasher } from '../../src/auth/password.js';
import { TokenSigner } from '../../src/auth/token.js';
import { StaticRegistry } from '../../src/registry/static-registry.js';
import { MemoryInboxStore } from '../../src/inbox/memory-inbox-store.js';
import { RedisInboxStore } from '../../src/inbox/redis-inbox-store.js';
import type { InboxStore } from '../../src/inbox/inbox-store.js';
import { MemoryGroupStore } from '../../src/groups/memory-group-store.js';
import { MemoryGroupNotifier } from '../../src/groups/group-notifier.js';
import { ownCopyBody, storedRequestBody } from '../../src/protocol/codec.js';
import { storedMessage } from '../../src/protocol/conversation-view.js';
import { editedBody, tombstoneBody } from '../../src/protocol/recall.js';
import { silentLogger } from '../../src/log.js';
import { TEST_SECRET } from '../helpers/node.js';
import { startRedis } from '../helpers/redis.js';

type MakeInbox = (t: Test) => Promise<InboxStore>;

async function gateOn(t: Test, inbox: InboxStore, limits: Partial<GateLimits> = {}) {
  const signer = new TokenSigner(TEST_SECRET);
  const gate = new WebGate({
    host: '127.0.0.1',
    port: 0,
    registry: new StaticRegistry(),
    users: new MemoryUserStore(),
    signer,
    hasher: new PasswordHasher({ N: 2 ** 14, r: 8, p: 1 }),
    registration: true,
    limits: { ...DEFAULT_GATE_LIMITS, ...limits },
    conversations: { inbox },
    log: silentLogger(),
  });
  t.teardown(() => gate.close());
  await gate.app.ready();
  const get = async (as: string | null, url: string, authorization?: string) => {
    const r = await gate.app.inject({ method: 'GET', url, headers: authorization ? { authorization } : as === null ? {} : { authorization: `Bearer ${signer.mint({ uid: as, ttlMs: 60_000 })}` } });
    return { status: r.statusCode, body: JSON.parse(r.body) as Record<string, any>, headers: r.headers };
  };
  return { get };
}

let msgIds = 0;
/** `from` sends `content` to `to` as the chat handler stores it: the message and the copy in from's inbox. */
async function chat(inbox: InboxStore, from: string, to: string, content: string): Promise<void> {
  const body = storedRequestBody({ content, msgType: 1 }, from, Date.now(), to);
  const msgId = String(++msgIds);
  await inbox.appendPair({ uid: to, sender: from, msgId, body, conversation: from }, { uid: from, sender: `${from}\0${to}`, msgId, body: ownCopyBody(body, 'phone'), conversation: to, own: true });
}

function suite(t: Test, make: MakeInbox): void {
  t.test('an edited and a recalled message say so, in history and in the list', async (t) => {
    const inbox = await make(t);
    const { get } = await gateOn(t, inbox);
    await chat(inbox, 'alice', 'bob', 'first');
    await chat(inbox, 'alice', 'bob', 'second');
    const [first, second] = (await inbox.history('bob', 'alice', 0, 10)).messages.map(storedMessage);
    await inbox.rewrite('bob', 1, tombstoneBody(first!), undefined);
    await inbox.rewrite('bob', 2, editedBody(second!, 'second, edited', ''), undefined);
    const history = await get('bob', '/api/conversations/alice/messages');
    t.same(history.body.messages.map((m: any) => [m.content, m.recalled ?? false, m.edited ?? false]), [
      ['[recalled]', true, false],
      ['second, edited', false, true],
    ]);
    t.match((await get('bob', '/api/conversations')).body.conversations[0].last, { content: 'second, edited', edited: true });
  });

  t.test('the list and a history page of the token\'s user, as JSON', async (t) => {
    const inbox = await make(t);
    const { get } = await gateOn(t, inbox);
    await chat(inbox, 'alice', 'bob', 'hi');
    await chat(inbox, 'carol', 'bob', 'x'.repeat(300));
    await chat(inbox, 'bob', 'alice', 'reply');
    await chat(inbox, 'alice', 'bob', 'again');

    const list = await get('bob', '/api/conversations');
    t.equal(list.status, 200);
    t.same(
      list.body.conversations.map((c: any) => [c.peer, c.lastSeq, c.readSeq, c.unread, c.last?.content?.length]),
      [
        ['alice', 4, 3, 1, 5],
        ['carol', 2, 0, 1, 256],
      ],
    );
    t.equal(list.body.conversations[1].truncated, true);
    t.equal(list.body.conversations[0].last.from, 'alice');
    t.equal(list.body.nextBefore, null);
    const paged = await get('bob', '/api/conversations?limit=1');
    t.same(paged.body.conversations.map((c: any) => c.peer), ['alice']);
    t.equal(paged.body.nextBefore, 4);
    t.same((await get('bob', '/api/conversations?limit=1&before=4')).body.conversations.map((c: any) => c.peer), ['carol']);
    for (const zero of ['0', '00', '000']) t.equal((await get('bob', `/api/conversations?limit=${zero}`)).body.conversations.length, 2, `limit=${zero}: the default page`);

    const history = await get('bob', '/api/conversations/alice/messages?limit=2');
    t.equal(history.status, 200);
    t.same(history.body.messages.map((m: any) => [m.seq, m.from, m.content, m.originDevice ?? null]), [
      [3, 'bob', 'reply', 'phone'],
      [4, 'alice', 'again', null],
    ]);
    t.ok(history.body.messages.every((m: any) => m.storedAt > 0), "the server's time");
    t.equal(history.body.nextBefore, 3);
    t.match(history.body, { oldest: 1, pruned: false });
    t.same((await get('bob', '/api/conversations/alice/messages?before=3')).body.messages.map((m: any) => m.content), ['hi']);
    t.same((await get('bob', '/api/conversations/Alice/messages')).body.messages.length, 3, 'a peer is a user name, folded as at registration');
  });

  t.test('attacks: no token, a forged one, another user\'s conversations, malformed pages, a flood', async (t) => {
    const inbox = await make(t);
    const { get } = await gateOn(t, inbox, { conversationReads: { max: 5, windowMs: 60_000 } });
    await chat(inbox, 'alice', 'bob', 'private');

    const none = await get(null, '/api/conversations');
    t.match({ status: none.status, code: none.body.error?.code }, { status: 401, code: 'SB_ERR_NO_TOKEN' });
    t.equal(none.headers['www-authenticate'], 'Bearer');
    const forged = new TokenSigner('another-secret').mint({ uid: 'bob', ttlMs: 60_000 });
    const bad = await get(null, '/api/conversations', `Bearer ${forged}`);
    t.match({ status: bad.status, code: bad.body.error?.code }, { status: 401, code: 'SB_ERR_TOKEN_INVALID' });

    // Mallory asks for her conversation with alice: she has none; bob's stays bob's.
    t.same((await get('mallory', '/api/conversations/alice/messages')).body.messages, []);
    t.same((await get('mallory', '/api/conversations')).body.conversations, []);
    const malformed = await get('mallory', '/api/conversations?before=-1');
    t.match({ status: malformed.status, code: malformed.body.error?.code }, { status: 400, code: 'SB_ERR_BAD_REQUEST' });
    const unknown = await get('mallory', '/api/conversations?after=x');
    t.equal(unknown.status, 400, 'unknown query fields are refused');

    // Five reads a minute: four spent above (the malformed ones count too: the rate is taken before the query is read).
    let refused = 0;
    for (let i = 0; i < 8; i++) {
      const r = await get('mallory', '/api/conversations');
      if (r.status === 429) {
        refused++;
        t.equal(r.body.error?.code, 'SB_ERR_RATE_LIMITED');
        t.ok(Number(r.headers['retry-after']) >= 1);
      }
    }
    t.equal(refused, 7, 'the fifth passes, every further one is refused');
    const bob = await get('bob', '/api/conversations');
    t.equal(bob.status, 200, 'bob is unaffected');
    t.same(bob.body.conversations.map((c: any) => c.peer), ['alice']);
  });
}

t.test('memory inbox', async (t) => suite(t, async (t) => {
  const inbox = new MemoryInboxStore();
  t.teardown(() => inbox.close());
  return inbox;
}));

t.test('redis inbox', async (t) => {
  const redis = await startRedis(t);
  let n = 0;
  suite(t, async (t) => {
    const inbox = new RedisInboxStore({ url: redis.url, keyPrefix: `cr${++n}:` });
    t.teardown(() => inbox.close());
    return inbox;
  });
});

t.test('groups at the gate: the list with groups=1 and its cursor, a group history page, readers and read counts; strangers and receipts off refused', async (t) => {
  const signer = new TokenSigner(TEST_SECRET);
  const inbox = new MemoryInboxStore();
  const groups = new MemoryGroupStore();
  const users = new MemoryUserStore();
  for (const username of ['alice', 'bob', 'carol']) await users.create({ username, passwordHash: 'x', createdAt: 1 });
  await users.setReceipts('carol', false);
  t.teardown(() => Promise.all([inbox.close(), groups.close()]));
  const gate = new WebGate({
    host: '127.0.0.1',
    port: 0,
    registry: new StaticRegistry(),
    users,
    signer,
    hasher: new PasswordHasher({ N: 2 ** 14, r: 8, p: 1 }),
    registration: true,
    limits: DEFAULT_GATE_LIMITS,
    conversations: { inbox },
    groups: { store: groups, notifier: new MemoryGroupNotifier() },
    log: silentLogger(),
  });
  t.teardown(() => gate.close());
  await gate.app.ready();
  const get = async (as: string, url: string) => {
    const r = await gate.app.inject({ method: 'GET', url, headers: { authorization: `Bearer ${signer.mint({ uid: as, ttlMs: 60_000 })}` } });
    return { status: r.statusCode, body: JSON.parse(r.body) as Record<string, any> };
  };
  const g = await groups.create('alice', 'climbing', ['bob', 'carol']);
  const say = (from: string, content: string) => groups.append(g.id, from, '0', storedRequestBody({ content, group: g.id }, from, Date.now(), g.id), true);
  await say('alice', 'first');
  await new Promise((resolve) => setTimeout(resolve, 5));
  await chat(inbox, 'alice', 'bob', 'a 1:1');
  await new Promise((resolve) => setTimeout(resolve, 5));
  const { seq } = await say('alice', 'second');

  const merged = await get('bob', '/api/conversations?groups=1');
  t.equal(merged.status, 200);
  t.same(merged.body.conversations.map((c: any) => [c.group ?? c.peer, c.lastSeq, c.readSeq, c.unread]), [[g.id, seq, 0, 2], ['alice', 1, 0, 1]]);
  t.match(merged.body.conversations[0], { name: 'climbing', last: { content: 'second', group: g.id, from: 'alice' }, truncated: false });
  t.equal(merged.body.nextCursor, null);
  const first = await get('bob', '/api/conversations?groups=1&limit=1');
  t.same(first.body.conversations.map((c: any) => c.group ?? c.peer), [g.id]);
  const second = await get('bob', `/api/conversations?groups=1&limit=1&cursor=${encodeURIComponent(first.body.nextCursor)}`);
  t.same(second.body.conversations.map((c: any) => c.group ?? c.peer), ['alice']);
  t.equal(second.body.nextCursor, null);
  t.same((await get('bob', '/api/conversations')).body.conversations.map((c: any) => c.peer), ['alice'], 'without groups=1: the 1:1 list');
  const forged = await get('bob', '/api/conversations?groups=1&cursor=anything');
  t.match({ status: forged.status, code: forged.body.error?.code }, { status: 400, code: 'SB_ERR_BAD_REQUEST' });

  const history = await get('bob', `/api/groups/${g.id}/messages?limit=2`);
  t.equal(history.status, 200);
  t.same(history.body.messages.map((m: any) => [m.seq, m.content ?? JSON.parse(m.event).type]), [[2, 'first'], [3, 'second']]);
  t.equal(history.body.nextBefore, 2);
  t.same((await get('bob', `/api/groups/${g.id}/messages?before=2`)).body.messages.map((m: any) => JSON.parse(m.event).type), ['created']);

  await groups.markRead(g.id, 'bob', seq, true);
  await groups.markRead(g.id, 'carol', seq, false);
  const readers = await get('alice', `/api/groups/${g.id}/readers?seq=${seq}`);
  t.equal(readers.status, 200);
  t.same(readers.body, { readers: [{ uid: 'alice', readSeq: seq }, { uid: 'bob', readSeq: seq }, { uid: 'carol', readSeq: 0 }], readCount: 1, memberCount: 2, nextAfter: null });
  const off = await get('carol', `/api/groups/${g.id}/readers?seq=${seq}`);
  t.match({ status: off.status, code: off.body.error?.code }, { status: 403, code: 'SB_ERR_RECEIPTS_OFF' });
  for (const url of [`/api/groups/${g.id}/readers`, `/api/groups/${g.id}/messages`]) {
    const stranger = await get('mallory', url);
    t.match({ status: stranger.status, code: stranger.body.error?.code }, { status: 403, code: 'SB_ERR_GROUP_NOT_MEMBER' }, `a stranger: ${url}`);
  }
  t.same((await get('mallory', '/api/conversations?groups=1')).body.conversations, [], "a stranger's list has no group");
  const bad = await get('bob', '/api/groups/not-a-group/messages');
  t.match({ status: bad.status, code: bad.body.error?.code }, { status: 400, code: 'SB_ERR_BAD_GROUP' });
});
