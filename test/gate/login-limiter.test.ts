// LoginLimiter's bookkeeping on a memory store: a failure is reserved before the password check,
// so attempts in flight at once cannot overshoot a limit; what did not fail is given back; a
// success makes the address known, which takes it off the per-name limit; a refusal by the
// per-name limit gives the per name and address reservation back.

import t from 'tap';
import { LoginLimiter, type Admission, type LoginLimits } from '../../src/gate/login-limiter.js';
import { MemoryRateLimitStore } from '../../src/gate/memory-rate-limit-store.js';

const LIMITS: LoginLimits = {
  perIp: { max: 3, windowMs: 60_000 },
  perUserIp: { max: 3, windowMs: 60_000 },
  perUser: { max: 5, windowMs: 60_000 },
  knownAddressMs: 600_000,
};

function admitted(a: Admission): Extract<Admission, { admitted: true }> {
  if (!a.admitted) throw new Error(`refused for ${a.retryMs} ms`);
  return a;
}

t.test('attempts in flight at once: exactly max are admitted per name and address', async (t) => {
  const store = new MemoryRateLimitStore();
  const limiter = new LoginLimiter(store, LIMITS);
  const all = await Promise.all(Array.from({ length: 10 }, () => limiter.begin('alice', '10.0.0.1')));
  t.equal(all.filter((a) => a.admitted).length, 3);
  for (const a of all.filter((x) => !x.admitted)) t.ok(!a.admitted && a.retryMs > 0 && a.retryMs <= 60_000);
});

t.test('successes and abandoned attempts give their reservation back; failures keep it', async (t) => {
  const store = new MemoryRateLimitStore();
  const limiter = new LoginLimiter(store, LIMITS);
  for (const outcome of ['succeeded', 'abandoned', 'succeeded', 'abandoned', 'abandoned'] as const) {
    await admitted(await limiter.begin('alice', '10.0.0.1')).settle(outcome);
  }
  t.equal((await store.get('fail:alice|10.0.0.1')).count, 0, 'nothing counted for five attempts that did not fail');
  const failing = admitted(await limiter.begin('alice', '10.0.0.1'));
  await failing.settle('failed');
  await failing.settle('succeeded');
  t.equal((await store.get('fail:alice|10.0.0.1')).count, 1, 'a failure stays counted (and an attempt settles once)');
});

t.test('a success makes the address known: failures from it no longer count per name', async (t) => {
  const store = new MemoryRateLimitStore();
  const limiter = new LoginLimiter(store, LIMITS);
  await admitted(await limiter.begin('alice', '10.0.0.1')).settle('succeeded');
  t.equal((await store.get('known:alice|10.0.0.1')).count, 1);
  await admitted(await limiter.begin('alice', '10.0.0.1')).settle('failed');
  t.equal((await store.get('fail:alice')).count, 0, 'a failure at a known address is not a per-name failure');
  await admitted(await limiter.begin('alice', '10.0.0.2')).settle('failed');
  t.equal((await store.get('fail:alice')).count, 1, 'one at an unknown address is');
});

t.test('refused by the per-name limit: the per name and address reservation is given back', async (t) => {
  const store = new MemoryRateLimitStore();
  const limiter = new LoginLimiter(store, { ...LIMITS, perUser: { max: 1, windowMs: 60_000 } });
  await admitted(await limiter.begin('alice', '10.0.0.1')).settle('failed');
  const refused = await limiter.begin('alice', '10.0.0.2');
  t.notOk(refused.admitted, 'the per-name limit is reached');
  t.equal((await store.get('fail:alice|10.0.0.2')).count, 0, 'the refused attempt left nothing on its address');
});

t.test('request(): every request counts against the address, IPv6 by /64', async (t) => {
  const limiter = new LoginLimiter(new MemoryRateLimitStore(), LIMITS);
  t.same([await limiter.request('2001:db8::1'), await limiter.request('2001:db8::2'), await limiter.request('2001:db8::3')], [0, 0, 0]);
  const retry = await limiter.request('2001:db8::4');
  t.ok(retry > 0 && retry <= 60_000, 'the fourth from the same /64 waits');
  t.equal(await limiter.request('2001:db9::1'), 0, 'another /64 does not');
});

t.test('an address stays known for knownAddressMs after the latest success there, not the first', async (t) => {
  let now = 1_000_000;
  const store = new MemoryRateLimitStore(undefined, () => now);
  const limiter = new LoginLimiter(store, { ...LIMITS, perUser: { max: 1, windowMs: 60_000 } });
  // Logins from home at the start and again shortly before knownAddressMs has passed.
  await admitted(await limiter.begin('alice', '10.0.0.1')).settle('succeeded');
  now += LIMITS.knownAddressMs - 60_000;
  await admitted(await limiter.begin('alice', '10.0.0.1')).settle('succeeded');
  now += 120_000;
  // A guesser elsewhere uses up the per-name limit.
  await admitted(await limiter.begin('alice', '10.9.9.9')).settle('failed');
  t.notOk((await limiter.begin('alice', '10.9.9.8')).admitted, 'the per-name limit is reached');
  const home = await limiter.begin('alice', '10.0.0.1');
  t.ok(home.admitted, 'home, where alice logged in two minutes ago, is still known and admitted');
  now += LIMITS.knownAddressMs;
  t.equal((await store.get('known:alice|10.0.0.1')).count, 0, 'knownAddressMs after the last login, home is forgotten');
});
