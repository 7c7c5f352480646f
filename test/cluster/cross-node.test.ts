// Three real worker processes, one real ZooKeeper and one real Redis: users connected to
// different workers talk to each other as if they shared one. Messages cross nodes in both
// directions (a PEER_DELIVER per holding worker), reach an offline user by sync wherever they
// log in, reach every device of a user spread over two workers, and keep each sender's order
// over a burst. Live checks start after the login rechecks are over (LOGIN_RECHECKS_MS), so a
// lost forward cannot be hidden by the inbox re-read a new session does.

import t from 'tap';
import { startZooKeeper } from '../helpers/zookeeper.js';
import { sleep, until } from '../../testkit/wait.js';
import { LOGIN_RECHECKS_MS, oneTo, startCluster, type WorkerProcess } from '../helpers/cluster.js';

const zk = await startZooKeeper(t);
const cluster = await startCluster(t, zk, { workers: 3 });
const [a, b, c] = cluster.workers as [WorkerProcess, WorkerProcess, WorkerProcess];

t.test('clients on different workers chat in both directions, acknowledged', async (t) => {
  const alice = await cluster.client(a, 'alice');
  const bob = await cluster.client(b, 'bob');
  const carol = await cluster.client(c, 'carol');
  const got = { alice: alice.got, bob: bob.got, carol: carol.got };
  await sleep(LOGIN_RECHECKS_MS);

  const exchanges = [
    [alice, 'bob'],
    [bob, 'alice'],
    [bob, 'carol'],
    [carol, 'bob'],
    [carol, 'alice'],
    [alice, 'carol'],
  ] as const;
  const expected = { alice: [] as string[], bob: [] as string[], carol: [] as string[] };
  for (const [sender, to] of exchanges) {
    const content = `${sender.uid}→${to}`;
    const result = await sender.send(to, content);
    expected[to].push(content);
    const shown = await got[to].atLeast(expected[to].length);
    const m = shown.at(-1)!;
    t.match(m, { from: sender.uid, to, content, seq: result.seq, msgId: result.msgId }, `${content}: delivered live across nodes at the acknowledged seq`);
  }
  for (const [uid, received] of Object.entries(got)) {
    t.same(received.messages.map((m) => m.content), expected[uid as keyof typeof expected], `${uid}: exactly the messages sent to them`);
    // Ascending, once each; the seqs in between are each user's own copies, which their sending device is not sent.
    t.same(received.seqs, [...new Set(received.seqs)].sort((x, y) => x - y), `${uid}: seqs ascending, once each`);
    t.equal(await cluster.inboxHead(uid), 4, `${uid}'s inbox: the 2 messages to them and the copies of the 2 they sent`);
  }

  // The acks went to the recipient's worker, which saves the position (write-behind, at the
  // latest when the session ends): the same device logging in on another worker with no
  // position of its own resumes after them, replaying nothing.
  // bob was last shown carol's message, his 4 (his 2 and 3 are copies of what he sent, passed over).
  t.same(got.bob.seqs, [1, 4]);
  await bob.logout();
  await until('b saved the position bob acknowledged', async () => (await cluster.cursorOf('bob', 'bob-device')) === 4);
  const bobAgain = await cluster.client(c, 'bob');
  const replayed = bobAgain.got;
  t.equal(bobAgain.lastSeq, 4, 'the replay on the other worker starts after the acknowledged seq 4');
  await sleep(200);
  t.same(replayed.messages, [], 'nothing acknowledged is shown again');
  const late = await alice.send('bob', 'after the move');
  t.match((await replayed.atLeast(1))[0], { content: 'after the move', seq: late.seq }, 'and live messages follow bob to the other worker');
  t.equal(late.seq, 5);
});

t.test('a user offline while messages arrive gets them all by sync on another worker', async (t) => {
  const alice = await cluster.client(a, 'alice2');
  const bob = await cluster.client(b, 'bob2');
  const sent: { content: string; seq: number }[] = [];
  for (let i = 0; i < 5; i++) {
    for (const sender of [alice, bob]) {
      const content = `${sender.uid}:${i}`;
      sent.push({ content, seq: (await sender.send('dave', content)).seq });
    }
  }
  t.same(
    sent.map((s) => s.seq),
    oneTo(10),
    'every send was acknowledged with the next seq of dave’s inbox',
  );
  t.same(await cluster.sessionsOf('dave'), [], 'dave has no session anywhere');

  const dave = await cluster.client(c, 'dave');
  const got = dave.got;
  await got.atLeast(10);
  await sleep(200);
  t.same(
    got.messages.map((m) => ({ content: m.content, seq: m.seq })),
    sent,
    'dave (on the third worker) got all ten by sync, in seq order, once each',
  );
});

