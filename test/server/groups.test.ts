// Group chat on one worker, over real sockets: a message stored once reaches every device of
// every member in group order (the sender's own device answered by its response only), live and
// by replay at login; membership changes made at the gate (the store plus the notifier, as the
// gate does) reach members live; a removed member gets nothing after its removal, an added one
// nothing before; non-members, unknown groups, forged events and logins without acks are refused.

import t, { type Test } from 'tap';
import { startNode, type TestNode } from '../helpers/node.js';
import { connect, connectLoggedIn } from '../helpers/raw-session.js';
import { isType, seqOf, u64, type RawClient } from '../../testkit/raw-client.js';
import { HeadType, ResultCode, type ImMessage } from '../../src/protocol/types.js';
import { encodeMessageRequest } from '../../src/protocol/codec.js';
import { MemoryGroupStore } from '../../src/groups/memory-group-store.js';
import { MemoryGroupNotifier, type GroupChange, type GroupNotifierListener } from '../../src/groups/group-notifier.js';

const login = (t: Test, tn: TestNode, uid: string, deviceId = 'dev-1') => connectLoggedIn(t, tn.port, uid, tn.token(uid), deviceId, { acks: true, groups: true });

const isGroupDelivery = (group: string) => (m: ImMessage) => m.type === HeadType.MESSAGE_REQUEST && m.messageRequest?.group === group;

/** The next `n` deliveries of `group`, acknowledged. */
async function groupDeliveries(client: RawClient, group: string, n: number): Promise<ImMessage[]> {
  const out: ImMessage[] = [];
  for (let i = 0; i < n; i++) out.push(await client.next(isGroupDelivery(group)));
  if (n > 0) client.groupAck(group, seqOf(out[n - 1]!));
  return out;
}

const summary = (ms: ImMessage[]) => ms.map((m) => `${seqOf(m)}:${m.messageRequest?.event ? JSON.parse(m.messageRequest.event).type : m.messageRequest?.content}`);

async function nothingMoreOf(t: Test, client: RawClient, group: string, what: string): Promise<void> {
  await client.roundTrip();
  t.same(client.takeDeliveries().filter(isGroupDelivery(group)).map(seqOf), [], what);
}

/** Creates a group as the gate does: in the store, then tells the workers. */
async function createGroup(tn: TestNode, owner: string, members: string[]) {
  const group = await tn.node.groups.create(owner, 'team', members);
  tn.node.groupNotifier.publish({ group: group.id, seq: 1, added: [owner, ...members] });
  return group.id;
}

/** A group of alice and bob, both logged in and past its created event. */
async function aliceAndBob(t: Test, tn: TestNode) {
  const id = await createGroup(tn, 'alice', ['bob']);
  const alice = await login(t, tn, 'alice');
  const bob = await login(t, tn, 'bob');
  await groupDeliveries(alice, id, 1);
  await groupDeliveries(bob, id, 1);
  return { id, alice, bob };
}

t.test('a group message reaches every device of every member once, in group order', async (t) => {
  const tn = await startNode(t);
  const id = await createGroup(tn, 'alice', ['bob', 'carol']);
  const alice = await login(t, tn, 'alice', 'phone');
  const alice2 = await login(t, tn, 'alice', 'laptop');
  const bob = await login(t, tn, 'bob');
  const carol = await login(t, tn, 'carol');
  const dave = await login(t, tn, 'dave');
  for (const c of [alice, alice2, bob, carol]) t.same(summary(await groupDeliveries(c, id, 1)), ['1:created'], 'a new device gets the created event');

  const seqs: string[] = [];
  for (const text of ['one', 'two', 'three']) {
    const response = await alice.response(alice.groupChat(id, text));
    t.equal(response.messageResponse?.result, true, `${text} stored`);
    seqs.push(u64(response.messageResponse?.seq));
  }
  t.same(seqs, ['2', '3', '4'], "the response carries the group's seq");
  for (const [name, c] of [['alice laptop', alice2], ['bob', bob], ['carol', carol]] as const) {
    const got = await groupDeliveries(c, id, 3);
    t.same(summary(got), ['2:one', '3:two', '4:three'], `${name} gets them in group order`);
    t.equal(got[0]!.messageRequest?.from, 'alice');
    t.equal(got[0]!.messageRequest?.to, id, 'to is the group');
    t.ok(Number(u64(got[0]!.messageRequest?.storedAt)) > 0, 'stamped with the server time');
  }
  await nothingMoreOf(t, alice, id, "the sending device gets no copy of its own messages");
  await nothingMoreOf(t, dave, id, 'a non-member gets nothing');
});

