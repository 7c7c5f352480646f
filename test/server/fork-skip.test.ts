// A failover to a lagging replica whose reused seqs are refilled by appends the worker answered as
// failed: in process, on a real redis-server. An append that timed out may still be executed by
// Redis afterwards (src/redis/redis-client.ts: a frozen Redis here, a Redis Cluster retrying a
// command across a failover in production), so the message is stored and nothing delivers it; the
// sender's resend (the same msg_id, as PROTOCOL.md §5 asks) then finds it stored. When such
// messages take exactly the numbers the device was sent and then lost, the next message comes as
// the one after its position and nothing shows the device the fork: one way to the silent skip
// the failover test (test/cluster/redis-cluster-failover.test.ts) once showed. The resend nudges
// the recipient's sessions to read their inbox, so that a session sent that seq as another message
// finds the fork (SB_ERR_INBOX_RESET, a new epoch) and its next login replays them; a message
// written live between the refill and the resend must not hide it.

import t, { type Test } from 'tap';
import { RedisInboxStore } from '../../src/inbox/redis-inbox-store.js';
import { decodeStoredRequest } from '../../src/protocol/codec.js';
import { contents, seqs, u64, type RawClient } from '../../testkit/raw-client.js';
import { until } from '../../testkit/wait.js';
import { startNode } from '../helpers/node.js';
import { connectLoggedIn } from '../helpers/raw-session.js';
import { laggingReplica, startRedis } from '../helpers/redis.js';

/** The worker's Redis command bound: a frozen Redis refuses a send after it. */
const TIMEOUT_MS = 300;

/** Sends `content` to bob with `msgId` and resolves its MessageResponse. */
async function send(alice: RawClient, content: string, msgId: number) {
  const response = await alice.response(alice.chat('bob', content, { msgId }), 5_000);
  return response.messageResponse!;
}

/**
 * bob's phone is sent seqs 1 to 5; a failover to a lagging replica takes his inbox back to 3;
 * alice's m6 and m7 are refused (Redis frozen) and stored at 4 and 5 after the thaw, unseen.
 */
async function refilledUnseen(t: Test, ownCopies: boolean) {
  const redis = await startRedis(t);
  const inbox = new RedisInboxStore({ url: redis.url, timeoutMs: TIMEOUT_MS });
  // Acks are prompt and resends far off: no read but the ones the test is about. The health
  // check never marks the worker unready (logins stay possible after the thaw at once).
  const tn = await startNode(t, { ackTimeoutMs: 60_000, ownCopies }, { inbox, health: { failures: 1_000_000 } });
  const alice = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'), 'phone', { acks: true });
  const carol = await connectLoggedIn(t, tn.port, 'carol', tn.token('carol'), 'phone', { acks: true });
  const bob = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'phone', { acks: true });
  const epoch = Number(u64(bob.loginResponse?.inboxEpoch));
  const shown = async (n: number) => {
    const got = await bob.deliveries(n);
    bob.ack(Math.max(...seqs(got)));
    return got;
  };

  for (const i of [1, 2, 3]) t.equal((await send(alice, `m${i}`, i)).result, true, `m${i} stored`);
  t.same(contents(await shown(3)), ['m1', 'm2', 'm3'], 'bob was sent seqs 1 to 3');
  // bob's inbox as a replica that stops replicating now holds it; then two more messages, which
  // the master acknowledges and bob's phone is sent, and the failover loses.
  const replica = await laggingReplica(redis, 'sb:{bob}:*');
  for (const i of [4, 5]) t.equal((await send(alice, `lost m${i}`, i)).result, true, `lost m${i} stored`);
  t.same(contents(await shown(2)), ['lost m4', 'lost m5'], 'bob was sent seqs 4 and 5');
  await replica.failover();
  t.equal((await inbox.range('bob', 0, 0)).head, 3, 'the failover: bob inbox head went back to 3, same epoch');

  // Two sends the worker answers as failed, which Redis then executes all the same: seqs 4 and 5
  // again, as other messages, with nothing delivered.
  redis.freeze();
  const refused = await Promise.all([send(alice, 'm6', 6), send(alice, 'm7', 7)]);
  t.same(
    refused.map((r) => r.errorCode),
    ['SB_ERR_STORE_UNAVAILABLE', 'SB_ERR_STORE_UNAVAILABLE'],
    'both refused with SB_ERR_STORE_UNAVAILABLE',
  );
  redis.thaw();
  await until('Redis stored them after the thaw', async () => (await inbox.range('bob', 0, 0)).head === 5);
  t.same((await inbox.range('bob', 3, 10)).messages.map((m) => decodeStoredRequest(m.body).content), ['m6', 'm7'], 'seqs 4 and 5 now hold m6 and m7');
  return { inbox, tn, alice, carol, bob, epoch };
}

