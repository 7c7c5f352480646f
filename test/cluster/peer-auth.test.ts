// The peer port accepts the handshake HELLO → CHALLENGE → AUTH and then peer frames, nothing
// else: a dialer must claim another worker's registered id and prove the cluster secret over
// the whole transcript. A node with a real ZooKeeper registry; the dialers are bare sockets,
// registered (or not) in ZooKeeper by the test. Everything refused has a code and is closed,
// and never reaches a client.

import t, { type Test } from 'tap';
import { DEFAULT_CLUSTER_SETTINGS, type ClusterSettings } from '../../src/cluster/cluster.js';
import { NONCE_BYTES, newNonce, peerProof, proofInput, verifyPeerProof, type Transcript } from '../../src/cluster/peer-auth.js';
import { silentLogger } from '../../src/log.js';
import { encodeMessageRequest } from '../../src/protocol/codec.js';
import { HeadType, type ImMessage } from '../../src/protocol/types.js';
import { ZooKeeperRegistry } from '../../src/registry/zk-registry.js';
import { until } from '../../testkit/wait.js';
import { freePort } from '../../testkit/services.js';
import { startNode, type TestNode } from '../helpers/node.js';
import { closingOf, isDelivery, isType, seqOf, type RawClient } from '../../testkit/raw-client.js';
import { connect, connectLoggedIn } from '../helpers/raw-client.js';
import { startZooKeeper } from '../helpers/zookeeper.js';

const CLUSTER_SECRET = 'cluster-secret';
const body = encodeMessageRequest({ from: 'mallory', to: 'bob', content: 'injected' });
const zk = await startZooKeeper(t);

let roots = 0;

interface ClusterNode extends TestNode {
  selfId: string;
  peerPort: number;
  root: string;
}

/** A worker in a ZooKeeper root of its own, in cluster mode. */
async function clusterNode(t: Test, settings: Partial<ClusterSettings> = {}): Promise<ClusterNode> {
  const root = `/peer-auth-${process.pid}-${++roots}`;
  const registry = new ZooKeeperRegistry({ connect: zk.connect, root, log: silentLogger(), nativeLogLevel: 'off' });
  const tn = await startNode(t, {}, { registry, cluster: { ...DEFAULT_CLUSTER_SETTINGS, secret: CLUSTER_SECRET, peerReconnectMs: 200, ...settings } });
  return { ...tn, selfId: tn.info.id, peerPort: tn.info.peerPort!, root };
}

/** Registers a worker entry in `node`'s registry (nothing listens on its ports); resolves its id. */
async function registerPeer(t: Test, node: ClusterNode): Promise<string> {
  const registry = new ZooKeeperRegistry({ connect: zk.connect, root: node.root, log: silentLogger(), nativeLogLevel: 'off' });
  t.teardown(() => registry.close());
  const info = await registry.register({ host: '127.0.0.1', port: await freePort(), peerPort: await freePort(), balance: 0, startedAt: Date.now(), version: 'test', ready: true });
  return info.id;
}

const answersHello = (m: ImMessage) => m.type === HeadType.PEER_CHALLENGE || closingOf(m) !== undefined;

/** Sends a HELLO as `peerId`; resolves the CHALLENGE and the transcript so far. */
async function hello(t: Test, node: ClusterNode, peerId: string): Promise<{ conn: RawClient; transcript: Transcript; mac: Uint8Array }> {
  const conn = await connect(t, node.peerPort);
  const dialerNonce = newNonce();
  conn.send({ type: HeadType.PEER_HELLO, peerHello: { nodeId: peerId, nonce: dialerNonce } });
  const reply = await conn.next(answersHello);
  if (closingOf(reply)) throw new Error(`HELLO as ${peerId} refused: ${closingOf(reply)!.code}`);
  const c = reply.peerChallenge!;
  return { conn, transcript: { dialer: peerId, acceptor: c.nodeId!, dialerNonce, acceptorNonce: c.nonce! }, mac: c.mac! };
}

/** The whole handshake as a worker with `secret` does it. */
async function handshake(t: Test, node: ClusterNode, peerId: string, secret = CLUSTER_SECRET): Promise<RawClient> {
  const { conn, transcript } = await hello(t, node, peerId);
  conn.send({ type: HeadType.PEER_AUTH, peerAuth: { mac: peerProof(secret, 'auth', transcript) } });
  return conn;
}

/** The code of the CLOSING a HELLO as `peerId` (with `nonce`, or none) is answered with. */
async function refusal(t: Test, node: ClusterNode, peerId: string, nonce: Uint8Array | null = newNonce(), timeoutMs?: number): Promise<string> {
  const conn = await connect(t, node.peerPort);
  conn.send({ type: HeadType.PEER_HELLO, peerHello: { nodeId: peerId, ...(nonce ? { nonce } : {}) } });
  const reply = await conn.next(answersHello, timeoutMs);
  await conn.waitClosed();
  return closingOf(reply)?.code ?? 'challenged';
}