t.test('an offline member gets what it missed at its next login, from its acknowledged position', async (t) => {
  const tn = await startNode(t);
  const id = await createGroup(tn, 'alice', ['bob']);
  const alice = await login(t, tn, 'alice');
  let bob = await login(t, tn, 'bob');
  await groupDeliveries(alice, id, 1);
  await groupDeliveries(bob, id, 1);
  await alice.response(alice.groupChat(id, 'a'));
  await groupDeliveries(bob, id, 1);
  await bob.roundTrip();
  bob.destroy();
  for (const text of ['b', 'c']) await alice.response(alice.groupChat(id, text));
  bob = await login(t, tn, 'bob');
  t.same(summary(await groupDeliveries(bob, id, 2)), ['3:b', '4:c'], 'replayed after its acknowledged position, nothing twice');
  await nothingMoreOf(t, bob, id, 'nothing more');
});

t.test('membership changes: the added member gets nothing before, the removed one nothing after', async (t) => {
  const tn = await startNode(t);
  const id = await createGroup(tn, 'alice', ['bob']);
  const alice = await login(t, tn, 'alice');
  const bob = await login(t, tn, 'bob');
  const carol = await login(t, tn, 'carol');
  await groupDeliveries(alice, id, 1);
  await groupDeliveries(bob, id, 1);
  await alice.response(alice.groupChat(id, 'before carol'));
  await groupDeliveries(bob, id, 1);

  const added = await tn.node.groups.addMembers(id, 'alice', ['carol']);
  tn.node.groupNotifier.publish({ group: id, seq: added.seq!, added: added.uids });
  const event = (await groupDeliveries(carol, id, 1))[0]!;
  t.same(JSON.parse(event.messageRequest!.event!), { type: 'added', actor: 'alice', uids: ['carol'] }, 'carol gets her added event live');
  t.equal(event.messageRequest?.from, 'alice', 'from the actor');
  t.same(summary(await groupDeliveries(bob, id, 1)), ['3:added'], 'bob sees it too, in order');

  await carol.response(carol.groupChat(id, 'hi all'));
  t.same(summary(await groupDeliveries(bob, id, 1)), ['4:hi all']);
  await nothingMoreOf(t, carol, id, 'carol got nothing from before she joined');

  const removed = await tn.node.groups.removeMembers(id, 'alice', ['bob']);
  tn.node.groupNotifier.publish({ group: id, seq: removed.seq! });
  t.same(summary(await groupDeliveries(bob, id, 1)), ['5:removed'], 'bob gets his removal');
  await alice.response(alice.groupChat(id, 'after bob'));
  t.same(summary(await groupDeliveries(carol, id, 2)), ['5:removed', '6:after bob']);
  await nothingMoreOf(t, bob, id, 'bob gets nothing after his removal');
  const refused = await bob.response(bob.groupChat(id, 'still here?'));
  t.equal(refused.messageResponse?.errorCode, 'SB_ERR_GROUP_NOT_MEMBER', 'a removed member cannot send');
});

