// How a worker recovers after its Redis refused it for a while, in process, on a real
// redis-server: a nudge whose read fails during the outage is served once Redis answers again (by
// the sweep, at the pace nudges are served), and an inbox found forked whose new epoch Redis
// refused is owed its reset: no device of that user resumes in the forked epoch on this worker
// (its logins are refused until the epoch is stored, its sessions of that epoch are closed), and
// the sweep stores the epoch once Redis takes it. The bound on owed resets is tested last, with
// a store whose answers the test gives.

import t, { type Test } from 'tap';
import { pino } from 'pino';
import { RedisInboxStore } from '../../src/inbox/redis-inbox-store.js';
import type { InboxRange } from '../../src/inbox/inbox-store.js';
import { SwitchboardError } from '../../src/errors.js';
import { OwedResets, RETRY_MAX_MS } from '../../src/server/owed-resets.js';
import { encodeMessageRequest } from '../../src/protocol/codec.js';
import { contents, seqs, u64, type RawClient } from '../../testkit/raw-client.js';
import { sleep, until } from '../../testkit/wait.js';
import { startNode, type TestNode } from '../helpers/node.js';
import { connect, connectLoggedIn } from '../helpers/raw-session.js';
import { laggingReplica, startRedis, type TestRedis } from '../helpers/redis.js';

// One wait below may last up to RETRY_MAX_MS (the sweep's backoff).
t.setTimeout(120_000);

/** The worker's Redis command bound: a frozen Redis fails a read after it. */
const TIMEOUT_MS = 300;
/** The worker's sweep interval with these limits (every timeout ≥ 4 s): 1 s; nudges are served at this pace. */
const SWEEP_MS = 1000;

/**
 * The Redis inbox, counting the reads that failed, and refusing new epochs while `refuseResets`
 * is set (once `held` resolves, when set).
 */
class WatchedInbox extends RedisInboxStore {
  failedReads = 0;
  refuseResets = false;
  refusedResets = 0;
  held: Promise<void> | undefined;

  override async range(uid: string, after: number, limit: number): Promise<InboxRange> {
    try {
      return await super.range(uid, after, limit);
    } catch (err) {
      this.failedReads++;
      throw err;
    }
  }

  // What a worker's client sees when it cannot reach the new master for a while after a failover.
  override async resetEpoch(uid: string, from: number): Promise<number> {
    if (!this.refuseResets) return super.resetEpoch(uid, from);
    this.refusedResets++;
    await this.held;
    throw new SwitchboardError('SB_ERR_STORE_UNAVAILABLE', 'inbox store unavailable (refused by the test)');
  }
}

async function worker(t: Test) {
  const redis = await startRedis(t);
  const inbox = new WatchedInbox({ url: redis.url, timeoutMs: TIMEOUT_MS });
  // Resends far off: no read but the ones the test is about. The health check never marks the
  // worker unready (logins stay possible).
  const tn = await startNode(t, { ackTimeoutMs: 60_000 }, { inbox, health: { failures: 1_000_000 } });
  return { redis, inbox, tn };
}

/** A login of bob's `deviceId` at `lastSeq` of `epoch`: its client and LoginResponse, successful or not. */
async function loginAt(t: Test, tn: TestNode, deviceId: string, lastSeq: number, epoch: number) {
  const client = await connect(t, tn.port);
  const response = (await client.login('bob', tn.token('bob'), deviceId, { acks: true, lastSeq, inboxEpoch: epoch })).loginResponse!;
  return { client, response };
}

