// Edit through the SDK, against a real node (PROTOCOL.md §14): edit() gives a sent message new
// content; the recipient's devices with inboxEvents and the sender's other devices get an 'edit'
// event carrying it (never a message); history and a device that logs in afterwards show the
// message edited.

import t, { type Test } from 'tap';
import { ImClient, type EditEvent, type ImClientOptions, type IncomingMessage } from '../../src/client/im-client.js';
import { startNode, type TestNode } from '../helpers/node.js';
import { until } from '../../testkit/wait.js';

interface Device {
  client: ImClient;
  messages: IncomingMessage[];
  edits: EditEvent[];
}

async function online(t: Test, n: TestNode, uid: string, deviceId: string, options: Partial<ImClientOptions> = {}): Promise<Device> {
  const client = new ImClient({ host: '127.0.0.1', port: n.port, uid, deviceId, token: n.token(uid), retryStrategy: false, ...options });
  const d: Device = { client, messages: [], edits: [] };
  client.on('message', (m) => d.messages.push(m));
  client.on('edit', (e) => d.edits.push(e));
  t.teardown(() => client.close());
  await client.connect();
  return d;
}

t.test('edit(): the message edited for everyone, an edit event with the new content for the devices that take them', async (t) => {
  const n = await startNode(t);
  const phone = await online(t, n, 'alice', 'phone', { ownCopies: true, inboxEvents: true });
  const laptop = await online(t, n, 'alice', 'laptop', { ownCopies: true, inboxEvents: true });
  const bob = await online(t, n, 'bob', 'b', { inboxEvents: true });
  const sent = await phone.client.send('bob', 'lunch at noon?', { json: '{"poll":true}' });
  await until('delivered', () => bob.messages.length === 1 && laptop.messages.length === 1);
  t.equal(bob.messages[0]!.edited, false);

  t.same(await phone.client.edit('bob', sent.msgId, 'lunch at one?'), { seq: sent.seq });
  await until('bob is told', () => bob.edits.length === 1);
  const [edit] = bob.edits;
  t.match(edit, { peer: 'alice', seq: sent.seq, msgId: sent.msgId, from: 'alice', content: 'lunch at one?', json: '' }, 'the new content; the json is replaced too');
  t.type(edit!.editedAt, 'number');
  t.ok(edit!.eventSeq > sent.seq, 'the event has a seq of its own');
  await until("alice's laptop is told", () => laptop.edits.length === 1);
  t.match(laptop.edits[0], { peer: 'bob', seq: sent.ownSeq, msgId: sent.msgId, from: 'alice', content: 'lunch at one?' });
  t.equal(bob.messages.length, 1, 'the event is no message');

  const [edited] = (await bob.client.history('alice')).messages;
  t.match(edited, { edited: true, content: 'lunch at one?', json: '', from: 'alice', msgId: sent.msgId, seq: sent.seq });
  t.match((await bob.client.conversations()).conversations[0]?.last, { edited: true, content: 'lunch at one?' }, 'the chat list too');
  const late = await online(t, n, 'bob', 'late');
  await until('the replay', () => late.messages.length === 1);
  t.match(late.messages[0], { edited: true, content: 'lunch at one?' }, 'a device that logs in later sees it edited');

  await t.rejects(bob.client.edit('alice', sent.msgId, 'mine now'), { code: 'SB_ERR_NO_MESSAGE' }, 'the recipient cannot edit it');
  t.same(await laptop.client.edit('bob', sent.msgId, 'lunch at one?'), { seq: sent.seq }, 'a repeat from another device: done already');
  t.equal(phone.edits.length, 0, 'the editing device only has the answer');
  await phone.client.recall('bob', sent.msgId);
  await t.rejects(phone.client.edit('bob', sent.msgId, 'lunch at two?'), { code: 'SB_ERR_NO_MESSAGE' }, 'recalled: no more edits');
});