t.test('refusals: non-members, unknown groups, bad ids, forged events, logins without acks', async (t) => {
  const tn = await startNode(t);
  const id = await createGroup(tn, 'alice', []);
  const mallory = await login(t, tn, 'mallory');
  const alice = await login(t, tn, 'alice');
  await groupDeliveries(alice, id, 1);

  const notMember = await mallory.response(mallory.groupChat(id, 'let me in'));
  t.equal(notMember.messageResponse?.errorCode, 'SB_ERR_GROUP_NOT_MEMBER');
  t.equal(notMember.messageResponse?.code, ResultCode.GROUP_REFUSED);
  const unknown = await mallory.response(mallory.groupChat('gaaaaaaaaaaaa', 'x'));
  t.equal(unknown.messageResponse?.errorCode, 'SB_ERR_GROUP_NOT_FOUND');
  const bad = await mallory.response(mallory.groupChat('../etc/passwd', 'x'));
  t.equal(bad.messageResponse?.errorCode, 'SB_ERR_BAD_GROUP');
  const forged = await alice.response(alice.groupChat(id, '', { event: '{"type":"added","actor":"alice","uids":["mallory"]}' }));
  t.equal(forged.messageResponse?.errorCode, 'SB_ERR_BAD_REQUEST', 'a client cannot send an event');
  const otherTo = await alice.response(alice.groupChat(id, 'x', { to: 'bob' }));
  t.equal(otherTo.messageResponse?.errorCode, 'SB_ERR_BAD_REQUEST', 'to must be the group or empty');
  await nothingMoreOf(t, alice, id, 'nothing refused was stored');
  t.equal((await tn.node.groups.get(id, 'alice')).head, 1, 'the log holds only the created event');

  const plain = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'), 'plain', { acks: true });
  const noGroups = await plain.response(plain.groupChat(id, 'x'));
  t.equal(noGroups.messageResponse?.errorCode, 'SB_ERR_BAD_REQUEST', 'a device that did not log in with groups cannot send to one');
  await nothingMoreOf(t, plain, id, 'and gets no group deliveries');

  const legacy = await connect(t, tn.port);
  const response = await legacy.login('alice', tn.token('alice'), 'x', { groups: true });
  t.equal(response.loginResponse?.errorCode, 'SB_ERR_BAD_REQUEST', 'groups without acks is refused');
});

t.test('a login with groups and a device id outside the rule (empty, over 128 characters) is refused as a bad request, not failed', async (t) => {
  // Found by the live-server fuzz: the group store refused the id while the login read the
  // member's group positions, and the login failed with SB_ERR_INTERNAL.
  const tn = await startNode(t);
  await createGroup(tn, 'alice', ['bob']);
  for (const [who, deviceId] of [
    ['a member', ''],
    ['a member', 'd'.repeat(129)],
    ['a user in no group yet', ''],
  ] as const) {
    const client = await connect(t, tn.port);
    const uid = who === 'a member' ? 'bob' : 'carol';
    const response = await client.login(uid, tn.token(uid), deviceId, { acks: true, groups: true });
    t.match(response.loginResponse, { result: false, errorCode: 'SB_ERR_BAD_REQUEST', info: /deviceId of 1 to 128 characters/ }, `${who}, device id of ${deviceId.length} characters: refused`);
  }
  const fine = await connect(t, tn.port);
  t.equal((await fine.login('bob', tn.token('bob'), 'd'.repeat(128), { acks: true, groups: true })).loginResponse?.result, true, 'a device id of 128 characters logs in');
  const plain = await connect(t, tn.port);
  t.equal((await plain.login('bob', tn.token('bob'), '', { acks: true })).loginResponse?.result, true, 'without groups, the empty device id still logs in (a development token)');
});

t.test('a resent message (same msg_id) is stored once', async (t) => {
  const tn = await startNode(t);
  const id = await createGroup(tn, 'alice', ['bob']);
  const alice = await login(t, tn, 'alice');
  const bob = await login(t, tn, 'bob');
  await groupDeliveries(bob, id, 1);
  const first = await alice.response(alice.groupChat(id, 'once', { msgId: 77 }));
  const again = await alice.response(alice.groupChat(id, 'once', { msgId: 77 }));
  t.equal(u64(again.messageResponse?.seq), u64(first.messageResponse?.seq), 'the original seq');
  t.equal(again.messageResponse?.duplicate, true);
  t.same(summary(await groupDeliveries(bob, id, 1)), ['2:once']);
  await nothingMoreOf(t, bob, id, 'delivered once');
});

t.test('a fan-out larger than a slice reaches everyone, in order, with other traffic interleaved', async (t) => {
  const tn = await startNode(t, { groupFanoutSlice: 16, maxConnectionsPerIp: 0 });
  const members = Array.from({ length: 60 }, (_, i) => `m${i}`);
  const id = await createGroup(tn, 'alice', members);
  const alice = await login(t, tn, 'alice');
  const clients = await Promise.all(members.map((m) => login(t, tn, m)));
  await Promise.all(clients.map((c) => groupDeliveries(c, id, 1)));
  for (let i = 0; i < 5; i++) alice.groupChat(id, `m${i}`);
  const got = await Promise.all(clients.map((c) => groupDeliveries(c, id, 5)));
  for (const [i, g] of got.entries()) {
    if (summary(g).join() !== '2:m0,3:m1,4:m2,5:m3,6:m4') t.fail(`member ${i} got ${summary(g)}`);
  }
  t.pass('60 members x 5 messages in slices of 16, each in order');
  await Promise.all(clients.slice(0, 5).map((c) => nothingMoreOf(t, c, id, 'nothing twice')));
});

