// `switchboard chat`'s conversation commands, a real process (the compiled dist/: `npm run build`
// first) against a real node: /list prints the chat list with unread counts, /history USER N the
// last messages of one conversation and marks them read, /read USER marks one read; a mark made
// on another device of the user prints as a read line, never as a message; /recall and /edit
// take back or change what the chat sent, and those made elsewhere print as lines; groups list
// and read as conversations.

import t from 'tap';
import { ImClient } from '../../src/client/im-client.js';
import { CliProcess } from '../helpers/cli-process.js';
import { startNode } from '../helpers/node.js';
import { until } from '../../testkit/wait.js';
import { parseChatLine } from '../../src/cli/commands/chat-groups.js';
import { editArgs } from '../../src/cli/commands/chat-conversations.js';

const SECRET = 'chat-test-secret-of-at-least-32-characters';
const EXIT_MS = 20_000;

t.test('/list, /history and /read; a read mark from another device prints as such', async (t) => {
  const n = await startNode(t, {}, { secret: SECRET });
  const connect = async (uid: string, deviceId: string) => {
    const client = new ImClient({ host: '127.0.0.1', port: n.port, uid, deviceId, token: n.token(uid), retryStrategy: false });
    t.teardown(() => client.close());
    await client.connect();
    return client;
  };
  const alice = await connect('alice', 'a');
  const carol = await connect('carol', 'c');
  const phone = await connect('bob', 'phone');
  for (let i = 1; i <= 3; i++) await alice.send('bob', `alice ${i}`);
  await carol.send('bob', 'carol 1');

  const bob = new CliProcess(t, 'chat bob', ['chat', '--user', 'bob', '--port', String(n.port), '--secret', SECRET]);
  await bob.waitFor('logged in', () => bob.stdout.includes('logged in as bob'));
  await bob.waitFor('the replay', () => bob.stdout.includes('carol 1'));

  bob.child.stdin.write('/list\n');
  await bob.waitFor('the list', () => bob.stdout.includes('* alice '));
  t.match(bob.stdout, /^\* carol {2}1 unread {2}carol: carol 1$/m, 'most recent first, with its unread count and preview');
  t.match(bob.stdout, /^\* alice {2}3 unread {2}alice: alice 3$/m);
  t.ok(bob.stdout.indexOf('* carol  1 unread') < bob.stdout.indexOf('* alice  3 unread'), 'carol wrote last');

  bob.child.stdin.write('/history alice 2\n');
  await bob.waitFor('the history', () => bob.stdout.includes('older messages with alice'));
  t.match(bob.stdout, /^\* … older messages with alice: \/history alice 100\n\[\d\d:\d\d:\d\d\] alice: alice 2\n\[\d\d:\d\d:\d\d\] alice: alice 3$/m, 'the last two, oldest first, and a word on the rest');
  // /history marked what it showed read: on every device.
  await until('alice read on the phone', async () => (await phone.conversations()).conversations.find((c) => c.peer === 'alice')?.unread === 0);

  bob.child.stdin.write('/read carol\n');
  await bob.waitFor('carol read', () => bob.stdout.includes('* carol: read up to #4, 0 unread'));

  // The phone marks a new message read: bob's chat is told, as a read line.
  const { seq } = await alice.send('bob', 'alice 4');
  await bob.waitFor('alice 4', () => bob.stdout.includes('alice: alice 4'));
  await phone.markRead('alice', seq);
  await bob.waitFor('the read line', () => bob.stdout.includes(`* read up to #${seq} with alice (on phone)`));

  bob.child.stdin.write('/history nobody\n/read nobody\n/history alice 0\n');
  await bob.waitFor('the refusals', () => bob.stdout.includes('/read refused') && bob.stdout.includes('the count must be'));
  t.match(bob.stdout, /^\* no messages with nobody$/m);
  t.match(bob.stdout, /^\* \/read refused: SB_ERR_NO_CONVERSATION/m);
  t.notMatch(bob.stdout, /"type":"read"/, 'the event never prints as a message');
  bob.child.stdin.end();
  t.not((await bob.exit(EXIT_MS)).code, 0, 'a refused command makes the exit code non-zero, as a refused message does');
});