t.test('a user on two workers gets every message on both devices', async (t) => {
  const phone = await cluster.client(a, 'erin', 'erin-phone');
  const tablet = await cluster.client(c, 'erin', 'erin-tablet');
  const onPhone = phone.got;
  const onTablet = tablet.got;
  const frank = await cluster.client(b, 'frank');
  const alice = await cluster.client(a, 'alice3');
  const records = await cluster.sessionsOf('erin');
  t.same(records.map((r) => r.nodeId).sort(), [a.nodeId, c.nodeId].sort(), 'Redis routes erin to both workers');
  await sleep(LOGIN_RECHECKS_MS);

  const sent: string[] = [];
  for (let i = 0; i < 5; i++) {
    // From a third worker (forwarded to both), and from the phone's worker (local + forward).
    for (const sender of [frank, alice]) {
      const content = `${sender.uid}:${i}`;
      await sender.send('erin', content);
      sent.push(content);
    }
  }
  await onPhone.atLeast(10);
  await onTablet.atLeast(10);
  await sleep(200);
  for (const [device, got] of [
    ['phone', onPhone],
    ['tablet', onTablet],
  ] as const) {
    t.same(got.seqs, oneTo(10), `${device}: seqs 1..10, once each`);
    t.same(
      got.messages.map((m) => m.content),
      sent,
      `${device}: every message, in the order sent`,
    );
  }
});

t.test('a burst from two workers to a third keeps each sender’s order, no loss, no duplicate', async (t) => {
  const BURST = 300;
  const alice = await cluster.client(a, 'alice4');
  const carol = await cluster.client(c, 'carol4');
  const bob = await cluster.client(b, 'bob4');
  const got = bob.got;
  await sleep(LOGIN_RECHECKS_MS);

  const send = (sender: typeof alice) => Promise.all(Array.from({ length: BURST }, (_, i) => sender.send('bob4', `${sender.uid}:${i}`)));
  const [fromAlice, fromCarol] = await Promise.all([send(alice), send(carol)]);
  await got.atLeast(2 * BURST, 20_000);
  await sleep(200);

  t.same(
    [...fromAlice, ...fromCarol].map((r) => r.seq).sort((x, y) => x - y),
    oneTo(2 * BURST),
    'the 600 sends were acknowledged with distinct seqs 1..600',
  );
  t.same(got.seqs, oneTo(2 * BURST), 'bob was shown 1..600 in seq order, each once');
  for (const [sender, results] of [
    [alice, fromAlice],
    [carol, fromCarol],
  ] as const) {
    const mine = got.from(sender.uid);
    t.same(
      mine.map((m) => m.content),
      Array.from({ length: BURST }, (_, i) => `${sender.uid}:${i}`),
      `${sender.uid}'s ${BURST} messages in the order sent`,
    );
    t.same(
      mine.map((m) => m.seq),
      results.map((r) => r.seq),
      `${sender.uid}'s messages at the seqs their sends were acknowledged with`,
    );
  }
});

t.test("own copies cross workers: what alice's phone sends reaches her laptop and her tablet on other workers, in her inbox order, never the phone", async (t) => {
  const phone = await cluster.client(a, 'alice5', 'phone', { ownCopies: true });
  const laptop = await cluster.client(b, 'alice5', 'laptop', { ownCopies: true });
  const bob = await cluster.client(c, 'bob5');
  await sleep(LOGIN_RECHECKS_MS);

  // Alternately: the phone to bob (an own copy for alice's inbox), bob to alice.
  const expected: [string, string][] = [];
  for (let i = 0; i < 4; i++) {
    const sent = await phone.send('bob5', `mine:${i}`);
    t.ok(sent.ownSeq > 0, 'the response gives the seq of the copy');
    expected.push(['alice5', `mine:${i}`]);
    await bob.send('alice5', `theirs:${i}`);
    expected.push(['bob5', `theirs:${i}`]);
  }
  await laptop.got.atLeast(8);
  await phone.got.atLeast(4);
  await sleep(300);
  t.same(laptop.got.seqs, oneTo(8), "the laptop: alice's seqs 1..8, once each");
  t.same(laptop.got.messages.map((m) => [m.from, m.content]), expected, 'the whole conversation, in order');
  t.ok(laptop.got.from('alice5').every((m) => m.own && m.originDevice === 'phone' && m.to === 'bob5'), 'her own, from the phone, to bob');
  t.same(phone.got.messages.map((m) => m.content), ['theirs:0', 'theirs:1', 'theirs:2', 'theirs:3'], 'the phone: only what bob sent');
  t.same(phone.got.seqs, [2, 4, 6, 8], 'at seqs that pass over its own');

  // A device that logs in later, on a third worker, gets the same by replay.
  const tablet = await cluster.client(c, 'alice5', 'tablet', { ownCopies: true });
  await tablet.got.atLeast(8);
  t.same(tablet.got.messages.map((m) => [m.from, m.content]), expected, 'the tablet by replay: the same conversation');
});
