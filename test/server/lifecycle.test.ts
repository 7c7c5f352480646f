// Session lifecycle over real sockets: heartbeats and the idle timeout, logout and disconnect
// cleanup, the device limit, same-device replacement, and server shutdown. A user who is gone
// is no longer in the session map or store: messages to them are stored, not written to the
// old connection, and replayed when they come back.

import t from 'tap';
import { startNode } from '../helpers/node.js';
import { isDelivery, isType, seqOf, u64, RawClient, DEFAULT_TIMEOUT_MS } from '../../testkit/raw-client.js';
import { until } from '../../testkit/wait.js';
import { connect, connectLoggedIn } from '../helpers/raw-client.js';
import { HeadType, ResultCode } from '../../src/protocol/types.js';

t.test('a heartbeat is echoed unchanged after login', async (t) => {
  const tn = await startNode(t);
  const alice = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'));
  const sent = alice.heartbeat(31);
  const echo = await alice.next();
  t.equal(echo.type, HeadType.HEART_BEAT);
  t.equal(u64(echo.sequence), '31');
  t.equal(echo.sessionId, alice.sessionId);
  t.same(echo.heartBeat, sent.heartBeat);
});

t.test('idle timeout', async (t) => {
  // Idle after 3 x 400 ms without a frame. The live clients send a frame every 50 ms; the
  // margin is wide because clients and server share one process, so a long stall of it (a busy
  // CI machine) would make every client look idle at once.
  const tn = await startNode(t, { heartbeatIntervalMs: 400, idleIntervals: 3 });

  const beating = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'));
  const timer = setInterval(() => beating.heartbeat(), 50);
  t.teardown(() => clearInterval(timer));
  const chatty = await connectLoggedIn(t, tn.port, 'carol', tn.token('carol'));
  const chatTimer = setInterval(() => chatty.chat('alice', 'still here'), 50);
  t.teardown(() => clearInterval(chatTimer));
  const silent = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'));

  const closing = await silent.nextClosing();
  t.equal(closing.code, 'SB_ERR_IDLE_TIMEOUT', 'a silent logged-in connection is closed');
  t.equal(closing.reason, 'no frame within 1200 ms');
  await silent.waitClosed();
  await until('bob to be gone', () => tn.node.server.sessions.byUser('bob').length === 0, DEFAULT_TIMEOUT_MS);

  // One more full idle period, measured by another silent connection being closed.
  const clock = await connectLoggedIn(t, tn.port, 'dave', tn.token('dave'));
  t.equal((await clock.nextClosing()).code, 'SB_ERR_IDLE_TIMEOUT');
  t.equal(beating.isClosed, false, 'a connection that heartbeats stays open');
  t.equal(beating.closing, undefined);
  t.equal(tn.node.server.sessions.byUser('alice').length, 1);
  t.equal(chatty.isClosed, false, 'a connection that chats stays open');
  t.equal(chatty.closing, undefined);
  clearInterval(timer);
  clearInterval(chatTimer);
  const hb = beating.heartbeat(999);
  t.equal(u64((await beating.next((m) => m.type === HeadType.HEART_BEAT && u64(m.sequence) === '999')).sequence), u64(hb.sequence));
});

t.test('logout', async (t) => {
  const tn = await startNode(t);
  const alice = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'));
  const bob = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'));
  t.equal(tn.node.server.sessions.size, 2);

  alice.send({ type: HeadType.LOGOUT_REQUEST, sequence: 12, sessionId: alice.sessionId });
  const response = await alice.next();
  t.equal(response.type, HeadType.LOGOUT_RESPONSE);
  t.equal(u64(response.sequence), '12', "echoes the request's sequence");
  t.equal(response.sessionId, alice.sessionId);
  await alice.waitClosed();
  t.equal(alice.closing, undefined, 'a requested logout is not announced as a CLOSING');

  await until('the session to be removed', () => tn.node.server.sessions.size === 1, DEFAULT_TIMEOUT_MS);
  t.same(tn.node.server.sessions.byUser('alice'), []);
  await until('the store record to be removed', async () => (await tn.node.store.byUser('alice')).length === 0, DEFAULT_TIMEOUT_MS);
  const toAlice = await bob.chatAndWait('alice', 'are you there?');
  t.equal(toAlice.messageResponse?.result, true, 'a message to a logged-out user is accepted');
  t.equal(u64(toAlice.messageResponse?.seq), '1');
  t.same(
    (await tn.node.inbox.range('alice', 0, 10)).messages.map((m) => m.seq),
    [1],
    "and kept in alice's inbox",
  );

  const back = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'));
  const replayed = await back.next(isDelivery);
  t.equal(replayed.messageRequest?.content, 'are you there?', 'she gets it when she logs in again');
  t.equal(seqOf(replayed), 1);
});