t.test('what the chat sends is marked delivered, then read, once each', async (t) => {
  const n = await startNode(t, {}, { secret: SECRET });
  const bob = new ImClient({ host: '127.0.0.1', port: n.port, uid: 'bob', deviceId: 'b', token: n.token('bob'), retryStrategy: false });
  const bobPad = new ImClient({ host: '127.0.0.1', port: n.port, uid: 'bob', deviceId: 'pad', token: n.token('bob'), retryStrategy: false });
  t.teardown(() => bob.close());
  t.teardown(() => bobPad.close());
  await bob.connect();
  await bobPad.connect();
  const alice = new CliProcess(t, 'chat alice', ['chat', '--user', 'alice', '--port', String(n.port), '--secret', SECRET]);
  await alice.waitFor('logged in', () => alice.stdout.includes('logged in as alice'));
  alice.child.stdin.write('@bob hi\n@bob there\n');
  await alice.waitFor('stored', () => alice.stdout.includes('✓ stored (bob #2)'));
  // Both of bob's devices acknowledge: one line.
  await alice.waitFor('delivered', () => alice.stdout.includes('✓✓ delivered (bob #2)'));
  await until('both devices have them', () => bob.lastSeq === 2 && bobPad.lastSeq === 2);
  await bob.markRead('alice', 2);
  await alice.waitFor('read', () => alice.stdout.includes('✓✓ read (bob #2)'));
  // A barrier: bob's answer follows every receipt on alice's connection.
  await bob.send('alice', 'seen');
  await alice.waitFor('the answer', () => alice.stdout.includes('bob: seen'));
  t.equal(alice.stdout.split('✓✓ delivered (bob #2)').length - 1, 1, 'delivered printed once for the two devices');
  t.equal(alice.stdout.split('✓✓ read').length - 1, 1);
  alice.child.stdin.end();
  t.equal((await alice.exit(EXIT_MS)).code, 0);
});

t.test('/recall takes back the last message the chat sent; a recall by the other side prints as such', async (t) => {
  const n = await startNode(t, {}, { secret: SECRET });
  const bob = new ImClient({ host: '127.0.0.1', port: n.port, uid: 'bob', deviceId: 'b', token: n.token('bob'), retryStrategy: false, inboxEvents: true });
  const recalls: string[] = [];
  bob.on('recall', (r) => recalls.push(`${r.peer} #${r.seq}`));
  t.teardown(() => bob.close());
  await bob.connect();
  const alice = new CliProcess(t, 'chat alice', ['chat', '--user', 'alice', '--port', String(n.port), '--secret', SECRET]);
  await alice.waitFor('logged in', () => alice.stdout.includes('logged in as alice'));
  alice.child.stdin.write('/recall\n@bob wrong chat, sorry\n');
  await alice.waitFor('stored', () => alice.stdout.includes('✓ stored (bob #1)'));
  t.match(alice.stdout, /^\* \/recall refused: SB_ERR_NO_MESSAGE this chat has sent nothing to recall$/m, 'nothing sent yet: refused');
  alice.child.stdin.write('/recall bob\n');
  await alice.waitFor('recalled', () => alice.stdout.includes('* recalled your last message to bob (bob #1)'));
  await until('bob is told', () => recalls.length === 1);
  t.same(recalls, ['alice #1']);

  const { msgId, seq } = await bob.send('alice', 'and mine too');
  await alice.waitFor('the message', () => alice.stdout.includes('bob: and mine too'));
  await bob.recall('alice', msgId);
  await alice.waitFor('the recall', () => alice.stdout.includes(`* bob recalled a message (#${seq})`));
  alice.child.stdin.end();
  t.not((await alice.exit(EXIT_MS)).code, 0, 'the refused /recall makes the exit code non-zero');
});