async function forkedUnanswered(t: Test, ownCopies: boolean): Promise<void> {
  const { inbox, tn, alice, bob, epoch } = await refilledUnseen(t, ownCopies);

  // The resends find them stored; then the next message takes seq 6, the one after bob's position.
  const resent = [await send(alice, 'm6', 6), await send(alice, 'm7', 7)];
  t.same(
    resent.map((r) => [r.result, Number(u64(r.seq)), r.duplicate]),
    [
      [true, 4, true],
      [true, 5, true],
    ],
    'the resends are duplicates, answered with the seqs Redis gave them',
  );
  t.equal(Number(u64((await send(alice, 'm8', 8)).seq)), 6, 'm8 stored as seq 6');

  const closing = await bob.nextClosing(2_000).catch(() => undefined);
  t.equal(closing?.code, 'SB_ERR_INBOX_RESET', 'bob phone is closed with SB_ERR_INBOX_RESET');
  t.same(contents(bob.takeDeliveries()), [], 'and not sent m8 as the message after lost m5');
  t.not((await inbox.range('bob', 0, 0)).epoch, epoch, 'the inbox has a new epoch');

  const again = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'phone', { acks: true, lastSeq: 5, inboxEpoch: epoch });
  t.equal(again.loginResponse?.reset, true, 'its next login reports the reset');
  t.same(contents(await again.deliveries(6)), ['m1', 'm2', 'm3', 'm6', 'm7', 'm8'], 'and replays what the inbox holds, m6 and m7 included');
}

t.test('own copies: the resends find both the message and its copy stored', (t) => forkedUnanswered(t, true));

t.test('no own copies: the resends find the message stored', (t) => forkedUnanswered(t, false));

t.test('a message between the refill and the resend: the resend still shows the fork, and the next login replays the reused seqs', async (t) => {
  const { tn, alice, carol, bob, epoch } = await refilledUnseen(t, false);
  // carol writes before alice's app resends (the SDK does not resend a refused send: the app
  // does, after however long): written live to bob's phone as seq 6, the one after its position.
  t.equal(Number(u64((await send(carol, 'from carol', 1)).seq)), 6, "carol's message stored as seq 6");
  t.same(contents(await bob.deliveries(1)), ['from carol'], 'and written to bob phone live');
  const resent = [await send(alice, 'm6', 6), await send(alice, 'm7', 7)];
  t.same(
    resent.map((r) => r.duplicate),
    [true, true],
    'the resends are duplicates: bob is nudged',
  );
  // The nudge's read compares every seq the session remembers, not only the last one sent (6).
  const closing = await bob.nextClosing(3_000).catch(() => undefined);
  t.equal(closing?.code, 'SB_ERR_INBOX_RESET', 'bob phone is closed with SB_ERR_INBOX_RESET (the fork is found)');
  const again = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'phone', { acks: true, lastSeq: 6, inboxEpoch: epoch });
  t.equal(again.loginResponse?.reset, true, 'the next login at 6 reports the reset');
  t.same(contents(await again.deliveries(6)), ['m1', 'm2', 'm3', 'm6', 'm7', 'from carol'], 'and replays what the inbox holds, m6 and m7 included');
});
