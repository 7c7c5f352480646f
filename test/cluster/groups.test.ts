// Group chat across real worker processes, one real ZooKeeper and one real Redis. Groups are
// created and changed as the gate does it: in the GroupStore on the cluster's Redis, then a
// GroupNotifier publish over Redis pub/sub (test/helpers/groups.ts). Members are SDK devices
// logged in with `groups` on different workers: a message stored once reaches every device of
// every member once, in group order, live (across workers by PEER_GROUP) or by sync at the next
// login on any worker; membership changes cut exactly at their event; non-members are refused;
// and one group message costs one PEER_GROUP per other worker, whatever the group's size,
// counted by a worker the test plays itself and by a relay on a real worker's peer port.

import t, { type Test } from 'tap';
import { isSwitchboardError } from '../../src/errors.js';
import { HeadType } from '../../src/protocol/types.js';
import { messageType } from '../../src/protocol/codec.js';
import { freePort } from '../../testkit/services.js';
import { sleep, until } from '../../testkit/wait.js';
import { TestCluster, type WorkerProcess } from '../helpers/cluster.js';
import { GroupAdmin, groupDevice, type GroupDevice } from '../helpers/groups.js';
import { FakePeer, PeerTap, groupFramesBy } from '../helpers/peer-frames.js';
import { startRedis } from '../helpers/redis.js';
import { startZooKeeper } from '../helpers/zookeeper.js';

const zk = await startZooKeeper(t);
const cluster = new TestCluster(t, zk, await startRedis(t));
const [a, b, c] = (await cluster.startWorkers(3)) as [WorkerProcess, WorkerProcess, WorkerProcess];
const admin = new GroupAdmin(t, cluster.redis.url);

const messageRequestType = messageType.root.lookupType('switchboard.MessageRequest');

/** Long enough for a stray delivery (a second copy, one past a departure) to have arrived. */
const SETTLE_MS = 300;

/** Whatever `promise` rejects with: its code. */
async function refusal(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (err) {
    return isSwitchboardError(err) ? err.code : String(err);
  }
  return 'stored';
}

/** After SETTLE_MS, what `device` was shown of `group` is exactly `expected` (`seq:content`, '#event'). */
async function shownExactly(t: Test, device: GroupDevice, group: string, expected: string[], what: string): Promise<void> {
  if (expected.length > 0) await device.got.atLeast(group, expected.length);
  await sleep(SETTLE_MS);
  t.same(device.got.summary(group), expected, what);
}

