// Chat over real sockets: delivery as the same MESSAGE_REQUEST envelope plus its inbox seq, the
// MESSAGE_RESPONSE for every request, per-sender order, the sender check, offline recipients
// (stored, not refused), several devices. test/server/delivery.test.ts covers replay and acks.

import t from 'tap';
import { startNode } from '../helpers/node.js';
import { frameHeader, isType, seqOf, u64 } from '../../testkit/raw-client.js';
import { connectLoggedIn } from '../helpers/raw-session.js';
import { HeadType, ResultCode } from '../../src/protocol/types.js';

t.test('a message reaches its recipient and the sender gets a MESSAGE_RESPONSE', async (t) => {
  const tn = await startNode(t);
  const alice = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'));
  const bob = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'));

  const sent = alice.chatMessage('bob', 'hello bob', {
    from: 'alice',
    msgId: 9001,
    msgType: 3,
    url: 'https://example.com/x',
    property: 'p',
    fromNick: 'Alice',
    json: '{"k":1}',
  });
  alice.send(sent);

  const delivered = await bob.next();
  t.equal(delivered.type, HeadType.MESSAGE_REQUEST, 'delivered as a MESSAGE_REQUEST envelope');
  t.equal(delivered.messageRequest?.from, 'alice');
  t.equal(delivered.messageRequest?.to, 'bob');
  t.equal(delivered.messageRequest?.content, 'hello bob');
  t.equal(u64(delivered.messageRequest?.msgId), '9001');
  t.equal(delivered.messageRequest?.msgType, 3);
  t.equal(delivered.messageRequest?.url, 'https://example.com/x');
  t.equal(delivered.messageRequest?.property, 'p');
  t.equal(delivered.messageRequest?.fromNick, 'Alice');
  t.equal(delivered.messageRequest?.json, '{"k":1}');
  t.equal(seqOf(delivered), 1, "carries its seq in bob's inbox");
  t.equal(u64(delivered.sequence), '1', 'the envelope sequence is the inbox seq too');
  t.not(delivered.sessionId, alice.sessionId, "the sender's session id is not passed on");

  const response = await alice.next();
  t.equal(response.type, HeadType.MESSAGE_RESPONSE);
  t.equal(response.messageResponse?.result, true);
  t.equal(response.messageResponse?.code, ResultCode.SUCCESS);
  t.equal(u64(response.messageResponse?.seq), '1', 'tells the sender the seq it got');
  t.equal(response.messageResponse?.duplicate, false);
  t.equal(u64(response.sequence), u64(sent.sequence), "echoes the request's sequence");
  t.equal(response.sessionId, alice.sessionId);

  // And the other way round.
  const back = await bob.chatAndWait('alice', 'hi alice');
  t.equal(back.messageResponse?.result, true);
  // Per recipient: alice's inbox holds her own copy of "hello bob" at 1 (PROTOCOL.md §14), which
  // her device, having sent it, is not sent; bob's message is her 2, as bob's own copy is his 2.
  t.equal(u64(back.messageResponse?.seq), '2', 'sequences are per recipient');
  t.equal(u64(back.messageResponse?.ownSeq), '2', "and the copy in bob's own inbox follows alice's message there");
  t.equal(u64(response.messageResponse?.ownSeq), '1', "alice's own copy is the first of her inbox");
  const reply = await alice.next(isType(HeadType.MESSAGE_REQUEST));
  t.equal(reply.messageRequest?.from, 'bob');
  t.equal(reply.messageRequest?.content, 'hi alice');
  t.equal(seqOf(reply), 2);
});

