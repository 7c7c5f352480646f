// Login over real sockets, as a native client does it: token checks and their result codes, the
// login timeout, what is refused before login, and the bounded pre-login queue. Where the
// replay after a login starts is test/server/delivery.test.ts's subject.

import t from 'tap';
import { startNode } from '../helpers/node.js';
import { isType, seqOf, u64, RawClient, PRE_LOGIN_SEQUENCE } from '../../testkit/raw-client.js';
import { connect, connectLoggedIn } from '../helpers/raw-client.js';
import { HeadType, ResultCode, type ImMessage } from '../../src/protocol/types.js';
import { encodeMessageFrame } from '../../src/protocol/codec.js';

t.test('login succeeds with a valid token', async (t) => {
  const tn = await startNode(t);
  const client = await connect(t, tn.port);
  const response = await client.login('alice', tn.token('alice'), 'phone');

  t.equal(response.type, HeadType.LOGIN_RESPONSE);
  t.equal(response.loginResponse?.result, true);
  t.equal(response.loginResponse?.code, ResultCode.SUCCESS);
  t.equal(response.loginResponse?.errorCode, '', 'no error code on success');
  t.equal(u64(response.loginResponse?.inboxHead), '0', 'an empty inbox');
  t.equal(u64(response.loginResponse?.syncFrom), '0');
  t.equal(response.loginResponse?.gap, false);
  t.equal(u64(response.sequence), PRE_LOGIN_SEQUENCE.toString(), 'echoes the pre-login sequence 2^64-1 exactly');
  t.equal(u64(response.sequence), '18446744073709551615');

  const sessionId = response.sessionId ?? '';
  t.match(sessionId, /^[0-9a-f-]{36}$/, 'a session id in the envelope');
  const local = tn.node.server.sessions.byUser('alice');
  t.equal(local.length, 1);
  t.equal(local[0]?.sessionId, sessionId, 'the session id is the server-side session');
  t.equal(local[0]?.deviceId, 'phone');
  const stored = await tn.node.store.byUser('alice');
  t.same(
    stored.map((r) => [r.sessionId, r.deviceId, r.nodeId]),
    [[sessionId, 'phone', tn.info.id]],
    'recorded in the session store',
  );
  t.equal(client.isClosed, false);
});

t.test('the LoginResponse tells the worker\'s heartbeat interval (ms); a refusal does not', async (t) => {
  const tn = await startNode(t, { heartbeatIntervalMs: 12_000 });
  const client = await connect(t, tn.port);
  const response = await client.login('alice', tn.token('alice'), 'phone');
  t.equal(response.loginResponse?.heartbeatIntervalMs, 12_000, 'the interval the worker runs with');
  const refused = await (await connect(t, tn.port)).login('alice', 'not a token', 'phone');
  t.equal(refused.loginResponse?.result, false);
  t.equal(refused.loginResponse?.heartbeatIntervalMs, 0, 'absent from a refusal');
});

t.test('login echoes whatever sequence the request carried', async (t) => {
  const tn = await startNode(t);
  const client = await connect(t, tn.port);
  client.send(RawClient.loginMessage('bob', tn.token('bob'), 'd', 4242));
  const response = await client.next(isType(HeadType.LOGIN_RESPONSE));
  t.equal(response.loginResponse?.result, true);
  t.equal(u64(response.sequence), '4242');
});

t.test('a token with a bad signature is refused with AUTH_FAILED, then closed', async (t) => {
  const tn = await startNode(t);
  const good = tn.token('alice');
  const forged = good.slice(0, -4) + (good.endsWith('AAAA') ? 'BBBB' : 'AAAA');
  for (const [name, token] of [
    ['forged signature', forged],
    ['not a token at all', 'alice'],
  ] as const) {
    const client = await connect(t, tn.port);
    const response = await client.login('alice', token, 'phone');
    t.equal(response.loginResponse?.result, false, name);
    t.equal(response.loginResponse?.code, ResultCode.AUTH_FAILED, name);
    t.equal(response.loginResponse?.errorCode, 'SB_ERR_TOKEN_INVALID', name);
    t.equal(u64(response.sequence), PRE_LOGIN_SEQUENCE.toString(), `${name}: sequence echoed`);
    await client.waitClosed();
    t.equal(client.closing, undefined, `${name}: the LoginResponse says why, no extra CLOSING`);
  }
  t.equal(tn.node.server.sessions.size, 0);
  t.same(await tn.node.store.byUser('alice'), []);
});

t.test('an expired token is refused with SB_ERR_TOKEN_EXPIRED', async (t) => {
  const tn = await startNode(t);
  const expired = tn.node.signer.mint({ uid: 'alice', ttlMs: 1_000, now: Date.now() - 60_000 });
  const client = await connect(t, tn.port);
  const response = await client.login('alice', expired, 'phone');
  t.equal(response.loginResponse?.result, false);
  t.equal(response.loginResponse?.code, ResultCode.AUTH_FAILED);
  t.equal(response.loginResponse?.errorCode, 'SB_ERR_TOKEN_EXPIRED');
  await client.waitClosed();
  t.equal(tn.node.server.sessions.size, 0);
});

