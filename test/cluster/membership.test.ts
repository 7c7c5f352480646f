// Cluster membership with real processes: a worker that starts is found by the others through
// ZooKeeper, which open authenticated links to it, so users on it chat with everyone; a worker
// stopped with SIGTERM leaves the registry, the others drop it, and its users' sessions are
// gone from Redis (messages to them wait in their inboxes for their next login).

import t from 'tap';
import { startZooKeeper } from '../helpers/zookeeper.js';
import { sleep } from '../../testkit/wait.js';
import { LOGIN_RECHECKS_MS, startCluster, type WorkerProcess } from '../helpers/cluster.js';

const zk = await startZooKeeper(t);

/**
 * The reconnect delay of these workers, far above the bound the test waits for links: the
 * links to a new worker must come up on the first attempt, not after a failed one.
 */
const PEER_RECONNECT_MS = 30_000;
const LINK_WAIT_MS = 10_000;

t.test('a fourth worker joins, serves cross-node chat, and leaves gracefully', async (t) => {
  const cluster = await startCluster(t, zk, { workers: 3, flags: { 'peer-reconnect-ms': PEER_RECONNECT_MS } });
  const others = [...cluster.workers];
  const marks = others.map((w) => w.mark());

  const d = await cluster.startWorker({ flags: { 'peer-reconnect-ms': PEER_RECONNECT_MS } });
  const listening = (await d.waitForLog({ msg: 'worker listening' })).time;
  t.notOk(
    others.some((w) => w.nodeId === d.nodeId),
    `the new worker has an id of its own (${d.nodeId})`,
  );
  for (const [i, w] of others.entries()) {
    const joined = await w.waitForLog({ msg: 'worker joined', peer: d.nodeId }, { from: marks[i] });
    t.match(joined, { host: '127.0.0.1', port: d.port }, `${w.name} saw ${d.name} join, at its address`);
    const ready = await w.waitForLog({ msg: 'peer link status', peer: d.nodeId, to: 'ready' }, { from: marks[i], timeoutMs: LINK_WAIT_MS });
    t.comment(`${w.name}: joined ${joined.time - listening} ms, link ready ${ready.time - listening} ms after ${d.name} listened`);
  }
  await cluster.waitForMesh(cluster.live, LINK_WAIT_MS);
  t.pass('every worker has a ready link to every other, the new one included');
  t.same(
    cluster.workers.flatMap((w) => w.logs({ msg: 'peer handshake failed' }).map((l) => `${w.name}: ${JSON.stringify(l.err)}`)),
    [],
    'no link needed a second attempt: the new worker proved its id to the first HELLO',
  );
  for (const w of others) {
    // The acceptor checks the dialer's proof a moment after the dialer counts its link ready.
    await d.waitForLog({ msg: 'peer authenticated', peer: w.nodeId });
    await w.waitForLog({ msg: 'peer authenticated', peer: d.nodeId });
    t.pass(`${w.name} and ${d.name} authenticated each other's links`);
  }

  const [a, b] = others as [WorkerProcess, WorkerProcess];
  const gina = await cluster.client(d, 'gina');
  const alice = await cluster.client(a, 'alice');
  const bob = await cluster.client(b, 'bob');
  const toGina = gina.got;
  const toAlice = alice.got;
  await sleep(LOGIN_RECHECKS_MS);
  const s1 = await alice.send('gina', 'hi gina');
  const s2 = await bob.send('gina', 'hello from b');
  t.match(
    await toGina.atLeast(2),
    [
      { from: 'alice', content: 'hi gina', seq: s1.seq },
      { from: 'bob', content: 'hello from b', seq: s2.seq },
    ],
    'users on two workers reach a user on the new one',
  );
  const r = await gina.send('alice', 'hi alice');
  t.match(await toAlice.atLeast(1), [{ from: 'gina', content: 'hi alice', seq: r.seq }], 'and the other way round');
  t.same(
    (await cluster.sessionsOf('gina')).map((s) => s.nodeId),
    [d.nodeId],
    'gina is routed to the new worker',
  );

  // Graceful stop: the client is told, the worker deletes its znode and exits cleanly.
  const closing = new Promise<{ code: string }>((resolve) => gina.once('closing', resolve));
  const marksBeforeStop = others.map((w) => w.mark());
  const exit = await d.stop();
  t.same(exit, { code: 0, signal: null }, 'SIGTERM: the worker exited with 0');
  t.ok(d.logs({ msg: 'worker stopped' }).length === 1, 'after logging "worker stopped"');
  t.equal((await closing).code, 'SB_ERR_SERVER_SHUTDOWN', 'its client was told why it is being closed');
  for (const [i, w] of others.entries()) {
    await w.waitForLog({ msg: 'worker left', peer: d.nodeId }, { from: marksBeforeStop[i] });
    t.pass(`${w.name} removed ${d.name}`);
  }
  t.same(await cluster.sessionsOf('gina'), [], 'gina has no session left in Redis');
  await cluster.waitForMesh(others);
  t.ok(
    others.every((w) => !cluster.linkReady(w, d)),
    'nobody keeps a link to the departed worker',
  );

  // What is sent to gina meanwhile waits in her inbox for her next login, on any worker.
  const s3 = await alice.send('gina', 'while you were away');
  const ginaAgain = await cluster.client(b, 'gina');
  const replay = ginaAgain.got;
  t.match(await replay.atLeast(1), [{ content: 'while you were away', seq: s3.seq }], 'gina gets it on her next login, elsewhere');
  await sleep(200);
  t.equal(replay.messages.length, 1, 'and only it: what she acknowledged before is not replayed');
});