t.test('members on three workers: every device gets every message once, in group order, live; the sender no copy', async (t) => {
  const group = await admin.create('alice', ['bob', 'carol']);
  // alice's second device and bob's two devices on other workers than alice's phone.
  const alicePhone = await groupDevice(cluster, a, 'alice', 'alice-phone');
  const aliceLaptop = await groupDevice(cluster, b, 'alice', 'alice-laptop');
  const bobPhone = await groupDevice(cluster, b, 'bob', 'bob-phone');
  const bobTablet = await groupDevice(cluster, c, 'bob', 'bob-tablet');
  const carol = await groupDevice(cluster, c, 'carol', 'carol-phone');
  const dave = await groupDevice(cluster, a, 'dave', 'dave-phone');
  const members = { alicePhone, aliceLaptop, bobPhone, bobTablet, carol };
  for (const [name, d] of Object.entries(members)) t.same((await d.got.atLeast(group, 1)).map((s) => s.what), ['#created'], `${name} is shown the created event`);

  // One at a time from three workers: each is waited for on every other device before the next
  // goes out, so each arrived live (nothing re-reads a group's log on a timer).
  const sent = new Map<number, { device: GroupDevice; content: string }>();
  const others = (sender: GroupDevice) => Object.values(members).filter((d) => d !== sender);
  for (const [sender, content] of [
    [alicePhone, 'a1'],
    [bobTablet, 'b1'],
    [carol, 'c1'],
    [aliceLaptop, 'a2'],
    [bobPhone, 'b2'],
  ] as const) {
    const before = new Map(others(sender).map((d) => [d, d.got.of(group).length]));
    const { seq } = await sender.client.sendToGroup(group, content);
    sent.set(seq, { device: sender, content });
    for (const [d, n] of before) t.match((await d.got.atLeast(group, n + 1))[n], { seq, what: content, from: sender.client.uid }, `${content} reached ${d.client.deviceId} live`);
  }
  // Then two devices on different workers at once: the group's order interleaves them.
  const BURST = 25;
  const burst = await Promise.all(
    [alicePhone, bobTablet].map(async (sender) =>
      Promise.all(Array.from({ length: BURST }, async (_, i) => ({ sender, content: `${sender.client.deviceId}:${i}`, ...(await sender.client.sendToGroup(group, `${sender.client.deviceId}:${i}`)) }))),
    ),
  );
  for (const r of burst.flat()) sent.set(r.seq, { device: r.sender, content: r.content });
  const head = 1 + sent.size;
  t.same(
    [...sent.keys()].sort((x, y) => x - y),
    Array.from({ length: sent.size }, (_, i) => i + 2),
    `the ${sent.size} sends were acknowledged with the group's seqs 2..${head}, each once`,
  );
  t.equal(await admin.head(group, 'alice'), head, 'the log holds them and nothing else');
  for (const [sender, results] of burst.map((rs) => [rs[0]!.sender, rs] as const)) {
    t.same(
      results.map((r) => r.seq),
      [...results.map((r) => r.seq)].sort((x, y) => x - y),
      `${sender.client.deviceId}'s burst is stored in the order sent`,
    );
  }

  for (const [name, d] of Object.entries(members)) {
    const expected = ['1:#created', ...[...sent].filter(([, s]) => s.device !== d).sort(([x], [y]) => x - y).map(([seq, s]) => `${seq}:${s.content}`)];
    await shownExactly(t, d, group, expected, `${name}: every message of the others once, in group order, none of its own`);
  }
  t.ok(
    aliceLaptop.got.of(group).some((s) => s.from === 'alice'),
    "alice's laptop (another worker) is shown the messages her phone sent",
  );
  t.same(dave.got.of(group), [], 'a non-member is shown nothing');
});

t.test('offline members sync on another worker: what they missed after their acknowledged position, once', async (t) => {
  const group = await admin.create('olga', ['erin', 'frank']);
  const olga = await groupDevice(cluster, a, 'olga', 'olga-phone');
  let erin = await groupDevice(cluster, b, 'erin', 'erin-phone');
  await erin.got.atLeast(group, 1);
  await olga.client.sendToGroup(group, 'o1');
  await erin.got.atLeast(group, 2);
  // Her acks went to b, which saves the position when the session ends.
  await erin.client.logout();
  await admin.savedAtLeast(group, 'erin', 'erin-phone', 2);

  for (const text of ['o2', 'o3', 'o4']) await olga.client.sendToGroup(group, text);
  const missed = ['3:o2', '4:o3', '5:o4'];

  erin = await groupDevice(cluster, c, 'erin', 'erin-phone');
  await shownExactly(t, erin, group, missed, 'erin, back on another worker, is shown what came after her acknowledged position, once');
  // frank never logged in: his first device gets the group from its start (fewer entries than --group-sync-new).
  const frank = await groupDevice(cluster, c, 'frank', 'frank-phone');
  await shownExactly(t, frank, group, ['1:#created', '2:o1', ...missed], "frank's first login: the whole group, once");
  const before = [erin, frank].map((d) => [d, d.got.of(group).length] as const);
  await olga.client.sendToGroup(group, 'o5');
  for (const [d, n] of before) t.equal((await d.got.atLeast(group, n + 1))[n]?.what, 'o5', `${d.client.uid} gets the next one live there`);
  await erin.client.logout();
  await admin.savedAtLeast(group, 'erin', 'erin-phone', 6);
  const erinAgain = await groupDevice(cluster, a, 'erin', 'erin-phone');
  await shownExactly(t, erinAgain, group, [], 'and a third login (a third worker) replays nothing acknowledged');
});

