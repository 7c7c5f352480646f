// TLS end to end with real worker processes (`switchboard worker`), one ZooKeeper and one Redis:
// clients on the workers' TLS ports, peer links over mutual TLS with the cluster CA, a message
// across the two; then SIGHUP: a renewed certificate is presented to new connections, a broken
// file is logged at error and the previous certificate stays, and the worker keeps serving.

import t from 'tap';
import tls from 'node:tls';
import { startZooKeeper } from '../helpers/zookeeper.js';
import { sleep } from '../../testkit/wait.js';
import { LOGIN_RECHECKS_MS, startCluster, type WorkerProcess } from '../helpers/cluster.js';
import { testPki } from '../helpers/tls.js';
import { PeerTap } from '../helpers/peer-frames.js';
import { freePort } from '../../testkit/services.js';

const zk = await startZooKeeper(t);
const pki = testPki(t);
const clusterCa = pki.ca('cluster-ca');
const certs = [clusterCa.issue('w1'), clusterCa.issue('w2')];
const ca = pki.read(clusterCa.ca);

/** The TLS port a worker announced in its 'worker listening' line. */
function tlsPortOf(worker: WorkerProcess): number {
  return Number(worker.logs({ msg: 'worker listening' })[0]!.tlsPort);
}

/** The serial number of the certificate presented on `port` now. */
async function serialOn(port: number): Promise<string> {
  const socket = tls.connect({ host: '127.0.0.1', port, ca, servername: 'localhost' });
  await new Promise<void>((resolve, reject) => socket.once('secureConnect', resolve).once('error', reject));
  const serial = socket.getPeerCertificate().serialNumber;
  socket.destroy();
  return serial;
}

const cluster = await startCluster(t, zk, { workers: 0 });
for (const cert of certs) {
  await cluster.startWorker({ flags: { 'tls-port': 0, 'tls-cert': cert.cert, 'tls-key': cert.key, 'peer-tls': 'mutual', 'peer-ca': clusterCa.ca } });
}
await cluster.waitForMesh();
const [w1, w2] = cluster.workers as [WorkerProcess, WorkerProcess];

t.test('clients on two workers chat over TLS ports and mutual-TLS peer links', async (t) => {
  t.match(w1.logs({ msg: 'peer listener listening' })[0], { tls: 'mutual' });
  const alice = await cluster.client(w1, 'alice', 'alice-device', { port: tlsPortOf(w1), tls: { ca, servername: 'localhost' } });
  const bob = await cluster.client(w2, 'bob', 'bob-device', { port: tlsPortOf(w2), tls: { ca } });
  await sleep(LOGIN_RECHECKS_MS);
  const sent = await alice.send('bob', 'across the cluster, encrypted');
  const [m] = await bob.got.atLeast(1);
  t.match(m, { from: 'alice', content: 'across the cluster, encrypted', seq: sent.seq }, 'delivered live through the peer link');
  t.equal(w1.logs({ msg: 'peer tls handshakes failed' }).length, 0, 'no peer TLS failure');
});

t.test('a tap on a peer link reads no frame and no message', async (t) => {
  // w3's peer port is reached through a relay that keeps what the dialers send (PeerTap).
  const peerPort = await freePort();
  const tap = await PeerTap.start(t, '127.0.0.2', peerPort);
  const cert = clusterCa.issue('w3', ['localhost', '127.0.0.1', '127.0.0.2']);
  const w3 = await cluster.startWorker({ flags: { 'peer-port': peerPort, 'announce-host': '127.0.0.2', 'tls-port': 0, 'tls-cert': cert.cert, 'tls-key': cert.key, 'peer-tls': 'mutual', 'peer-ca': clusterCa.ca } });
  await cluster.waitForMesh();
  const dave = await cluster.client(w1, 'dave', 'dave-device', { port: tlsPortOf(w1), tls: { ca, servername: 'localhost' } });
  const erin = await cluster.client(w3, 'erin', 'erin-device', { port: tlsPortOf(w3), tls: { ca, servername: 'localhost' } });
  await sleep(LOGIN_RECHECKS_MS);
  const texts = ['first secret line', 'second secret line', 'third secret line'];
  for (const text of texts) await dave.send('erin', text);
  const got = await erin.got.atLeast(3);
  t.same(got.map((m) => m.content), texts, 'delivered through the tapped link');
  t.ok(tap.byteCount > 0, 'the link went through the tap');
  t.equal(tap.frames.length, 0, 'not one frame decoded from it');
  t.ok(tap.undecodable >= 1, 'its bytes are no frame stream');
  const seen = Buffer.concat(tap.bytes);
  t.equal(texts.filter((text) => seen.includes(Buffer.from(text))).length, 0, 'none of the 3 messages readable on the wire');
  t.notOk(seen.includes(Buffer.from('erin')), 'nor the recipient');
});

t.test('SIGHUP re-reads the certificate; a broken one keeps the previous', async (t) => {
  const port = tlsPortOf(w1);
  const before = await serialOn(port);
  const renewed = clusterCa.issue('w1-renewed');
  pki.copy(renewed.cert, certs[0]!.cert);
  pki.copy(renewed.key, certs[0]!.key);
  let mark = w1.mark();
  w1.child.kill('SIGHUP');
  await w1.waitForLog({ msg: 'tls files reloaded', role: 'client' }, { from: mark });
  const after = await serialOn(port);
  t.not(after, before, 'new connections get the renewed certificate');

  pki.write('w1.crt', '-----BEGIN CERTIFICATE-----\nbroken\n-----END CERTIFICATE-----\n');
  mark = w1.mark();
  w1.child.kill('SIGHUP');
  const failed = await w1.waitForLog({ msg: 'tls files not reloaded: the previous ones stay in use', role: 'client' }, { from: mark });
  t.equal(failed.level, 50, 'logged at error');
  t.match(failed.err, { code: 'SB_ERR_TLS_FILES' });
  t.equal(await serialOn(port), after, 'the previous certificate stays in use');
  t.ok(w1.alive, 'the worker runs on');
  const carol = await cluster.client(w1, 'carol', 'carol-device', { port, tls: { ca } });
  t.equal(carol.status, 'ready', 'and logs clients in');
});
