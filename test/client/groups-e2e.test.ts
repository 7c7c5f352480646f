// The SDK's groups against a real node (embedded mode, in-memory stores) over real sockets: two
// members' clients, the group made in the node's GroupStore and announced on its GroupNotifier
// as the gate does; last, the whole way: the gate's accounts, logins and group API (GateGroups).
// Messages and events reach the other member once, in group order; the sender never sees its
// own; reconnects and resends after lost acks show nothing twice; refusals come with their codes.

import t, { type Test } from 'tap';
import { ImClient, type GroupEventMessage, type GroupMessage, type ImClientOptions } from '../../src/client/im-client.js';
import { HeadType } from '../../src/protocol/types.js';
import { PASSWORD, startNode, startSwitchboard, type TestNode } from '../helpers/node.js';
import { sleep, until } from '../../testkit/wait.js';
import { FrameProxy } from './frame-proxy.js';
import { GateGroups } from '../../src/client/gate-groups.js';
import { gateEndpoint } from '../../src/client/gate-session.js';

interface Member {
  client: ImClient;
  /** "seq:text" of messages, "seq:*type" of events, in the order emitted. */
  shown: string[];
  messages: GroupMessage[];
  events: GroupEventMessage[];
}

function member(t: Test, tn: TestNode, uid: string, options: Partial<ImClientOptions> = {}): Member {
  const client = new ImClient({ host: '127.0.0.1', port: tn.port, uid, deviceId: `${uid}-phone`, token: tn.token(uid), groups: true, retryStrategy: () => 30, ...options });
  const m: Member = { client, shown: [], messages: [], events: [] };
  client.on('groupMessage', (g) => {
    m.messages.push(g);
    m.shown.push(`${g.seq}:${g.content}`);
  });
  client.on('groupEvent', (e) => {
    m.events.push(e);
    m.shown.push(`${e.seq}:*${e.event.type}`);
  });
  t.teardown(() => client.close());
  return m;
}

/** A group made as the gate makes one: in the store, then announced to the workers. */
async function createGroup(tn: TestNode, owner: string, members: string[]): Promise<string> {
  const group = await tn.node.groups.create(owner, 'team', members);
  tn.node.groupNotifier.publish({ group: group.id, seq: 1, added: [owner, ...members] });
  return group.id;
}

t.test('two members: the created event once each, messages to the other in group order, none back to the sender', async (t) => {
  const tn = await startNode(t);
  const id = await createGroup(tn, 'alice', ['bob']);
  const alice = member(t, tn, 'alice');
  const bob = member(t, tn, 'bob');
  await Promise.all([alice.client.connect(), bob.client.connect()]);
  await until('both see the group created', () => alice.shown.length === 1 && bob.shown.length === 1);
  t.match(bob.events[0], { group: id, seq: 1, actor: 'alice', event: { type: 'created', actor: 'alice', uids: ['bob'], name: 'team' } });

  const results = [];
  for (const text of ['one', 'two', 'three']) results.push(await alice.client.sendToGroup(id, text));
  t.same(results.map((r) => [r.seq, r.duplicate]), [[2, false], [3, false], [4, false]], "the group's seqs");
  const reply = await bob.client.sendToGroup(id, 'hi alice');
  t.equal(reply.seq, 5);
  await until('bob has three', () => bob.shown.length === 4);
  await until('alice has the reply', () => alice.shown.length === 2);
  await sleep(100);
  t.same(bob.shown, ['1:*created', '2:one', '3:two', '4:three'], 'bob: in order, not his own');
  t.same(alice.shown, ['1:*created', '5:hi alice'], 'alice: not her own');
  t.match(bob.messages[0], { group: id, from: 'alice', content: 'one' });
  t.ok(bob.messages[0]!.storedAt! > 0, "the server's time");
  t.equal(alice.client.groupSeq(id), 5, "alice's position passed her own messages");
  t.equal(bob.client.groupSeq(id), 5);
});

