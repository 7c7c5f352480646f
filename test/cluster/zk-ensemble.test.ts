// Workers and a gate on a real three-server ZooKeeper ensemble (`--zk a,b,c`), and the leader
// killed with SIGKILL while users chat across the workers. The two followers elect a new leader
// and every ZooKeeper session reconnects to a survivor (a follower drops its clients too while
// it has no leader) before its timeout: no worker's znode goes, so no worker leaves or is purged,
// no route changes, the peer links stay up and every acknowledged message reaches its recipient,
// live, exactly once. SIGKILL is the crash; SIGTERM would look the same to the followers and
// the clients (ZooKeeper 3.8 hands nothing over on shutdown: its one shutdown hook writes an
// audit line, and the kernel closes the sockets either way), so the kill is the case to test.
//
// The figures (election time, each session's gap and move, refused sends) come from the servers'
// `srvr` and `cons` and the workers' logs, and are printed as comments; nothing asserts a time.

import t from 'tap';
import type { ImClient, SendResult } from '../../src/client/im-client.js';
import { ZooKeeperSession } from '../../src/registry/zookeeper-client.js';
import type { EnsembleServer } from '../../testkit/zookeeper-ensemble.js';
import type { LogLine } from '../../testkit/switchboard-process.js';
import { sleep, until } from '../../testkit/wait.js';
import { startEnsemble } from '../helpers/zookeeper.js';
import { startGate } from '../helpers/gate-process.js';
import { CLUSTER_ZK_GATE, LOGIN_RECHECKS_MS, ZK_SESSION_TIMEOUT_MS, oneTo, startCluster, type WorkerProcess } from '../helpers/cluster.js';

const ensemble = await startEnsemble(t);

/**
 * Sends each sender keeps in flight, and the pause between two sends: at most ~80 messages/s
 * per sender, under the default --msg-rate (100/s), so that no refusal is the rate limit's.
 */
const WINDOW = 4;
const PAUSE_MS = 12;
/** Acknowledged sends per sender before the kill, and again after every session reconnected. */
const BATCH = 30;

interface Acked {
  sender: string;
  to: string;
  content: string;
  result: SendResult;
}

