// What the SDK refuses at once and what ends it, against a real node: a message too large to
// send or deliver is refused before it is written; a protocol error ends the client instead of
// resending the same frame after every reconnect; and each lost connection or failed attempt
// says why (the socket's error, the server's CLOSING code, the gate's code and message), with
// the gate's 401 never retried and its retry-after waited out.

import t, { type Test } from 'tap';
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { ImClient, type ClientStatus, type ImClientOptions } from '../../src/client/im-client.js';
import { gateEndpoint } from '../../src/client/gate-session.js';
import { SwitchboardError } from '../../src/errors.js';
import { HeadType } from '../../src/protocol/types.js';
import { startNode, type TestNode } from '../helpers/node.js';
import { freePort } from '../../testkit/services.js';
import { sleep, until } from '../../testkit/wait.js';
import { FrameProxy } from './frame-proxy.js';
import { startRedis } from '../helpers/redis.js';
import { RedisInboxStore } from '../../src/inbox/redis-inbox-store.js';
import { RedisSessionStore } from '../../src/session/redis-session-store.js';

interface Watched {
  client: ImClient;
  statuses: ClientStatus[];
  disconnects: { code: string; message: string; retryInMs: number | null }[];
  errors: Error[];
}

function watch(t: Test, options: ImClientOptions): Watched {
  // A request timeout far beyond the test's patience: a send left pending is the defect.
  const client = new ImClient({ requestTimeoutMs: 120_000, retryStrategy: () => 20, ...options });
  const w: Watched = { client, statuses: [], disconnects: [], errors: [] };
  client.on('status', (s) => w.statuses.push(s));
  client.on('disconnect', ({ reason, retryInMs }) => w.disconnects.push({ code: reason.code, message: reason.message, retryInMs }));
  client.on('error', (err) => w.errors.push(err));
  t.teardown(() => client.close());
  return w;
}

function direct(n: TestNode, uid: string): ImClientOptions {
  return { host: '127.0.0.1', port: n.port, uid, deviceId: 'd', token: n.token(uid) };
}

/** Rejects if `promise` has not settled within `ms`: a hang fails the assertion, not the file. */
function within<T>(promise: Promise<T>, ms = 10_000): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`still pending after ${ms} ms`)), ms)));
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

t.test('a message over the frame limit is refused at once with SB_ERR_MESSAGE_TOO_LARGE, and nothing is written', async (t) => {
  const n = await startNode(t);
  const proxy = await FrameProxy.start(t, n.port);
  const alice = watch(t, { ...direct(n, 'alice'), port: proxy.port });
  await alice.client.connect();

  await t.rejects(within(alice.client.send('alice', 'x'.repeat(70_000))), { code: 'SB_ERR_MESSAGE_TOO_LARGE' }, 'over the frame itself');
  // 20 000 emoji: 40 000 UTF-16 units (under the limit as a string's length), 80 000 bytes of UTF-8.
  await t.rejects(within(alice.client.send('alice', '😀'.repeat(20_000))), { code: 'SB_ERR_MESSAGE_TOO_LARGE' }, 'counted in bytes, not characters');
  t.same(proxy.seen('toServer', HeadType.MESSAGE_REQUEST), [], 'neither reached the server');
  t.equal(proxy.connections, 1, 'no reconnect');
  t.same(alice.statuses, ['connecting', 'ready']);

  const ok = await alice.client.send('alice', 'a normal one');
  t.equal(ok.seq, 1, 'the connection serves on');
});

t.test('near the limit the SDK and the server agree: what the SDK sends is stored, never refused for its size', async (t) => {
  const n = await startNode(t);
  const alice = watch(t, direct(n, 'alice'));
  await alice.client.connect();
  const outcomes = new Set<string>();
  // Around the largest content that fits: a 65 536-byte frame less the envelope and the seq.
  for (let length = 65_440; length <= 65_536; length += 4) {
    const outcome = await within(alice.client.send('alice', 'y'.repeat(length))).then(
      () => 'stored',
      (err: SwitchboardError) => err.code,
    );
    outcomes.add(outcome);
  }
  t.same([...outcomes].sort(), ['SB_ERR_MESSAGE_TOO_LARGE', 'stored'], 'the range spans the limit; nothing else happened');
  t.same(alice.statuses, ['connecting', 'ready'], 'the server never closed the connection');
  t.same(alice.disconnects, []);
});