t.test('every delivery carries stored_at, the server\'s clock when it accepted the message, the same in the replay; a sender\'s own is replaced', async (t) => {
  const tn = await startNode(t);
  const alice = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'));
  const bob = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob', 'phone'), 'phone');
  const before = Date.now();
  // One through the hand decoder's splice, one it leaves to protobufjs (stored_at written first,
  // out of order), each with a stored_at of the sender's that the server must not keep.
  t.equal((await alice.chatAndWait('bob', 'spliced', { storedAt: 1 })).messageResponse?.result, true);
  const body = Buffer.from('0805' + '108407' + '3211' + '880105' + '1a03626f62' + '3207' + Buffer.from('encoded').toString('hex'), 'hex');
  alice.sendRaw(Buffer.concat([frameHeader(body.length), body]));
  t.equal((await alice.response(900)).messageResponse?.result, true);
  const after = Date.now();
  const live = await bob.deliveries(2);
  for (const m of live) {
    const storedAt = Number(u64(m.messageRequest?.storedAt));
    t.ok(storedAt >= before && storedAt <= after, `${m.messageRequest?.content}: stored_at ${storedAt} is the server's time of acceptance`);
  }
  // Another device of bob logs in later: its replay carries the very same values.
  const laptop = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob', 'laptop'), 'laptop');
  const replayed = await laptop.deliveries(2);
  t.same(replayed.map((m) => u64(m.messageRequest?.storedAt)), live.map((m) => u64(m.messageRequest?.storedAt)), 'the replay carries the stored value');
});

t.test('a seq set by the sender is ignored: the inbox assigns it', async (t) => {
  const tn = await startNode(t);
  const alice = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'));
  const bob = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'));
  const response = await alice.chatAndWait('bob', 'forged seq', { seq: 4242 });
  t.equal(u64(response.messageResponse?.seq), '1');
  const delivered = await bob.next(isType(HeadType.MESSAGE_REQUEST));
  t.equal(seqOf(delivered), 1, 'delivered with the assigned seq only');
  t.equal(delivered.messageRequest?.content, 'forged seq');
});

t.test('a burst of 500 messages keeps per-sender order', async (t) => {
  const tn = await startNode(t);
  const alice = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'));
  const carol = await connectLoggedIn(t, tn.port, 'carol', tn.token('carol'));
  const bob = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'));
  const count = 500;

  // Two senders at once, one write per message, nothing awaited in between.
  const sequences: number[] = [];
  for (let i = 0; i < count; i++) {
    sequences.push(alice.chat('bob', `a${i}`));
    carol.chat('bob', `c${i}`);
  }

  const fromAlice: string[] = [];
  const fromCarol: string[] = [];
  const bobSeqs: number[] = [];
  for (let i = 0; i < 2 * count; i++) {
    const m = await bob.next(isType(HeadType.MESSAGE_REQUEST));
    (m.messageRequest?.from === 'alice' ? fromAlice : fromCarol).push(m.messageRequest?.content ?? '');
    bobSeqs.push(seqOf(m));
  }
  t.same(
    bobSeqs,
    Array.from({ length: 2 * count }, (_, i) => i + 1),
    "bob's inbox numbers both senders' messages 1..1000, delivered in that order",
  );
  t.same(fromAlice, Array.from({ length: count }, (_, i) => `a${i}`), "alice's messages arrive in the order she sent them");
  t.same(fromCarol, Array.from({ length: count }, (_, i) => `c${i}`), "carol's messages arrive in the order she sent them");

  const responses: string[] = [];
  for (let i = 0; i < count; i++) {
    const r = await alice.next(isType(HeadType.MESSAGE_RESPONSE));
    t.equal(r.messageResponse?.result, true);
    responses.push(u64(r.sequence));
  }
  t.same(responses, sequences.map(String), 'responses come back in request order');
});

t.test('a spoofed from is refused with SENDER_MISMATCH and not delivered', async (t) => {
  const tn = await startNode(t);
  const mallory = await connectLoggedIn(t, tn.port, 'mallory', tn.token('mallory'));
  const bob = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'));

  const spoofed = mallory.chat('bob', 'I am alice', { from: 'alice' });
  const response = await mallory.response(spoofed);
  t.equal(response.messageResponse?.result, false);
  t.equal(response.messageResponse?.code, ResultCode.SENDER_MISMATCH);
  t.equal(response.messageResponse?.errorCode, 'SB_ERR_SENDER_MISMATCH');
  t.equal(mallory.isClosed, false, 'a refused message does not close the connection');

  // Same connection, honest this time: bob's first message is this one.
  const honest = await mallory.chatAndWait('bob', 'I am mallory', { from: 'mallory' });
  t.equal(honest.messageResponse?.result, true);
  const first = await bob.next();
  t.equal(first.messageRequest?.content, 'I am mallory', 'the spoofed message was never delivered');
  t.equal(first.messageRequest?.from, 'mallory');
  t.equal(seqOf(first), 1, 'nor stored: the honest message is the first in the inbox');
});

