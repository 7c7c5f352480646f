// A worker process killed with SIGKILL while users on other workers keep writing to the users
// connected to it. Its ZooKeeper session times out, so every survivor drops it ('worker left');
// the survivor with the lowest id, and only it, purges its session records from Redis; the
// survivors go on working. Every acknowledged message was in the recipient's inbox before its
// sender heard so: each reaches the recipient exactly once when they log in again elsewhere,
// whether they resume from their last position or start over on a new device.

import t from 'tap';
import { Redis } from 'ioredis';
import type { ImClient, SendResult } from '../../src/client/im-client.js';
import { startZooKeeper } from '../helpers/zookeeper.js';
import { sleep, until } from '../../testkit/wait.js';
import { LOGIN_RECHECKS_MS, ZK_SESSION_TIMEOUT_MS, oneTo, startCluster, type WorkerProcess } from '../helpers/cluster.js';

const zk = await startZooKeeper(t);

/** Sends each sender keeps in flight, and the pause between two sends. */
const WINDOW = 4;
const PAUSE_MS = 5;
/** Acknowledged sends per sender before the kill, and again after the purge. */
const BATCH = 30;

interface Acked {
  sender: string;
  to: string;
  content: string;
  result: SendResult;
}

t.test('SIGKILL of a worker: it leaves, its sessions are purged, no acknowledged message is lost', async (t) => {
  const cluster = await startCluster(t, zk, { workers: 3 });
  // The victim is the lowest id, so the purge is up to the lowest *survivor*.
  const [victim, b, c] = cluster.workers as [WorkerProcess, WorkerProcess, WorkerProcess];
  t.ok(victim.nodeId < b.nodeId && b.nodeId < c.nodeId, 'ids in start order');

  const recipients = ['hana', 'ivan'];
  const hana = await cluster.client(victim, 'hana', 'hana-phone');
  const ivan = await cluster.client(victim, 'ivan', 'ivan-phone');
  const hanaBefore = hana.got;
  const ivanBefore = ivan.got;
  const kim = await cluster.client(c, 'kim');
  const toKim = kim.got;
  const senders = [await cluster.client(b, 'sender-b'), await cluster.client(c, 'sender-c')];
  await sleep(LOGIN_RECHECKS_MS);

  const acked: Acked[] = [];
  const failed: string[] = [];
  let stop = false;
  const run = async (sender: ImClient) => {
    const inFlight = new Set<Promise<void>>();
    for (let i = 0; !stop; i++) {
      const to = recipients[i % recipients.length]!;
      const content = `${sender.uid}:${i}`;
      const p: Promise<void> = sender
        .send(to, content)
        .then(
          (result) => void acked.push({ sender: sender.uid, to, content, result }),
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
  t.ok(hanaBefore.messages.length > 0 && ivanBefore.messages.length > 0, 'the recipients were receiving live from both other workers');
  const marks = [b.mark(), c.mark()];
  await victim.kill();
  const ackedAtKill = acked.length;

  // Both survivors drop it once its ZooKeeper session has timed out.
  for (const [i, w] of [b, c].entries()) {
    await w.waitForLog({ msg: 'worker left', peer: victim.nodeId }, { from: marks[i], timeoutMs: ZK_SESSION_TIMEOUT_MS + 10_000 });
    t.pass(`${w.name} logged 'worker left' for the killed ${victim.name}`);
  }
  const ackedAtLeave = acked.length;
  const purge = await b.waitForLog({ msg: 'purged sessions of a departed worker', peer: victim.nodeId }, { from: marks[0] });
  t.equal(purge.purged, 2, `the lowest survivor ${b.name} purged the victim's 2 sessions`);
  t.ok(ackedAtLeave > ackedAtKill, `sends went on being acknowledged while the victim was dead but registered (${ackedAtLeave - ackedAtKill})`);
  for (const uid of recipients) t.same(await cluster.sessionsOf(uid), [], `${uid} has no session left in Redis`);
  t.equal(await redisExists(cluster.redis.url, `sb:node:{${victim.nodeId}}:sess`), 0, "the victim's node set is gone too");

  // Routing among the survivors is unaffected, and senders go on past the purge.
  const live = await senders[0]!.send('kim', 'still here');
  t.match((await toKim.atLeast(1))[0], { content: 'still here', seq: live.seq }, 'b → c still delivers live');
  const atPurge = new Map(senders.map((s) => [s.uid, ackedBy(s.uid)]));
  await until(`${BATCH} more acknowledged sends per sender`, () => senders.every((s) => ackedBy(s.uid) >= atPurge.get(s.uid)! + BATCH));
  stop = true;
  await running;
  t.same(failed, [], 'every send was acknowledged: the senders never noticed the crash');
  t.equal(c.logs({ msg: 'purged sessions of a departed worker' }).length, 0, `${c.name} (not the lowest) purged nothing`);
  t.comment(`${acked.length} acknowledged: ${ackedAtKill} before the kill, ${ackedAtLeave - ackedAtKill} until 'worker left', the rest after`);

  const head = (uid: string) => cluster.inboxHead(uid);

  // hana resumes on the same device from the position her SDK kept, on another worker.
  t.equal(hana.status, 'closed', "hana's connection died with the victim");
  const hanaPosition = hana.lastSeq!;
  const hanaAgain = await cluster.client(b, 'hana', 'hana-phone', { lastSeq: hanaPosition });
  const hanaAfter = hanaAgain.got;
  const hanaHead = await head('hana');
  await until(`hana processed her inbox up to ${hanaHead}`, () => hanaAgain.lastSeq === hanaHead);
  // ivan starts over on a new device on the third worker: the whole inbox.
  const ivanNew = await cluster.client(c, 'ivan', 'ivan-tablet');
  const ivanAfter = ivanNew.got;
  const ivanHead = await head('ivan');
  await until(`ivan's new device processed his inbox up to ${ivanHead}`, () => ivanNew.lastSeq === ivanHead);
  await sleep(200);

  t.same([...hanaBefore.seqs, ...hanaAfter.seqs], oneTo(hanaHead), `hana: 1..${hanaHead} exactly once (before the crash up to ${hanaPosition}, then resumed)`);
  t.same(ivanAfter.seqs, oneTo(ivanHead), `ivan's new device: 1..${ivanHead} exactly once`);
  for (const [uid, shown] of [
    ['hana', [...hanaBefore.messages, ...hanaAfter.messages]],
    ['ivan', ivanAfter.messages],
  ] as const) {
    const bySeq = new Map(shown.map((m) => [m.seq, m]));
    const mine = acked.filter((a) => a.to === uid);
    t.same(
      mine.filter((a) => bySeq.get(a.result.seq)?.content !== a.content).map((a) => `${a.content}@${a.result.seq}`),
      [],
      `${uid}: all ${mine.length} acknowledged messages shown, each at the seq its sender was told`,
    );
    t.equal(new Set(shown.map((m) => m.content)).size, shown.length, `${uid}: no message stored twice`);
    for (const sender of senders) {
      const order = shown.filter((m) => m.from === sender.uid).map((m) => Number(m.content.split(':')[1]));
      t.same(order, [...order].sort((x, y) => x - y), `${uid}: ${sender.uid}'s messages in the order sent`);
    }
  }

  // And every acknowledged message is on its sender's other devices: a new one gets each own copy once, at the own_seq its response gave.
  for (const sender of senders) {
    const other = await cluster.client(b, sender.uid, `${sender.uid}-tablet`, { ownCopies: true });
    const ownHead = await head(sender.uid);
    await until(`${sender.uid}'s new device processed its inbox up to ${ownHead}`, () => other.lastSeq === ownHead);
    const shown = other.got.messages;
    const bySeq = new Map(shown.map((m) => [m.seq, m]));
    const mine = acked.filter((a) => a.sender === sender.uid);
    t.same(
      mine.filter((a) => !(bySeq.get(a.result.ownSeq)?.own && bySeq.get(a.result.ownSeq)?.content === a.content)).map((a) => `${a.content}@${a.result.ownSeq}`),
      [],
      `${sender.uid}: all ${mine.length} acknowledged messages are its own copies, at their own_seq`,
    );
    t.equal(new Set(shown.map((m) => m.content)).size, shown.length, `${sender.uid}: no copy stored twice`);
  }
});

async function redisExists(url: string, key: string): Promise<number> {
  const redis = new Redis(url);
  try {
    return await redis.exists(key);
  } finally {
    redis.disconnect();
  }
}
