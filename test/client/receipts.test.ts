// Receipts through the SDK, end to end on an embedded switchboard (gate and worker): a client
// made with `receipts` gets 'receipt' events, "delivered" once the recipient's SDK has processed
// the messages (its acks), "read" once the recipient marks them read; GateSettings turns them off
// for a user, both ways. The read event of a mark past the last
// message carries the position stored, not the one asked for.

import t, { type Test } from 'tap';
import { ImClient, type ImClientOptions, type ReadEvent, type ReceiptEvent } from '../../src/client/im-client.js';
import { gateEndpoint } from '../../src/client/gate-session.js';
import { GateSettings } from '../../src/client/gate-settings.js';
import { PASSWORD, startSwitchboard } from '../helpers/node.js';
import { until } from '../../testkit/wait.js';

interface Device {
  client: ImClient;
  receipts: ReceiptEvent[];
  reads: ReadEvent[];
  settings: GateSettings;
}

async function device(t: Test, gate: string, uid: string, deviceId: string, options: Partial<ImClientOptions> = {}): Promise<Device> {
  let token = '';
  const client = new ImClient({ uid, deviceId, retryStrategy: () => 30, endpoint: gateEndpoint(gate, { username: uid, password: PASSWORD, deviceId }, (session) => (token = session.tokens!.token)), ...options });
  const d: Device = { client, receipts: [], reads: [], settings: new GateSettings(gate, () => token) };
  client.on('receipt', (r) => d.receipts.push(r));
  client.on('read', (r) => d.reads.push(r));
  t.teardown(() => client.close());
  await client.connect();
  return d;
}

const shape = (r: ReceiptEvent) => `${r.kind} ${r.peer} #${r.seq} ${r.msgId}`;

t.test('"delivered" once the recipient processed them, "read" once marked; to every device of the sender that asked', async (t) => {
  const gate = await startSwitchboard(t, ['alice', 'bob']);
  const phone = await device(t, gate, 'alice', 'phone', { receipts: true });
  const laptop = await device(t, gate, 'alice', 'laptop', { receipts: true });
  const tablet = await device(t, gate, 'alice', 'tablet');
  const bob = await device(t, gate, 'bob', 'b', { ownCopies: true });
  const bobPad = await device(t, gate, 'bob', 'pad', { ownCopies: true });

  const first = await phone.client.send('bob', 'one', { msgId: 11 });
  const second = await phone.client.send('bob', 'two', { msgId: 12 });
  await until('delivered to the phone', () => phone.receipts.some((r) => r.kind === 'delivered' && r.seq === second.seq));
  t.ok(phone.receipts.every((r) => r.kind === 'delivered' && r.peer === 'bob' && r.at > 0));
  t.equal(phone.receipts.at(-1)!.msgId, '12');
  await until('and to the laptop', () => laptop.receipts.some((r) => r.seq === second.seq));
  t.ok(first.seq < second.seq);

  // Past the last message: the read event tells bob's pad the position stored, not the one asked for.
  const mark = await bob.client.markRead('alice', Number.MAX_SAFE_INTEGER);
  t.equal(mark.readSeq, second.seq);
  await until('read', () => phone.receipts.some((r) => r.kind === 'read'));
  t.equal(shape(phone.receipts.find((r) => r.kind === 'read')!), `read bob #${second.seq} 12`);
  await until('the pad has the read event', () => bobPad.reads.length === 1);
  t.equal(bobPad.reads[0]!.seq, second.seq, 'the clamped position');

  // A barrier: bob answers; by then every receipt sent to the tablet would have arrived.
  await bob.client.send('alice', 'ok');
  await until('the tablet has the answer', async () => (await tablet.client.conversations()).conversations.length === 1);
  t.same(tablet.receipts, [], 'a device that did not ask gets none');
});

t.test('GateSettings: receipts off for bob: his devices send none and get none', async (t) => {
  const gate = await startSwitchboard(t, ['alice', 'bob']);
  const alice = await device(t, gate, 'alice', 'phone', { receipts: true });
  const bob = await device(t, gate, 'bob', 'b', { receipts: true });
  t.same(await bob.settings.get(), { receipts: true }, 'on by default');
  t.same(await bob.settings.setReceipts(false), { receipts: false });
  t.same(await bob.settings.get(), { receipts: false });

  // A login reads the setting; sessions logged in before follow within SETTING_TTL_MS (src/server/receipts.ts).
  const fresh = await device(t, gate, 'bob', 'fresh', { receipts: true });
  const sent = await alice.client.send('bob', 'hello');
  await until('bob processed it', () => fresh.client.lastSeq === sent.seq && bob.client.lastSeq === sent.seq);
  await fresh.client.markRead('alice', sent.seq);
  const back = await fresh.client.send('alice', 'hi');
  await until('alice has it', () => alice.client.lastSeq === back.seq);
  await alice.client.markRead('bob', back.seq);
  // A barrier through the server: alice's answer reaches bob after anything sent to him before.
  await alice.client.send('bob', 'barrier');
  await until('bob has the barrier', () => fresh.client.lastSeq! > sent.seq);
  t.same(alice.receipts.filter((r) => r.peer === 'bob' && r.seq === sent.seq && r.kind === 'read'), [], 'a device that logged in after the change marks read without telling');
  t.same(fresh.receipts, [], 'and is told nothing');
  await t.rejects(new GateSettings(gate, 'not a token').get(), { code: 'SB_ERR_TOKEN_INVALID', status: 401 });
});