t.test('an empty from is filled in with the logged-in user', async (t) => {
  const tn = await startNode(t);
  const alice = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'));
  const bob = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'));
  const response = await alice.chatAndWait('bob', 'no from', { from: '' });
  t.equal(response.messageResponse?.result, true);
  const delivered = await bob.next(isType(HeadType.MESSAGE_REQUEST));
  t.equal(delivered.messageRequest?.from, 'alice');
  t.equal(delivered.messageRequest?.content, 'no from');
});

t.test('a message to an offline user is stored and answered with its seq', async (t) => {
  const tn = await startNode(t);
  const alice = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'));
  const response = await alice.chatAndWait('nobody', 'anyone there?');
  t.equal(response.messageResponse?.result, true, 'accepted: there is no RECIPIENT_OFFLINE any more');
  t.equal(response.messageResponse?.code, ResultCode.SUCCESS);
  t.equal(response.messageResponse?.errorCode, '');
  t.equal(u64(response.messageResponse?.seq), '1');
  t.equal(alice.isClosed, false);
  t.same(tn.node.server.sessions.byUser('nobody'), [], 'nobody is online');
  const stored = await tn.node.inbox.range('nobody', 0, 10);
  t.same(
    stored.messages.map((m) => m.seq),
    [1],
    "in nobody's inbox",
  );

  const nobody = await connectLoggedIn(t, tn.port, 'nobody', tn.token('nobody'));
  const replayed = await nobody.next(isType(HeadType.MESSAGE_REQUEST));
  t.equal(replayed.messageRequest?.content, 'anyone there?', 'delivered at login');
  t.equal(replayed.messageRequest?.from, 'alice');
  t.equal(seqOf(replayed), 1);
});

t.test('a message without a recipient is refused with BAD_REQUEST', async (t) => {
  const tn = await startNode(t);
  const alice = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'));
  const response = await alice.chatAndWait('', 'to whom?');
  t.equal(response.messageResponse?.result, false);
  t.equal(response.messageResponse?.code, ResultCode.BAD_REQUEST);
  t.equal(response.messageResponse?.errorCode, 'SB_ERR_BAD_REQUEST');

  const seq = alice.nextSequence();
  alice.send({ type: HeadType.MESSAGE_REQUEST, sequence: seq, sessionId: alice.sessionId });
  const bare = await alice.response(seq);
  t.equal(bare.messageResponse?.errorCode, 'SB_ERR_BAD_REQUEST', 'no messageRequest at all');
  t.equal(alice.isClosed, false);
});

t.test('every device of the recipient receives the message', async (t) => {
  const tn = await startNode(t);
  const phone = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'phone');
  const tablet = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'tablet');
  const alice = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'));
  t.not(phone.sessionId, tablet.sessionId, 'one session per device');
  t.equal(tn.node.server.sessions.byUser('bob').length, 2);

  const response = await alice.chatAndWait('bob', 'to all of you');
  t.equal(response.messageResponse?.result, true);
  for (const [name, device] of [
    ['phone', phone],
    ['tablet', tablet],
  ] as const) {
    const m = await device.next(isType(HeadType.MESSAGE_REQUEST));
    t.equal(m.messageRequest?.content, 'to all of you', name);
    t.equal(m.messageRequest?.from, 'alice', name);
  }

  // A message one device sends to its own user reaches both devices, the sender included.
  await phone.chatAndWait('bob', 'note to self');
  const onTablet = await tablet.next(isType(HeadType.MESSAGE_REQUEST));
  const onPhone = await phone.next(isType(HeadType.MESSAGE_REQUEST));
  t.equal(onTablet.messageRequest?.content, 'note to self');
  t.equal(onPhone.messageRequest?.content, 'note to self');
  t.same([seqOf(onPhone), seqOf(onTablet)], [2, 2], 'one inbox per user: the same seq on every device');
});