t.test('a logged-out user is unreachable at once, even before the socket has closed', async (t) => {
  // The client does not answer the server's FIN, so the socket stays half-open for the whole
  // close grace period. Messages to it in that window must not be written to it (they would be
  // acknowledged and dropped): they are stored for the user's next login.
  const tn = await startNode(t, { closeGraceMs: 5_000 });
  const alice = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'), 'phone', { allowHalfOpen: true });
  const bob = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'));

  alice.send({ type: HeadType.LOGOUT_REQUEST, sequence: 1, sessionId: alice.sessionId });
  t.equal((await alice.next()).type, HeadType.LOGOUT_RESPONSE);
  await alice.ended;
  t.equal(alice.isClosed, false, 'still half-open');
  t.equal(tn.node.server.sessions.byUser('alice').length, 0, 'gone from the session map as soon as it is closing');

  const toAlice = await bob.chatAndWait('alice', 'lost in the void?');
  t.equal(toAlice.messageResponse?.result, true, 'stored');
  t.equal(u64(toAlice.messageResponse?.seq), '1');
  await until('the store record to be removed', async () => (await tn.node.store.byUser('alice')).length === 0, DEFAULT_TIMEOUT_MS);

  // Ending our side lets the server close; whatever it wrote before arrives before its close.
  alice.socket.end();
  await alice.waitClosed();
  t.notOk(
    alice.received.some((m) => m.type === HeadType.MESSAGE_REQUEST),
    'nothing was written after the LOGOUT_RESPONSE',
  );
  t.equal(await tn.node.inbox.cursor('alice', 'phone'), undefined, 'nor counted as written to the phone');

  // Another device of the same user can log in meanwhile: it is replayed the stored message and
  // then reachable live.
  const tablet = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'), 'tablet');
  const replayed = await tablet.next(isDelivery);
  t.equal(replayed.messageRequest?.content, 'lost in the void?');
  t.equal(seqOf(replayed), 1);
  t.equal((await bob.chatAndWait('alice', 'hi tablet')).messageResponse?.result, true);
  const live = await tablet.next(isDelivery);
  t.equal(live.messageRequest?.content, 'hi tablet');
  t.equal(seqOf(live), 2);
});

t.test('a dropped connection is cleaned up like a logout', async (t) => {
  const tn = await startNode(t);
  const alice = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'));
  const bob = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'));
  t.equal((await tn.node.store.byUser('alice')).length, 1);

  alice.destroy();
  await alice.closed;
  await until('the session to be removed', () => tn.node.server.sessions.size === 1, DEFAULT_TIMEOUT_MS);
  t.same(tn.node.server.sessions.byUser('alice'), []);
  await until('the store record to be removed', async () => (await tn.node.store.byUser('alice')).length === 0, DEFAULT_TIMEOUT_MS);
  t.same(await tn.node.store.byUser('alice'), []);
  t.equal((await tn.node.store.byUser('bob')).length, 1, "bob's record is untouched");
  t.equal(tn.node.server.connectionCount, 1);

  const toAlice = await bob.chatAndWait('alice', 'gone?');
  t.equal(toAlice.messageResponse?.result, true, 'a message to her is stored');
  t.equal((await tn.node.inbox.range('alice', 0, 0)).head, 1);
  const back = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'));
  t.equal((await back.next(isDelivery)).messageRequest?.content, 'gone?', 'and replayed when she is back');
});

