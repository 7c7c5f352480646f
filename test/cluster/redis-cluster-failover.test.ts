// A Redis Cluster master killed (SIGKILL) under chat load: 3 masters with a replica each, two
// real worker processes on ZooKeeper, SDK senders on both workers writing to recipients whose
// inboxes are spread over the masters, most of them on the victim. Every send is recorded
// (acknowledged with its seq, or refused with its code), and every delivery. The load goes on
// until the victim's replica has taken over and every conversation with its users is acknowledged
// again; then the devices catch up and fresh devices read every recipient's inbox.
//
// What must hold: refusals are SB_ERR_STORE_UNAVAILABLE, only for users on the failed slots, and
// no worker fails; users on the surviving masters are never refused and keep being acknowledged;
// service resumes on the failed slots; every acknowledged message is delivered exactly once,
// except the last ones the failed master acknowledged and had not replicated (Redis replication
// is asynchronous and switchboard does not WAIT): those are counted, they are the end of what the
// master held, and a device that had been sent one of their seqs is reset (SB_ERR_INBOX_RESET, a
// new epoch) instead of silently skipping the messages that reuse them.
//
// Twice, on one cluster: a plain kill with the Redis defaults (cluster-require-full-coverage yes:
// every node answers CLUSTERDOWN from when the victim is flagged failed until its replica is
// promoted, which the client retries within --redis-timeout-ms, so the surviving masters' users
// wait meanwhile), then a kill whose replica lags (its replication link cut moments before: what
// a slow or broken link does) with cluster-require-full-coverage no (the other masters serve
// throughout). Timings are measured and reported with t.comment, not asserted. The compiled
// dist/: `npm run build` first.

import t, { type Test } from 'tap';
import { Redis } from 'ioredis';
import { startRedisCluster } from '../helpers/redis.js';
import { startZooKeeper } from '../helpers/zookeeper.js';
import { startCluster, type TestClient, type WorkerProcess } from '../helpers/cluster.js';
import { RedisInboxStore } from '../../src/inbox/redis-inbox-store.js';
import type { RedisClusterNode } from '../../testkit/redis-cluster.js';
import { sleep, until } from '../../testkit/wait.js';

t.setTimeout(120_000);

/** cluster-node-timeout: the victim is flagged failed about this long after it died, then its replica is elected. */
const NODE_TIMEOUT_MS = 1_000;
const PREFIX = 'fo:';
/** Pause between two sends of one conversation (sender → recipient), and before a resend after a refusal. */
const PAUSE_MS = 40;
const RESEND_MS = 50;
/** Load before the kill. */
const WARMUP_MS = 1_000;
/** Acknowledged sends per conversation on the failed slots after the kill, before the load stops. */
const AFTER = 5;
/**
 * How long before the kill the second victim's replica stops replicating: a few messages per
 * user, fewer than the appends that follow the failover (the rewinds that a head check alone misses).
 */
const LAG_MS = 50;
/** Acknowledged messages lost are the victim's last: acknowledged at most this long before the kill (or before its replica stopped replicating). */
const LOSS_WINDOW_MS = 1_000;

const zk = await startZooKeeper(t);
const redis = await startRedisCluster(t, { replicasPerMaster: 1, nodeTimeoutMs: NODE_TIMEOUT_MS });
const cluster = await startCluster(t, zk, { workers: 2, flags: { redis: redis.seeds.join(','), 'redis-cluster': true, 'redis-prefix': PREFIX } });
const workers = cluster.workers as [WorkerProcess, WorkerProcess];
const inbox = new RedisInboxStore({ url: { cluster: redis.seeds }, keyPrefix: PREFIX });
t.teardown(() => inbox.close());

/** The master serving `uid`'s keys (all in the slot of its hash tag). */
const masterOfUser = (uid: string) => redis.masterOf(`${PREFIX}{${uid}}:seq`);

/** A command on one node, on a connection of its own. */
async function on<T>(node: RedisClusterNode, ...args: [string, ...(string | number)[]]): Promise<T> {
  const admin = new Redis(node.url, { maxRetriesPerRequest: 1 });
  try {
    return (await admin.call(...args)) as T;
  } finally {
    admin.disconnect();
  }
}