t.test('a login without a token is refused with NO_TOKEN', async (t) => {
  const tn = await startNode(t);
  const cases: [string, ImMessage][] = [
    ['empty token', RawClient.loginMessage('alice', '', 'phone')],
    ['no token field', RawClient.loginMessage('alice', undefined, 'phone')],
    ['no loginRequest at all', { type: HeadType.LOGIN_REQUEST, sequence: PRE_LOGIN_SEQUENCE, sessionId: '-1' }],
  ];
  for (const [name, message] of cases) {
    const client = await connect(t, tn.port);
    client.send(message);
    const response = await client.next(isType(HeadType.LOGIN_RESPONSE));
    t.equal(response.loginResponse?.result, false, name);
    t.equal(response.loginResponse?.code, ResultCode.NO_TOKEN, name);
    t.equal(response.loginResponse?.errorCode, 'SB_ERR_NO_TOKEN', name);
    await client.waitClosed();
  }
  t.equal(tn.node.server.sessions.size, 0);
});

t.test('a token issued for another user or device is refused with SB_ERR_TOKEN_MISMATCH', async (t) => {
  const tn = await startNode(t);
  const cases: [string, string, string][] = [
    ['another user', tn.token('mallory'), 'phone'],
    ['another device', tn.token('alice', 'tablet'), 'phone'],
  ];
  for (const [name, token, deviceId] of cases) {
    const client = await connect(t, tn.port);
    const response = await client.login('alice', token, deviceId);
    t.equal(response.loginResponse?.result, false, name);
    t.equal(response.loginResponse?.code, ResultCode.AUTH_FAILED, name);
    t.equal(response.loginResponse?.errorCode, 'SB_ERR_TOKEN_MISMATCH', name);
    await client.waitClosed();
  }
  t.equal(tn.node.server.sessions.size, 0);

  // The device-bound token does work for its own device.
  const client = await connect(t, tn.port);
  const response = await client.login('alice', tn.token('alice', 'tablet'), 'tablet');
  t.equal(response.loginResponse?.result, true, 'a device-bound token logs in on that device');
});

t.test('a second login on a logged-in connection is refused but keeps the session', async (t) => {
  const tn = await startNode(t);
  const client = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'));
  const first = client.sessionId;
  client.send(RawClient.loginMessage('alice', tn.token('alice'), 'dev-1', 7));
  const response = await client.next(isType(HeadType.LOGIN_RESPONSE));
  t.equal(response.loginResponse?.result, false);
  t.equal(response.loginResponse?.code, ResultCode.BAD_REQUEST);
  t.equal(response.loginResponse?.errorCode, 'SB_ERR_ALREADY_LOGGED_IN');
  t.equal(u64(response.sequence), '7');
  t.equal(tn.node.server.sessions.byUser('alice')[0]?.sessionId, first, 'still the first session');
  const hb = client.heartbeat();
  t.equal(u64((await client.next(isType(HeadType.HEART_BEAT))).sequence), u64(hb.sequence), 'connection still works');
});

t.test('a connection that never logs in is closed with SB_ERR_LOGIN_TIMEOUT', async (t) => {
  const tn = await startNode(t, { loginTimeoutMs: 500 });
  const silent = await connect(t, tn.port);
  const closing = await silent.nextClosing();
  t.equal(closing.code, 'SB_ERR_LOGIN_TIMEOUT');
  t.match(closing.reason, /500 ms/);
  await silent.waitClosed();

  // Heartbeats do not stand in for a login.
  const beating = await connect(t, tn.port);
  const timer = setInterval(() => beating.heartbeat(), 40);
  t.teardown(() => clearInterval(timer));
  t.equal((await beating.nextClosing()).code, 'SB_ERR_LOGIN_TIMEOUT', 'heartbeats do not postpone the login timeout');
  await beating.waitClosed();
  clearInterval(timer);

  // A connection that logs in in time is left alone.
  const prompt = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'));
  const late = await connect(t, tn.port);
  await late.nextClosing(); // one full login timeout has passed since `prompt` logged in
  t.equal(prompt.isClosed, false, 'a logged-in connection survives the login timeout');
  t.equal(prompt.closing, undefined);
});

