// The ImClient SDK against a real node on a loopback port: login, chat, errors, heartbeats,
// reconnects across a server restart, the bounded request queue and the final closes.

import t, { type Test } from 'tap';
import { ImClient, type ClientStatus, type ImClientOptions, type IncomingMessage } from '../../src/client/im-client.js';
import { TokenSigner } from '../../src/auth/token.js';
import { createNode, type SwitchboardNode } from '../../src/node.js';
import { startNode, TEST_SECRET, type TestNode } from '../helpers/node.js';
import { freePort } from '../../testkit/services.js';
import { sleep, until } from '../../testkit/wait.js';

const FAST_RETRY = () => 50;

interface TrackedClient {
  client: ImClient;
  statuses: ClientStatus[];
  messages: IncomingMessage[];
  closings: { code: string; reason: string }[];
}

function makeClient(t: Test, port: number, uid: string, options: Partial<ImClientOptions> = {}): TrackedClient {
  const signer = new TokenSigner(TEST_SECRET);
  const client = new ImClient({
    host: '127.0.0.1',
    port,
    uid,
    deviceId: `${uid}-device`,
    token: signer.mint({ uid, ttlMs: 60_000 }),
    retryStrategy: FAST_RETRY,
    ...options,
  });
  const tracked: TrackedClient = { client, statuses: [], messages: [], closings: [] };
  client.on('status', (s) => tracked.statuses.push(s));
  client.on('message', (m) => tracked.messages.push(m));
  client.on('closing', (c) => tracked.closings.push(c));
  t.teardown(() => client.close());
  return tracked;
}

async function ready(t: Test, n: TestNode, uid: string, options: Partial<ImClientOptions> = {}): Promise<TrackedClient> {
  const tracked = makeClient(t, n.port, uid, options);
  await tracked.client.connect();
  return tracked;
}

function waitStatus(client: ImClient, status: ClientStatus, withinMs = 10_000): Promise<void> {
  if (client.status === status) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      client.off('status', onStatus);
      reject(new Error(`client did not become ${status} within ${withinMs} ms (is ${client.status})`));
    }, withinMs);
    const onStatus = (s: ClientStatus) => {
      if (s !== status) return;
      clearTimeout(timer);
      client.off('status', onStatus);
      resolve();
    };
    client.on('status', onStatus);
  });
}

function nextMessage(client: ImClient): Promise<IncomingMessage> {
  return new Promise((resolve) => client.once('message', resolve));
}

/** Rejects if `promise` has not settled within `ms`, so a hang fails the assertion instead of the file. */
function within<T>(promise: Promise<T>, ms = 5_000): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`still pending after ${ms} ms`)), ms)));
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** A node on a given port, as a restarted server would be. */
async function nodeOnPort(t: Test, port: number): Promise<SwitchboardNode> {
  const node = createNode({ host: '127.0.0.1', port, secret: TEST_SECRET, limits: { closeGraceMs: 200 } });
  await node.start();
  t.teardown(() => node.stop());
  return node;
}

t.test('connect logs in: status ready, session id set and known to the server', async (t) => {
  const n = await startNode(t);
  const alice = makeClient(t, n.port, 'alice');
  t.equal(alice.client.status, 'idle');
  let loginEvent = '';
  alice.client.on('login', (sid) => (loginEvent = sid));
  await alice.client.connect();
  t.equal(alice.client.status, 'ready');
  t.ok(alice.client.sessionId.length > 0, 'session id set');
  t.equal(loginEvent, alice.client.sessionId, 'the login event carries it');
  t.same(alice.statuses, ['connecting', 'ready']);
  t.equal(n.node.server.sessions.find('alice', 'alice-device')?.sessionId, alice.client.sessionId, 'the server has this session');
  await t.rejects(alice.client.connect(), { code: 'SB_ERR_CLIENT_CLOSED' }, 'connect() only once');
});