t.test('a member removed mid-conversation gets its removal and nothing after; one added later nothing before', async (t) => {
  const group = await admin.create('paul', ['rita', 'sam']);
  const paul = await groupDevice(cluster, a, 'paul', 'paul-phone');
  const rita = await groupDevice(cluster, b, 'rita', 'rita-phone');
  const henry = await groupDevice(cluster, c, 'henry', 'henry-phone');
  let sam = await groupDevice(cluster, b, 'sam', 'sam-phone');
  await rita.got.atLeast(group, 1);
  await sam.got.atLeast(group, 1);
  await paul.client.sendToGroup(group, 'p1');
  await sam.got.atLeast(group, 2);
  await sam.client.logout();
  await admin.savedAtLeast(group, 'sam', 'sam-phone', 2);
  await paul.client.sendToGroup(group, 'p2');
  await rita.got.atLeast(group, 3);

  // rita (online on b) and sam (offline) are removed; the notifier reaches b over Redis.
  const removed = await admin.remove(group, 'paul', ['rita', 'sam']);
  t.equal(removed, 4);
  const removal = (await rita.got.atLeast(group, 4))[3]!;
  t.match(removal, { seq: 4, from: 'paul', event: { type: 'removed', actor: 'paul', uids: ['rita', 'sam'] } }, 'rita is shown her removal live');
  await paul.client.sendToGroup(group, 'p3');
  // henry (online on c, paul on a) is added: the notifier makes c's session of henry join.
  const added = await admin.add(group, 'paul', ['henry']);
  t.equal(added, 6);
  const addition = (await henry.got.atLeast(group, 1))[0]!;
  t.match(addition, { seq: 6, from: 'paul', event: { type: 'added', actor: 'paul', uids: ['henry'] } }, 'henry is shown his added event live');
  await paul.client.sendToGroup(group, 'p4');
  const { seq: fromHenry } = await henry.client.sendToGroup(group, 'h1');
  t.equal(fromHenry, 8, 'henry can send once added');

  const before = ['1:#created', '2:p1', '3:p2', '4:#removed'];
  await shownExactly(t, rita, group, before, 'rita: everything up to her removal, nothing after (live)');
  await shownExactly(t, henry, group, ['6:#added', '7:p4'], 'henry: from his added event on, nothing before; not his own h1');
  await shownExactly(t, paul, group, ['1:#created', '4:#removed', '6:#added', '8:h1'], "paul: the events and henry's message, none of his own");
  t.equal(await refusal(rita.client.sendToGroup(group, 'still here?')), 'SB_ERR_GROUP_NOT_MEMBER', 'rita can no longer send');

  // Later logins, on other workers than before.
  sam = await groupDevice(cluster, c, 'sam', 'sam-phone');
  await shownExactly(t, sam, group, ['3:p2', '4:#removed'], 'sam, removed while offline: what he missed up to his removal, nothing after');
  await rita.client.logout();
  const ritaAgain = await groupDevice(cluster, a, 'rita', 'rita-phone');
  const ritaNew = await groupDevice(cluster, c, 'rita', 'rita-tablet');
  await shownExactly(t, ritaAgain, group, [], 'rita logging in again is shown nothing more');
  t.same(ritaNew.got.summary(group), [], 'nor is a new device of hers');
  const henryNew = await groupDevice(cluster, b, 'henry', 'henry-tablet');
  await shownExactly(t, henryNew, group, ['6:#added', '7:p4', '8:h1'], "henry's new device on another worker: nothing before his addition");
});

t.test('non-members and unknown groups are refused, and nothing is stored or shown', async (t) => {
  const group = await admin.create('quinn', ['uma']);
  const quinn = await groupDevice(cluster, a, 'quinn', 'quinn-phone');
  const uma = await groupDevice(cluster, c, 'uma', 'uma-phone');
  const mallory = await groupDevice(cluster, b, 'mallory', 'mallory-phone');
  await uma.got.atLeast(group, 1);

  t.equal(await refusal(mallory.client.sendToGroup(group, 'let me in')), 'SB_ERR_GROUP_NOT_MEMBER', 'a non-member of an existing group');
  t.equal(await refusal(mallory.client.sendToGroup('gaaaaaaaaaaaa', 'anyone?')), 'SB_ERR_GROUP_NOT_FOUND', 'a well-formed id of no group');
  t.equal(await refusal(mallory.client.sendToGroup('../etc/passwd', 'x')), 'SB_ERR_BAD_GROUP', 'not a group id');
  const flood = await Promise.all(Array.from({ length: 50 }, (_, i) => refusal(mallory.client.sendToGroup(group, `spam ${i}`))));
  t.same(new Set(flood), new Set(['SB_ERR_GROUP_NOT_MEMBER']), 'fifty more, each refused');
  t.equal(await admin.head(group, 'quinn'), 1, 'nothing was appended');

  const { seq } = await quinn.client.sendToGroup(group, 'real');
  t.equal(seq, 2, "the members' next message is the group's seq 2");
  await shownExactly(t, uma, group, ['1:#created', '2:real'], 'the member is shown only the real message');
  t.same(mallory.got.of(group), [], 'the non-member is shown nothing of it');
});