t.test('a nudge whose read fails while Redis is frozen is served by the sweep once Redis answers, one read per sweep meanwhile', async (t) => {
  const { redis, inbox, tn } = await worker(t);
  // Another worker's inbox client: what it stores, this worker is not told of.
  const other = new RedisInboxStore({ url: redis.url, timeoutMs: TIMEOUT_MS });
  t.teardown(() => other.close());
  const alice = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'));
  const phone = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'phone', { acks: true });
  const legacy = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'legacy');
  t.equal((await alice.chatAndWait('bob', 'm1')).messageResponse?.result, true);
  for (const device of [phone, legacy]) t.same(contents(await device.deliveries(1)), ['m1'], 'bob is sent m1 live');
  phone.ack(1);
  // Stored by another worker, whose delivery was lost: only a nudge announces it.
  const stored = await other.append({ uid: 'bob', sender: 'carol', msgId: '0', body: encodeMessageRequest({ from: 'carol', to: 'bob', content: 'announced by the nudge' }) });
  t.equal(stored.seq, 2);

  redis.freeze();
  const frozenAt = Date.now();
  tn.node.server.local.nudge(['bob']);
  await until('the reads serving the nudge failed', () => inbox.failedReads >= 2, 5_000);
  // More nudges meanwhile cost nothing: the one waiting covers them.
  for (let i = 0; i < 50; i++) tn.node.server.local.nudge(['bob']);
  await sleep(2 * SWEEP_MS + TIMEOUT_MS);
  const failed = inbox.failedReads;
  const elapsed = Date.now() - frozenAt;
  // Per session: the nudge's own read, then at most one per sweep (and one more under way).
  const bound = 2 * (2 + Math.ceil(elapsed / SWEEP_MS));
  t.ok(failed <= bound, `${failed} failed reads in ${elapsed} ms for two sessions (at most ${bound}): no busy loop`);
  t.same(seqs([...phone.takeDeliveries(), ...legacy.takeDeliveries()]), [], 'nothing delivered during the outage');

  redis.thaw();
  for (const [name, device] of [
    ['the ack device', phone],
    ['the legacy device', legacy],
  ] as const) {
    const got = await device.deliveries(1, 3 * SWEEP_MS).catch(() => []);
    t.same(contents(got), ['announced by the nudge'], `${name} is sent what the nudge announced, by the sweep after the thaw`);
    t.same(seqs(got), [2], 'as seq 2');
  }
});

/**
 * bob's phone was sent seqs 1 to 5 and acknowledged them; a failover to a replica that had 1 to 3
 * rolls bob's inbox back to head 3 in the same epoch; from then on the worker's resetEpoch calls
 * are refused. Resolves the epoch.
 */
async function forkedWithResetsRefused(t: Test, inbox: WatchedInbox, redis: TestRedis, alice: RawClient, phone: RawClient) {
  const epoch = Number(u64(phone.loginResponse?.inboxEpoch));
  for (const i of [1, 2, 3]) t.equal((await alice.chatAndWait('bob', `m${i}`, { msgId: i })).messageResponse?.result, true);
  t.same(contents(await phone.deliveries(3)), ['m1', 'm2', 'm3']);
  phone.ack(3);
  const replica = await laggingReplica(redis, 'sb:{bob}:*');
  for (const i of [4, 5]) t.equal((await alice.chatAndWait('bob', `lost m${i}`, { msgId: i })).messageResponse?.result, true);
  t.same(contents(await phone.deliveries(2)), ['lost m4', 'lost m5'], 'bob phone was sent seqs 4 and 5');
  phone.ack(5);
  await phone.roundTrip();
  await replica.failover();
  t.equal((await inbox.range('bob', 0, 0)).head, 3, 'the failover: bob inbox head went back to 3, same epoch');
  inbox.refuseResets = true;
  return epoch;
}