t.test('send resolves on the response and the recipient gets the message', async (t) => {
  const n = await startNode(t);
  const alice = await ready(t, n, 'alice');
  const bob = await ready(t, n, 'bob');

  const received = nextMessage(bob.client);
  const before = Date.now();
  const result = await alice.client.send('bob', 'hello bob', { json: '{"k":1}', fromNick: 'Al' });
  const m = await received;
  t.ok(m.storedAt !== undefined && m.storedAt >= before && m.storedAt <= Date.now(), "storedAt is the server's time of acceptance");
  t.match(m, { seq: 1, from: 'alice', to: 'bob', content: 'hello bob', msgId: result.msgId, json: '{"k":1}', fromNick: 'Al' });
  t.match(result, { seq: 1, duplicate: false }, 'the result carries the position in bob\'s inbox');
  t.match(result.msgId, /^\d+$/, 'a decimal msgId');
  t.ok(m.time > 0, 'time is set');

  const second = nextMessage(bob.client);
  const r2 = await alice.client.send('bob', 'again');
  t.not(r2.msgId, result.msgId, 'default msgIds are unique');
  t.not(r2.sequence, result.sequence);
  t.match(r2, { seq: 2, duplicate: false }, 'the next position');
  t.match(await second, { msgId: r2.msgId, seq: 2 });
  t.equal(bob.client.lastSeq, 2, 'lastSeq follows what was processed');

  // A uint64 msgId beyond 2^53 survives unchanged.
  const third = nextMessage(bob.client);
  const big = '18446744073709551615';
  const r3 = await alice.client.send('bob', 'big id', { msgId: big });
  t.equal(r3.msgId, big);
  t.equal((await third).msgId, big);
});

t.test('a send to an offline user succeeds and the message arrives at their next login', async (t) => {
  const n = await startNode(t);
  const alice = await ready(t, n, 'alice');
  const result = await alice.client.send('bob', 'stored for later');
  t.match(result, { seq: 1, duplicate: false }, 'stored in bob\'s inbox, not refused');
  t.equal(alice.client.status, 'ready');
  t.equal(n.node.server.sessions.byUser('bob').length, 0, 'bob really was offline');

  // Listeners go on before connect(): the replay may come in the same read as the login answer.
  const bob = makeClient(t, n.port, 'bob');
  await bob.client.connect();
  await until('bob got the stored message', () => bob.messages.length > 0, 5_000);
  t.match(bob.messages, [{ seq: 1, from: 'alice', content: 'stored for later', msgId: result.msgId }], 'delivered once, with its seq');

  const got = nextMessage(bob.client);
  t.match(await alice.client.send('bob', 'now online'), { seq: 2 });
  t.match(await got, { seq: 2, content: 'now online' }, 'and live delivery follows');
});

t.test('a bad token makes connect() reject with SB_ERR_TOKEN_INVALID', async (t) => {
  const n = await startNode(t);
  const alice = makeClient(t, n.port, 'alice', { token: new TokenSigner('another-secret').mint({ uid: 'alice', ttlMs: 60_000 }) });
  await t.rejects(alice.client.connect(), { code: 'SB_ERR_TOKEN_INVALID' });
  t.equal(alice.client.status, 'closed');
  t.equal(alice.client.sessionId, '');
  await sleep(200);
  t.notOk(alice.statuses.includes('reconnecting'), 'a refused login is not retried');
  t.equal(n.node.server.sessions.size, 0);
});

t.test('a token for another user is refused with SB_ERR_TOKEN_MISMATCH', async (t) => {
  const n = await startNode(t);
  const mallory = makeClient(t, n.port, 'mallory', { token: n.token('alice') });
  await t.rejects(mallory.client.connect(), { code: 'SB_ERR_TOKEN_MISMATCH' });
  t.equal(mallory.client.status, 'closed');
});

t.test('heartbeats keep an otherwise silent connection open', async (t) => {
  // The server closes connections silent for 2 × 1.5 s; the client beats every 750 ms. The
  // margins are wide because a loaded machine can stall this process (client and server both)
  // for a second, and a client also drops a server it has not heard from in 3 intervals.
  const n = await startNode(t, { heartbeatIntervalMs: 1_500, idleIntervals: 2 });

  // Control: without heartbeats (60 s interval) the server does close it for idleness.
  const silent = await ready(t, n, 'silent', { heartbeatIntervalMs: 60_000, retryStrategy: false });
  const beating = await ready(t, n, 'beating', { heartbeatIntervalMs: 750 });
  // And one that is given no interval: it takes the server's from the LoginResponse.
  const told = await ready(t, n, 'told');
  t.equal(told.client.heartbeatIntervalMs, 1_500, "without an interval of its own the client takes the server's");
  t.equal(silent.client.heartbeatIntervalMs, 60_000, 'one given keeps it');
  const sessionId = beating.client.sessionId;
  const loggedInAt = Date.now();

  await waitStatus(silent.client, 'closed');
  t.same(silent.closings.map((c) => c.code), ['SB_ERR_IDLE_TIMEOUT'], 'the control client was closed for idleness');

  await sleep(loggedInAt + 10_000 - Date.now()); // over three idle periods since the login
  t.equal(beating.client.status, 'ready');
  t.same(beating.closings, [], 'never told to close');
  t.same(beating.statuses, ['connecting', 'ready'], 'never reconnected');
  t.equal(beating.client.sessionId, sessionId, 'the same session throughout');
  t.equal(n.node.server.sessions.find('beating', 'beating-device')?.sessionId, sessionId);
  t.same([told.client.status, told.closings, told.statuses], ['ready', [], ['connecting', 'ready']], "the client on the server's interval was kept open too");
});