t.test('an unacknowledged group delivery is sent again after the ack timeout', async (t) => {
  const tn = await startNode(t, { ackTimeoutMs: 200 });
  const id = await createGroup(tn, 'alice', ['bob']);
  const alice = await login(t, tn, 'alice');
  const bob = await login(t, tn, 'bob');
  await groupDeliveries(bob, id, 1);
  await alice.response(alice.groupChat(id, 'ack me'));
  const first = await bob.next(isGroupDelivery(id));
  const again = await bob.next(isGroupDelivery(id), 5000);
  t.equal(seqOf(again), seqOf(first), 'resent with the same group seq');
  bob.groupAck(id, seqOf(again));
  t.ok(isType(HeadType.MESSAGE_REQUEST)(again));
});

t.test("the sending device's position covers its own messages: its next login replays none of them", async (t) => {
  const tn = await startNode(t);
  const id = await createGroup(tn, 'alice', ['bob']);
  let alice = await login(t, tn, 'alice');
  const bob = await login(t, tn, 'bob');
  await groupDeliveries(alice, id, 1);
  await groupDeliveries(bob, id, 1);
  await alice.response(alice.groupChat(id, 'mine 1'));
  await bob.response(bob.groupChat(id, 'from bob'));
  const fromBob = await alice.next(isGroupDelivery(id));
  await alice.response(alice.groupChat(id, 'mine 2'));
  // Acknowledges bob's entry only: the device was never sent its own entry after it.
  alice.groupAck(id, seqOf(fromBob));
  await alice.roundTrip();
  alice.destroy();
  await bob.response(bob.groupChat(id, 'later'));
  alice = await login(t, tn, 'alice');
  t.same(summary(await groupDeliveries(alice, id, 1)), ['5:later'], 'only what came after its own last message');
  await nothingMoreOf(t, alice, id, 'none of its own messages again');
});

t.test('a resend of a message stored but never fanned out (its worker died) reaches the members', async (t) => {
  const tn = await startNode(t);
  const id = await createGroup(tn, 'alice', ['bob']);
  const alice = await login(t, tn, 'alice');
  const bob = await login(t, tn, 'bob');
  await groupDeliveries(bob, id, 1);
  // Stored as a worker does it, then that worker is gone before forwarding it: nobody is told.
  const body = encodeMessageRequest({ msgId: 99, from: 'alice', to: id, group: id, content: 'stored, never forwarded' });
  await tn.node.groups.append(id, 'alice', '99', body);
  await nothingMoreOf(t, bob, id, 'bob does not know about it yet');
  const again = await alice.response(alice.groupChat(id, 'stored, never forwarded', { msgId: 99 }));
  t.equal(again.messageResponse?.duplicate, true, 'the resend is a duplicate');
  t.same(summary(await groupDeliveries(bob, id, 1)), ['2:stored, never forwarded'], 'and bob gets the stored copy');
});

t.test("a membership change costs the worker one read of the group's log, not one per member device", async (t) => {
  const store = new MemoryGroupStore();
  let reads = 0;
  const read = store.read.bind(store);
  store.read = (...args) => {
    reads++;
    return read(...args);
  };
  const tn = await startNode(t, { maxConnectionsPerIp: 0 }, { groups: store });
  const members = Array.from({ length: 20 }, (_, i) => `m${i}`);
  const id = await createGroup(tn, 'alice', members);
  const clients = await Promise.all(members.map((m) => login(t, tn, m)));
  await Promise.all(clients.map((c) => groupDeliveries(c, id, 1)));
  reads = 0;
  const seq = await tn.node.groups.update(id, 'alice', { name: 'renamed' });
  tn.node.groupNotifier.publish({ group: id, seq });
  const got = await Promise.all(clients.map((c) => groupDeliveries(c, id, 1)));
  t.ok(got.every((g) => JSON.parse(g[0]!.messageRequest!.event!).name === 'renamed'), 'every member device gets the event');
  t.equal(reads, 1, 'read once for the 20 devices');
});

