// An inbox whose sequence goes backwards under load, on a real Redis behind a real worker
// process: Redis loses its data (FLUSHALL) while senders keep sending, or its sequence is
// rewound as a failover to a lagging replica would; and the wipe again in a cluster of two
// worker processes, the recipient on the other worker (its deliveries come as PEER_DELIVER). Every message acknowledged after that must
// reach each of the recipient's devices: the online ones (an ack device and a legacy one, both
// SDK clients that reconnect) and one that was offline and comes back with its old position. Each
// is told that its position was reset. Without inbox epochs the new messages reuse sequence
// numbers the devices have seen, and none of them is delivered.
// bin/switchboard.js runs the compiled dist/: `npm run build` (npm test does) first.

import t, { type Test } from 'tap';
import { Redis } from 'ioredis';
import { TokenSigner } from '../../src/auth/token.js';
import { ImClient, type IncomingMessage } from '../../src/client/im-client.js';
import { RedisInboxStore } from '../../src/inbox/redis-inbox-store.js';
import { decodeMessage } from '../../src/protocol/codec.js';
import { until } from '../../testkit/wait.js';
import { CLUSTER_TOKEN_SECRET, startCluster, startRedisWorker, type WorkerProcess } from '../helpers/cluster.js';
import { startZooKeeper } from '../helpers/zookeeper.js';
import { isDelivery, seqOf, u64, type RawClient } from '../../testkit/raw-client.js';
import { connectLoggedIn } from '../helpers/raw-session.js';
import { startRedis, type TestRedis } from '../helpers/redis.js';

const signer = new TokenSigner(CLUSTER_TOKEN_SECRET);
const token = (uid: string, deviceId: string) => signer.mint({ uid, deviceId, ttlMs: 600_000 });
const SENDERS = ['alice', 'carol'];
/** Sends each sender keeps in flight. */
const WINDOW = 3;
/** Messages each sender has acknowledged after the event before the senders stop. */
const AFTER = 150;
const WAIT_MS = 15_000;

interface Device {
  client: ImClient;
  shown: IncomingMessage[];
  resets: { requested: number; previousEpoch: number; from: number; epoch: number }[];
}

async function device(t: Test, worker: WorkerProcess, deviceId: string, acks: boolean): Promise<Device> {
  const client = new ImClient({ host: '127.0.0.1', port: worker.port, uid: 'bob', deviceId, token: token('bob', deviceId), acks, retryStrategy: () => 50, requestTimeoutMs: 20_000 });
  const d: Device = { client, shown: [], resets: [] };
  client.on('message', (m) => d.shown.push(m));
  client.on('reset', (r) => d.resets.push(r));
  t.teardown(() => client.close());
  await client.connect();
  return d;
}

/** Senders that keep sending to bob, WINDOW at a time each, recording which sends started after the event. */
class Load {
  /** Contents acknowledged by sends that started after the event. */
  readonly after = new Set<string>();
  readonly failures: unknown[] = [];
  #event = false;
  #running = true;
  readonly #done: Promise<void>[] = [];
  readonly #afterCount = new Map<string, number>();

  constructor(t: Test, worker: WorkerProcess) {
    for (const uid of SENDERS) {
      const client = new ImClient({ host: '127.0.0.1', port: worker.port, uid, deviceId: 'd', token: token(uid, 'd'), retryStrategy: () => 50, requestTimeoutMs: 20_000 });
      t.teardown(() => client.close());
      let n = 0;
      this.#afterCount.set(uid, 0);
      const loop = async () => {
        while (this.#running) {
          const content = `${uid}:${++n}`;
          const afterEvent = this.#event;
          try {
            await client.send('bob', content);
            if (afterEvent) {
              this.after.add(content);
              this.#afterCount.set(uid, this.#afterCount.get(uid)! + 1);
            }
          } catch (err) {
            this.failures.push(err);
          }
        }
      };
      this.#done.push(client.connect().then(() => Promise.all(Array.from({ length: WINDOW }, loop)).then(() => undefined)));
    }
  }

  /** The event (wipe, rewind) has completed: sends from now on must all be delivered. */
  markEvent(): void {
    this.#event = true;
  }

