// The GroupNotifier contract, run against MemoryGroupNotifier and RedisGroupNotifier (a real
// Redis): changes reach every listener of the process after the current tick, in order, as
// copies; unsubscribing and closing stop them; publish never throws. Then what only Redis has:
// another process's notifier hears them, missed() when the subscription comes back after a
// CLIENT KILL of the subscriber or a Redis restart (and not at the first subscription),
// malformed and oversized messages are ignored with one warn line, a publish to a Redis that
// is down is a warning, and a notifier that never subscribes holds one connection.

import t, { type Test } from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import { Writable } from 'node:stream';
import { Redis } from 'ioredis';
import { MemoryGroupNotifier } from '../../src/groups/group-notifier.js';
import { DEFAULT_MAX_CHANGE_BYTES, RedisGroupNotifier, parseChange } from '../../src/groups/redis-group-notifier.js';
import { createLogger, type Logger } from '../../src/log.js';
import { newGroupId } from '../../src/groups/group-store.js';
import { startRedis } from '../helpers/redis.js';
import { sleep, until } from '../../testkit/wait.js';
import { groupNotifierConformance, recorder } from './group-notifier.conformance.js';

t.test('MemoryGroupNotifier', async (t) => {
  groupNotifierConformance(t, async (t) => {
    const notifier = new MemoryGroupNotifier();
    t.teardown(() => notifier.close());
    return { notifier, subscribed: async () => {} };
  });
});

const redis = await startRedis(t);
const admin = new Redis(redis.url, { maxRetriesPerRequest: 1 });
t.teardown(() => admin.disconnect());
let n = 0;

/** Subscribers of `channel` Redis counts. */
const subscribers = async (channel: string, url = redis.url) => {
  const client = url === redis.url ? admin : new Redis(url, { maxRetriesPerRequest: 1 });
  try {
    return ((await client.call('PUBSUB', 'NUMSUB', channel)) as [string, number])[1];
  } finally {
    if (client !== admin) client.disconnect();
  }
};

/** A Redis notifier on its own prefix; `lines` are its log lines. */
function redisNotifier(t: Test, url = redis.url, prefix = `t${++n}:`, extra: { maxChangeBytes?: number; redisOptions?: object } = {}) {
  const lines: Record<string, unknown>[] = [];
  const log: Logger = createLogger({ level: 'info' }, new Writable({ write: (chunk: Buffer, _e, done) => (lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>), done()) }));
  const notifier = new RedisGroupNotifier({ url, keyPrefix: prefix, timeoutMs: 1_000, log, ...extra });
  t.teardown(() => notifier.close());
  return { notifier, lines, prefix, subscribed: () => until(`subscribed to ${notifier.channel}`, async () => (await subscribers(notifier.channel, url)) >= 1) };
}