t.test("a read of the log that finds the sender's entry before its response is out holds it back: the sender gets no copy", async (t) => {
  const store = new MemoryGroupStore();
  // alice's append is stored at once but answered only when the test says so: meanwhile bob's
  // next entry reaches her stream as a gap, and the read that fills it finds her own entry.
  let answer: (() => void) | undefined;
  const append = store.append.bind(store);
  store.append = async (group, sender, msgId, body) => {
    const result = await append(group, sender, msgId, body);
    if (sender === 'alice') await new Promise<void>((resolve) => (answer = resolve));
    return result;
  };
  const tn = await startNode(t, {}, { groups: store });
  const { id, alice, bob } = await aliceAndBob(t, tn);

  const mine = alice.groupChat(id, 'mine');
  while (answer === undefined) await alice.roundTrip();
  await bob.response(bob.groupChat(id, 'from bob'));
  await alice.roundTrip();
  t.same(alice.takeDeliveries().filter(isGroupDelivery(id)).map(seqOf), [], "alice is sent neither her entry nor bob's after it before her response");
  answer();
  const response = await alice.response(mine);
  t.equal(u64(response.messageResponse?.seq), '2', 'her response carries seq 2');
  t.same(summary(await groupDeliveries(alice, id, 1)), ['3:from bob'], "then bob's entry, after it");
  await nothingMoreOf(t, alice, id, 'and never a copy of her own');
  t.same(summary(await groupDeliveries(bob, id, 1)), ['2:mine'], 'bob gets hers');
});

t.test('removed, then added back before its old stream was swept: the member gets its new `added` event and what follows, live', async (t) => {
  const tn = await startNode(t);
  const { id, alice, bob } = await aliceAndBob(t, tn);
  const removed = await tn.node.groups.removeMembers(id, 'alice', ['bob']);
  tn.node.groupNotifier.publish({ group: id, seq: removed.seq! });
  t.same(summary(await groupDeliveries(bob, id, 1)), ['2:removed'], 'bob gets (and acknowledges) his removal');
  // Before the sweep drops his stream (which reads up to the removal), he is added back.
  const added = await tn.node.groups.addMembers(id, 'alice', ['bob']);
  tn.node.groupNotifier.publish({ group: id, seq: added.seq!, added: added.uids });
  await alice.response(alice.groupChat(id, 'welcome back'));
  t.same(summary(await groupDeliveries(bob, id, 2)), ['3:added', '4:welcome back'], 'bob gets his new added event and the message after it');
  await alice.response(alice.groupChat(id, 'later'));
  t.same(summary(await groupDeliveries(bob, id, 1)), ['5:later'], 'and the group goes on reaching him live');
});

t.test('an entry that reaches the worker before the `added` change reaches the added member', async (t) => {
  const tn = await startNode(t);
  const id = await createGroup(tn, 'alice', []);
  const carol = await login(t, tn, 'carol');
  const added = await tn.node.groups.addMembers(id, 'alice', ['carol']);
  // alice, on another worker, sends right away: stored as seq 3 and forwarded here before the change arrives.
  const body = encodeMessageRequest({ msgId: 5, from: 'alice', to: id, group: id, content: 'hi carol', storedAt: Date.now() });
  const stored = await tn.node.groups.append(id, 'alice', '5', body);
  tn.node.server.local.deliverGroup(id, stored.seq, body);
  tn.node.groupNotifier.publish({ group: id, seq: added.seq!, added: added.uids });
  t.same(summary(await groupDeliveries(carol, id, 2)), ['2:added', '3:hi carol'], 'carol gets her added event and the message after it');
});

