// Recall through the SDK, against a real node (PROTOCOL.md §14): recall() turns a sent message
// into a tombstone; the recipient's devices with inboxEvents and the sender's other devices get a
// 'recall' event (never a message); a device that logs in afterwards is shown the tombstone.

import t, { type Test } from 'tap';
import { ImClient, type ImClientOptions, type IncomingMessage, type RecallEvent } from '../../src/client/im-client.js';
import { startNode, type TestNode } from '../helpers/node.js';
import { until } from '../../testkit/wait.js';

interface Device {
  client: ImClient;
  messages: IncomingMessage[];
  recalls: RecallEvent[];
}

async function online(t: Test, n: TestNode, uid: string, deviceId: string, options: Partial<ImClientOptions> = {}): Promise<Device> {
  const client = new ImClient({ host: '127.0.0.1', port: n.port, uid, deviceId, token: n.token(uid), retryStrategy: false, ...options });
  const d: Device = { client, messages: [], recalls: [] };
  client.on('message', (m) => d.messages.push(m));
  client.on('recall', (r) => d.recalls.push(r));
  t.teardown(() => client.close());
  await client.connect();
  return d;
}

t.test('recall(): a tombstone for everyone, a recall event for the devices that take them', async (t) => {
  const n = await startNode(t);
  const phone = await online(t, n, 'alice', 'phone', { ownCopies: true, inboxEvents: true });
  const laptop = await online(t, n, 'alice', 'laptop', { ownCopies: true, inboxEvents: true });
  const bob = await online(t, n, 'bob', 'b', { inboxEvents: true });
  const sent = await phone.client.send('bob', 'oops, wrong chat');
  await until('delivered', () => bob.messages.length === 1 && laptop.messages.length === 1);

  t.same(await phone.client.recall('bob', sent.msgId), { seq: sent.seq });
  await until('bob is told', () => bob.recalls.length === 1);
  t.same(bob.recalls[0], { peer: 'alice', seq: sent.seq, msgId: sent.msgId, from: 'alice', eventSeq: bob.recalls[0]!.eventSeq });
  await until("alice's laptop is told", () => laptop.recalls.length === 1);
  t.match(laptop.recalls[0], { peer: 'bob', seq: sent.ownSeq, msgId: sent.msgId, from: 'alice' });
  t.equal(bob.messages.length, 1, 'the event is no message');

  const [tombstone] = (await bob.client.history('alice')).messages;
  t.match(tombstone, { recalled: true, content: '[recalled]', from: 'alice', msgId: sent.msgId });
  const late = await online(t, n, 'bob', 'late');
  await until('the replay', () => late.messages.length === 1);
  t.match(late.messages[0], { recalled: true, content: '[recalled]' }, 'a device that logs in later sees the tombstone');

  await t.rejects(bob.client.recall('alice', sent.msgId), { code: 'SB_ERR_NO_MESSAGE' }, 'the recipient cannot recall it');
  t.same(await laptop.client.recall('bob', sent.msgId), { seq: sent.seq }, 'a repeat from another device: done already');
  t.equal(phone.recalls.length, 0, 'the recalling device only has the answer');
});
