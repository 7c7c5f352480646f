// Edit over the wire (PROTOCOL.md §14): the sender's EDIT replaces the message's content and json
// in place in the recipient's inbox and in the sender's own copy (same seq, same store time, set
// `edited`), each with an edit event that carries the new content, for the devices that take
// events; later replays, history pages and the chat list show the edited message. Run on the
// memory inbox and on a real Redis one. The attacks: editing another user's message, one
// received, a forged msg_id, past the window, a recalled one, a forged `edited`, an edit too
// large to deliver, and an edit racing a recall.

import t from 'tap';
import { nothingMoreDelivered } from '../helpers/raw-session.js';
import { conversation, edit, eventOf, history, login, recall, sent, STORES } from '../helpers/rewrites.js';
import { startNode } from '../helpers/node.js';
import { isDelivery, seqOf, u64 } from '../../testkit/raw-client.js';
import { ConversationOp } from '../../src/protocol/types.js';
import { MemoryInboxStore } from '../../src/inbox/memory-inbox-store.js';
import type { AppendRequest, RewriteResult } from '../../src/inbox/inbox-store.js';
import { sleep } from '../../testkit/wait.js';

for (const [store, start] of STORES) {
  t.test(`${store}: an edit replaces the message in place everywhere and tells every device that takes events`, async (t) => {
    const tn = await start(t);
    const phone = await login(t, tn, 'alice', 'phone', { ownCopies: true, inboxEvents: true });
    const laptop = await login(t, tn, 'alice', 'laptop', { ownCopies: true, inboxEvents: true });
    const bob = await login(t, tn, 'bob', 'b', { inboxEvents: true });
    const legacy = await login(t, tn, 'bob', 'old', { acks: false });
    const seq = await sent(phone, 'bob', 'see you at 8', 42);
    const original = (await bob.next(isDelivery)).messageRequest!;
    await legacy.next(isDelivery);
    const ownSeq = seqOf(await laptop.next(isDelivery));

    const same = await edit(phone, 'bob', 42, 'see you at 8');
    t.match([same.result, Number(u64(same.seq)), Number(u64(same.eventSeq))], [true, seq, 0], 'an edit to the words it has: nothing stored');
    await nothingMoreDelivered(t, bob, 'nothing sent');
    t.equal((await history(bob, 'alice'))[0]?.edited, false, 'and not shown as edited');

    const done = await edit(phone, 'bob', 42, 'see you at 9', '{"place":"cafe"}');
    t.equal(done.result, true);
    t.equal(Number(u64(done.seq)), seq, "bob's seq of it");
    const bobEvent = await bob.next(isDelivery);
    t.same(eventOf(bobEvent), { type: 'edit', peer: 'alice', seq, msgId: '42' }, 'bob is told, by seq and msg_id');
    t.match(bobEvent.messageRequest, { from: 'alice', to: 'bob', content: 'see you at 9', json: '{"place":"cafe"}' }, 'with the new content: nothing to fetch');
    const laptopEvent = await laptop.next(isDelivery);
    t.same(eventOf(laptopEvent), { type: 'edit', peer: 'bob', seq: ownSeq, msgId: '42' }, "alice's other device too, by her own seq");
    t.match(laptopEvent.messageRequest, { originDevice: 'phone', content: 'see you at 9' });
    t.equal(Number(u64(done.eventSeq)), seqOf(laptopEvent));
    await nothingMoreDelivered(t, phone, 'the editing device has the answer only');
    await nothingMoreDelivered(t, legacy, 'a device that takes no events is passed over the event');

    for (const [who, client, peer, at] of [['bob', bob, 'alice', seq], ['alice', laptop, 'bob', ownSeq]] as const) {
      const messages = await history(client, peer);
      t.equal(messages.length, 1, `${who}'s history: one message, the event is none`);
      t.match(messages[0], { content: 'see you at 9', json: '{"place":"cafe"}', edited: true, from: 'alice', to: 'bob' }, `${who}'s history: the edited message`);
      t.same([Number(u64(messages[0]!.seq)), String(u64(messages[0]!.msgId)), Number(u64(messages[0]!.storedAt))], [at, '42', Number(u64(original.storedAt))], 'at its seq, with its msg_id and store time');
      const list = await conversation(client, { op: ConversationOp.LIST });
      t.match(list.conversations?.[0]?.last, { content: 'see you at 9', edited: true }, `${who}'s list: the edited message as the last one`);
    }
    const fresh = await login(t, tn, 'bob', 'new');
    const replay = await fresh.next(isDelivery);
    t.match(replay.messageRequest, { content: 'see you at 9', edited: true }, 'a replay shows the edited message');
    t.equal(seqOf(replay), seq);
    t.notMatch(JSON.stringify([...fresh.pending, replay]), /at 8/, 'and nowhere the old content');

    const again = await edit(laptop, 'bob', 42, 'see you at 9', '{"place":"cafe"}');
    t.match([again.result, Number(u64(again.seq)), Number(u64(again.eventSeq))], [true, seq, 0], 'the same edit again, from another device: nothing stored');
    await nothingMoreDelivered(t, bob, 'and nothing sent');

    const second = await edit(phone, 'bob', 42, 'see you at 10');
    t.equal(second.result, true, 'edited again, within the window');
    t.match((await bob.next(isDelivery)).messageRequest, { content: 'see you at 10', json: '' });
    t.match((await history(bob, 'alice'))[0], { content: 'see you at 10', json: '', edited: true }, 'an edit replaces the json too: left empty, it is gone');
  });

  t.test(`${store}: only your own messages, within the window, never a recalled one`, async (t) => {
    const tn = await start(t, { editWindowMs: 400 });
    const alice = await login(t, tn, 'alice', 'a', { inboxEvents: true });
    const bob = await login(t, tn, 'bob', 'b', { inboxEvents: true });
    const carol = await login(t, tn, 'carol', 'c');
    await sent(alice, 'bob', 'mine', 7);
    await sent(bob, 'alice', 'his', 8);
    for (const [who, client, peer, msgId] of [
      ["carol, with alice's msg_id", carol, 'bob', 7],
      ['bob, a message he received', bob, 'alice', 7],
      ["alice, bob's message to her", alice, 'bob', 8],
      ['alice, a msg_id she never sent', alice, 'bob', 9],
    ] as const) {
      t.match(await edit(client, peer, msgId, 'forged'), { result: false, errorCode: 'SB_ERR_NO_MESSAGE' }, who);
    }
    t.match(await edit(alice, '', 7, 'x'), { result: false, errorCode: 'SB_ERR_BAD_REQUEST' }, 'no peer');
    t.match(await edit(alice, 'bob', 0, 'x'), { result: false, errorCode: 'SB_ERR_BAD_REQUEST' }, 'no msg_id');
    t.match(await edit(alice, 'bob', 7, ''), { result: false, errorCode: 'SB_ERR_BAD_REQUEST' }, 'no content: recall it instead');

    await sent(alice, 'bob', 'regret', 11);
    t.equal((await recall(alice, 'bob', 11)).result, true);
    t.match(await edit(alice, 'bob', 11, 'regret, reworded'), { result: false, errorCode: 'SB_ERR_NO_MESSAGE', info: /recalled/ }, 'a recalled message stays recalled');
    t.match((await history(bob, 'alice')).at(-1), { content: '[recalled]', recalled: true });

    const forged = (await alice.chatAndWait('bob', 'looks edited', { msgId: 10, edited: true })).messageResponse!;
    t.match(forged, { result: false, errorCode: 'SB_ERR_BAD_REQUEST' }, 'a client cannot send an edited message');
    await sleep(450);
    t.match(await edit(alice, 'bob', 7, 'too late'), { result: false, errorCode: 'SB_ERR_EDIT_EXPIRED' }, 'past the window');
    t.same((await history(bob, 'alice')).map((m) => [m.content, m.edited ?? false]), [['mine', false], ['his', false], ['[recalled]', false]], 'nothing changed');
  });

  t.test(`${store}: an edit is bounded like a message: one its event could not deliver is refused`, async (t) => {
    const maxFrameLength = 1024;
    const tn = await start(t, { maxFrameLength });
    const alice = await login(t, tn, 'alice', 'a', { ownCopies: true });
    await login(t, tn, 'bob', 'b', { inboxEvents: true });
    await sent(alice, 'bob', 'short', 5);
    // The request fits a frame; the edit event (its JSON and the content) would not.
    const huge = 'x'.repeat(maxFrameLength - 80);
    t.match(await edit(alice, 'bob', 5, huge), { result: false, errorCode: 'SB_ERR_MESSAGE_TOO_LARGE' });
    const bob = await login(t, tn, 'bob', 'b2');
    t.same((await history(bob, 'alice')).map((m) => m.content), ['short'], 'nothing stored');
    t.equal((await edit(alice, 'bob', 5, 'x'.repeat(maxFrameLength / 2))).result, true, 'a large one that fits is taken');
  });
}