/** A notifier whose subscription can be down: changes published meanwhile are lost, and missed() is reported when it is back. */
class LossyNotifier extends MemoryGroupNotifier {
  down = false;
  readonly #listeners: GroupNotifierListener[] = [];
  override publish(change: GroupChange): void {
    if (!this.down) super.publish(change);
  }
  override subscribe(listener: GroupNotifierListener): () => void {
    this.#listeners.push(listener);
    return super.subscribe(listener);
  }
  back(): void {
    this.down = false;
    for (const l of this.#listeners) l.missed();
  }
}

t.test('a member added while the notifier was down gets the group once it reports the changes missed', async (t) => {
  const notifier = new LossyNotifier();
  const tn = await startNode(t, {}, { groupNotifier: notifier });
  const id = await createGroup(tn, 'alice', []);
  const alice = await login(t, tn, 'alice');
  const carol = await login(t, tn, 'carol');
  await groupDeliveries(alice, id, 1);
  notifier.down = true;
  const added = await tn.node.groups.addMembers(id, 'alice', ['carol']);
  notifier.publish({ group: id, seq: added.seq!, added: added.uids });
  notifier.back();
  t.same(summary(await groupDeliveries(alice, id, 1)), ['2:added'], 'alice, a member already, reads the event');
  t.same(summary(await groupDeliveries(carol, id, 1)), ['2:added'], 'carol, online, gets her added event');
  await alice.response(alice.groupChat(id, 'hi carol'));
  t.same(summary(await groupDeliveries(carol, id, 1)), ['3:hi carol'], 'and the group live from then on');
});

t.test('a resend after the ack timeout skips the device its own messages too', async (t) => {
  const tn = await startNode(t, { ackTimeoutMs: 200 });
  const { id, alice, bob } = await aliceAndBob(t, tn);
  await bob.response(bob.groupChat(id, 'from bob'));
  t.same(summary([await alice.next(isGroupDelivery(id))]), ['2:from bob'], 'alice is sent bob\'s message and does not acknowledge it');
  t.equal(u64((await alice.response(alice.groupChat(id, 'mine'))).messageResponse?.seq), '3', 'then sends her own, seq 3');
  t.same(summary([await alice.next(isGroupDelivery(id))]), ['2:from bob'], 'the ack timeout sends 2 again');
  await nothingMoreOf(t, alice, id, 'and not her own 3');
  alice.groupAck(id, 2);
  await alice.roundTrip();
  await alice.response(alice.groupChat(id, 'mine again'));
  await bob.response(bob.groupChat(id, 'after'));
  t.same(summary(await groupDeliveries(alice, id, 1)), ['5:after'], 'her ack of 2 covered her own 3 and 4: the next delivery is 5');
});

t.test("a device that sends without acknowledging keeps at most 256 of its own seqs remembered", async (t) => {
  const tn = await startNode(t, { ackTimeoutMs: 60_000 });
  const { id, alice, bob } = await aliceAndBob(t, tn);
  await bob.response(bob.groupChat(id, 'from bob'));
  await alice.next(isGroupDelivery(id));
  // Never acknowledging bob's 2, each of her own entries after it must be remembered to be skipped.
  for (let i = 0; i < 300; i++) await alice.response(alice.groupChat(id, `mine ${i}`));
  const stream = tn.node.server.sessions.byUser('alice')[0]!.groups!.get(id)!;
  t.equal(stream.own.size, 256, 'the 300 own seqs are bounded to the latest 256');
  t.equal(Math.min(...stream.own), 302 - 255, 'the oldest forgotten first');
  alice.groupAck(id, 2);
  await alice.roundTrip();
  t.equal(stream.acked, 2, "her ack of 2 cannot cover her own 3.. once 3's seq is forgotten");
  t.equal(stream.own.size, 256, 'so the rest stay remembered');
  await nothingMoreOf(t, alice, id, 'and none of her own is sent to her');
});

t.test('a resend to every device of a large group at once reads the log at most 64 reads at a time and writes a slice a turn, and reaches every device', async (t) => {
  const store = new MemoryGroupStore();
  let reading = 0;
  let most = 0;
  const read = store.read.bind(store);
  store.read = async (...args) => {
    most = Math.max(most, ++reading);
    try {
      await new Promise((resolve) => setTimeout(resolve, 5));
      return await read(...args);
    } finally {
      reading--;
    }
  };
  // A slice of 16: the resends' writes span turns, reads waiting for one with budget left.
  const tn = await startNode(t, { maxConnectionsPerIp: 0, ackTimeoutMs: 300, groupFanoutSlice: 16 }, { groups: store });
  const members = Array.from({ length: 200 }, (_, i) => `m${i}`);
  const id = await createGroup(tn, 'alice', members);
  const alice = await login(t, tn, 'alice');
  const clients = await Promise.all(members.map((m) => login(t, tn, m)));
  await Promise.all(clients.map((c) => groupDeliveries(c, id, 1)));
  await groupDeliveries(alice, id, 1);
  await alice.response(alice.groupChat(id, 'everyone'));
  // Received, never acknowledged: after the ack timeout all 200 streams read the log at once.
  // (A device slow to acknowledge its created event under load may be sent that again too: only 2 counts.)
  const second = (m: ImMessage) => isGroupDelivery(id)(m) && seqOf(m) === 2;
  await Promise.all(clients.map((c) => c.next(second)));
  most = 0;
  const again = await Promise.all(clients.map(async (c) => summary([await c.next(second, 10_000)])));
  t.same(again.filter((s) => s[0] !== '2:everyone'), [], 'every device is sent the message again');
  t.ok(most > 1 && most <= 64, `at most 64 reads at once (${most})`);
});

t.test('removed and added back, both changes heard before the removal was read: the member reads on', async (t) => {
  const store = new MemoryGroupStore();
  // Reads take 30 ms (a Redis round trip on a busy worker): both changes arrive within one.
  const read = store.read.bind(store);
  store.read = async (...args) => {
    await new Promise((resolve) => setTimeout(resolve, 30));
    return read(...args);
  };
  const tn = await startNode(t, {}, { groups: store });
  const { id, alice, bob } = await aliceAndBob(t, tn);
  const removed = await tn.node.groups.removeMembers(id, 'alice', ['bob']);
  const added = await tn.node.groups.addMembers(id, 'alice', ['bob']);
  tn.node.groupNotifier.publish({ group: id, seq: removed.seq! });
  tn.node.groupNotifier.publish({ group: id, seq: added.seq!, added: added.uids });
  t.same(summary(await groupDeliveries(bob, id, 1)), ['2:removed'], 'bob gets (and acknowledges) his removal');
  t.same(summary(await groupDeliveries(bob, id, 1)), ['3:added'], 'then his new added event');
  await alice.response(alice.groupChat(id, 'welcome back'));
  t.same(summary(await groupDeliveries(bob, id, 1)), ['4:welcome back'], 'and the group after it');
});

t.test('an append issued while its stream waits for a read slot gets no copy before its response', async (t) => {
  const store = new MemoryGroupStore();
  let slow = false;
  // Read at once, answered 200 ms later (the reply's way back): a read sees what was stored before it was issued.
  const read = store.read.bind(store);
  store.read = async (...args) => {
    const result = await read(...args);
    if (slow) await new Promise((resolve) => setTimeout(resolve, 200));
    return result;
  };
  let answer: (() => void) | undefined;
  const append = store.append.bind(store);
  store.append = async (group, sender, msgId, body) => {
    const result = await append(group, sender, msgId, body);
    if (sender === 'alice') await new Promise<void>((resolve) => (answer = resolve));
    return result;
  };
  const tn = await startNode(t, { maxConnectionsPerIp: 0 }, { groups: store });
  const members = Array.from({ length: 70 }, (_, i) => `m${i}`);
  const id = await createGroup(tn, 'alice', members);
  const clients: RawClient[] = [];
  for (const m of members) clients.push(await login(t, tn, m));
  // alice last: her stream is among the last a nudge of everyone starts, so it waits for a slot.
  const alice = await login(t, tn, 'alice');
  await Promise.all([...clients, alice].map((c) => groupDeliveries(c, id, 1)));
  slow = true;
  tn.node.server.local.nudge();
  const mine = alice.groupChat(id, 'mine');
  while (answer === undefined) await alice.roundTrip();
  await new Promise((resolve) => setTimeout(resolve, 700));
  await alice.roundTrip();
  t.same(alice.takeDeliveries().filter(isGroupDelivery(id)).map(seqOf), [], 'alice is sent no copy of her own entry before her response');
  answer();
  t.equal(u64((await alice.response(mine)).messageResponse?.seq), '2');
});

t.test("a device's first position in a group is saved before its replay, so a worker dying before its sweep cannot make it a new device elsewhere", async (t) => {
  const tn = await startNode(t);
  const id = await createGroup(tn, 'alice', ['bob']);
  t.equal(await tn.node.groups.cursor(id, 'alice', 'dev-1'), undefined, 'no position before the first login');
  await login(t, tn, 'alice');
  t.equal(await tn.node.groups.cursor(id, 'alice', 'dev-1'), 0, 'saved at login, before anything was acknowledged');
  // carol's device is online when she is added: its stream starts at the added event, and is saved there.
  const carol = await login(t, tn, 'carol', 'dev-c');
  const added = await tn.node.groups.addMembers(id, 'alice', ['carol']);
  tn.node.groupNotifier.publish({ group: id, seq: added.seq!, added: added.uids });
  await carol.next(isGroupDelivery(id));
  t.equal(await tn.node.groups.cursor(id, 'carol', 'dev-c'), added.seq! - 1, 'before she acknowledged anything');
});
