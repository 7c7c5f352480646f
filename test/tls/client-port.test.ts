// The worker's TLS client port, against a real node and the SDK: a client with the right CA logs
// in and chats; a wrong CA or a wrong name is refused; plaintext to the TLS port is closed and
// counted, the worker unaffected; and the plain port's caps (per address, not logged in) and a
// handshake deadline hold on the TLS port too.

import t, { type Test } from 'tap';
import net from 'node:net';
import { once } from 'node:events';
import { ImClient, type ImClientOptions, type IncomingMessage } from '../../src/client/im-client.js';
import { TlsFiles } from '../../src/net/tls-files.js';
import { encodeMessageFrame } from '../../src/protocol/codec.js';
import { HeadType } from '../../src/protocol/types.js';
import type { WorkerLimits } from '../../src/config.js';
import { startNode, type TestNode } from '../helpers/node.js';
import { testPki, type TestPki } from '../helpers/tls.js';
import { until } from '../../testkit/wait.js';

interface TlsNode extends TestNode {
  tlsPort: number;
  pki: TestPki;
  ca: string;
}

async function startTlsNode(t: Test, limits: Partial<WorkerLimits> = {}, plain = true): Promise<TlsNode> {
  const pki = testPki(t);
  const ca = pki.ca('ca');
  const files = new TlsFiles(ca.issue('worker'));
  const n = await startNode(t, limits, { tls: { port: 0, files }, plain });
  // startNode's port is the plain one (0 here without it).
  return { ...n, tlsPort: n.info.tlsPort!, pki, ca: ca.ca };
}

function tlsClient(t: Test, n: TlsNode, uid: string, tls: ImClientOptions['tls'], extra: Partial<ImClientOptions> = {}): { client: ImClient; messages: IncomingMessage[] } {
  const client = new ImClient({ host: '127.0.0.1', port: n.tlsPort, uid, deviceId: `${uid}-d`, token: n.token(uid), tls, retryStrategy: false, ...extra });
  const messages: IncomingMessage[] = [];
  client.on('message', (m) => messages.push(m));
  client.on('error', () => {});
  t.teardown(() => client.close());
  return { client, messages };
}

async function refusal(promise: Promise<unknown>): Promise<Error & { code?: string }> {
  try {
    await promise;
  } catch (err) {
    return err as Error & { code?: string };
  }
  throw new Error('not refused');
}

t.test('a client with the right CA logs in and chats over TLS', async (t) => {
  const n = await startTlsNode(t);
  const ca = n.pki.read(n.ca);
  const alice = tlsClient(t, n, 'alice', { ca });
  const bob = tlsClient(t, n, 'bob', { ca, servername: 'localhost' });
  await alice.client.connect();
  await bob.client.connect();
  const sent = await alice.client.send('bob', 'hello over tls');
  t.ok(sent.seq > 0, 'stored');
  await until('bob.messages.length === 1', () => bob.messages.length === 1);
  t.equal(bob.messages[0]!.content, 'hello over tls');
  t.equal(n.info.port > 0, true, 'the plain port is there too');
});

t.test('a certificate from another CA is refused by the client', async (t) => {
  const n = await startTlsNode(t);
  const other = n.pki.ca('other');
  const { client } = tlsClient(t, n, 'alice', { ca: n.pki.read(other.ca) });
  const err = await refusal(client.connect());
  t.equal(err.code, 'SB_ERR_TLS_HANDSHAKE');
  t.match(err.message, /certificate/i);
});

t.test('a certificate for another name is refused by the client', async (t) => {
  const n = await startTlsNode(t);
  const { client } = tlsClient(t, n, 'alice', { ca: n.pki.read(n.ca), servername: 'chat.example.com' });
  const err = await refusal(client.connect());
  t.equal(err.code, 'SB_ERR_TLS_HANDSHAKE');
  t.match(err.message, /chat\.example\.com|altnames/);
});

t.test('plaintext to the TLS port is closed and counted; the worker serves on', async (t) => {
  const n = await startTlsNode(t);
  const socket = net.connect(n.tlsPort, '127.0.0.1');
  await once(socket, 'connect');
  socket.on('error', () => {});
  socket.write(encodeMessageFrame({ type: HeadType.HEART_BEAT, sequence: 1 }));
  const received: Buffer[] = [];
  socket.on('data', (d: Buffer) => received.push(d));
  await once(socket, 'close');
  t.equal(Buffer.concat(received).includes(Buffer.from([0x00, 0x86])), false, 'no switchboard frame answered');
  await until('n.node.server.tlsHandshakeFailures === 1', () => n.node.server.tlsHandshakeFailures === 1);
  await until('n.node.server.caps.unauthenticated === 0', () => n.node.server.caps.unauthenticated === 0);
  const { client } = tlsClient(t, n, 'carol', { ca: n.pki.read(n.ca) });
  await client.connect();
  t.equal(client.status, 'ready', 'a TLS client logs in after it');
});