t.test('the ZooKeeper leader killed under chat load: workers stay registered, routes stay, no acknowledged message is lost', async (t) => {
  t.equal(ensemble.connect.split(',').length, 3, `--zk ${ensemble.connect}`);
  const cluster = await startCluster(t, ensemble, { workers: 3 });
  const workers = cluster.workers as [WorkerProcess, WorkerProcess, WorkerProcess];
  const gate = await startGate(t, cluster);
  const ids = workers.map((w) => w.nodeId).sort();
  await gate.waitFor('the gate lists the three workers', async () => sameIds(await gate.workers(), ids));

  // One sender and one recipient per worker; each sender writes to the recipients on the two
  // other workers, so that every message crosses a peer link, on all six routes.
  const recipients = await Promise.all(workers.map((w, i) => cluster.client(w, `rcpt-${i + 1}`)));
  const senders = await Promise.all(workers.map((w, i) => cluster.client(w, `sender-${i + 1}`)));
  const sessionIds = recipients.map((r) => r.sessionId);
  // Past the inbox re-reads a login schedules: from now on a recipient gets a message only by
  // live forwarding to its worker.
  await sleep(LOGIN_RECHECKS_MS);

  const acked: Acked[] = [];
  const failed: string[] = [];
  let stop = false;
  const run = async (sender: ImClient, i: number) => {
    const to = recipients.filter((_, j) => j !== i).map((r) => r.uid);
    const inFlight = new Set<Promise<void>>();
    for (let n = 0; !stop; n++) {
      const recipient = to[n % to.length]!;
      const content = `${sender.uid}:${n}`;
      const p: Promise<void> = sender
        .send(recipient, content)
        .then(
          (result) => void acked.push({ sender: sender.uid, to: recipient, content, result }),
          (err: { code?: string }) => void failed.push(`${content}: ${err.code}`),
        )
        .finally(() => inFlight.delete(p));
      inFlight.add(p);
      if (inFlight.size >= WINDOW) await Promise.race(inFlight);
      await sleep(PAUSE_MS);
    }
    await Promise.all(inFlight);
  };
  const ackedBy = (uid: string) => acked.filter((a) => a.sender === uid).length;
  const running = Promise.all(senders.map(run));
  await until(`${BATCH} acknowledged sends per sender`, () => senders.every((s) => ackedBy(s.uid) >= BATCH));
  t.ok(
    recipients.every((r) => r.got.messages.length > 0),
    'every recipient was receiving live from the other workers',
  );

  // Who owns which znode, and which server each of those sessions is connected to.
  const before = await registryOwners(ensemble.connect, cluster.root);
  t.same([...before.keys()].sort(), ids, 'every worker is registered before the kill');
  const serverBefore = await sessionServers(ensemble.servers);
  const { leader: oldLeader, epoch: oldEpoch } = await ensemble.waitForQuorum();
  const onLeader = workers.filter((w) => serverBefore.get(before.get(w.nodeId)!) === oldLeader);

  // Every answer of the gate while ZooKeeper fails over: it must list all three workers.
  const gateAnswers: string[][] = [];
  let polling = true;
  const poll = (async () => {
    while (polling) {
      gateAnswers.push(await gate.workers().then((list) => list.map((w) => w.id).sort(), (err: Error) => [`error: ${err.message}`]));
      await sleep(100);
    }
  })();

  const marks = workers.map((w) => w.mark());
  const gateMark = gate.mark();
  const ackedAtKill = acked.length;
  const killedAt = Date.now();
  await oldLeader.kill();
  const { leader: newLeader, epoch: newEpoch } = await ensemble.waitForQuorum();
  const electedMs = Date.now() - killedAt;
  t.not(newLeader.id, oldLeader.id, `server ${newLeader.id} leads now`);
  t.ok(newEpoch > oldEpoch, `in a new epoch (${oldEpoch} → ${newEpoch})`);

  // Each session is disconnected (its server died, or went looking for a leader) and connects
  // again to a survivor: the same session, so the same znode.
  const gaps: string[] = [];
  for (const [i, w] of workers.entries()) {
    const lost = await w.waitForLog({ msg: 'zookeeper status', to: 'suspended' }, { from: marks[i], timeoutMs: 10_000 });
    const back = await w.waitForLog({ msg: 'zookeeper status', from: 'suspended', to: 'connected' }, { from: marks[i], timeoutMs: ZK_SESSION_TIMEOUT_MS + 10_000 });
    gaps.push(`${w.name} ${back.time - lost.time} ms`);
  }
  t.pass('every worker lost its ZooKeeper connection and got it back');
  const ackedAtReconnect = acked.length;
  const reconnectedMs = Date.now() - killedAt;
  const gateLost = await gate.waitForLog({ msg: 'zookeeper status', to: 'suspended' }, { from: gateMark, timeoutMs: 10_000 });
  const gateBack = await gate.waitForLog({ msg: 'zookeeper status', from: 'suspended', to: 'connected' }, { from: gateMark, timeoutMs: 20_000 });
  gaps.push(`gate ${gateBack.time - gateLost.time} ms`);

  const atReconnect = new Map(senders.map((s) => [s.uid, ackedBy(s.uid)]));
  await until(`${BATCH} more acknowledged sends per sender`, () => senders.every((s) => ackedBy(s.uid) >= atReconnect.get(s.uid)! + BATCH));
  stop = true;
  await running;
  polling = false;
  await poll;

  // The registry, read on the survivors: the same three znodes, owned by the same sessions.
  const survivors = ensemble.servers.filter((s) => s.alive());
  const after = await registryOwners(survivors.map((s) => s.connect).join(','), cluster.root);
  t.same(after, before, "every worker's znode survived, owned by the session that created it");
  const serverAfter = await sessionServers(survivors);
  const moved = workers.filter((w) => serverAfter.get(before.get(w.nodeId)!) !== serverBefore.get(before.get(w.nodeId)!));
  t.ok(
    workers.every((w) => survivors.includes(serverAfter.get(before.get(w.nodeId)!)!)),
    'every worker session is connected to a surviving server',
  );
  t.ok(
    onLeader.every((w) => moved.includes(w)),
    `the sessions on the killed leader moved (${onLeader.map((w) => w.name).join(', ') || 'none was there'})`,
  );
  t.ok(gateAnswers.length > 0, `the gate answered ${gateAnswers.length} times meanwhile`);
  t.same(
    gateAnswers.filter((a) => !sameList(a, ids)),
    [],
    "and listed the three workers every time: its view never lost one",
  );

  const events = ['worker left', 'worker joined', 'purged sessions of a departed worker', 'registered with zookeeper', 'registered again: sessions announced anew', 'registry node deleted; registering again'];
  for (const [i, w] of workers.entries()) {
    const said = w.logs((l: LogLine) => events.includes(l.msg) || (l.msg === 'zookeeper status' && l.to === 'expired'), marks[i]);
    t.same(
      said.map((l) => `${l.msg} ${String(l.peer ?? l.to ?? '')}`),
      [],
      `${w.name} logged no departure, purge, expiry or re-registration`,
    );
    for (const p of workers) if (p !== w) t.ok(cluster.linkReady(w, p), `${w.name} → ${p.name} link still ready`);
    t.equal(w.logs({ msg: 'peer link status' }, marks[i]).length, 0, `${w.name}: no peer link changed status`);
  }
  t.equal(gate.logs({ msg: 'zookeeper status', to: 'expired' }, gateMark).length, 0, "the gate's session did not expire");

  for (const [i, r] of recipients.entries()) {
    t.equal(r.status, 'ready', `${r.uid}: connection up all along`);
    t.equal(r.sessionId, sessionIds[i], `${r.uid}: as the same session`);
    t.same(
      (await cluster.sessionsOf(r.uid)).map((s) => s.nodeId),
      [workers[i]!.nodeId],
      `${r.uid}: routed to ${workers[i]!.name}, where it is`,
    );
  }

  t.same(failed, [], 'no send was refused');
  t.ok(ackedAtReconnect > ackedAtKill, `sends were acknowledged while ZooKeeper failed over (${ackedAtReconnect - ackedAtKill})`);
  for (const r of recipients) {
    const head = await cluster.inboxHead(r.uid);
    await until(`${r.uid} shown its inbox up to ${head}`, () => r.lastSeq === head);
    const shown = r.got.messages;
    t.same(r.got.seqs, oneTo(head), `${r.uid}: 1..${head} exactly once, all live`);
    const bySeq = new Map(shown.map((m) => [m.seq, m]));
    const mine = acked.filter((a) => a.to === r.uid);
    t.same(
      mine.filter((a) => bySeq.get(a.result.seq)?.content !== a.content).map((a) => `${a.content}@${a.result.seq}`),
      [],
      `${r.uid}: all ${mine.length} acknowledged messages shown, each at the seq its sender was told`,
    );
    t.equal(new Set(shown.map((m) => m.content)).size, shown.length, `${r.uid}: none shown twice`);
  }

  t.comment(`leader: server ${oldLeader.id} killed (SIGKILL); server ${newLeader.id} leads and serves ${electedMs} ms later (epoch ${oldEpoch} → ${newEpoch})`);
  t.comment(`sessions without a connection: ${gaps.join(', ')}; every worker connected again ${reconnectedMs} ms after the kill (or earlier)`);
  t.comment(
    `worker sessions moved to another server: ${moved.length} of 3 (${workers.map((w) => `${w.name} ${serverBefore.get(before.get(w.nodeId)!)?.id}→${serverAfter.get(before.get(w.nodeId)!)?.id}`).join(', ')}), on the killed leader before: ${onLeader.length}`,
  );
  t.comment(`${acked.length} acknowledged: ${ackedAtKill} before the kill, ${ackedAtReconnect - ackedAtKill} until every worker was connected again; ${failed.length} refused${refusals(failed)}`);
});

