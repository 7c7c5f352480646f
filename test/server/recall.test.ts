// Recall over the wire (PROTOCOL.md §14): the sender's RECALL turns the message into a tombstone
// in the recipient's inbox and in the sender's own copy, each with a recall event for the
// devices that take them, so later replays, history pages and the chat list show the tombstone,
// never the content. Run on the memory inbox and on a real Redis one. The attacks: recalling
// another user's message, one received, one past the window, repeats, a forged `recalled`.

import t from 'tap';
import { nothingMoreDelivered } from '../helpers/raw-session.js';
import { eventOf, history, login, memory, recall, sent, STORES } from '../helpers/rewrites.js';
import { isDelivery, seqOf, u64 } from '../../testkit/raw-client.js';
import { ConversationOp } from '../../src/protocol/types.js';
import { sleep } from '../../testkit/wait.js';

for (const [store, start] of STORES) {
  t.test(`${store}: a recall leaves a tombstone everywhere and tells every device that takes events`, async (t) => {
    const tn = await start(t);
    const phone = await login(t, tn, 'alice', 'phone', { ownCopies: true, inboxEvents: true });
    const laptop = await login(t, tn, 'alice', 'laptop', { ownCopies: true, inboxEvents: true });
    const bob = await login(t, tn, 'bob', 'b', { inboxEvents: true });
    const legacy = await login(t, tn, 'bob', 'old', { acks: false });
    const seq = await sent(phone, 'bob', 'the secret', 42);
    await bob.next(isDelivery);
    await legacy.next(isDelivery);
    const ownSeq = seqOf(await laptop.next(isDelivery));

    const done = await recall(phone, 'bob', 42);
    t.equal(done.result, true);
    t.equal(Number(u64(done.seq)), seq, "bob's seq of it");
    const bobEvent = await bob.next(isDelivery);
    t.same(eventOf(bobEvent), { type: 'recall', peer: 'alice', seq, msgId: '42' }, 'bob is told, by seq and msg_id');
    t.equal(bobEvent.messageRequest?.content ?? '', '', 'an event, no content');
    const laptopEvent = await laptop.next(isDelivery);
    t.same(eventOf(laptopEvent), { type: 'recall', peer: 'bob', seq: ownSeq, msgId: '42' }, "alice's other device too, by her own seq");
    t.equal(laptopEvent.messageRequest?.originDevice, 'phone');
    t.equal(Number(u64(done.eventSeq)), seqOf(laptopEvent));
    await nothingMoreDelivered(t, phone, 'the recalling device has the answer only');
    await nothingMoreDelivered(t, legacy, 'a device that takes no events is passed over the event');

    for (const [who, client, peer] of [['bob', bob, 'alice'], ['alice', laptop, 'bob']] as const) {
      const [m] = await history(client, peer);
      t.match(m, { content: '[recalled]', recalled: true, from: 'alice', to: 'bob' }, `${who}'s history: the tombstone`);
      t.equal(String(u64(m!.msgId)), '42');
      const list = (await client.conversation({ op: ConversationOp.LIST })).conversationResponse!;
      t.equal(list.conversations?.[0]?.last?.recalled, true, `${who}'s list: the tombstone as the last message`);
    }
    const fresh = await login(t, tn, 'bob', 'new');
    const replay = await fresh.next(isDelivery);
    t.match(replay.messageRequest, { content: '[recalled]', recalled: true }, 'a replay shows the tombstone');
    t.notMatch(JSON.stringify([...fresh.pending, replay]), /the secret/, 'and nowhere the content');

    const again = await recall(laptop, 'bob', 42);
    t.match([again.result, Number(u64(again.seq)), Number(u64(again.eventSeq))], [true, seq, 0], 'a repeat, from another device: done already, nothing stored');
    await nothingMoreDelivered(t, bob, 'and nothing sent');
  });

  t.test(`${store}: only your own messages, within the window`, async (t) => {
    const tn = await start(t, { recallWindowMs: 200 });
    const alice = await login(t, tn, 'alice', 'a', { inboxEvents: true });
    const bob = await login(t, tn, 'bob', 'b', { inboxEvents: true });
    const carol = await login(t, tn, 'carol', 'c');
    await sent(alice, 'bob', 'mine', 7);
    await sent(bob, 'alice', 'his', 8);
    for (const [who, client, peer, msgId] of [
      ['carol, with alice\'s msg_id', carol, 'bob', 7],
      ['bob, a message he received', bob, 'alice', 7],
      ['alice, bob\'s message to her', alice, 'bob', 8],
      ['alice, a msg_id she never sent', alice, 'bob', 9],
    ] as const) {
      t.match(await recall(client, peer, msgId), { result: false, errorCode: 'SB_ERR_NO_MESSAGE' }, who);
    }
    t.match(await recall(alice, '', 7), { result: false, errorCode: 'SB_ERR_BAD_REQUEST' }, 'no peer');
    t.match(await recall(alice, 'bob', 0), { result: false, errorCode: 'SB_ERR_BAD_REQUEST' }, 'no msg_id');
    await sleep(250);
    t.match(await recall(alice, 'bob', 7), { result: false, errorCode: 'SB_ERR_RECALL_EXPIRED' }, 'past the window');
    t.same((await history(bob, 'alice')).map((m) => m.content), ['mine', 'his'], 'nothing changed');
    const forged = (await alice.chatAndWait('bob', 'looks recalled', { msgId: 10, recalled: true })).messageResponse!;
    t.match(forged, { result: false, errorCode: 'SB_ERR_BAD_REQUEST' }, 'a client cannot send a tombstone');
  });
}

t.test('recall off (--recall-window-s 0): refused, nothing changes', async (t) => {
  const tn = await memory(t, { recallWindowMs: 0 });
  const alice = await login(t, tn, 'alice', 'a');
  await login(t, tn, 'bob', 'b');
  await sent(alice, 'bob', 'stays', 1);
  t.match(await recall(alice, 'bob', 1), { result: false, errorCode: 'SB_ERR_RECALL_EXPIRED' });
});