t.test('edit off (--edit-window-s 0): refused, nothing changes', async (t) => {
  const tn = await startNode(t, { editWindowMs: 0 });
  const alice = await login(t, tn, 'alice', 'a');
  const bob = await login(t, tn, 'bob', 'b');
  await sent(alice, 'bob', 'stays', 1);
  t.match(await edit(alice, 'bob', 1, 'changed'), { result: false, errorCode: 'SB_ERR_EDIT_EXPIRED' });
  t.same((await history(bob, 'alice')).map((m) => m.content), ['stays']);
});

/** A memory inbox that runs `race` once, just before the first rewrite an edit makes (after it read the message). */
class RacingInbox extends MemoryInboxStore {
  race: (() => Promise<unknown>) | undefined;

  override async rewrite(uid: string, seq: number, body: Uint8Array, event: AppendRequest | undefined, expected?: Uint8Array): Promise<RewriteResult> {
    const race = event && Buffer.from(event.body).includes('"type":"edit"') ? this.race : undefined;
    this.race = undefined;
    await race?.();
    return super.rewrite(uid, seq, body, event, expected);
  }
}

t.test('an edit never undoes a recall that lands between its read and its write', async (t) => {
  const inbox = new RacingInbox();
  const tn = await startNode(t, {}, { inbox });
  const phone = await login(t, tn, 'alice', 'phone', { ownCopies: true });
  const laptop = await login(t, tn, 'alice', 'laptop', { ownCopies: true });
  const bob = await login(t, tn, 'bob', 'b');
  await sent(phone, 'bob', 'the secret', 42);
  inbox.race = () => recall(laptop, 'bob', 42);
  t.match(await edit(phone, 'bob', 42, 'the secret, reworded'), { result: false, errorCode: 'SB_ERR_NO_MESSAGE', info: /recalled/ }, 'the edit reads again and finds the tombstone');
  t.match((await history(bob, 'alice'))[0], { content: '[recalled]', recalled: true }, "bob's copy stays a tombstone");
  t.match((await history(laptop, 'bob'))[0], { content: '[recalled]', recalled: true }, "and alice's");
});