t.test('the device limit', async (t) => {
  const tn = await startNode(t, { maxDevicesPerUser: 2 });
  const phone = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'), 'phone');
  await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'), 'tablet');

  const watch = await connect(t, tn.port);
  const refused = await watch.login('alice', tn.token('alice'), 'watch');
  t.equal(refused.loginResponse?.result, false);
  t.equal(refused.loginResponse?.code, ResultCode.TOO_MANY_DEVICES);
  t.equal(refused.loginResponse?.errorCode, 'SB_ERR_TOO_MANY_DEVICES');
  await watch.waitClosed();
  t.equal(tn.node.server.sessions.byUser('alice').length, 2);
  t.equal((await tn.node.store.byUser('alice')).length, 2, 'the refused device was not recorded');

  // Other users are not affected by alice's limit.
  await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'watch');

  // Logging in again on a device that is already counted is a replacement, not a third device.
  const phone2 = await connect(t, tn.port);
  t.equal((await phone2.login('alice', tn.token('alice'), 'phone')).loginResponse?.result, true, 'same device at the limit is allowed');
  t.equal((await phone.nextClosing()).code, 'SB_ERR_SESSION_REPLACED');

  // Once a device leaves, another may come in.
  phone2.destroy();
  await until('the phone session to be removed', () => tn.node.server.sessions.byUser('alice').length === 1, DEFAULT_TIMEOUT_MS);
  const watch2 = await connect(t, tn.port);
  t.equal((await watch2.login('alice', tn.token('alice'), 'watch')).loginResponse?.result, true, 'a freed slot can be used');
});

t.test('a new login from the same device replaces the old session', async (t) => {
  const tn = await startNode(t);
  const bob = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'));
  const old = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'), 'phone');

  const fresh = await connect(t, tn.port);
  const response = await fresh.login('alice', tn.token('alice'), 'phone');
  t.equal(response.loginResponse?.result, true);
  t.not(fresh.sessionId, old.sessionId, 'a new session id');

  const closing = await old.nextClosing();
  t.equal(closing.code, 'SB_ERR_SESSION_REPLACED');
  await old.waitClosed();

  const local = tn.node.server.sessions.byUser('alice');
  t.same(
    local.map((s) => s.sessionId),
    [fresh.sessionId],
    'only the new session is local',
  );
  await until('the old record to be removed', async () => (await tn.node.store.byUser('alice')).length === 1, DEFAULT_TIMEOUT_MS);
  t.same(
    (await tn.node.store.byUser('alice')).map((r) => r.sessionId),
    [fresh.sessionId],
    'only the new session is recorded',
  );

  t.equal((await bob.chatAndWait('alice', 'which one?')).messageResponse?.result, true);
  const delivered = await fresh.next(isType(HeadType.MESSAGE_REQUEST));
  t.equal(delivered.messageRequest?.content, 'which one?', 'the new connection receives messages');
  t.notOk(
    old.received.some((m) => m.type === HeadType.MESSAGE_REQUEST),
    'the old connection received nothing after it was replaced',
  );
  t.equal((await fresh.chatAndWait('bob', 'it is me')).messageResponse?.result, true, 'the new connection can send');
});

t.test('stopping the server closes every connection with SB_ERR_SERVER_SHUTDOWN', async (t) => {
  const tn = await startNode(t);
  const alice = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'));
  const bob = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'));
  const anonymous = await connect(t, tn.port);
  // Let the server accept the anonymous socket before stopping.
  anonymous.heartbeat();
  await anonymous.next(isType(HeadType.HEART_BEAT));

  const stopped = tn.node.stop();
  for (const [name, client] of [
    ['alice', alice],
    ['bob', bob],
    ['not logged in', anonymous],
  ] as const) {
    const closing = await client.nextClosing();
    t.equal(closing.code, 'SB_ERR_SERVER_SHUTDOWN', name);
    await client.waitClosed();
  }
  const closingOfAlice = alice.received.at(-1);
  t.equal(closingOfAlice?.sessionId, alice.sessionId, 'the CLOSING names the session it closes');
  await stopped;
  t.equal(tn.node.server.connectionCount, 0);
  t.equal(tn.node.server.sessions.size, 0);

  await t.rejects(RawClient.connect(tn.port), 'no longer accepting connections');
});