t.test('a member away gets what it missed at its next connection, each once; its own messages are never shown back', async (t) => {
  const tn = await startNode(t);
  const id = await createGroup(tn, 'alice', ['bob']);
  const proxy = await FrameProxy.start(t, tn.port);
  const alice = member(t, tn, 'alice');
  const bob = member(t, tn, 'bob', { port: proxy.port });
  await Promise.all([alice.client.connect(), bob.client.connect()]);
  await until('created', () => alice.shown.length === 1 && bob.shown.length === 1);
  await bob.client.sendToGroup(id, 'from bob before');
  await until('alice has it', () => alice.shown.length === 2);

  // Bob's acks no longer reach the server, and his connection goes: what he was sent since his
  // last ack comes again at the reconnect, and what alice sends meanwhile too.
  proxy.hook = (m, direction) => (direction === 'toServer' && m.type === HeadType.MESSAGE_ACK ? 'drop' : 'forward');
  await alice.client.sendToGroup(id, 'a');
  await until('bob has a', () => bob.shown.length === 2);
  await bob.client.sendToGroup(id, 'from bob unacked');
  proxy.cut();
  proxy.hook = undefined;
  for (const text of ['b', 'c']) await alice.client.sendToGroup(id, text);
  await until('bob reconnected and caught up', () => bob.shown.length === 4 && proxy.connections >= 2, 15_000);
  await sleep(200);
  t.same(bob.shown, ['1:*created', '3:a', '5:b', '6:c'], 'each once, in order, none of his own (2, 4)');
  t.equal(bob.client.groupSeq(id), 6);
});

t.test('deliveries resent after lost acks (the ack timeout) are shown once', async (t) => {
  const tn = await startNode(t, { ackTimeoutMs: 150 });
  const id = await createGroup(tn, 'alice', ['bob']);
  const proxy = await FrameProxy.start(t, tn.port);
  const alice = member(t, tn, 'alice');
  const bob = member(t, tn, 'bob', { port: proxy.port });
  await Promise.all([alice.client.connect(), bob.client.connect()]);
  await until('created', () => bob.shown.length === 1);
  let dropAcks = true;
  proxy.hook = (m, direction) => (dropAcks && direction === 'toServer' && m.type === HeadType.MESSAGE_ACK ? 'drop' : 'forward');
  for (const text of ['x', 'y']) await alice.client.sendToGroup(id, text);
  const resent = () => proxy.seen('toClient', HeadType.MESSAGE_REQUEST).filter((m) => m.messageRequest?.group === id).length;
  await until('the server resent them', () => resent() >= 5, 10_000);
  dropAcks = false;
  await sleep(300);
  t.same(bob.shown, ['1:*created', '2:x', '3:y'], `shown once though delivered ${resent()} times`);
  const acks = proxy.seen('toServer', HeadType.MESSAGE_ACK).filter((m) => m.ack?.group === id);
  t.ok(acks.length >= 2, 'each resend acknowledged again');
  t.equal(Number(acks.at(-1)!.ack!.seq), 3, 'cumulative, at the position');
});

t.test('membership changes reach members live as events, in order with the messages', async (t) => {
  const tn = await startNode(t);
  const id = await createGroup(tn, 'alice', ['bob']);
  const alice = member(t, tn, 'alice');
  const bob = member(t, tn, 'bob');
  const carol = member(t, tn, 'carol');
  await Promise.all([alice.client.connect(), bob.client.connect(), carol.client.connect()]);
  await until('created', () => bob.shown.length === 1);
  await alice.client.sendToGroup(id, 'before carol');
  const added = await tn.node.groups.addMembers(id, 'alice', ['carol']);
  tn.node.groupNotifier.publish({ group: id, seq: added.seq!, added: added.uids });
  await until('carol is told', () => carol.shown.length === 1);
  const hello = await carol.client.sendToGroup(id, 'hello');
  t.equal(hello.seq, 4);
  await until('bob has all', () => bob.shown.length === 4);
  t.same(bob.shown, ['1:*created', '2:before carol', '3:*added', '4:hello']);
  t.match(bob.events[1], { actor: 'alice', event: { type: 'added', uids: ['carol'] } });
  await sleep(100);
  t.same(carol.shown, ['3:*added'], 'carol: nothing from before she joined, not her own');
});

