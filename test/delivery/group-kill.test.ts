// A worker process killed with SIGKILL while group messages flow loses none that were
// acknowledged. Three real workers, one real ZooKeeper, one real Redis: one group whose members
// are on every worker (one of them with a device on two), three senders on different workers
// keeping a window of sends in flight. The worker with a sender and members on it is killed
// mid-stream; its clients reconnect as the SDK does, asking endpoint() before every attempt (as
// gateEndpoint() asks the gate), which names a surviving worker. Every send that resolved must
// then reach every member device exactly once (after the SDK's dedupe by (group, seq)), in
// group order, at the seq its sender was told; the sending device is told its seq instead.
// Sends that failed or were cut off may or may not have been stored: if they were, they are in
// the group's order like any other entry.

import t from 'tap';
import type { ClientStatus, GroupSendResult } from '../../src/client/im-client.js';
import { until } from '../../testkit/wait.js';
import { TestCluster, type WorkerProcess } from '../helpers/cluster.js';
import { GroupAdmin, groupDevice, type GroupDevice } from '../helpers/groups.js';
import { startRedis } from '../helpers/redis.js';
import { startZooKeeper } from '../helpers/zookeeper.js';

/** Sends each sender keeps in flight. */
const WINDOW = 4;
/** Acknowledged sends per sender before the kill, and again after it. */
const BATCH = 20;
const WAIT_MS = 20_000;

interface Acked {
  sender: GroupDevice;
  i: number;
  result: GroupSendResult;
}