t.test('the proofs bind role, direction and both nonces, unambiguously', async (t) => {
  const base: Transcript = { dialer: '0000000001', acceptor: '0000000002', dialerNonce: newNonce(), acceptorNonce: newNonce() };
  const auth = peerProof(CLUSTER_SECRET, 'auth', base).toString('hex');
  t.not(peerProof(CLUSTER_SECRET, 'challenge', base).toString('hex'), auth, 'the acceptor’s proof is never the dialer’s');
  const variants: Record<string, Transcript> = {
    'roles swapped': { dialer: base.acceptor, acceptor: base.dialer, dialerNonce: base.dialerNonce, acceptorNonce: base.acceptorNonce },
    'nonces swapped': { ...base, dialerNonce: base.acceptorNonce, acceptorNonce: base.dialerNonce },
    'another dialer nonce': { ...base, dialerNonce: newNonce() },
    'another acceptor nonce': { ...base, acceptorNonce: newNonce() },
  };
  for (const [what, variant] of Object.entries(variants)) {
    t.not(peerProof(CLUSTER_SECRET, 'auth', variant).toString('hex'), auth, what);
    t.not(peerProof(CLUSTER_SECRET, 'challenge', variant).toString('hex'), auth, `${what}, as a challenge`);
  }
  const split1: Transcript = { ...base, dialer: 'ab', acceptor: 'c' };
  const split2: Transcript = { ...base, dialer: 'a', acceptor: 'bc' };
  t.not(proofInput('auth', split1).toString('hex'), proofInput('auth', split2).toString('hex'), 'ids are length-prefixed: ab|c is not a|bc');
  t.ok(verifyPeerProof(CLUSTER_SECRET, 'auth', base, peerProof(CLUSTER_SECRET, 'auth', base)), 'the right proof verifies');
  t.notOk(verifyPeerProof('other', 'auth', base, peerProof(CLUSTER_SECRET, 'auth', base)), 'under the same secret only');
  t.notOk(verifyPeerProof(CLUSTER_SECRET, 'auth', { ...base, dialerNonce: Buffer.alloc(NONCE_BYTES - 1) }, peerProof(CLUSTER_SECRET, 'auth', { ...base, dialerNonce: Buffer.alloc(NONCE_BYTES - 1) })), 'a short nonce never verifies');
});

t.test('with the secret, a registered peer delivers to local sessions', async (t) => {
  const node = await clusterNode(t);
  const peerId = await registerPeer(t, node);
  const bob = await connectLoggedIn(t, node.port, 'bob', node.token('bob'));
  const { conn: peer, transcript, mac } = await hello(t, node, peerId);
  t.equal(transcript.acceptor, node.selfId, 'the worker names itself');
  t.ok(verifyPeerProof(CLUSTER_SECRET, 'challenge', transcript, mac), 'and proves the secret over the transcript');
  peer.send({ type: HeadType.PEER_AUTH, peerAuth: { mac: peerProof(CLUSTER_SECRET, 'auth', transcript) } });
  // The message is in bob's inbox first (as another worker would have stored it).
  const stored = encodeMessageRequest({ from: 'alice', to: 'bob', content: 'via peer' });
  const { seq } = await node.node.inbox.append({ uid: 'bob', sender: 'alice', msgId: '0', body: stored });
  peer.send({ type: HeadType.PEER_DELIVER, peerDeliver: { uid: 'bob', seq, body: stored } });
  const delivered = await bob.next(isDelivery);
  t.equal(seqOf(delivered), seq);
  t.equal(delivered.messageRequest?.content, 'via peer');
  // Heartbeats keep the link alive and are echoed.
  peer.send({ type: HeadType.HEART_BEAT, heartBeat: { uid: peerId } });
  t.equal((await peer.next(isType(HeadType.HEART_BEAT))).heartBeat?.uid, peerId);
  // A peer link speaks no client protocol, and no second handshake.
  peer.send({ type: HeadType.LOGIN_REQUEST, loginRequest: { uid: 'x', token: 'y' } });
  t.equal((await peer.nextClosing()).code, 'SB_ERR_UNKNOWN_TYPE');
});