t.test('refusals by code: not a member, no such group, not a group id; a client without groups', async (t) => {
  const tn = await startNode(t);
  const id = await createGroup(tn, 'alice', []);
  const mallory = member(t, tn, 'mallory');
  await mallory.client.connect();
  await t.rejects(mallory.client.sendToGroup(id, 'let me in'), { code: 'SB_ERR_GROUP_NOT_MEMBER' });
  await t.rejects(mallory.client.sendToGroup('gaaaaaaaaaaaa', 'x'), { code: 'SB_ERR_GROUP_NOT_FOUND' });
  await t.rejects(mallory.client.sendToGroup('../../etc', 'x'), { code: 'SB_ERR_BAD_GROUP' });
  t.equal((await tn.node.groups.get(id, 'alice')).head, 1, 'nothing was stored');
  t.equal(mallory.client.status, 'ready');

  const plain = member(t, tn, 'alice', { groups: false, deviceId: 'plain' });
  await plain.client.connect();
  await t.rejects(plain.client.sendToGroup(id, 'x'), { code: 'SB_ERR_BAD_REQUEST' });
  await sleep(100);
  t.same(plain.shown, [], 'a device without groups gets nothing of them');
});

t.test('the whole way: accounts and logins at the gate, the group made and changed with GateGroups, spoken in over the SDK', async (t) => {
  const gateUrl = await startSwitchboard(t, ['alice', 'bob', 'carol']);
  const password = PASSWORD;

  const through = (uid: string) => {
    let token = '';
    const client = new ImClient({ uid, deviceId: 'phone', groups: true, retryStrategy: () => 30, endpoint: gateEndpoint(gateUrl, { username: uid, password, deviceId: 'phone' }, (session) => (token = session.tokens!.token)) });
    const shown: string[] = [];
    client.on('groupMessage', (m) => shown.push(`${m.seq}:${m.from}:${m.content}`));
    client.on('groupEvent', (e) => shown.push(`${e.seq}:*${e.event.type}:${(e.event.uids ?? []).join(',')}`));
    t.teardown(() => client.close());
    return { client, shown, api: new GateGroups(gateUrl, () => token) };
  };
  const alice = through('alice');
  const bob = through('bob');
  await Promise.all([alice.client.connect(), bob.client.connect()]);

  const team = await alice.api.createGroup('team', ['Bob']);
  t.match(team, { name: 'team', owner: 'alice', memberCount: 2, head: 1 });
  await until('both told of it', () => alice.shown.length === 1 && bob.shown.length === 1);
  t.same(bob.shown, ['1:*created:bob'], 'live, with the name folded as the gate folds it');
  t.same(await bob.api.listGroups(), { groups: [{ id: team.id, role: 'member' }], next: undefined });

  t.equal((await alice.client.sendToGroup(team.id, 'hello bob')).seq, 2);
  t.same(await alice.api.addMembers(team.id, ['carol']), { seq: 3, uids: ['carol'] });
  await t.rejects(bob.api.addMembers(team.id, ['alice']), { code: 'SB_ERR_GROUP_FORBIDDEN', status: 403 }, 'a member is not an admin');
  await t.rejects(alice.api.addMembers(team.id, ['nobody']), { code: 'SB_ERR_UNKNOWN_RECIPIENT' }, 'no such account');
  t.same((await bob.api.members(team.id)).members.map((m) => `${m.uid}:${m.role}`), ['alice:owner', 'bob:member', 'carol:member']);
  t.same(await bob.api.leave(team.id), { seq: 4 });
  await until('alice sees bob go', () => alice.shown.length === 3);
  t.same(alice.shown, ['1:*created:bob', '3:*added:carol', '4:*left:'], 'not her own message');
  await until('bob sees his own leaving', () => bob.shown.length === 4);
  t.same(bob.shown, ['1:*created:bob', '2:alice:hello bob', '3:*added:carol', '4:*left:']);
  await t.rejects(bob.client.sendToGroup(team.id, 'still here?'), { code: 'SB_ERR_GROUP_NOT_MEMBER' });
  await t.rejects(bob.api.members(team.id), { code: 'SB_ERR_GROUP_NOT_MEMBER' });
  t.same(await alice.api.dissolve(team.id), { seq: 5 });
  await t.rejects(alice.client.sendToGroup(team.id, 'anyone?'), { code: 'SB_ERR_GROUP_DISSOLVED' });
  await until('the end, told', () => alice.shown.length === 4);
  t.equal(alice.shown.at(-1), '5:*dissolved:');
});