t.test('a MESSAGE_REQUEST before login closes with SB_ERR_NOT_LOGGED_IN', async (t) => {
  const tn = await startNode(t);
  const bob = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'));
  const intruder = await connect(t, tn.port);
  intruder.send({
    type: HeadType.MESSAGE_REQUEST,
    sequence: PRE_LOGIN_SEQUENCE,
    sessionId: '-1',
    messageRequest: { from: 'alice', to: 'bob', content: 'injected' },
  });
  const closing = await intruder.nextClosing();
  t.equal(closing.code, 'SB_ERR_NOT_LOGGED_IN');
  await intruder.waitClosed();
  t.notOk(
    intruder.received.some((m) => m.type === HeadType.MESSAGE_RESPONSE),
    'no MESSAGE_RESPONSE: the message was not processed',
  );
  t.equal((await tn.node.inbox.range('bob', 0, 0)).head, 0, 'nor stored');

  // bob got nothing: the next thing he receives is a message from a real sender.
  const alice = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'));
  await alice.chatAndWait('bob', 'genuine');
  const first = await bob.next(isType(HeadType.MESSAGE_REQUEST));
  t.equal(first.messageRequest?.content, 'genuine', 'the injected message was never delivered');
});

t.test('a LOGOUT_REQUEST before login closes with SB_ERR_NOT_LOGGED_IN', async (t) => {
  const tn = await startNode(t);
  const client = await connect(t, tn.port);
  client.send({ type: HeadType.LOGOUT_REQUEST, sequence: PRE_LOGIN_SEQUENCE, sessionId: '-1' });
  t.equal((await client.nextClosing()).code, 'SB_ERR_NOT_LOGGED_IN');
  await client.waitClosed();
});

t.test('a heartbeat before login is echoed unchanged', async (t) => {
  const tn = await startNode(t);
  const client = await connect(t, tn.port);
  const sent: ImMessage = {
    type: HeadType.HEART_BEAT,
    sequence: PRE_LOGIN_SEQUENCE,
    sessionId: '-1',
    heartBeat: { seq: 77, uid: 'nobody-yet', json: '{"hello":1}' },
  };
  client.send(sent);
  const echo = await client.next();
  t.equal(echo.type, HeadType.HEART_BEAT);
  t.equal(u64(echo.sequence), PRE_LOGIN_SEQUENCE.toString());
  t.equal(echo.sessionId, '-1');
  t.same(echo.heartBeat, sent.heartBeat);
  t.equal(client.isClosed, false);

  const response = await client.login('alice', tn.token('alice'), 'phone');
  t.equal(response.loginResponse?.result, true, 'the connection can still log in afterwards');
});

t.test('frames sent behind a pending login', async (t) => {
  const limit = 4;
  const tn = await startNode(t, { preLoginQueueLimit: limit });
  const bob = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'));

  // Frames written together with the login arrive in the same chunk and are decoded while the
  // (asynchronous) login is still pending, so they wait in the pre-login queue.
  t.test('up to the limit they wait, then run in order after the login', async (t) => {
    const alice = await connect(t, tn.port);
    const frames = [RawClient.loginMessage('alice', tn.token('alice'), 'phone')];
    for (let i = 0; i < limit; i++) frames.push(alice.chatMessage('bob', `queued ${i}`));
    alice.sendRaw(Buffer.concat(frames.map((m) => encodeMessageFrame(m))));

    const login = await alice.next(isType(HeadType.LOGIN_RESPONSE));
    t.equal(login.loginResponse?.result, true);
    for (let i = 0; i < limit; i++) {
      const response = await alice.next(isType(HeadType.MESSAGE_RESPONSE));
      t.equal(u64(response.sequence), String(i + 1));
      t.equal(response.messageResponse?.result, true);
      const delivered = await bob.next(isType(HeadType.MESSAGE_REQUEST));
      t.equal(delivered.messageRequest?.content, `queued ${i}`);
      t.equal(delivered.messageRequest?.from, 'alice');
    }
    const ids = alice.received.map((m) => m.type);
    t.equal(ids[0], HeadType.LOGIN_RESPONSE, 'the login is answered before the queued frames');
  });

  t.test('one more closes with SB_ERR_PRELOGIN_QUEUE_FULL', async (t) => {
    const mallory = await connect(t, tn.port);
    const frames = [RawClient.loginMessage('mallory', tn.token('mallory'), 'phone')];
    for (let i = 0; i <= limit; i++) frames.push(mallory.chatMessage('bob', `flood ${i}`));
    mallory.sendRaw(Buffer.concat(frames.map((m) => encodeMessageFrame(m))));

    t.equal((await mallory.nextClosing()).code, 'SB_ERR_PRELOGIN_QUEUE_FULL');
    await mallory.waitClosed();
    t.notOk(
      mallory.received.some((m) => m.type === HeadType.LOGIN_RESPONSE),
      'the pending login is abandoned, not answered',
    );
    t.equal(tn.node.server.sessions.byUser('mallory').length, 0, 'no session was created');
    t.same(await tn.node.store.byUser('mallory'), []);

    // bob received none of the flood: his next message is this one.
    const carol = await connectLoggedIn(t, tn.port, 'carol', tn.token('carol'));
    await carol.chatAndWait('bob', 'after the flood');
    const next = await bob.next(isType(HeadType.MESSAGE_REQUEST));
    t.equal(next.messageRequest?.content, 'after the flood');
    t.equal(seqOf(next), limit + 1, 'nor was any of it stored: the queued test stored 1..4');
  });
});
