// TLS on the peer port and links, in-process: a worker in ZooKeeper with peer TLS, dialed by bare
// TLS sockets. Mutual: a dialer without a certificate, or with one of another CA, is refused in
// the TLS handshake, before a frame; one of the cluster CA gets the peer handshake, which still
// asks for the cluster secret. CA mode: no dialer certificate is asked for, and a dialer
// (WorkerReSender) refuses an acceptor whose certificate is of another CA.

import t, { type Test } from 'tap';
import tls from 'node:tls';
import { once } from 'node:events';
import { DEFAULT_CLUSTER_SETTINGS, type PeerTlsMode } from '../../src/cluster/cluster.js';
import { newNonce } from '../../src/cluster/peer-auth.js';
import { WorkerReSender } from '../../src/cluster/worker-resender.js';
import { TlsFiles } from '../../src/net/tls-files.js';
import { silentLogger } from '../../src/log.js';
import { HeadType, type ImMessage } from '../../src/protocol/types.js';
import { ZooKeeperRegistry } from '../../src/registry/zk-registry.js';
import { closingOf, RawClient } from '../../testkit/raw-client.js';
import { sleep } from '../../testkit/wait.js';
import { startNode } from '../helpers/node.js';
import { startZooKeeper } from '../helpers/zookeeper.js';
import { testPki, type TestPki } from '../helpers/tls.js';

const zk = await startZooKeeper(t);
let roots = 0;

interface PeerTlsNode {
  peerPort: number;
  pki: TestPki;
  /** The cluster CA's certificate file. */
  ca: string;
  /** A certificate of the cluster CA, as another worker would have. */
  peer: { cert: string; key: string };
  /** A certificate for the same names, of another CA. */
  stranger: { cert: string; key: string };
}

async function peerTlsNode(t: Test, mode: PeerTlsMode): Promise<PeerTlsNode> {
  const pki = testPki(t);
  const ca = pki.ca('cluster-ca');
  const other = pki.ca('other-ca');
  const files = new TlsFiles({ ...ca.issue('worker'), ca: ca.ca });
  const registry = new ZooKeeperRegistry({ connect: zk.connect, root: `/peer-tls-${process.pid}-${++roots}`, log: silentLogger(), nativeLogLevel: 'off' });
  const n = await startNode(t, {}, { registry, cluster: { ...DEFAULT_CLUSTER_SETTINGS, secret: 'cluster-secret', peerTls: { mode, files } } });
  return { peerPort: n.info.peerPort!, pki, ca: ca.ca, peer: ca.issue('peer'), stranger: other.issue('stranger') };
}

/** A TLS dial of the peer port; resolves the client or the socket error that refused it. */
async function dial(t: Test, n: PeerTlsNode, options: tls.ConnectionOptions): Promise<RawClient | Error> {
  try {
    const client = await RawClient.connect(n.peerPort, { tls: { servername: 'localhost', ca: n.pki.read(n.ca), ...options } });
    t.teardown(() => client.destroy());
    return client;
  } catch (err) {
    return err as Error;
  }
}

/** What a HELLO is answered with: a CHALLENGE, a CLOSING's code, or 'closed' without a frame. */
async function helloAnswer(client: RawClient): Promise<string> {
  client.send({ type: HeadType.PEER_HELLO, peerHello: { nodeId: 'nobody', nonce: newNonce() } });
  try {
    const reply = await client.next((m: ImMessage) => m.type === HeadType.PEER_CHALLENGE || closingOf(m) !== undefined);
    return reply.type === HeadType.PEER_CHALLENGE ? 'challenge' : closingOf(reply)!.code;
  } catch {
    return 'closed';
  }
}

t.test('mutual: a dialer with a certificate of another CA is refused before any frame', async (t) => {
  const n = await peerTlsNode(t, 'mutual');
  const stranger = await dial(t, n, { cert: n.pki.read(n.stranger.cert), key: n.pki.read(n.stranger.key) });
  // TLS 1.3: the client finishes first, the server's refusal arrives as it reads on.
  const answer = stranger instanceof Error ? 'refused' : await helloAnswer(stranger);
  t.ok(answer === 'refused' || answer === 'closed', `refused in the TLS handshake (${answer})`);
  if (!(stranger instanceof Error)) t.equal(stranger.received.length, 0, 'not one frame from the worker');
});

t.test('mutual: a dialer without a certificate is refused', async (t) => {
  const n = await peerTlsNode(t, 'mutual');
  const anonymous = await dial(t, n, {});
  const answer = anonymous instanceof Error ? 'refused' : await helloAnswer(anonymous);
  t.ok(answer === 'refused' || answer === 'closed', `refused (${answer})`);
});

t.test('mutual: a certificate of the cluster CA gets the peer handshake, which still wants the secret', async (t) => {
  const n = await peerTlsNode(t, 'mutual');
  const peer = await dial(t, n, { cert: n.pki.read(n.peer.cert), key: n.pki.read(n.peer.key) });
  t.notOk(peer instanceof Error, 'TLS handshake completed');
  // An id not in the registry: the peer handshake refuses it as ever.
  t.equal(await helloAnswer(peer as RawClient), 'SB_ERR_PEER_UNKNOWN_NODE');
});

t.test('ca: no dialer certificate is asked for; plaintext to the TLS peer port is closed', async (t) => {
  const n = await peerTlsNode(t, 'ca');
  const peer = await dial(t, n, {});
  t.notOk(peer instanceof Error, 'TLS handshake completed without a dialer certificate');
  t.equal(await helloAnswer(peer as RawClient), 'SB_ERR_PEER_UNKNOWN_NODE');
  const plain = await RawClient.connect(n.peerPort);
  t.teardown(() => plain.destroy());
  t.equal(await helloAnswer(plain), 'closed', 'a plaintext HELLO gets no answer');
});

t.test('ca: a dialer refuses an acceptor whose certificate is of another CA', async (t) => {
  const pki = testPki(t);
  const cluster = pki.ca('cluster-ca');
  const other = pki.ca('other-ca');
  const impostor = other.issue('impostor');
  let bytes = 0;
  const server = tls.createServer({ cert: pki.read(impostor.cert), key: pki.read(impostor.key) }, (socket) => {
    socket.on('data', (d: Buffer) => (bytes += d.length));
    socket.on('error', () => {});
  });
  server.on('tlsClientError', () => {});
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.teardown(() => server.close());
  const port = (server.address() as { port: number }).port;
  const link = new WorkerReSender({
    selfId: 'a',
    peer: { id: 'b', host: '127.0.0.1', port: 1, peerPort: port, balance: 0, startedAt: 0, version: 'test', ready: true },
    secret: 'cluster-secret',
    reconnectMs: 50,
    queueLimit: 10,
    missedLimit: 10,
    heartbeatMs: 10_000,
    maxFrameLength: 65_536,
    tls: new TlsFiles({ ...cluster.issue('worker'), ca: cluster.ca }),
    log: silentLogger(),
  });
  t.teardown(() => link.close());
  await sleep(500);
  t.not(link.status, 'ready');
  t.equal(bytes, 0, 'no HELLO reached the impostor');
});