t.test('a wrong cluster secret fails the handshake', async (t) => {
  const node = await clusterNode(t);
  const peerId = await registerPeer(t, node);
  const bob = await connectLoggedIn(t, node.port, 'bob', node.token('bob'));
  const { transcript, mac } = await hello(t, node, peerId);
  t.notOk(verifyPeerProof('other', 'challenge', transcript, mac), 'the worker’s proof depends on the secret');
  const intruder = await handshake(t, node, peerId, 'wrong-secret');
  intruder.send({ type: HeadType.PEER_DELIVER, peerDeliver: { uid: 'bob', seq: 1, body } });
  t.equal((await intruder.nextClosing()).code, 'SB_ERR_PEER_AUTH_FAILED');
  await intruder.waitClosed();
  await bob.roundTrip();
  t.same(bob.takeDeliveries(), [], 'bob got nothing injected');
});

t.test('a proof for another connection is refused (no replay)', async (t) => {
  const node = await clusterNode(t);
  const peerId = await registerPeer(t, node);
  const first = await hello(t, node, peerId);
  const proofForFirst = peerProof(CLUSTER_SECRET, 'auth', first.transcript);
  const second = await hello(t, node, peerId);
  second.conn.send({ type: HeadType.PEER_AUTH, peerAuth: { mac: proofForFirst } });
  t.equal((await second.conn.nextClosing()).code, 'SB_ERR_PEER_AUTH_FAILED', 'the nonces differ per connection');
});

t.test('a HELLO claiming the worker’s own id is refused', async (t) => {
  const node = await clusterNode(t);
  t.equal(await refusal(t, node, node.selfId), 'SB_ERR_PEER_UNKNOWN_NODE');
});

t.test('a HELLO claiming an id not in the registry is refused after a bounded wait', async (t) => {
  const node = await clusterNode(t, { peerHandshakeTimeoutMs: 1_000 });
  t.equal(await refusal(t, node, '0000009999'), 'SB_ERR_PEER_UNKNOWN_NODE', 'refused with its own code, before the handshake timeout');
  const peerId = await registerPeer(t, node);
  await handshake(t, node, peerId);
  t.pass('a registered id is accepted');
});

t.test('a HELLO from a worker the view does not show yet waits for it', async (t) => {
  const node = await clusterNode(t);
  // Registrations in one root get ids in steps of ZooKeeper's sequence (the reservation and its
  // delete count too): measure the step with one registration, then predict the next id.
  const first = await registerPeer(t, node);
  const nextId = String(2 * Number(first) - Number(node.selfId)).padStart(node.selfId.length, '0');
  const conn = await connect(t, node.peerPort);
  const dialerNonce = newNonce();
  conn.send({ type: HeadType.PEER_HELLO, peerHello: { nodeId: nextId, nonce: dialerNonce } });
  t.equal(await registerPeer(t, node), nextId, 'registered as predicted, after its HELLO');
  const challenge = (await conn.next(answersHello)).peerChallenge;
  t.ok(challenge, 'the HELLO was answered once the view had the id');
  const transcript: Transcript = { dialer: nextId, acceptor: node.selfId, dialerNonce, acceptorNonce: challenge!.nonce! };
  conn.send({ type: HeadType.PEER_AUTH, peerAuth: { mac: peerProof(CLUSTER_SECRET, 'auth', transcript) } });
  conn.send({ type: HeadType.HEART_BEAT, heartBeat: { uid: nextId } });
  await conn.next(isType(HeadType.HEART_BEAT));
  t.pass('and the link is authenticated');
});

t.test('a malformed HELLO is refused', async (t) => {
  const node = await clusterNode(t);
  const ids = ['', 'a|b', 'a b', 'x'.repeat(65), 'wörker', '0000000001\n'];
  for (const id of ids) t.equal(await refusal(t, node, id), 'SB_ERR_PEER_BAD_HELLO', `node id ${JSON.stringify(id)}`);
  t.equal(await refusal(t, node, 'P', Buffer.alloc(NONCE_BYTES - 1)), 'SB_ERR_PEER_BAD_HELLO', 'a 15-byte nonce');
  t.equal(await refusal(t, node, 'P', null), 'SB_ERR_PEER_BAD_HELLO', 'no nonce');
  const peerId = await registerPeer(t, node);
  const { conn } = await hello(t, node, peerId);
  conn.send({ type: HeadType.PEER_HELLO, peerHello: { nodeId: peerId, nonce: newNonce() } });
  t.equal((await conn.nextClosing()).code, 'SB_ERR_PEER_BAD_HELLO', 'a second HELLO');
});