t.test('groups in the chat: /list shows them with unread counts, /history #GROUP, /read #GROUP, /readers #GROUP, and a group read from another device', async (t) => {
  const n = await startNode(t, {}, { secret: SECRET });
  const connect = async (uid: string, deviceId: string) => {
    const client = new ImClient({ host: '127.0.0.1', port: n.port, uid, deviceId, token: n.token(uid), retryStrategy: false, groups: true });
    t.teardown(() => client.close());
    await client.connect();
    return client;
  };
  const g = await n.node.groups.create('alice', 'climbing', ['bob']);
  n.node.groupNotifier.publish({ group: g.id, seq: 1, added: ['alice', 'bob'] });
  const alice = await connect('alice', 'a');
  const phone = await connect('bob', 'phone');
  await alice.sendToGroup(g.id, 'up for it?');
  await alice.sendToGroup(g.id, 'at 6?');

  const bob = new CliProcess(t, 'chat bob', ['chat', '--user', 'bob', '--port', String(n.port), '--secret', SECRET]);
  await bob.waitFor('logged in', () => bob.stdout.includes('logged in as bob'));
  bob.child.stdin.write('/list\n');
  await bob.waitFor('the list', () => bob.stdout.includes('* #climbing'));
  t.match(bob.stdout, /^\* #climbing {2}2 unread {2}alice: at 6\?$/m, 'the group, its unread messages and its last one');

  bob.child.stdin.write('/history #climbing 1\n');
  await bob.waitFor('the group history', () => bob.stdout.includes('older entries of #climbing'));
  t.match(bob.stdout, /^\[#climbing\] alice: at 6\?$/m);
  await until('the phone lists it read', async () => (await phone.chatList()).entries.find((e) => e.group === g.id)?.unread === 0);

  const { seq } = await alice.sendToGroup(g.id, 'see you there');
  await bob.waitFor('the new message', () => bob.stdout.includes('alice: see you there'));
  await phone.markGroupRead(g.id, seq);
  await bob.waitFor('the read line', () => bob.stdout.includes(`* read up to #${seq} in #climbing (on phone)`));

  bob.child.stdin.write('#climbing great\n');
  await bob.waitFor('stored', () => /✓ stored \(#climbing #\d+\)/.test(bob.stdout));
  const mine = Number(/✓ stored \(#climbing #(\d+)\)/.exec(bob.stdout)![1]);
  bob.child.stdin.write('/readers #climbing\n');
  await bob.waitFor('the count', () => bob.stdout.includes(`(#${mine}): read by 0 of 1`));
  await alice.markGroupRead(g.id, mine);
  bob.child.stdin.write('/readers #climbing\n');
  await bob.waitFor('the new count', () => bob.stdout.includes(`(#${mine}): read by 1 of 1`));
  bob.child.stdin.write('/read #climbing\n/readers #nosuch\n');
  await bob.waitFor('the mark', () => bob.stdout.includes(`* #climbing: read up to #${mine}, 0 unread`));
  await bob.waitFor('the refusal', () => bob.stdout.includes('/readers refused'));
  bob.child.stdin.end();
  await bob.exit(EXIT_MS);
});

t.test('/edit [@USER] TEXT: the text as typed; USER when it is @named or someone this chat sent to', async (t) => {
  t.same(parseChatLine('/edit  see  you at 9 '), { kind: 'conversation', name: 'edit', args: ['see  you at 9'] }, 'the spacing inside kept');
  t.match(parseChatLine('/edit'), { kind: 'bad', reason: /usage: \/edit \[@USER\] TEXT/ });
  const sentTo = (name: string) => name === 'bob';
  t.same(editArgs('@carol hi there', sentTo), { user: 'carol', text: 'hi there' });
  t.same(editArgs('bob hi there', sentTo), { user: 'bob', text: 'hi there' }, 'bob: this chat sent to him');
  t.same(editArgs('carol hi there', sentTo), { user: undefined, text: 'carol hi there' }, 'carol: not a peer of this chat, a word of the text');
  t.same(editArgs('bob', sentTo), { user: undefined, text: 'bob' }, 'one word is the text');
  t.same(editArgs('@ hi', sentTo), { user: undefined, text: '@ hi' });
});

t.test('/edit changes the last message the chat sent; edits made elsewhere print as lines, edited messages with (edited)', async (t) => {
  const n = await startNode(t, {}, { secret: SECRET });
  const connect = async (uid: string, deviceId: string) => {
    const client = new ImClient({ host: '127.0.0.1', port: n.port, uid, deviceId, token: n.token(uid), retryStrategy: false, inboxEvents: true, ownCopies: true });
    t.teardown(() => client.close());
    await client.connect();
    return client;
  };
  const bob = await connect('bob', 'b');
  const edits: string[] = [];
  bob.on('edit', (e) => edits.push(`${e.peer} #${e.seq}: ${e.content}`));
  const alicePhone = await connect('alice', 'phone');
  const alice = new CliProcess(t, 'chat alice', ['chat', '--user', 'alice', '--port', String(n.port), '--secret', SECRET]);
  await alice.waitFor('logged in', () => alice.stdout.includes('logged in as alice'));
  alice.child.stdin.write('/edit oops\n@bob see you at 8\n');
  await alice.waitFor('stored', () => alice.stdout.includes('✓ stored (bob #1)'));
  t.match(alice.stdout, /^\* \/edit refused: SB_ERR_NO_MESSAGE this chat has sent nothing to edit$/m, 'nothing sent yet: refused');
  alice.child.stdin.write('/edit see  you at 9\n');
  await alice.waitFor('edited', () => alice.stdout.includes('* edited your last message to bob (bob #1)'));
  alice.child.stdin.write('/edit bob see you at 10\n/edit @bob see you at 11\n');
  await until('bob is told of each', () => edits.length === 3);
  t.same(edits, ['alice #1: see  you at 9', 'alice #1: see you at 10', 'alice #1: see you at 11'], 'the text as typed; bob named, then @bob');

  const mine = await bob.send('alice', 'and mine');
  await alice.waitFor('the message', () => alice.stdout.includes('bob: and mine'));
  await bob.edit('alice', mine.msgId, 'and mine, edited');
  await alice.waitFor('the edit', () => alice.stdout.includes(`* bob edited a message (#${mine.seq}): and mine, edited`));
  const fromPhone = await alicePhone.send('bob', 'from the phone');
  await alicePhone.edit('bob', fromPhone.msgId, 'from the phone, edited');
  await alice.waitFor('her own edit', () => alice.stdout.includes(`* you edited your message to bob (#${fromPhone.ownSeq}): from the phone, edited`));
  alice.child.stdin.write('/history bob\n/list\n');
  await alice.waitFor('the list', () => alice.stdout.includes('* bob  '));
  t.match(alice.stdout, /\] me → bob: see you at 11 \(edited\)$/m, 'history shows the edit, marked');
  t.match(alice.stdout, /\] bob: and mine, edited \(edited\)$/m);
  t.match(alice.stdout, /^\* bob {2}read {2}me: from the phone, edited \(edited\)$/m, 'the list too');
  alice.child.stdin.end();
  t.not((await alice.exit(EXIT_MS)).code, 0, 'the refused /edit makes the exit code non-zero');
});