t.test('a protocol error ("fix the client") ends the client: the send fails with the server\'s code, nothing is resent', async (t) => {
  // The server's frame limit is below the client's: the SDK's check passes, the server closes.
  const n = await startNode(t, { maxFrameLength: 1024 });
  const proxy = await FrameProxy.start(t, n.port);
  const alice = watch(t, { ...direct(n, 'alice'), port: proxy.port });
  await alice.client.connect();

  await t.rejects(within(alice.client.send('alice', 'z'.repeat(2_000))), { code: 'SB_ERR_FRAME_TOO_LONG' });
  await until('client closed', () => alice.client.status === 'closed');
  t.notOk(alice.statuses.includes('reconnecting'), 'no reconnect');
  t.equal(proxy.connections, 1, 'one connection, one login');
  t.equal(proxy.seen('toServer', HeadType.LOGIN_REQUEST).length, 1);
  t.match(alice.disconnects, [{ code: 'SB_ERR_FRAME_TOO_LONG', retryInMs: null }], 'the reason, and no retry');
  t.match(alice.errors, [{ code: 'SB_ERR_FRAME_TOO_LONG' }], "an 'error' event: the client is gone");
});

t.test('a first connect to a port nobody listens on rejects with the socket\'s reason', async (t) => {
  const port = await freePort();
  const alice = watch(t, { host: '127.0.0.1', port, uid: 'alice', token: 't', retryStrategy: () => null });
  const err = (await within(alice.client.connect()).catch((e: unknown) => e)) as SwitchboardError;
  t.equal(err.code, 'SB_ERR_CLIENT_CONNECT_FAILED');
  t.match(err.message, `ECONNREFUSED 127.0.0.1:${port}`);
  t.match(alice.disconnects, [{ code: 'SB_ERR_CLIENT_CONNECT_FAILED', retryInMs: null }]);
});

t.test('a server that accepts and never answers the login: each attempt ends after requestTimeoutMs, and connect() rejects once retrying gives up', async (t) => {
  const sockets: net.Socket[] = [];
  const silent = net.createServer((socket) => {
    sockets.push(socket);
    socket.on('error', () => {});
  });
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    for (const socket of sockets) socket.destroy();
    silent.close();
  });
  const port = (silent.address() as AddressInfo).port;
  const alice = watch(t, { host: '127.0.0.1', port, uid: 'alice', token: 't', requestTimeoutMs: 300, retryStrategy: (attempt) => (attempt < 3 ? 20 : null) });
  const err = (await within(alice.client.connect(), 5_000).catch((e: unknown) => e)) as SwitchboardError;
  t.equal(err.code, 'SB_ERR_CLIENT_CONNECTION_LOST', 'rejected, not left pending');
  t.match(err.message, 'no answer to the login within 300 ms');
  t.equal(sockets.length, 3, 'after three attempts, as the retry strategy said');
  t.match(alice.disconnects, [{ retryInMs: 20 }, { retryInMs: 20 }, { retryInMs: null }]);
});

t.test('a lost connection says why: the server\'s CLOSING code, then the retry', async (t) => {
  const n = await startNode(t);
  const alice = watch(t, direct(n, 'alice'));
  await alice.client.connect();
  n.node.server.sessions.find('alice', 'd')!.outbound.close({ code: 'SB_ERR_INTERNAL', reason: 'a fault for the test' });
  await until('reconnected', () => alice.statuses.at(-1) === 'ready' && alice.statuses.length > 2);
  t.match(alice.disconnects, [{ code: 'SB_ERR_INTERNAL', message: 'a fault for the test', retryInMs: 20 }]);
});

t.test('close() in a disconnect listener ends the client: no reconnect, no new session', async (t) => {
  const n = await startNode(t);
  const alice = watch(t, direct(n, 'alice'));
  await alice.client.connect();
  alice.client.once('disconnect', () => alice.client.close());
  n.node.server.sessions.find('alice', 'd')!.outbound.close({ code: 'SB_ERR_INTERNAL', reason: 'a fault for the test' });
  await until('the disconnect', () => alice.disconnects.length === 1);
  // Many retry delays (20 ms) later: still closed, and the server has no session for it.
  await sleep(500);
  t.equal(alice.client.status, 'closed');
  t.equal(alice.statuses.at(-1), 'closed');
  t.notOk(alice.statuses.slice(alice.statuses.indexOf('closed')).includes('reconnecting'), 'never reconnecting after closed');
  t.equal(n.node.server.sessions.find('alice', 'd'), undefined, 'no new login');
});