/** Masters running now (a promoted replica among them), by port, each with its replica if it has one. */
async function topology(): Promise<{ master: RedisClusterNode; replica?: RedisClusterNode }[]> {
  const live = redis.nodes.filter((n) => n.alive);
  const roles = await Promise.all(live.map((n) => on<[string, string, number]>(n, 'ROLE')));
  return live
    .filter((_, i) => roles[i]![0] === 'master')
    .sort((a, b) => a.port - b.port)
    .map((master) => ({ master, replica: live.find((_, i) => roles[i]![0] === 'slave' && Number(roles[i]![2]) === master.port) }));
}

/** `want[i]` users on masters[i], named `<name><n>`: the first that hash there. */
async function usersOn(masters: RedisClusterNode[], want: number[], name: string): Promise<string[][]> {
  const out: string[][] = masters.map(() => []);
  for (let n = 0; out.some((users, i) => users.length < want[i]!); n++) {
    const uid = `${name}${n}`;
    const i = masters.indexOf(await masterOfUser(uid));
    if (i >= 0 && out[i]!.length < want[i]!) out[i]!.push(uid);
  }
  return out;
}

interface Pair {
  sender: TestClient;
  to: string;
  /** The recipient's inbox is on the victim. */
  failed: boolean;
  attempts: Attempt[];
}

interface Attempt {
  pair: Pair;
  content: string;
  startedAt: number;
  endedAt: number;
  seq?: number;
  code?: string;
}

/** A recipient's device, reconnecting as an app does, with all it was shown and told. */
interface Device {
  uid: string;
  client: TestClient;
  shown: { seq: number; epoch: number; content: string; at: number }[];
  closings: string[];
  resets: number;
}

async function device(worker: WorkerProcess, uid: string, deviceId: string, reconnect: boolean): Promise<Device> {
  const client = await cluster.client(worker, uid, deviceId, { connect: false, ...(reconnect ? { retryStrategy: () => 100 } : {}) });
  const d: Device = { uid, client, shown: [], closings: [], resets: 0 };
  client.on('message', (m) => d.shown.push({ seq: m.seq, epoch: client.inboxEpoch, content: m.content, at: Date.now() }));
  client.on('closing', ({ code }) => d.closings.push(code));
  client.on('reset', () => d.resets++);
  await client.connect();
  return d;
}

/** When the cluster, as a surviving master sees it, flagged the victim failed and promoted its replica; and its cluster_state changes. */
function watchCluster(from: RedisClusterNode, victim: RedisClusterNode, replica: RedisClusterNode, since: () => number) {
  const seen = { failAt: NaN, promotedAt: NaN, states: [] as string[] };
  let watching = true;
  const admin = new Redis(from.url, { maxRetriesPerRequest: 1 });
  const done = (async () => {
    let state = '';
    while (watching) {
      const [info, nodes] = await Promise.all([admin.call('CLUSTER', 'INFO'), admin.call('CLUSTER', 'NODES')]).catch(() => ['', '']);
      const now = since();
      const flags = (port: number) => String(nodes).split('\n').find((l) => l.includes(`:${port}@`))?.split(' ')[2]?.split(',') ?? [];
      if (Number.isNaN(seen.failAt) && flags(victim.port).includes('fail')) seen.failAt = now;
      if (Number.isNaN(seen.promotedAt) && flags(replica.port).includes('master')) seen.promotedAt = now;
      const s = /cluster_state:(\w+)/.exec(String(info))?.[1];
      if (s && s !== state) seen.states.push(`${s} at ${now} ms`);
      state = s ?? state;
      await sleep(20);
    }
    admin.disconnect();
  })();
  return { seen, stop: async () => ((watching = false), await done) };
}

const ms = (n: number) => `${Math.round(n)} ms`;
const pct = (n: number, of: number) => `${((100 * n) / Math.max(1, of)).toFixed(1)} %`;

interface Scenario {
  /** Users' names start so (each scenario its own users). */
  name: string;
  /** cluster-require-full-coverage on every node. */
  fullCoverage: boolean;
  /** The victim's replica stops replicating this long before the kill (0: it replicates to the end). */
  lagMs: number;
}