t.test('RedisGroupNotifier', async (t) => {
  groupNotifierConformance(t, async (t) => redisNotifier(t));

  t.test('the channel is <prefix>groups; another process hears what this one publishes', async (t) => {
    const one = redisNotifier(t, redis.url, 'tenant:');
    const other = redisNotifier(t, redis.url, 'tenant:');
    const stranger = redisNotifier(t, redis.url, 'other:');
    t.equal(one.notifier.channel, 'tenant:groups');
    const heard = recorder();
    const strangerHeard = recorder();
    other.notifier.subscribe(heard);
    stranger.notifier.subscribe(strangerHeard);
    await until('both subscribed', async () => (await subscribers('tenant:groups')) === 1 && (await subscribers('other:groups')) === 1);
    const group = newGroupId();
    one.notifier.publish({ group, seq: 9, added: ['dave'] });
    await until('the other process heard it', () => heard.changes.length === 1);
    t.same(heard.changes, [{ group, seq: 9, added: ['dave'] }]);
    await sleep(50);
    t.same(strangerHeard.changes, [], 'a notifier on another prefix hears nothing');
  });

  t.test('a publishing-only notifier (a gate) holds one connection; subscribing adds the subscriber', async (t) => {
    const { notifier, prefix } = redisNotifier(t);
    notifier.publish({ group: newGroupId(), seq: 1 });
    await until('the publisher is connected', () => notifier.redis.status === 'ready');
    t.equal(notifier.subscriber, undefined, 'no subscriber connection');
    notifier.subscribe(recorder());
    await until('subscribed', async () => (await subscribers(`${prefix}groups`)) === 1);
    t.ok(notifier.subscriber, 'the subscriber exists once a listener does');
  });

  t.test('CLIENT KILL of the subscriber: missed() once the subscription is back, not at the first one', async (t) => {
    const { notifier, subscribed, lines } = redisNotifier(t);
    const a = recorder();
    const b = recorder();
    notifier.subscribe(a);
    notifier.subscribe(b);
    await subscribed();
    await sleep(50);
    t.equal(a.misses, 0, 'the first subscription reports nothing missed');
    const killed = (await admin.call('CLIENT', 'KILL', 'TYPE', 'pubsub')) as number;
    t.equal(killed, 1, 'the subscriber connection was killed');
    // Published while the subscriber is down (or not yet subscribed again): lost, at most once.
    await until('missed() after the subscription came back', () => a.misses === 1 && b.misses === 1);
    t.ok(lines.some((l) => l.msg === 'group notifier subscribed' && l.resubscribed === true), 'logged as a resubscription');
    const group = newGroupId();
    notifier.publish({ group, seq: 2 });
    await until('changes flow again', () => a.changes.some((c) => c.group === group));
    await admin.call('CLIENT', 'KILL', 'TYPE', 'pubsub');
    await until('and again after a second kill', () => a.misses === 2);
  });

  t.test('a Redis restart: missed() when the subscription is back; a publish meanwhile is a warning, never a throw', async (t) => {
    const server = await startRedis(t);
    const { notifier, subscribed, lines } = redisNotifier(t, server.url, 'r:', { redisOptions: { maxRetriesPerRequest: 0 } });
    const r = recorder();
    notifier.subscribe(r);
    await subscribed();
    await server.stop();
    t.doesNotThrow(() => notifier.publish({ group: newGroupId(), seq: 1 }), 'publishing to a Redis that is down');
    await until('the failed publish is logged', () => lines.some((l) => l.msg === 'group change not published'));
    t.equal(r.misses, 0, 'nothing reported while it is down');
    const again = restartRedis(t, server.port);
    await again.ready;
    await until('missed() after the restart', () => r.misses === 1, 30_000);
    const group = newGroupId();
    notifier.publish({ group, seq: 5 });
    await until('changes flow on the new server', () => r.changes.some((c) => c.group === group && c.seq === 5));
  });

  t.test('malformed and oversized messages: ignored, one warn line for a burst; the next good one arrives', async (t) => {
    const { notifier, subscribed, lines, prefix } = redisNotifier(t, redis.url, undefined, { maxChangeBytes: 1024 });
    const r = recorder();
    notifier.subscribe(r);
    await subscribed();
    const channel = `${prefix}groups`;
    const group = newGroupId();
    for (const bad of [
      'not json',
      '[]',
      'null',
      JSON.stringify({ group: '../etc', seq: 1 }),
      JSON.stringify({ group, seq: 0 }),
      JSON.stringify({ group, seq: 1.5 }),
      JSON.stringify({ group, seq: '1' }),
      JSON.stringify({ group, seq: 1, added: 'bob' }),
      JSON.stringify({ group, seq: 1, added: [1] }),
      JSON.stringify({ group, seq: 1, added: [''] }),
      JSON.stringify({ group, seq: 1, added: ['x'.repeat(2000)] }),
      'x'.repeat(1025),
    ]) {
      await admin.publish(channel, bad);
    }
    await admin.publish(channel, JSON.stringify({ group, seq: 4, added: ['bob'], extra: 'ignored' }));
    await until('the good one arrived', () => r.changes.length === 1);
    t.same(r.changes, [{ group, seq: 4, added: ['bob'] }], 'only the good one, without unknown fields');
    const warnings = lines.filter((l) => l.msg === 'malformed group change ignored');
    t.equal(warnings.length, 1, 'one warn line for the burst');
    t.match(warnings[0], { level: 40, channel });
    t.equal(r.misses, 0);
  });

  t.test('parseChange bounds', async (t) => {
    const group = newGroupId();
    t.same(parseChange(Buffer.from(JSON.stringify({ group, seq: 1, added: Array.from({ length: 5000 }, (_, i) => `u${i}`) })))?.added?.length, 5000);
    t.equal(parseChange(Buffer.from(JSON.stringify({ group, seq: 1, added: Array.from({ length: 5001 }, (_, i) => `u${i}`) }))), undefined, 'at most 5000 uids');
    t.equal(parseChange(Buffer.from(JSON.stringify({ group, seq: Number.MAX_SAFE_INTEGER + 2 }))), undefined, 'a seq beyond safe integers');
    t.ok(DEFAULT_MAX_CHANGE_BYTES >= Buffer.byteLength(JSON.stringify({ group, seq: 1e12, added: Array.from({ length: 500 }, () => 'u'.repeat(64)) })), 'the default bound holds the largest change one call makes');
  });
});

/** redis-server again on `port`, killed at teardown; `ready` once it answers PING. */
function restartRedis(t: Test, port: number): { process: ChildProcess; ready: Promise<void> } {
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
  t.teardown(() => void child.kill('SIGKILL'));
  const ready = until(`redis-server back on ${port}`, async () => {
    const probe = new Redis(`redis://127.0.0.1:${port}`, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    probe.on('error', () => {});
    try {
      await probe.connect();
      return (await probe.ping()) === 'PONG';
    } catch {
      return false;
    } finally {
      probe.disconnect();
    }
  });
  return { process: child, ready };
}