t.test('one PEER_GROUP per other worker per group message, never one per member', async (t) => {
  // A worker the test plays (registered in the cluster's root: every worker dials it) and a
  // fourth real worker, d, whose peer port is reached through a relay that counts frames.
  const fake = await FakePeer.start(t, cluster);
  const peerPort = await freePort();
  const tap = await PeerTap.start(t, '127.0.0.2', peerPort);
  const d = await cluster.startWorker({ flags: { 'peer-port': peerPort, 'announce-host': '127.0.0.2' } });
  await cluster.waitForMesh();
  await until(() => `every worker linked to the fake peer (has ${fake.authenticated.join(', ')})`, () => [a, b, c, d].every((w) => fake.authenticated.includes(w.nodeId)));
  t.same(fake.refused, [], 'every worker completed the handshake with the fake peer');
  t.ok(
    tap.frames.some((f) => f.from === a.nodeId && f.message.type === HeadType.PEER_AUTH),
    "a's link to d goes through the relay",
  );

  const MEMBERS = 50;
  const M = 20;
  const uids = Array.from({ length: MEMBERS }, (_, i) => `member${String(i).padStart(2, '0')}`);
  const group = await admin.create('vera', uids);
  const vera = await groupDevice(cluster, a, 'vera', 'vera-phone');
  const members = await Promise.all(uids.map((uid) => groupDevice(cluster, d, uid, `${uid}-phone`)));
  await Promise.all(members.map((m) => m.got.atLeast(group, 1)));

  const seqs = await Promise.all(Array.from({ length: M }, async (_, i) => (await vera.client.sendToGroup(group, `v${i}`)).seq));
  await Promise.all(members.map((m) => m.got.atLeast(group, 1 + M)));
  await sleep(SETTLE_MS);
  const all = Array.from({ length: M }, (_, i) => i + 2);
  t.same([...seqs].sort((x, y) => x - y), all, `${M} messages, seqs 2..${M + 1}`);
  t.same(
    members.filter((m) => m.got.seqs(group).join() !== [1, ...all].join()).map((m) => m.client.uid),
    [],
    `all ${MEMBERS} members on d were shown the created event and all ${M} messages, once each, in order`,
  );

  t.same(Object.fromEntries(groupFramesBy(tap.frames, group)), { [a.nodeId]: M }, `the link a→d carried exactly ${M} PEER_GROUP frames for the ${MEMBERS} members there`);
  t.same(Object.fromEntries(groupFramesBy(fake.frames, group)), { [a.nodeId]: M }, `the fake peer got exactly ${M} from a (none from the workers that did not store them)`);
  const toFake = fake.frames.filter((f) => f.message.type === HeadType.PEER_GROUP && f.message.peerGroup?.group === group);
  t.same(
    toFake.map((f) => Number(f.message.peerGroup!.seq)).sort((x, y) => x - y),
    all,
    'one per seq',
  );
  const body = messageRequestType.decode(toFake[0]!.message.peerGroup!.body!);
  t.match(body, { from: 'vera', group, to: group }, 'carrying the stored message once, with the group id');
  t.same(
    [...tap.frames, ...fake.frames].filter((f) => f.message.type === HeadType.PEER_DELIVER && uids.includes(f.message.peerDeliver?.uid ?? '')).length,
    0,
    'and no per-member PEER_DELIVER',
  );
});