t.test('after a server restart on the same port the client reconnects by itself', async (t) => {
  const first = await startNode(t);
  const port = first.port;
  const alice = await ready(t, first, 'alice');
  const firstSession = alice.client.sessionId;

  await first.node.stop();
  await waitStatus(alice.client, 'reconnecting');
  t.same(alice.closings.map((c) => c.code), ['SB_ERR_SERVER_SHUTDOWN'], 'the server said why');
  t.equal(alice.client.sessionId, '', 'no session while disconnected');

  const second = await nodeOnPort(t, port);
  await waitStatus(alice.client, 'ready');
  t.ok(alice.client.sessionId.length > 0);
  t.not(alice.client.sessionId, firstSession, 'a new session on the new server');
  t.equal(second.server.sessions.find('alice', 'alice-device')?.sessionId, alice.client.sessionId);
  t.same(alice.statuses.slice(0, 3), ['connecting', 'ready', 'reconnecting']);
  t.equal(alice.statuses.at(-1), 'ready');

  const got = nextMessage(alice.client);
  await alice.client.send('alice', 'back again');
  t.equal((await got).content, 'back again', 'sending works after the reconnect');
});

t.test('a send issued while reconnecting is queued and resolves after the reconnect', async (t) => {
  const first = await startNode(t);
  const port = first.port;
  const alice = await ready(t, first, 'alice');

  await first.node.stop();
  await waitStatus(alice.client, 'reconnecting');
  const got = nextMessage(alice.client);
  let settled = false;
  const queued = alice.client.send('alice', 'sent while down');
  queued.then(
    () => (settled = true),
    () => (settled = true),
  );
  await sleep(200); // several failed reconnect attempts
  t.equal(settled, false, 'the send waits while nothing listens');
  t.equal(alice.client.status, 'reconnecting');

  await nodeOnPort(t, port);
  const result = await queued;
  t.match(result.msgId, /^\d+$/);
  const m = await got;
  t.equal(m.content, 'sent while down');
  t.equal(m.msgId, result.msgId);
  t.equal(alice.client.status, 'ready');
});

t.test('a retryStrategy returning null gives up: the client closes', async (t) => {
  const n = await startNode(t);
  const alice = await ready(t, n, 'alice', { retryStrategy: () => null });
  await n.node.stop();
  await waitStatus(alice.client, 'closed');
  t.notOk(alice.statuses.includes('reconnecting'));
  await t.rejects(alice.client.send('bob', 'too late'), { code: 'SB_ERR_CLIENT_CLOSED' });
});

t.test('the retryStrategy is asked with increasing attempts until it returns null', async (t) => {
  const port = await freePort();
  const attempts: number[] = [];
  const alice = makeClient(t, port, 'alice', {
    retryStrategy: (attempt) => {
      attempts.push(attempt);
      return attempt <= 3 ? 20 : null;
    },
  });
  await t.rejects(alice.client.connect(), { code: 'SB_ERR_CLIENT_CONNECT_FAILED', message: `ECONNREFUSED 127.0.0.1:${port}` }, 'connect() rejects with the last reason when retrying gives up');
  t.same(attempts, [1, 2, 3, 4]);
  t.equal(alice.client.status, 'closed');
  t.same(alice.statuses, ['connecting', 'reconnecting', 'closed']);
});

t.test('retryStrategy false: a lost connection closes the client', async (t) => {
  const n = await startNode(t);
  const alice = await ready(t, n, 'alice', { retryStrategy: false });
  await n.node.stop();
  await waitStatus(alice.client, 'closed');
  t.notOk(alice.statuses.includes('reconnecting'));
});

t.test('maxPendingRequests bounds the waiting sends with SB_ERR_CLIENT_QUEUE_FULL', async (t) => {
  const n = await startNode(t);
  await ready(t, n, 'bob');
  const alice = await ready(t, n, 'alice', { maxPendingRequests: 2 });
  const a = alice.client.send('bob', 'one');
  const b = alice.client.send('bob', 'two');
  await t.rejects(alice.client.send('bob', 'three'), { code: 'SB_ERR_CLIENT_QUEUE_FULL' });
  await Promise.all([a, b]);
  t.pass('the two within the bound were delivered');
  await alice.client.send('bob', 'four');
  t.pass('room again once answered');
});

