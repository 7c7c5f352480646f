// An attacker without the cluster secret cannot pass the peer handshake by reflection: making a
// worker compute, on a second connection, the proof its first connection needs, whether both go
// to one worker or to two. Nor can it reach the peer protocol through the client port. Real
// worker processes, ZooKeeper and Redis; the attacker is a bare socket that knows no secret.
// Whatever it tries, bob is shown nothing forged and his devices' positions do not move.

import t, { type Test } from 'tap';
import { newNonce } from '../../src/cluster/peer-auth.js';
import { encodeMessageRequest } from '../../src/protocol/codec.js';
import { HeadType, type ImMessage } from '../../src/protocol/types.js';
import { until } from '../../testkit/wait.js';
import { startCluster, type TestClient, type WorkerProcess } from '../helpers/cluster.js';
import { closingOf, isDelivery, seqOf, type RawClient } from '../../testkit/raw-client.js';
import { connect, connectLoggedIn } from '../helpers/raw-client.js';
import { startZooKeeper } from '../helpers/zookeeper.js';

const zk = await startZooKeeper(t);
const cluster = await startCluster(t, zk, { workers: 2 });
const [w1, w2] = cluster.workers as [WorkerProcess, WorkerProcess];

const FORGED = 7;
const answersHello = (m: ImMessage) => m.type === HeadType.PEER_CHALLENGE || closingOf(m) !== undefined;

/**
 * The attack: connection 1 to `target` claims to be `via` and gets target's nonce N2. A worker
 * answers a HELLO with a proof over the stranger's nonce, so connection 2 asks `via` for one
 * over N2, sent as if by `target` (on one worker: `via` is `target`, which claims its own id),
 * and connection 1 replies with it. Then it forwards forged messages to `uid` and a heartbeat.
 * Resolves how `target` ended connection 1: a code, or 'authenticated' when it echoed the
 * heartbeat as an authenticated peer does.
 */
async function reflect(t: Test, target: WorkerProcess, via: WorkerProcess, uid: string): Promise<string> {
  const first = await connect(t, target.peerPort);
  first.send({ type: HeadType.PEER_HELLO, peerHello: { nodeId: via.nodeId, nonce: newNonce() } });
  const challenge = await first.next(answersHello);
  if (closingOf(challenge)) return closingOf(challenge)!.code;
  const second = await connect(t, via.peerPort);
  second.send({ type: HeadType.PEER_HELLO, peerHello: { nodeId: target.nodeId, nonce: challenge.peerChallenge!.nonce! } });
  const reflected = await second.next(answersHello);
  first.send({ type: HeadType.PEER_AUTH, peerAuth: { mac: reflected.peerChallenge?.mac ?? Buffer.alloc(32) } });
  // At the seqs the devices expect next: each would be shown and move their positions past
  // the real messages still to come.
  for (let i = 0; i < FORGED; i++) {
    const body = encodeMessageRequest({ from: 'alice', to: uid, content: `forged ${i}`, msgId: 9_000 + i });
    first.send({ type: HeadType.PEER_DELIVER, peerDeliver: { uid, seq: 1 + i, body } });
  }
  first.send({ type: HeadType.HEART_BEAT, heartBeat: { uid: via.nodeId } });
  const outcome = await first.next((m) => m.type === HeadType.HEART_BEAT || closingOf(m) !== undefined);
  return closingOf(outcome)?.code ?? 'authenticated';
}

/** `uid` on `worker` twice: a legacy raw device and an acknowledging SDK device. */
async function victim(t: Test, worker: WorkerProcess, uid: string): Promise<{ legacy: RawClient; acking: TestClient }> {
  const legacy = await connectLoggedIn(t, worker.port, uid, cluster.token(uid, 'legacy'), 'legacy');
  const acking = await cluster.client(worker, uid, 'acking');
  return { legacy, acking };
}

/**
 * After the attack a real message from alice on the other worker reaches both devices as the
 * only thing they are shown, and the positions they save when their sessions end are its seq.
 */
