// The resend's nudge must show the fork even when another message reached the recipient
// between the moment Redis ran the refused send (refilling a reused seq) and the resend. The SDK
// does not resend a refused send itself (ImClient.send rejects): the app does, after however
// long. A message in between is written live as the one after the device's position (it is); a
// read for a nudge that started at the last seq sent, that message, showed nothing of the reused
// seqs below it, so it compares every seq the session remembers (the last 8). Same set-up as
// fork-skip.test.ts.

import t from 'tap';
import { RedisInboxStore } from '../../src/inbox/redis-inbox-store.js';
import { contents, seqs, u64, type RawClient } from '../../testkit/raw-client.js';
import { sleep, until } from '../../testkit/wait.js';
import { startNode } from '../helpers/node.js';
import { connectLoggedIn } from '../helpers/raw-session.js';
import { laggingReplica, startRedis } from '../helpers/redis.js';

const TIMEOUT_MS = 300;

async function send(from: RawClient, content: string, msgId: number) {
  return (await from.response(from.chat('bob', content, { msgId }), 5_000)).messageResponse!;
}

t.test('a message between the refill and the resend: the resend nudge still shows the fork, and the next login replays the reused seqs', async (t) => {
  const redis = await startRedis(t);
  const inbox = new RedisInboxStore({ url: redis.url, timeoutMs: TIMEOUT_MS });
  const tn = await startNode(t, { ackTimeoutMs: 60_000, ownCopies: false }, { inbox, health: { failures: 1_000_000 } });
  const alice = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'), 'phone', { acks: true });
  const carol = await connectLoggedIn(t, tn.port, 'carol', tn.token('carol'), 'phone', { acks: true });
  const bob = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'phone', { acks: true });
  const epoch = Number(u64(bob.loginResponse?.inboxEpoch));
  const shown = async (n: number) => {
    const got = await bob.deliveries(n);
    bob.ack(Math.max(...seqs(got)));
    return got;
  };
  for (const i of [1, 2, 3]) await send(alice, `m${i}`, i);
  await shown(3);
  const replica = await laggingReplica(redis, 'sb:{bob}:*');
  for (const i of [4, 5]) await send(alice, `lost m${i}`, i);
  t.same(contents(await shown(2)), ['lost m4', 'lost m5']);
  await replica.failover();

  redis.freeze();
  const refused = await Promise.all([send(alice, 'm6', 6), send(alice, 'm7', 7)]);
  t.same(refused.map((r) => r.errorCode), ['SB_ERR_STORE_UNAVAILABLE', 'SB_ERR_STORE_UNAVAILABLE']);
  redis.thaw();
  await until('Redis stored them after the thaw', async () => (await inbox.range('bob', 0, 0)).head === 5);

  // carol writes before alice's app resends.
  t.equal(Number(u64((await send(carol, 'from carol', 1)).seq)), 6, "carol's message stored as seq 6");
  const resent = [await send(alice, 'm6', 6), await send(alice, 'm7', 7)];
  t.same(resent.map((r) => r.duplicate), [true, true], 'the resends are duplicates: bob is nudged');
  await sleep(1_500);
  const closing = await bob.nextClosing(500).catch(() => undefined);
  t.equal(closing?.code, 'SB_ERR_INBOX_RESET', 'bob phone is closed with SB_ERR_INBOX_RESET (the fork is found)');
  t.same(contents(bob.takeDeliveries()), ['from carol'], "(carol's message was written live as seq 6 before the resends: it was the next seq)");
  const again = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'phone', { acks: true, lastSeq: 6, inboxEpoch: epoch });
  t.equal(again.loginResponse?.reset, true, 'the next login at 6 reports the reset');
  const replay = await again.deliveries(6, 2_000).catch(() => again.takeDeliveries());
  t.same(contents(replay), ['m1', 'm2', 'm3', 'm6', 'm7', 'from carol'], 'and replays what the inbox holds, m6 and m7 included');
});
