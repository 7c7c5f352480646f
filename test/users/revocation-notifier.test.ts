// The RevocationNotifier: in memory, revocations reach this process's listeners after the
// current tick, as copies; over Redis, another process's notifier hears them on
// <prefix>revocations, a killed subscription reports missed() once it is back (the workers then
// check every session at once), and messages that are not revocations are ignored.

import t from 'tap';
import { Redis } from 'ioredis';
import { MemoryRevocationNotifier, type RevocationListener } from '../../src/users/revocation-notifier.js';
import { RedisRevocationNotifier, parseRevocation } from '../../src/users/redis-revocation-notifier.js';
import type { Revocation } from '../../src/users/user-store.js';
import { silentLogger } from '../../src/log.js';
import { startRedis } from '../helpers/redis.js';
import { sleep, until } from '../../testkit/wait.js';

function recorder(): RevocationListener & { heard: Revocation[]; misses: number } {
  const r = { heard: [] as Revocation[], misses: 0, revoked: (x: Revocation) => void r.heard.push(x), missed: () => void r.misses++ };
  return r;
}

t.test('memory: after the current tick, to every listener, as a copy; unsubscribed hears nothing', async (t) => {
  const notifier = new MemoryRevocationNotifier();
  const a = recorder();
  const b = recorder();
  const off = notifier.subscribe(a);
  notifier.subscribe(b);
  const revocation: Revocation = { uid: 'alice', deviceId: 'phone', before: 5 };
  notifier.publish(revocation);
  t.same(a.heard, [], 'not synchronously');
  revocation.before = 99;
  await until('heard', () => a.heard.length === 1 && b.heard.length === 1);
  t.same(a.heard, [{ uid: 'alice', deviceId: 'phone', before: 5 }], 'a copy');
  off();
  notifier.publish({ uid: 'bob', before: 6 });
  await until('b heard it', () => b.heard.length === 2);
  t.equal(a.heard.length, 1, 'a unsubscribed');
  await notifier.close();
});

t.test('parseRevocation: only what a gate publishes', async (t) => {
  const p = (v: unknown) => parseRevocation(Buffer.from(typeof v === 'string' ? v : JSON.stringify(v)));
  t.same(p({ u: 'alice', b: 10 }), { uid: 'alice', before: 10 });
  t.same(p({ u: 'alice', d: 'phone', b: 10 }), { uid: 'alice', deviceId: 'phone', before: 10 });
  for (const bad of ['not json', 'null', '[]', { b: 1 }, { u: '', b: 1 }, { u: 'a', b: -1 }, { u: 'a', b: 1.5 }, { u: 'a', b: '1' }, { u: 'a', d: 7, b: 1 }, { u: 'x'.repeat(300), b: 1 }]) {
    t.equal(p(bad), undefined, JSON.stringify(bad));
  }
});

t.test('redis: another process hears it on <prefix>revocations; a killed subscription reports missed(); junk is ignored', async (t) => {
  const redis = await startRedis(t);
  const admin = new Redis(redis.url);
  t.teardown(() => admin.disconnect());
  const gate = new RedisRevocationNotifier({ url: redis.url, keyPrefix: 'p:', log: silentLogger() });
  const worker = new RedisRevocationNotifier({ url: redis.url, keyPrefix: 'p:', log: silentLogger() });
  t.teardown(() => Promise.all([gate.close(), worker.close()]));
  t.equal(gate.channel, 'p:revocations');
  const r = recorder();
  worker.subscribe(r);
  const subscribed = async () => ((await admin.call('PUBSUB', 'NUMSUB', 'p:revocations')) as [string, number])[1] === 1;
  await until('subscribed', subscribed);
  await admin.publish('p:revocations', 'junk');
  await admin.publish('p:revocations', JSON.stringify({ u: 'x', b: 1, pad: 'y'.repeat(2000) }));
  gate.publish({ uid: 'alice', deviceId: 'phone', before: 42 });
  await until('heard', () => r.heard.length === 1);
  t.same(r.heard, [{ uid: 'alice', deviceId: 'phone', before: 42 }], 'the junk and the oversized message were ignored');
  t.equal(r.misses, 0, 'the first subscription misses nothing');
  await admin.call('CLIENT', 'KILL', 'TYPE', 'pubsub');
  await until('missed() once the subscription is back', () => r.misses === 1);
  await until('subscribed again', subscribed);
  gate.publish({ uid: 'bob', before: 43 });
  await until('heard again', () => r.heard.length === 2);
  await sleep(20);
  t.same(r.heard[1], { uid: 'bob', before: 43 });
});