t.test('maxPendingRequests also bounds sends queued while reconnecting', async (t) => {
  const first = await startNode(t);
  const alice = await ready(t, first, 'alice', { maxPendingRequests: 1 });
  await first.node.stop();
  await waitStatus(alice.client, 'reconnecting');
  const queued = alice.client.send('alice', 'queued');
  await t.rejects(alice.client.send('alice', 'one too many'), { code: 'SB_ERR_CLIENT_QUEUE_FULL' });
  alice.client.close();
  await t.rejects(queued, { code: 'SB_ERR_CLIENT_CLOSED' });
});

t.test('close() rejects what is waiting with SB_ERR_CLIENT_CLOSED', async (t) => {
  const n = await startNode(t);
  await ready(t, n, 'bob');
  const alice = await ready(t, n, 'alice');
  const pending = alice.client.send('bob', 'never answered');
  alice.client.close();
  await t.rejects(pending, { code: 'SB_ERR_CLIENT_CLOSED' });
  t.equal(alice.client.status, 'closed');
  await t.rejects(alice.client.send('bob', 'after close'), { code: 'SB_ERR_CLIENT_CLOSED' });
  await until('server dropped the session', () => n.node.server.sessions.byUser('alice').length === 0, 5_000);
  await sleep(200);
  t.equal(alice.client.status, 'closed', 'a closed client does not reconnect');
});

t.test('close() while connecting rejects connect() with SB_ERR_CLIENT_CLOSED', async (t) => {
  const n = await startNode(t);
  const alice = makeClient(t, n.port, 'alice');
  const connecting = alice.client.connect();
  alice.client.close();
  await t.rejects(within(connecting), { code: 'SB_ERR_CLIENT_CLOSED' });
  t.equal(alice.client.status, 'closed');
});

t.test('close() while retrying the first connect rejects connect()', async (t) => {
  const port = await freePort();
  const alice = makeClient(t, port, 'alice');
  const connecting = alice.client.connect();
  await waitStatus(alice.client, 'reconnecting');
  alice.client.close();
  await t.rejects(within(connecting), { code: 'SB_ERR_CLIENT_CLOSED' });
});

t.test('logout() resolves, closes the client and ends the session on the server', async (t) => {
  const n = await startNode(t);
  const alice = await ready(t, n, 'alice');
  t.equal(n.node.server.sessions.byUser('alice').length, 1);
  await alice.client.logout();
  t.equal(alice.client.status, 'closed');
  t.equal(alice.client.sessionId, '');
  await until('server dropped the session', () => n.node.server.sessions.byUser('alice').length === 0, 5_000);
  await until('store dropped the session', async () => (await n.node.store.byUser('alice')).length === 0, 5_000);
  await sleep(200);
  t.equal(alice.client.status, 'closed', 'a logged-out client does not reconnect');
  t.notOk(alice.statuses.includes('reconnecting'));
  await alice.client.logout();
  t.pass('logout() of a closed client resolves');
});

t.test('a session replaced by the same device elsewhere closes for good', async (t) => {
  const n = await startNode(t);
  const first = await ready(t, n, 'alice', { deviceId: 'phone' });
  const second = await ready(t, n, 'alice', { deviceId: 'phone' });

  await waitStatus(first.client, 'closed');
  t.same(first.closings.map((c) => c.code), ['SB_ERR_SESSION_REPLACED']);
  await sleep(300); // six retry delays
  t.equal(first.client.status, 'closed', 'the replaced client stays closed');
  t.notOk(first.statuses.includes('reconnecting'), 'and never tried to reconnect');
  t.equal(second.client.status, 'ready');
  t.same(second.closings, [], 'the new session was not replaced back');
  t.equal(n.node.server.sessions.byUser('alice').length, 1);
  t.equal(n.node.server.sessions.find('alice', 'phone')?.sessionId, second.client.sessionId);
});

t.test('another device of the same user does not replace the session', async (t) => {
  const n = await startNode(t);
  const phone = await ready(t, n, 'alice', { deviceId: 'phone' });
  const laptop = await ready(t, n, 'alice', { deviceId: 'laptop' });
  const bob = await ready(t, n, 'bob');
  const atPhone = nextMessage(phone.client);
  const atLaptop = nextMessage(laptop.client);
  await bob.client.send('alice', 'to every device');
  t.equal((await atPhone).content, 'to every device');
  t.equal((await atLaptop).content, 'to every device');
  t.equal(phone.client.status, 'ready');
  t.same(phone.closings, []);
});