t.test('a fork whose new epoch Redis refuses: the worker owes the reset; no login resumes in the forked epoch, and the sweep stores it once Redis takes it', async (t) => {
  const { redis, inbox, tn } = await worker(t);
  const alice = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'));
  const phone = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'phone', { acks: true });
  const epoch = await forkedWithResetsRefused(t, inbox, redis, alice, phone);

  // m6 takes seq 4, which the phone was sent as lost m4: the fork is found, the new epoch refused.
  t.equal(Number(u64((await alice.chatAndWait('bob', 'm6', { msgId: 6 })).messageResponse?.seq)), 4, 'm6 stored as seq 4');
  const closing = await phone.nextClosing(5_000).catch(() => undefined);
  t.equal(closing?.code, 'SB_ERR_INBOX_RESET', 'bob phone is closed with SB_ERR_INBOX_RESET');
  t.same(contents(phone.takeDeliveries()), [], 'and not sent m6 as seq 4');
  t.ok(inbox.refusedResets >= 5, `the new epoch was tried and refused (${inbox.refusedResets} times)`);
  t.equal((await inbox.range('bob', 0, 0)).epoch, epoch, 'the inbox still has the forked epoch');

  // The head passes the phone's position: a login at 5 in that epoch is no longer above it.
  for (const i of [7, 8]) await alice.chatAndWait('bob', `m${i}`, { msgId: i });
  t.equal((await inbox.range('bob', 0, 0)).head, 6, 'm7 and m8 stored as seqs 5 and 6');

  for (const deviceId of ['phone', 'tablet']) {
    const { client, response } = await loginAt(t, tn, deviceId, 5, epoch);
    t.equal(response.result, false, `bob ${deviceId} at 5 of the forked epoch: the login is refused while the new epoch is refused`);
    t.equal(response.errorCode, 'SB_ERR_STORE_UNAVAILABLE', 'with SB_ERR_STORE_UNAVAILABLE (log in again later)');
    await client.waitClosed(2_000).catch(() => {});
    t.same(contents(client.takeDeliveries()), [], 'nothing replayed from its old position');
  }

  inbox.refuseResets = false;
  // The sweep's retries back off (1 s, doubling, up to RETRY_MAX_MS): the next one may be that far.
  await until('the sweep stores the new epoch, with no login', async () => (await inbox.range('bob', 0, 0)).epoch !== epoch, RETRY_MAX_MS + 3 * SWEEP_MS);
  const again = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'phone', { acks: true, lastSeq: 5, inboxEpoch: epoch });
  t.equal(again.loginResponse?.reset, true, 'the next login reports the reset');
  t.same(contents(await again.deliveries(6)), ['m1', 'm2', 'm3', 'm6', 'm7', 'm8'], 'and replays what the inbox holds, m6 and m7 included');
});

t.test('a fork whose new epoch Redis refuses: a session of the forked epoch on this worker is closed with SB_ERR_INBOX_RESET, not served', async (t) => {
  const { redis, inbox, tn } = await worker(t);
  const alice = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'));
  const phone = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'phone', { acks: true });
  const epoch = await forkedWithResetsRefused(t, inbox, redis, alice, phone);

  let release!: () => void;
  inbox.held = new Promise<void>((resolve) => (release = resolve));
  t.equal(Number(u64((await alice.chatAndWait('bob', 'm6', { msgId: 6 })).messageResponse?.seq)), 4, 'm6 stored as seq 4');
  // While the phone's session still tries the new epoch, bob's tablet, which had seqs up to 4
  // (lost m4), logs in at 4 of that epoch: not above the head, so nothing at its login shows the fork.
  await until('the phone session found the fork', () => inbox.refusedResets >= 1, 5_000);
  const tablet = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'tablet', { acks: true, lastSeq: 4, inboxEpoch: epoch });
  t.equal(tablet.loginResponse?.reset, false, '(the tablet logged in before the reset was owed: no reset)');
  release();
  t.equal((await phone.nextClosing(5_000).catch(() => undefined))?.code, 'SB_ERR_INBOX_RESET', 'the phone is closed once its attempts are spent');
  t.equal((await inbox.range('bob', 0, 0)).epoch, epoch, 'its new epoch was refused: the inbox still has the forked epoch');

  await alice.chatAndWait('bob', 'm7', { msgId: 7 });
  const closing = await tablet.nextClosing(2_000).catch(() => undefined);
  t.equal(closing?.code, 'SB_ERR_INBOX_RESET', 'the next message closes the tablet with SB_ERR_INBOX_RESET');
  t.same(contents(tablet.takeDeliveries()), [], 'instead of sending m7 as the message after lost m4 (m6 skipped)');
});