/** A gate that answers each POST /api/login with the next scripted answer. */
async function scriptedGate(t: Test, answers: ((res: http.ServerResponse) => void)[]) {
  const state = { logins: 0 };
  const server = http.createServer((req, res) => {
    req.resume();
    const answer = answers[Math.min(state.logins++, answers.length - 1)]!;
    res.setHeader('content-type', 'application/json');
    answer(res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, state };
}

function refuse(status: number, code: string, message: string, headers: Record<string, string> = {}) {
  return (res: http.ServerResponse) => {
    for (const [k, v] of Object.entries(headers)) res.setHeader(k, v);
    res.statusCode = status;
    res.end(JSON.stringify({ error: { code, message } }));
  };
}

t.test("reconnects through the gate: its 429 is reported and its retry-after waited out; its 401 ends the client, never retried", async (t) => {
  const n = await startNode(t);
  const loginOk = (res: http.ServerResponse) =>
    res.end(JSON.stringify({ uid: 'alice', token: n.token('alice'), expiresAt: Date.now() + 3_600_000, worker: { id: 'w', host: '127.0.0.1', port: n.port }, workers: [] }));
  const gate = await scriptedGate(t, [
    loginOk,
    refuse(429, 'SB_ERR_RATE_LIMITED', 'too many requests; retry later', { 'retry-after': '1' }),
    refuse(401, 'SB_ERR_LOGIN_FAILED', 'wrong username or password'),
  ]);
  const alice = watch(t, { uid: 'alice', deviceId: 'd', endpoint: gateEndpoint(gate.url, { username: 'alice', password: 'pw', deviceId: 'd' }) });
  await alice.client.connect();

  n.node.server.sessions.find('alice', 'd')!.outbound.close({ code: 'SB_ERR_SERVER_SHUTDOWN', reason: 'going away' });
  await until('client closed', () => alice.client.status === 'closed');
  t.match(alice.disconnects, [
    { code: 'SB_ERR_SERVER_SHUTDOWN', retryInMs: 20 },
    { code: 'SB_ERR_RATE_LIMITED', message: 'too many requests; retry later', retryInMs: 1_000 },
    { code: 'SB_ERR_LOGIN_FAILED', message: 'wrong username or password', retryInMs: null },
  ]);
  t.equal(gate.state.logins, 3, 'the wrong password was tried once, not again');
  t.match(alice.errors, [{ code: 'SB_ERR_LOGIN_FAILED' }]);
});

t.test('a gate nobody listens on: the first connect rejects naming the gate and the socket\'s reason', async (t) => {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const alice = watch(t, { uid: 'alice', endpoint: gateEndpoint(url, { username: 'alice', password: 'pw', deviceId: 'd' }), retryStrategy: () => null });
  const err = (await within(alice.client.connect()).catch((e: unknown) => e)) as SwitchboardError;
  t.equal(err.code, 'SB_ERR_CLIENT_CONNECT_FAILED');
  t.match(err.message, url);
  t.match(err.message, `ECONNREFUSED 127.0.0.1:${port}`);
});

t.test("a send made before the login heartbeats at the server's interval, not at the default 50 s the client started with", async (t) => {
  // Idle after 3 × 200 ms: a client still heartbeating at 50 s is closed with SB_ERR_IDLE_TIMEOUT.
  const n = await startNode(t, { heartbeatIntervalMs: 200, idleIntervals: 3 });
  const proxy = await FrameProxy.start(t, n.port);
  const alice = watch(t, { ...direct(n, 'alice'), port: proxy.port });
  const connected = alice.client.connect();
  const sent = alice.client.send('alice', 'written before the login');
  await connected;
  await sent;
  t.equal(alice.client.heartbeatIntervalMs, 200, "the server's interval");
  await until('three heartbeats', () => proxy.seen('toServer', HeadType.HEART_BEAT).length >= 3);
  t.equal(proxy.connections, 1, 'never closed for idleness');
  t.same(alice.statuses, ['connecting', 'ready']);
  t.same(alice.disconnects, []);
});

t.test('a login refused with SB_ERR_STORE_UNAVAILABLE is tried again after a backoff, not the end of the client', async (t) => {
  const redis = await startRedis(t);
  const url = redis.url;
  // The health threshold is never reached: the login itself meets the frozen store.
  const n = await startNode(t, {}, { inbox: new RedisInboxStore({ url, timeoutMs: 300 }), store: new RedisSessionStore({ url, timeoutMs: 300 }), health: { failures: 1_000_000 } });
  redis.freeze();
  const alice = watch(t, direct(n, 'alice'));
  // Redis answers again once the first refusal has been seen.
  alice.client.once('disconnect', () => redis.thaw());
  await within(alice.client.connect(), 30_000);
  t.equal(alice.disconnects[0]?.code, 'SB_ERR_STORE_UNAVAILABLE', 'the first login was refused for the stores');
  t.not(alice.disconnects[0]?.retryInMs, null, 'and tried again');
  t.equal(alice.client.status, 'ready', 'the next login succeeded');
  t.same(alice.errors, []);
});