t.test('SIGKILL of a worker while group messages flow: every acknowledged one reaches every member once, in order', async (t) => {
  const zk = await startZooKeeper(t);
  const cluster = new TestCluster(t, zk, await startRedis(t));
  const [a, b, c] = (await cluster.startWorkers(3)) as [WorkerProcess, WorkerProcess, WorkerProcess];
  const admin = new GroupAdmin(t, cluster.redis.url);
  const killed = new Set<WorkerProcess>();

  // Each device goes back to its own worker while it lives, else to the next survivor.
  let turn = 0;
  /** Where each device (by id) was last sent. */
  const at = new Map<string, WorkerProcess>();
  const device = (home: WorkerProcess, uid: string, deviceId: string) =>
    groupDevice(cluster, home, uid, deviceId, {
      retryStrategy: () => 50,
      // Long enough that a send waiting across the kill is not given up on.
      requestTimeoutMs: 60_000,
      endpoint: async () => {
        const survivors = [a, b, c].filter((w) => !killed.has(w));
        const to = survivors.includes(home) ? home : survivors[turn++ % survivors.length]!;
        at.set(deviceId, to);
        return { host: '127.0.0.1', port: to.port, token: cluster.token(uid, deviceId) };
      },
    });

  const senderHomes: [WorkerProcess, string][] = [
    [a, 'sa'],
    [b, 'sb'],
    [c, 'sc'],
  ];
  const readerHomes: [WorkerProcess, string, string][] = [
    [a, 'ra', 'ra-phone'],
    [b, 'rb', 'rb-phone'],
    [c, 'rc', 'rc-phone'],
    [b, 'multi', 'multi-phone'],
    [c, 'multi', 'multi-tablet'],
  ];
  const group = await admin.create('sa', ['sb', 'sc', 'ra', 'rb', 'rc', 'multi']);
  const senders = await Promise.all(senderHomes.map(([w, uid]) => device(w, uid, `${uid}-phone`)));
  const readers = await Promise.all(readerHomes.map(([w, uid, deviceId]) => device(w, uid, deviceId)));
  const everyone = [...senders, ...readers];
  const onB = everyone.filter((d) => at.get(d.client.deviceId) === b);
  await Promise.all(everyone.map((d) => d.got.atLeast(group, 1)));

  const acked: Acked[] = [];
  const failed: string[] = [];
  const ackedBy = new Map(senders.map((s) => [s, 0]));
  const outcome = new Map<string, 'pending' | 'acked' | 'failed'>();
  let stop = false;
  const run = async (sender: GroupDevice) => {
    const inFlight = new Set<Promise<void>>();
    for (let i = 0; !stop; i++) {
      const key = `${sender.client.uid}:${i}`;
      outcome.set(key, 'pending');
      const p: Promise<void> = sender.client
        .sendToGroup(group, key)
        .then(
          (result) => {
            outcome.set(key, 'acked');
            acked.push({ sender, i, result });
            ackedBy.set(sender, ackedBy.get(sender)! + 1);
          },
          (err: { code?: string }) => {
            outcome.set(key, 'failed');
            failed.push(`${key}: ${String(err.code)}`);
          },
        )
        .finally(() => inFlight.delete(p));
      inFlight.add(p);
      if (inFlight.size >= WINDOW) await Promise.race(inFlight);
    }
    await Promise.all(inFlight);
  };
  const running = Promise.all(senders.map(run));

  await until(`${BATCH} acknowledged sends per sender`, () => [...ackedBy.values()].every((n) => n >= BATCH), WAIT_MS);
  killed.add(b);
  process.kill(b.child.pid!, 'SIGKILL');
  const atKill = new Map(ackedBy);
  const pendingAtKill = [...outcome].filter(([key, state]) => state === 'pending' && key.startsWith('sb:')).map(([key]) => key);
  await b.exited;
  t.equal(b.child.signalCode, 'SIGKILL', 'b was killed');
  await until('b’s clients noticed', () => onB.every((d) => (['reconnecting', 'connecting'] as ClientStatus[]).includes(d.client.status) || at.get(d.client.deviceId) !== b), WAIT_MS);
  await until(`${BATCH} more acknowledged sends per sender`, () => senders.every((s) => ackedBy.get(s)! >= atKill.get(s)! + BATCH), WAIT_MS);
  stop = true;
  await running;
  t.equal(pendingAtKill.length, WINDOW, 'the sender on b had a full window of sends unanswered at the kill');
  t.same(
    pendingAtKill.filter((key) => outcome.get(key) !== 'acked'),
    [],
    'all of them were resent to a survivor and acknowledged',
  );
  t.same(failed, [], 'no send failed');
  t.ok(onB.every((d) => d.client.status === 'ready' && at.get(d.client.deviceId) !== b), `b's ${onB.length} devices are logged in on survivors`);
  t.comment(`${acked.length} acknowledged (${acked.filter((x) => x.result.duplicate).length} as duplicates of a resend stored before the kill)`);

  // The log now holds every entry each device must have processed, each once.
  const head = await admin.head(group, 'sa');
  for (const d of everyone) await until(() => `${d.client.deviceId} processed ${group} up to ${head} (at ${d.client.groupSeq(group)})`, () => d.client.groupSeq(group) === head, WAIT_MS);

  const ackedSeqs = acked.map((x) => x.result.seq).sort((x, y) => x - y);
  t.equal(new Set(ackedSeqs).size, ackedSeqs.length, 'every acknowledged send has a seq of its own');
  for (const d of everyone) {
    const name = d.client.deviceId;
    const shown = d.got.of(group);
    const seqs = shown.map((s) => s.seq);
    const own = acked.filter((x) => x.sender === d).map((x) => x.result.seq);
    t.ok(
      seqs.every((seq, k) => k === 0 || seq > seqs[k - 1]!),
      `${name}: shown in group order, each once`,
    );
    const covered = new Set([...seqs, ...own]);
    t.same(
      Array.from({ length: head }, (_, k) => k + 1).filter((seq) => !covered.has(seq)),
      [],
      `${name}: every entry 1..${head} shown or its own acknowledged send`,
    );
    const bySeq = new Map(shown.map((s) => [s.seq, s]));
    const missing = acked.filter((x) => x.sender !== d && bySeq.get(x.result.seq)?.what !== `${x.sender.client.uid}:${x.i}`);
    t.same(
      missing.map((x) => `${x.sender.client.uid}:${x.i}@${x.result.seq}`),
      [],
      `${name}: every acknowledged message of the others at the seq its sender was told`,
    );
    for (const s of senders) {
      const order = shown.filter((m) => m.from === s.client.uid && m.what.includes(':')).map((m) => Number(m.what.split(':')[1]));
      t.same(order, [...order].sort((x, y) => x - y), `${name}: ${s.client.uid}'s messages in the order sent`);
    }
  }
});