t.test('a login above the head whose new epoch Redis refuses is refused, and the reset owed: still refused once the head has passed it', async (t) => {
  const { redis, inbox, tn } = await worker(t);
  const alice = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'));
  const phone = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'phone', { acks: true });
  const epoch = await forkedWithResetsRefused(t, inbox, redis, alice, phone);
  phone.destroy();
  await until('the phone session is gone', () => tn.node.server.sessions.byUser('bob').length === 0, 5_000);

  const above = await loginAt(t, tn, 'phone', 5, epoch);
  t.equal(above.response.errorCode, 'SB_ERR_STORE_UNAVAILABLE', 'at 5, above the head (3): the new epoch is refused, and so is the login');
  // No session of bob is online: nothing finds the fork while the head passes 5.
  for (const i of [6, 7, 8]) await alice.chatAndWait('bob', `m${i}`, { msgId: i });
  t.equal((await inbox.range('bob', 0, 0)).head, 6, 'm6, m7, m8 stored as seqs 4 to 6');
  const again = await loginAt(t, tn, 'phone', 5, epoch);
  t.equal(again.response.errorCode, 'SB_ERR_STORE_UNAVAILABLE', 'at 5, now below the head: still refused, not resumed after lost m5');
  await again.client.waitClosed(2_000).catch(() => {});
  t.same(contents(again.client.takeDeliveries()), [], 'nothing replayed from its old position');

  inbox.refuseResets = false;
  const reset = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'phone', { acks: true, lastSeq: 5, inboxEpoch: epoch });
  t.equal(reset.loginResponse?.reset, true, 'once Redis takes the new epoch (at this login or a sweep), the login reports the reset');
  t.same(contents(await reset.deliveries(6)), ['m1', 'm2', 'm3', 'm6', 'm7', 'm8'], 'and replays what the inbox holds');
});

t.test('owed resets: a bounded number, the oldest forgotten (logged); one attempt at a time, backing off; none once the inbox left the epoch', async (t) => {
  const lines: Record<string, unknown>[] = [];
  const log = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
  /** resetEpoch calls, answered by the test: a new epoch, or (undefined) refused. */
  const calls: { uid: string; answer(to?: number): void }[] = [];
  const inbox = {
    resetEpoch: (uid: string) =>
      new Promise<number>((resolve, reject) => {
        calls.push({ uid, answer: (to) => (to === undefined ? reject(new SwitchboardError('SB_ERR_STORE_UNAVAILABLE', 'refused')) : resolve(to)) });
      }),
  };
  const owed = new OwedResets(inbox, log, 2);
  owed.owe('a', 1);
  owed.owe('b', 1);
  owed.owe('b', 1);
  owed.owe('c', 1);
  t.same([owed.size, owed.owes('a', 1), owed.owes('b', 1), owed.owes('c', 1), owed.owes('c', 2)], [2, false, true, true, false], 'two kept: the oldest, a, forgotten');
  t.match(lines.find((l) => l.msg === 'owed inbox epoch resets at their bound: oldest forgotten'), { level: 50, uid: 'a', epoch: 1, max: 2 }, 'and logged');

  owed.retry();
  owed.retry();
  t.same(calls.map((c) => c.uid), ['b', 'c'], 'a sweep tries each once; the next one adds nothing while they are under way');
  calls[0]!.answer();
  calls[1]!.answer(7);
  await new Promise<void>((resolve) => setImmediate(resolve));
  t.same([owed.owes('b', 1), owed.owes('c', 1)], [true, false], 'refused: still owed; stored: no longer');
  t.match(lines.find((l) => l.msg === 'inbox epoch reset failed'), { level: 50, uid: 'b', attempts: 1 });
  t.match(lines.find((l) => l.msg === 'owed inbox epoch reset stored'), { level: 30, uid: 'c', from: 1, to: 7 });

  owed.retry();
  t.equal(calls.length, 2, "a refused attempt waits before the sweep's next one");
  owed.retry(Date.now() + 500);
  t.equal(calls.length, 2, 'half a second after the first failure');
  owed.retry(Date.now() + 1_100);
  t.equal(calls.length, 3, 'then tried again');
  t.equal(await owed.settle('b', 5), false, 'a login that finds the inbox at another epoch owes nothing');
  t.equal(owed.size, 0, 'and the fork is forgotten');
  calls[2]!.answer(5);
  await new Promise<void>((resolve) => setImmediate(resolve));
  t.equal(lines.filter((l) => l.msg === 'owed inbox epoch reset stored').length, 1, 'the sweep attempt answering after it changes nothing');
});