async function onlyTheRealMessage(t: Test, uid: string, devices: { legacy: RawClient; acking: TestClient }, from: WorkerProcess): Promise<void> {
  const alice = await cluster.client(from, 'alice', `alice-to-${uid}`);
  const { seq } = await alice.send(uid, 'real');
  t.equal(seq, 1, `the real message is the first in ${uid}'s inbox`);
  const legacyGot = await devices.legacy.next(isDelivery);
  t.match({ seq: seqOf(legacyGot), content: legacyGot.messageRequest?.content }, { seq, content: 'real' }, 'the legacy device is shown the real message');
  await devices.acking.got.atLeast(1);
  await devices.legacy.roundTrip();
  t.same(devices.legacy.takeDeliveries(), [], 'and nothing else');
  t.same(devices.acking.got.messages.map((m) => [m.seq, m.content]), [[seq, 'real']], 'the acknowledging device is shown only the real message');
  // Ending the sessions saves the positions; they are the real message's seq, not a forged one.
  await devices.acking.logout();
  devices.legacy.destroy();
  for (const device of ['legacy', 'acking']) {
    await until(`${uid}/${device} saved a position`, async () => (await cluster.cursorOf(uid, device)) !== undefined);
    t.equal(await cluster.cursorOf(uid, device), seq, `${uid}/${device}: position at the real message`);
  }
  t.equal(await cluster.inboxHead(uid), seq, 'the inbox holds the real message only');
}

t.test('reflection within one worker: the proof of connection 1 asked for on connection 2', async (t) => {
  const devices = await victim(t, w1, 'bob');
  t.equal(await reflect(t, w1, w1, 'bob'), 'SB_ERR_PEER_UNKNOWN_NODE', 'a HELLO with the worker’s own id is refused');
  await onlyTheRealMessage(t, 'bob', devices, w2);
});

t.test('reflection across two workers: the proof asked for on the other worker', async (t) => {
  const devices = await victim(t, w1, 'carol');
  t.equal(await reflect(t, w1, w2, 'carol'), 'SB_ERR_PEER_AUTH_FAILED', 'the other worker’s challenge proof is not a dialer’s proof');
  await onlyTheRealMessage(t, 'carol', devices, w2);
  // The worker's log arrives through its stdout, possibly after the refusal reached the attacker.
  const logged = await w1.waitForLog({ msg: 'closing connection', code: 'SB_ERR_PEER_AUTH_FAILED', listener: 'peer' });
  t.equal(logged.code, 'SB_ERR_PEER_AUTH_FAILED', 'the refusal is logged on the peer port');
});

t.test('the client port speaks no peer frame at all', async (t) => {
  const devices = await victim(t, w1, 'dave');
  const types = [HeadType.PEER_HELLO, HeadType.PEER_AUTH, HeadType.PEER_DELIVER, HeadType.PEER_NUDGE, HeadType.PEER_CHALLENGE];
  for (const type of types) {
    const intruder = await connect(t, w1.port);
    const body = encodeMessageRequest({ from: 'alice', to: 'dave', content: 'forged' });
    intruder.send({ type, peerHello: { nodeId: w2.nodeId, nonce: newNonce() }, peerDeliver: { uid: 'dave', seq: 1, body }, peerNudge: { all: true } });
    t.equal((await intruder.nextClosing()).code, 'SB_ERR_UNKNOWN_TYPE', `type ${type} before login`);
    await intruder.waitClosed();
  }
  // Nor from a logged-in client.
  const mallory = await connectLoggedIn(t, w1.port, 'mallory', cluster.token('mallory'));
  mallory.send({ type: HeadType.PEER_HELLO, peerHello: { nodeId: w2.nodeId, nonce: newNonce() } });
  t.equal((await mallory.nextClosing()).code, 'SB_ERR_UNKNOWN_TYPE', 'PEER_HELLO after login');
  await onlyTheRealMessage(t, 'dave', devices, w2);
});

t.test('the legitimate workers are linked over their peer ports', async (t) => {
  t.not(w1.peerPort, w1.port, 'the peer port is not the client port');
  t.ok(cluster.linkReady(w1, w2) && cluster.linkReady(w2, w1), 'both links are up');
  const joined = w1.logs({ msg: 'worker joined', peer: w2.nodeId })[0];
  t.equal(joined?.peerPort, w2.peerPort, 'w1 dials the peer port w2 announced');
  t.ok(w2.logs({ msg: 'peer authenticated', peer: w1.nodeId, listener: 'peer' }).length > 0, 'w2 accepted w1 on its peer port');
});