t.test('nothing but the handshake is accepted before it completes', async (t) => {
  const node = await clusterNode(t);
  const bob = await connectLoggedIn(t, node.port, 'bob', node.token('bob'));
  const frames: ImMessage[] = [
    { type: HeadType.PEER_DELIVER, peerDeliver: { uid: 'bob', seq: 1, body } },
    { type: HeadType.PEER_NUDGE, peerNudge: { all: true } },
    { type: HeadType.PEER_CHALLENGE, peerChallenge: { nodeId: 'P', nonce: newNonce(), mac: Buffer.alloc(32) } },
    { type: HeadType.PEER_AUTH, peerAuth: { mac: Buffer.alloc(32) } },
    { type: HeadType.HEART_BEAT, heartBeat: { uid: 'P' } },
    { type: HeadType.LOGIN_REQUEST, loginRequest: { uid: 'bob', token: node.token('bob') } },
    { type: HeadType.MESSAGE_REQUEST, messageRequest: { to: 'bob', content: 'x' } },
  ];
  for (const frame of frames) {
    const intruder = await connect(t, node.peerPort);
    intruder.send(frame);
    t.equal((await intruder.nextClosing()).code, 'SB_ERR_PEER_NOT_AUTHENTICATED', `type ${frame.type}`);
    await intruder.waitClosed();
  }
  await bob.roundTrip();
  t.same(bob.takeDeliveries(), [], 'bob got nothing injected');
  t.equal((await node.node.inbox.range('bob', 0, 10)).head, 0, 'nothing stored either');
});

t.test('a connection that does not complete the handshake in time is closed', async (t) => {
  const node = await clusterNode(t, { peerHandshakeTimeoutMs: 400 });
  const silent = await connect(t, node.peerPort);
  t.equal((await silent.nextClosing()).code, 'SB_ERR_PEER_HANDSHAKE_TIMEOUT', 'one that says nothing');
  const peerId = await registerPeer(t, node);
  const { conn } = await hello(t, node, peerId);
  t.equal((await conn.nextClosing()).code, 'SB_ERR_PEER_HANDSHAKE_TIMEOUT', 'one that never answers the challenge');
  const linked = await handshake(t, node, peerId);
  linked.send({ type: HeadType.HEART_BEAT, heartBeat: { uid: peerId } });
  await linked.next(isType(HeadType.HEART_BEAT));
  // Once a connection opened after it has timed out, the link is past the timeout too.
  const later = await connect(t, node.peerPort);
  t.equal((await later.nextClosing()).code, 'SB_ERR_PEER_HANDSHAKE_TIMEOUT');
  linked.send({ type: HeadType.HEART_BEAT, heartBeat: { uid: peerId } });
  await linked.next(isType(HeadType.HEART_BEAT));
  t.notOk(linked.closing, 'an authenticated link is not subject to it');
});

t.test('connections still in the handshake beyond peer-max-pending are refused at accept', async (t) => {
  const node = await clusterNode(t, { peerMaxPending: 2 });
  const peerId = await registerPeer(t, node);
  const accepted = async () => (await refusal(t, node, node.selfId, newNonce(), 1_000).catch(() => 'refused at accept')) === 'SB_ERR_PEER_UNKNOWN_NODE';
  const first = await hello(t, node, peerId);
  const second = await connect(t, node.peerPort);
  await until('two connections pending on the peer port', async () => !(await accepted()));
  const third = await connect(t, node.peerPort);
  await third.waitClosed();
  t.same(third.received, [], 'a third is closed at once, without a frame');
  // An authenticated link no longer counts as pending.
  first.conn.send({ type: HeadType.PEER_AUTH, peerAuth: { mac: peerProof(CLUSTER_SECRET, 'auth', first.transcript) } });
  await until('a connection is accepted again once one completed the handshake', accepted);
  second.destroy();
  t.notOk(first.conn.closing, 'the authenticated link stays');
});

t.test('a newer link from the same worker replaces the older one', async (t) => {
  const node = await clusterNode(t);
  const peerId = await registerPeer(t, node);
  const older = await handshake(t, node, peerId);
  older.send({ type: HeadType.HEART_BEAT, heartBeat: { uid: peerId } });
  await older.next(isType(HeadType.HEART_BEAT));
  const newer = await handshake(t, node, peerId);
  t.equal((await older.nextClosing()).code, 'SB_ERR_PEER_REPLACED');
  newer.send({ type: HeadType.HEART_BEAT, heartBeat: { uid: peerId } });
  await newer.next(isType(HeadType.HEART_BEAT));
  t.pass('the newer link is up');
});

t.test('the client port refuses peer frames, logged in or not', async (t) => {
  const node = await clusterNode(t);
  const stranger = await connect(t, node.port);
  stranger.send({ type: HeadType.PEER_HELLO, peerHello: { nodeId: 'P', nonce: newNonce() } });
  t.equal((await stranger.nextClosing()).code, 'SB_ERR_UNKNOWN_TYPE');
  const alice = await connectLoggedIn(t, node.port, 'alice', node.token('alice'));
  alice.send({ type: HeadType.PEER_DELIVER, peerDeliver: { uid: 'alice', seq: 1, body } });
  t.equal((await alice.nextClosing()).code, 'SB_ERR_UNKNOWN_TYPE');
});