t.test('a socket that never handshakes is closed by the login timeout', async (t) => {
  const n = await startTlsNode(t, { loginTimeoutMs: 300 });
  const socket = net.connect(n.tlsPort, '127.0.0.1');
  socket.on('error', () => {});
  socket.resume();
  await once(socket, 'connect');
  await until('accepted', () => n.node.server.caps.unauthenticated === 1);
  t.equal(n.node.server.caps.unauthenticated, 1, 'counted as not logged in from the accept');
  await once(socket, 'close');
  await until('n.node.server.caps.unauthenticated === 0', () => n.node.server.caps.unauthenticated === 0);
  t.equal(n.node.server.tlsHandshakeFailures, 1, 'counted as a failed handshake');
});

t.test('a handshake completed but no login: closed by the same login timeout, counted from the accept', async (t) => {
  const n = await startTlsNode(t, { loginTimeoutMs: 400 });
  const { default: tls } = await import('node:tls');
  const socket = tls.connect({ host: '127.0.0.1', port: n.tlsPort, ca: n.pki.read(n.ca), servername: 'localhost' });
  socket.on('error', () => {});
  socket.resume();
  await once(socket, 'secureConnect');
  await until('n.node.server.connectionCount === 1', () => n.node.server.connectionCount === 1);
  await once(socket, 'close');
  await until('the connection closed', () => n.node.server.connectionCount === 0);
  t.equal(n.node.server.caps.unauthenticated, 0);
});

t.test('the cap on connections not logged in holds on the TLS port: the oldest still handshaking is shed', async (t) => {
  const n = await startTlsNode(t, { maxUnauthenticated: 2, loginTimeoutMs: 60_000 });
  const idle: net.Socket[] = [];
  for (let i = 0; i < 2; i++) {
    const s = net.connect(n.tlsPort, '127.0.0.1');
    s.on('error', () => {});
    s.resume();
    await once(s, 'connect');
    idle.push(s);
  }
  await until('n.node.server.caps.unauthenticated === 2', () => n.node.server.caps.unauthenticated === 2);
  const closedFirst = once(idle[0]!, 'close');
  const { client } = tlsClient(t, n, 'dave', { ca: n.pki.read(n.ca) });
  await client.connect();
  await closedFirst;
  t.equal(idle[1]!.destroyed, false, 'the younger idle socket is still open');
  t.equal(n.node.server.caps.unauthenticated, 1);
  for (const s of idle) s.destroy();
});

t.test('the per-address cap holds on the TLS port', async (t) => {
  const n = await startTlsNode(t, { maxConnectionsPerIp: 2, loginTimeoutMs: 60_000 });
  const open: net.Socket[] = [];
  for (let i = 0; i < 2; i++) {
    const s = net.connect(n.tlsPort, '127.0.0.1');
    s.on('error', () => {});
    s.resume();
    await once(s, 'connect');
    open.push(s);
  }
  await until('n.node.server.caps.connectionsOf(127.0.0.1) === 2', () => n.node.server.caps.connectionsOf('127.0.0.1') === 2);
  const third = net.connect(n.tlsPort, '127.0.0.1');
  third.on('error', () => {});
  const received: Buffer[] = [];
  third.on('data', (d: Buffer) => received.push(d));
  await once(third, 'close');
  t.equal(Buffer.concat(received).length, 0, 'closed without a plaintext answer');
  t.equal(n.node.server.caps.connectionsOf('127.0.0.1'), 2);
  for (const s of open) s.destroy();
  await until('n.node.server.caps.connectionsOf(127.0.0.1) === 0', () => n.node.server.caps.connectionsOf('127.0.0.1') === 0);
});

t.test('--no-plain-port: the worker registers port 0 and serves TLS only', async (t) => {
  const n = await startTlsNode(t, {}, false);
  t.equal(n.info.port, 0);
  t.ok(n.tlsPort > 0);
  const { client } = tlsClient(t, n, 'erin', { ca: n.pki.read(n.ca) });
  await client.connect();
  t.equal(client.status, 'ready');
});

t.test('announceTlsPort (a load balancer terminates TLS): registered as the tlsPort, nothing listens on it', async (t) => {
  const n = await startNode(t, {}, { announceTlsPort: 8883 });
  t.equal(n.info.tlsPort, 8883);
  t.ok(n.info.port > 0, 'the plain port the balancer forwards to');
});