  async finish(): Promise<void> {
    await until(() => `each sender acknowledged ${AFTER} after the event (${[...this.#afterCount.values()]})`, () => [...this.#afterCount.values()].every((n) => n >= AFTER), WAIT_MS);
    this.#running = false;
    await Promise.all(this.#done);
  }
}

/** A device that caught up with the inbox as it was at its login, went offline and kept its position (seq and epoch). */
async function offlineDevice(t: Test, worker: WorkerProcess): Promise<{ lastSeq: number; epoch: number }> {
  const raw = await connectLoggedIn(t, worker.port, 'bob', token('bob', 'offline'), 'offline', { acks: true });
  const epoch = Number(u64(raw.loginResponse?.inboxEpoch));
  const got = await raw.deliveries(Number(u64(raw.loginResponse?.inboxHead)), WAIT_MS);
  const lastSeq = seqOf(got.at(-1)!);
  raw.ack(lastSeq);
  await raw.roundTrip();
  raw.destroy();
  return { lastSeq, epoch };
}

/** What bob's inbox holds now, as (seq, content). */
async function inboxNow(redis: TestRedis): Promise<{ head: number; oldest: number; epoch: number; messages: { seq: number; content: string }[] }> {
  const store = new RedisInboxStore({ url: redis.url });
  try {
    const r = await store.range('bob', 0, 100_000);
    const messages = r.messages.map((m) => ({ seq: m.seq, content: decodeMessage(Buffer.concat([Buffer.from([0x32]), varint(m.body.length), m.body])).messageRequest!.content ?? '' }));
    return { head: r.head, oldest: r.oldest, epoch: r.epoch, messages };
  } finally {
    await store.close();
  }
}

function varint(n: number): Buffer {
  const out: number[] = [];
  for (; n >= 0x80; n >>>= 7) out.push((n & 0x7f) | 0x80);
  out.push(n);
  return Buffer.from(out);
}

/** The offline device comes back with its old position: it must be told of the reset and get what the inbox holds. */
async function comeBack(t: Test, worker: WorkerProcess, redis: TestRedis, old: { lastSeq: number; epoch: number }): Promise<RawClient> {
  const held = await inboxNow(redis);
  const raw = await connectLoggedIn(t, worker.port, 'bob', token('bob', 'offline'), 'offline', { acks: true, lastSeq: old.lastSeq, inboxEpoch: old.epoch });
  const r = raw.loginResponse!;
  t.equal(r.reset, true, 'the returning device is told its position was reset');
  t.not(Number(u64(r.inboxEpoch)), old.epoch, 'and given the new epoch');
  t.equal(Number(u64(r.syncFrom)), held.oldest - 1, 'the replay starts at the oldest retained message');
  const replayed = await raw.deliveries(held.messages.length, WAIT_MS);
  t.same(
    replayed.map((m) => ({ seq: seqOf(m), content: m.messageRequest?.content ?? '' })),
    held.messages,
    `it is replayed exactly what the inbox now holds (${held.messages.length} messages)`,
  );
  return raw;
}

function missingFrom(d: Device, wanted: Set<string>): string[] {
  const shown = new Set(d.shown.map((m) => m.content));
  return [...wanted].filter((c) => !shown.has(c));
}

async function allDelivered(t: Test, devices: Record<string, Device>, wanted: Set<string>): Promise<void> {
  const all = Object.values(devices);
  await until('every device shown every message acknowledged after the event', () => all.every((d) => missingFrom(d, wanted).length === 0), WAIT_MS).catch(() => undefined);
  for (const [name, d] of Object.entries(devices)) {
    t.same(missingFrom(d, wanted).length, 0, `${name}: all ${wanted.size} messages acknowledged after the event are delivered`);
  }
}

t.test('Redis loses its data under load (FLUSHALL): every message acknowledged afterwards is delivered, each device is told of the reset', async (t) => {
  const redis = await startRedis(t);
  const worker = await startRedisWorker(t, redis);
  const offline = await (async () => {
    const admin = new ImClient({ host: '127.0.0.1', port: worker.port, uid: 'alice', deviceId: 'x', token: token('alice', 'x'), retryStrategy: false });
    t.teardown(() => admin.close());
    await admin.connect();
    for (let i = 1; i <= 20; i++) await admin.send('bob', `before:${i}`);
    admin.close();
    return offlineDevice(t, worker);
  })();
  const devices = { ack: await device(t, worker, 'phone', true), legacy: await device(t, worker, 'legacy', false) };
  const epochBefore = devices.ack.client.inboxEpoch;
  t.equal(offline.epoch, epochBefore);

  const load = new Load(t, worker);
  await until('the devices got some of the load', () => devices.ack.shown.length > 100 && devices.legacy.shown.length > 100, WAIT_MS);
  const admin = new Redis(redis.url);
  t.teardown(() => admin.disconnect());
  await admin.flushall();
  load.markEvent();
  await load.finish();
  t.same(load.failures, [], 'no send failed');
  t.comment(`${load.after.size} messages acknowledged after the wipe`);

  await allDelivered(t, devices, load.after);
  for (const [name, d] of Object.entries(devices)) {
    t.ok(d.resets.length >= 1, `${name} was told its position was reset`);
    t.equal(d.resets[0]?.previousEpoch, epochBefore, `${name}: the reset names the epoch of before`);
    t.not(d.client.inboxEpoch, epochBefore, `${name} is in the new epoch`);
  }
  await worker.waitForLog({ msg: 'inbox reset: closing session', uid: 'bob' });
  const raw = await comeBack(t, worker, redis, offline);
  t.ok(raw.received.filter(isDelivery).every((m) => !(m.messageRequest?.content ?? '').startsWith('before:')), 'nothing from before the wipe exists any more');
});

// A failover to a replica that lagged behind: the sequence and the log are those of a moment ago,
// the epoch the same. Done in one script, so no append falls in between. The log loses whole
// entries, as a replica lags by whole scripts: from the one holding head - ARGV[1] on.
const REWIND = `
local h = tonumber(string.match(redis.call('GET', KEYS[1]), '^(%d+)')) - tonumber(ARGV[1])
local holding = redis.call('XREVRANGE', KEYS[2], string.format('%d', h), '-', 'COUNT', 1)[1]
local cut = h + 1
if holding then cut = tonumber(string.match(holding[1], '^(%d+)')) end
for _, entry in ipairs(redis.call('XRANGE', KEYS[2], string.format('%d', cut), '+')) do redis.call('XDEL', KEYS[2], entry[1]) end
-- The replica's log never had them: its last id is that of the last entry left.
local last = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)[1]
redis.call('XSETID', KEYS[2], last and last[1] or '0-1')
h = cut - 1
redis.call('SET', KEYS[1], string.format('%d', h))
local cur = redis.call('HGETALL', KEYS[3])
for i = 1, #cur, 2 do
  if tonumber(cur[i + 1]) > h then redis.call('HSET', KEYS[3], cur[i], h) end
end
return h
`;

t.test('a failover to a lagging replica (the sequence rewound, same epoch): a new epoch, nothing acknowledged afterwards skipped', async (t) => {
  const redis = await startRedis(t);
  const worker = await startRedisWorker(t, redis);
  const devices = { ack: await device(t, worker, 'phone', true), legacy: await device(t, worker, 'legacy', false) };
  const epochBefore = devices.ack.client.inboxEpoch;

  const load = new Load(t, worker);
  await until('the devices got some of the load', () => devices.ack.shown.length > 100 && devices.legacy.shown.length > 100, WAIT_MS);
  // A device that goes offline now, high in the sequence: after the rewind, new messages take its numbers.
  const offline = await offlineDevice(t, worker);
  const admin = new Redis(redis.url);
  t.teardown(() => admin.disconnect());
  const rewoundTo = Number(await admin.eval(REWIND, 3, 'sb:{bob}:seq', 'sb:{bob}:lg', 'sb:{bob}:cur', 50));
  load.markEvent();
  t.ok(offline.lastSeq > rewoundTo, `the offline device's position (${offline.lastSeq}) is above the rewound head (${rewoundTo})`);
  await load.finish();
  t.same(load.failures, [], 'no send failed');

  await allDelivered(t, devices, load.after);
  const detected = await worker.waitForLog({ msg: 'inbox sequence went backwards: new epoch', uid: 'bob' });
  t.equal(detected.from, epochBefore, 'the worker noticed the sequence going backwards');
  for (const [name, d] of Object.entries(devices)) {
    t.ok(d.resets.length >= 1, `${name} was told its position was reset`);
    t.not(d.client.inboxEpoch, epochBefore, `${name} is in the new epoch`);
  }
  const held = await inboxNow(redis);
  t.ok(held.head > offline.lastSeq, `the new messages have passed the offline device's position (${held.head} > ${offline.lastSeq})`);
  t.not(held.epoch, epochBefore, 'the inbox has a new epoch');
  // Without the new epoch its old position would be valid again, and the messages numbered
  // rewoundTo+1 .. lastSeq of the new history would be skipped.
  await comeBack(t, worker, redis, offline);
});

t.test('in a cluster: Redis wiped while the recipient is on another worker than the senders', async (t) => {
  const zk = await startZooKeeper(t);
  const cluster = await startCluster(t, zk, { workers: 2 });
  const [a, b] = cluster.workers as [WorkerProcess, WorkerProcess];
  const devices = { ack: await device(t, b, 'phone', true), legacy: await device(t, b, 'legacy', false) };
  const epochBefore = devices.ack.client.inboxEpoch;
  const load = new Load(t, a);
  await until('the devices got some of the load, forwarded', () => devices.ack.shown.length > 100 && devices.legacy.shown.length > 100, WAIT_MS);
  const admin = new Redis(cluster.redis.url);
  t.teardown(() => admin.disconnect());
  await admin.flushall();
  load.markEvent();
  await load.finish();
  t.same(load.failures, [], 'no send failed');
  await allDelivered(t, devices, load.after);
  for (const [name, d] of Object.entries(devices)) {
    t.ok(d.resets.length >= 1, `${name} was told its position was reset`);
    t.equal(d.resets[0]?.previousEpoch, epochBefore);
  }
  t.ok(b.logs({ msg: 'inbox reset: closing session', uid: 'bob' }).length >= 1, 'the worker holding the devices closed their sessions for the new epoch');
});
