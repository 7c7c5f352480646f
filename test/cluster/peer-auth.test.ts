// Peer links are authenticated: a socket on a worker's port can inject forwarded frames only
// after proving the cluster secret in the HELLO → CHALLENGE → AUTH handshake. Everything else
// is refused with a code and closed, and never reaches a client.

import t from 'tap';
import { HeadType } from '../../src/protocol/types.js';
import { newNonce, peerMac, verifyPeerMac } from '../../src/cluster/peer-auth.js';
import { encodeMessageRequest } from '../../src/protocol/codec.js';
import { startNode } from '../helpers/node.js';
import { connect, connectLoggedIn, isDelivery, seqOf } from '../helpers/raw-client.js';

const CLUSTER_SECRET = 'cluster-secret';
const cluster = { secret: CLUSTER_SECRET, peerReconnectMs: 200, peerQueueLimit: 100, routeCacheTtlMs: 1000, routeCacheSize: 100 };
const body = encodeMessageRequest({ from: 'mallory', to: 'bob', content: 'injected' });

t.test('peer frames before the handshake are refused and closed', async (t) => {
  const tn = await startNode(t, {}, { cluster });
  const bob = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'));
  for (const type of [HeadType.PEER_DELIVER, HeadType.PEER_NUDGE, HeadType.PEER_CHALLENGE]) {
    const intruder = await connect(t, tn.port);
    intruder.send({ type, peerDeliver: { uid: 'bob', seq: 1, body }, peerNudge: { all: true } });
    t.equal((await intruder.nextClosing()).code, 'SB_ERR_PEER_NOT_AUTHENTICATED', `type ${type}`);
    await intruder.waitClosed();
  }
  await bob.roundTrip();
  t.same(bob.takeDeliveries(), [], 'bob got nothing injected');
  t.equal((await tn.node.inbox.range('bob', 0, 10)).head, 0, 'nothing stored either');
});

t.test('a wrong cluster secret fails the handshake', async (t) => {
  const tn = await startNode(t, {}, { cluster });
  const bob = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'));
  const intruder = await connect(t, tn.port);
  const nonce = newNonce();
  intruder.send({ type: HeadType.PEER_HELLO, peerHello: { nodeId: '0000000099', nonce } });
  const challenge = await intruder.next((m) => m.type === HeadType.PEER_CHALLENGE);
  const selfId = tn.info.id;
  t.equal(challenge.peerChallenge?.nodeId, selfId, 'the worker names itself');
  t.ok(verifyPeerMac(CLUSTER_SECRET, selfId, '0000000099', nonce, challenge.peerChallenge?.mac), 'and proves the secret over our nonce');
  t.notOk(verifyPeerMac('other', selfId, '0000000099', nonce, challenge.peerChallenge?.mac), 'a proof that depends on the secret');
  intruder.send({ type: HeadType.PEER_AUTH, peerAuth: { mac: peerMac('wrong-secret', '0000000099', selfId, challenge.peerChallenge!.nonce!) } });
  t.equal((await intruder.nextClosing()).code, 'SB_ERR_PEER_AUTH_FAILED');
  await intruder.waitClosed();
  await bob.roundTrip();
  t.same(bob.takeDeliveries(), []);
});

t.test('a proof for another connection or worker is refused (no replay)', async (t) => {
  const tn = await startNode(t, {}, { cluster });
  const selfId = tn.info.id;
  const first = await connect(t, tn.port);
  first.send({ type: HeadType.PEER_HELLO, peerHello: { nodeId: 'A', nonce: newNonce() } });
  const c1 = await first.next((m) => m.type === HeadType.PEER_CHALLENGE);
  const proofForFirst = peerMac(CLUSTER_SECRET, 'A', selfId, c1.peerChallenge!.nonce!);
  const second = await connect(t, tn.port);
  second.send({ type: HeadType.PEER_HELLO, peerHello: { nodeId: 'A', nonce: newNonce() } });
  await second.next((m) => m.type === HeadType.PEER_CHALLENGE);
  second.send({ type: HeadType.PEER_AUTH, peerAuth: { mac: proofForFirst } });
  t.equal((await second.nextClosing()).code, 'SB_ERR_PEER_AUTH_FAILED', 'the nonce differs per connection');
});

t.test('a client session cannot become a peer', async (t) => {
  const tn = await startNode(t, {}, { cluster });
  const alice = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'));
  alice.send({ type: HeadType.PEER_HELLO, peerHello: { nodeId: 'A', nonce: newNonce() } });
  t.equal((await alice.nextClosing()).code, 'SB_ERR_PEER_AUTH_FAILED');
});

t.test('with the secret, a peer delivers to local sessions', async (t) => {
  const tn = await startNode(t, {}, { cluster });
  const selfId = tn.info.id;
  const bob = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'));
  const peer = await connect(t, tn.port);
  const nonce = newNonce();
  peer.send({ type: HeadType.PEER_HELLO, peerHello: { nodeId: 'P', nonce } });
  const challenge = await peer.next((m) => m.type === HeadType.PEER_CHALLENGE);
  peer.send({ type: HeadType.PEER_AUTH, peerAuth: { mac: peerMac(CLUSTER_SECRET, 'P', selfId, challenge.peerChallenge!.nonce!) } });
  // The message is in bob's inbox first (as another worker would have stored it).
  const { seq } = await tn.node.inbox.append({ uid: 'bob', sender: 'alice', msgId: '0', body: encodeMessageRequest({ from: 'alice', to: 'bob', content: 'via peer' }) });
  peer.send({ type: HeadType.PEER_DELIVER, peerDeliver: { uid: 'bob', seq, body: encodeMessageRequest({ from: 'alice', to: 'bob', content: 'via peer' }) } });
  const delivered = await bob.next(isDelivery);
  t.equal(seqOf(delivered), seq);
  t.equal(delivered.messageRequest?.content, 'via peer');
  // Heartbeats keep the link alive and are echoed.
  peer.send({ type: HeadType.HEART_BEAT, heartBeat: { uid: 'P' } });
  t.equal((await peer.next((m) => m.type === HeadType.HEART_BEAT)).heartBeat?.uid, 'P');
  // A peer link is exempt from the login timeout but speaks no client protocol.
  peer.send({ type: HeadType.LOGIN_REQUEST, loginRequest: { uid: 'x', token: 'y' } });
  t.equal((await peer.nextClosing()).code, 'SB_ERR_UNKNOWN_TYPE');
});