/** ' (SB_ERR_X: 3, ...)' of 'content: code' lines, or ''. */
function refusals(failed: string[]): string {
  const byCode = new Map<string, number>();
  for (const f of failed) {
    const code = f.slice(f.lastIndexOf(' ') + 1);
    byCode.set(code, (byCode.get(code) ?? 0) + 1);
  }
  return byCode.size === 0 ? '' : ` (${[...byCode].map(([code, n]) => `${code}: ${n}`).join(', ')})`;
}

function sameIds(workers: { id: string }[], ids: string[]): boolean {
  return sameList(workers.map((w) => w.id).sort(), ids);
}

function sameList(a: string[], b: string[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/** Worker id → the session owning its znode (ephemeralOwner), read as the gate reads, on a session of its own. */
async function registryOwners(connect: string, root: string): Promise<Map<string, string>> {
  let connected = false;
  const session = new ZooKeeperSession({ connect, sessionTimeoutMs: 5_000, logLevel: 'off', auth: CLUSTER_ZK_GATE, onConnected: () => (connected = true) });
  try {
    await until(`a ZooKeeper session on ${connect}`, () => connected);
    const owners = new Map<string, string>();
    for (const name of (await session.getChildren(`${root}/workers`)).filter((n) => n.startsWith('w-')).sort()) {
      const stat = await session.exists(`${root}/workers/${name}`);
      if (stat) owners.set(name.slice(2), stat.ephemeralOwner);
    }
    return owners;
  } finally {
    session.close();
  }
}

/** Session id → the server it is connected to (`cons` of each). */
async function sessionServers(servers: readonly EnsembleServer[]): Promise<Map<string, EnsembleServer>> {
  const where = new Map<string, EnsembleServer>();
  for (const server of servers) for (const id of await server.sessions()) where.set(id, server);
  return where;
}