async function killMasterUnderLoad(t: Test, { name, fullCoverage, lagMs }: Scenario): Promise<void> {
  const top = await topology();
  for (const { master, replica } of top) {
    for (const node of replica ? [master, replica] : [master]) await on(node, 'CONFIG', 'SET', 'cluster-require-full-coverage', fullCoverage ? 'yes' : 'no');
  }
  // The victim: a master with a replica; most recipients on it, two on each other master; the
  // senders on the others, so that their own copies (a send appends to the sender's inbox too) stay up.
  const victimAt = top.findIndex((m) => m.replica !== undefined);
  const victim = top[victimAt]!.master;
  const replica = top[victimAt]!.replica!;
  const masters = top.map((m) => m.master);
  const recipientsByMaster = await usersOn(masters, masters.map((m) => (m === victim ? 4 : 2)), `${name}r`);
  const sendersByMaster = await usersOn(masters, masters.map((m) => (m === victim ? 0 : 2)), `${name}s`);
  const counts = recipientsByMaster.map((r) => r.length);
  t.equal(masters[counts.indexOf(Math.max(...counts))], victim, 'the victim serves the most recipients');
  const onVictim = new Set(recipientsByMaster[victimAt]);
  const recipients = recipientsByMaster.flat();

  const devices = new Map<string, Device>();
  for (const [i, uid] of recipients.entries()) devices.set(uid, await device(workers[i % 2]!, uid, `${uid}-phone`, true));
  const senders: TestClient[] = [];
  for (const [i, uid] of sendersByMaster.flat().entries()) senders.push(await cluster.client(workers[i % 2]!, uid, `${uid}-phone`));

  // One loop per conversation: a send waiting for the failed master holds up no other.
  const pairs: Pair[] = senders.flatMap((sender) => recipients.map((to) => ({ sender, to, failed: onVictim.has(to), attempts: [] })));
  let stop = false;
  const converse = async (pair: Pair) => {
    for (let i = 1; !stop; i++) {
      const content = `${pair.sender.uid}>${pair.to}#${i}`;
      // A refused send goes again with the same msg_id, as a client must (PROTOCOL.md §5).
      for (;;) {
        const attempt: Attempt = { pair, content, startedAt: Date.now(), endedAt: 0 };
        pair.attempts.push(attempt);
        try {
          attempt.seq = (await pair.sender.send(pair.to, content, { msgId: i })).seq;
          attempt.endedAt = Date.now();
          break;
        } catch (err) {
          attempt.endedAt = Date.now();
          attempt.code = (err as { code?: string }).code ?? String(err);
          if (stop || pair.sender.status === 'closed') return;
          await sleep(RESEND_MS);
        }
      }
      await sleep(PAUSE_MS);
    }
  };
  const running = Promise.all(pairs.map(converse));
  // Also when an assertion below throws: the subtest then ends and reports.
  t.teardown(() => void (stop = true));
  const acked = () => pairs.flatMap((p) => p.attempts.filter((a) => a.seq !== undefined));

  await sleep(WARMUP_MS);
  t.ok(pairs.every((p) => p.attempts.some((a) => a.seq !== undefined)), `all ${pairs.length} conversations acknowledged before the kill`);
  const marks = workers.map((w) => w.mark());
  // The replica stops replicating: its link is cut, and it cannot authenticate to its master again.
  if (lagMs > 0) {
    await on(replica, 'CONFIG', 'SET', 'masterauth', 'not-the-password');
    await on(replica, 'CLIENT', 'KILL', 'TYPE', 'master');
  }
  const cutAt = Date.now();
  await sleep(lagMs);
  const killAt = Date.now();
  const watch = watchCluster(masters.find((m) => m !== victim)!, victim, replica, () => Date.now() - killAt);
  t.teardown(watch.stop);
  await victim.kill();
  const killedAt = Date.now();
  /**
   * Answers received before this are the victim's: it had died by killedAt, and its replica
   * cannot be promoted within a node timeout of that (answers after it are the replica's).
   */
  const victimUntil = killedAt + NODE_TIMEOUT_MS / 2;
  const byVictim = (a: Attempt) => a.pair.failed && a.seq !== undefined && a.endedAt < victimUntil;

  await until('the replica serves the failed slots', async () => (await masterOfUser([...onVictim][0]!)).port === replica.port, 30_000, 50);
  if (lagMs > 0) await on(replica, 'CONFIG', 'SET', 'masterauth', '');
  const after = (p: Pair) => p.attempts.filter((a) => a.seq !== undefined && a.startedAt > killedAt).length;
  await until(`${AFTER} sends acknowledged after the kill in every conversation with the victim's users`, () => pairs.every((p) => !p.failed || after(p) >= AFTER), 30_000);
  stop = true;
  await running;
  await watch.stop();

  // Every device catches up with its inbox (a reset one logs in again and is replayed it).
  for (const d of devices.values()) {
    await until(
      () => `${d.uid}'s device caught up (at ${d.client.lastSeq} of epoch ${d.client.inboxEpoch}, ${d.client.status})`,
      async () => {
        const { head, epoch } = await inbox.range(d.uid, 0, 0);
        return d.client.status === 'ready' && d.client.lastSeq === head && d.client.inboxEpoch === epoch;
      },
      20_000,
    );
  }
  // Fresh devices read what each inbox holds now.
  const held = new Map<string, Map<number, string>>();
  for (const [i, uid] of recipients.entries()) {
    const fresh = await device(workers[(i + 1) % 2]!, uid, `${uid}-fresh`, false);
    const { head } = await inbox.range(uid, 0, 0);
    await until(`${uid}'s fresh device read its inbox up to ${head}`, () => fresh.client.lastSeq === head);
    t.equal(new Set(fresh.shown.map((s) => s.content)).size, fresh.shown.length, `${uid}: no message stored twice`);
    held.set(uid, new Map(fresh.shown.map((s) => [s.seq, s.content])));
    fresh.client.close();
  }

  // Refusals: their codes, and whose.
  const refused = pairs.flatMap((p) => p.attempts.filter((a) => a.code !== undefined));
  const codes = [...new Set(refused.map((a) => a.code!))];
  t.same(codes.filter((c) => c !== 'SB_ERR_STORE_UNAVAILABLE'), [], `refusals are SB_ERR_STORE_UNAVAILABLE only (${refused.length})`);
  t.same(refused.filter((a) => !a.pair.failed).map((a) => `${a.content}: ${a.code}`), [], 'no send to a user on a surviving master is refused');
  // Service resumes: the first send started after the kill and acknowledged, to a user on the failed slots.
  const resumedAt = Math.min(...acked().filter((a) => a.pair.failed && a.startedAt > killedAt).map((a) => a.endedAt));
  const duringOutage = pairs.filter((p) => !p.failed).map((p) => p.attempts.filter((a) => a.seq !== undefined && a.startedAt >= killedAt && a.endedAt < resumedAt).length);
  t.ok(duringOutage.every((n) => n > 0), `every conversation with a user on a surviving master is acknowledged during the outage (${Math.min(...duringOutage)} to ${Math.max(...duringOutage)} sends each)`);

  // Every acknowledged message is in its recipient's inbox at its seq, but the victim's last ones.
  const lost = acked().filter((a) => held.get(a.pair.to)!.get(a.seq!) !== a.content);
  t.same(lost.filter((a) => !a.pair.failed).map((a) => `${a.content}@${a.seq}`), [], 'nothing acknowledged to a user on a surviving master is lost');
  const windowFrom = Math.min(cutAt, killAt) - LOSS_WINDOW_MS;
  t.same(
    lost.filter((a) => !(byVictim(a) && a.endedAt >= windowFrom)).map((a) => `${a.content}@${a.seq} acknowledged ${a.endedAt - killAt} ms after the kill`),
    [],
    `what is lost was acknowledged by the victim in its last moments (from ${LOSS_WINDOW_MS} ms before ${lagMs > 0 ? 'its replica stopped' : 'the kill'})`,
  );
  /** Per user on the victim: the head its inbox went back to (Infinity: it lost nothing). */
  const newHead = new Map<string, number>();
  for (const uid of onVictim) {
    const mine = lost.filter((a) => a.pair.to === uid);
    const first = Math.min(...mine.map((a) => a.seq!));
    newHead.set(uid, first - 1);
    const kept = acked().filter((a) => a.pair.to === uid && byVictim(a) && !mine.includes(a));
    t.ok(kept.every((a) => a.seq! < first), `${uid}: lost ${mine.length}, all after what the replica kept (its head went back to ${first - 1 === Infinity ? 'nothing' : first - 1})`);
  }

  // Devices: exactly once per epoch; everything the inbox holds shown (no silent skip); one that
  // had been sent a seq above its inbox's new head was reset.
  for (const d of devices.values()) {
    const epochs = new Map<number, string[]>();
    for (const s of d.shown) epochs.set(s.epoch, [...(epochs.get(s.epoch) ?? []), s.content]);
    t.ok([...epochs.values()].every((c) => new Set(c).size === c.length), `${d.uid}: no message shown twice in one epoch`);
    const seen = new Set(d.shown.map((s) => s.content));
    t.same([...held.get(d.uid)!].filter(([, c]) => !seen.has(c)).map(([seq, c]) => `${c}@${seq}`), [], `${d.uid}: shown everything its inbox holds (no silent skip)`);
    const before = Math.max(0, ...d.shown.filter((s) => s.at < resumedAt).map((s) => s.seq));
    const head = newHead.get(d.uid) ?? Infinity;
    if (before > head) t.ok(d.closings.includes('SB_ERR_INBOX_RESET') && d.resets > 0, `${d.uid}: sent up to ${before}, above the new head ${head}: closed with SB_ERR_INBOX_RESET, reset at its next login`);
    if (!onVictim.has(d.uid)) t.same([d.closings, d.resets], [[], 0], `${d.uid} (surviving master): never closed or reset`);
  }

  // The workers: running, and what they logged at error level is the store's unavailability.
  t.ok(workers.every((w) => w.alive), 'both workers are running');
  const errors = workers.flatMap((w, i) => w.logs((l) => l.level >= 50, marks[i]));
  t.same(errors.filter((l) => (l.err as { code?: string } | undefined)?.code !== 'SB_ERR_STORE_UNAVAILABLE').map((l) => l.msg), [], `every error logged is SB_ERR_STORE_UNAVAILABLE (${errors.length}: ${[...new Set(errors.map((l) => l.msg))].join(', ')})`);

  // The figures.
  const victimAcks = acked().filter(byVictim);
  const lastSecond = victimAcks.filter((a) => a.endedAt >= killAt - 1_000).length;
  const sinceCut = victimAcks.filter((a) => a.endedAt >= cutAt).length;
  const recoveredAt = pairs.filter((p) => p.failed).map((p) => {
    const lastRefusal = Math.max(killedAt, ...p.attempts.filter((a) => a.code !== undefined).map((a) => a.endedAt));
    return Math.min(...p.attempts.filter((a) => a.seq !== undefined && a.startedAt >= lastRefusal).map((a) => a.endedAt));
  });
  const slowest = Math.max(...pairs.filter((p) => !p.failed).flatMap((p) => p.attempts.filter((a) => a.startedAt >= killAt && a.startedAt < resumedAt).map((a) => a.endedAt - a.startedAt)));
  const { seen } = watch;
  const reset = [...devices.values()].filter((d) => d.resets > 0);
  t.comment(`cluster-node-timeout ${NODE_TIMEOUT_MS} ms, cluster-require-full-coverage ${fullCoverage ? 'yes' : 'no'}, replica ${lagMs > 0 ? `cut off ${lagMs} ms before the kill` : 'replicating to the end'}; ${pairs.length} conversations (${pairs.filter((p) => p.failed).length} with the victim's ${onVictim.size} users), ${acked().length} sends acknowledged`);
  t.comment(`refused: ${refused.length} (${codes.map((c) => `${c} ×${refused.filter((a) => a.code === c).length}`).join(', ') || 'none'}) on ${new Set(refused.map((a) => a.pair)).size} conversations`);
  t.comment(`acknowledged then lost: ${lost.length}, ${pct(lost.length, lastSecond)} of the ${lastSecond} the victim acknowledged in its last second${lagMs > 0 ? `, ${pct(lost.length, sinceCut)} of the ${sinceCut} since its replica stopped` : ''}; devices reset: ${reset.length} (${reset.map((d) => d.uid).join(', ') || 'none'})`);
  t.comment(`after the kill: failed flag ${ms(seen.failAt)}, replica promoted ${ms(seen.promotedAt)} (polled), first send acknowledged on the failed slots ${ms(resumedAt - killAt)}, every conversation acknowledged again ${ms(Math.max(...recoveredAt) - killAt)}`);
  const lookups = workers.reduce((n, w, i) => n + w.logs({ msg: 'route lookup failed; the recipient gets the message by sync' }, marks[i]).length, 0);
  t.comment(`users on the surviving masters: slowest send during the outage ${ms(slowest)}; cluster_state ${seen.states.join(', ')}; deliveries whose route lookup failed (the other worker nudged): ${lookups}`);

  for (const d of devices.values()) d.client.close();
  for (const s of senders) s.close();
}

t.test('a master killed under load, its replica up to date; cluster-require-full-coverage yes', (t) => killMasterUnderLoad(t, { name: 'a', fullCoverage: true, lagMs: 0 }));

t.test('a master killed under load, its replica lagging; cluster-require-full-coverage no', (t) => killMasterUnderLoad(t, { name: 'b', fullCoverage: false, lagMs: LAG_MS }));
