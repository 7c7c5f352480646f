// RateLimiter: fixed windows per key, the ms until a refused key may retry, and a bounded number
// of tracked keys (oldest window dropped first). The clock is injected.

import t from 'tap';
import { RateLimiter } from '../../src/gate/rate-limiter.js';

function clock(start = 1_000_000) {
  const c = { now: start, read: () => c.now };
  return c;
}

t.test('allows max requests per window, then says how long until the window ends', async (t) => {
  const c = clock();
  const limiter = new RateLimiter({ max: 3, windowMs: 1_000 }, 100, c.read);
  t.same([limiter.take('k'), limiter.take('k'), limiter.take('k')], [0, 0, 0], 'the first three are allowed');
  t.equal(limiter.take('k'), 1_000, 'the fourth, at the window start: the whole window');
  c.now += 300;
  t.equal(limiter.take('k'), 700, '300 ms in: 700 ms left');
  c.now += 699;
  t.equal(limiter.take('k'), 1, '1 ms before the end: 1 ms left');
  c.now += 1;
  t.equal(limiter.take('k'), 0, 'at the end of the window: a new window, allowed');
  t.same([limiter.take('k'), limiter.take('k')], [0, 0], 'three in the new window');
  t.equal(limiter.take('k'), 1_000, 'and the fourth is refused again');
});

t.test('refused requests do not extend the window', async (t) => {
  const c = clock();
  const limiter = new RateLimiter({ max: 1, windowMs: 500 }, 100, c.read);
  t.equal(limiter.take('k'), 0);
  for (let i = 0; i < 10; i++) {
    c.now += 40;
    t.equal(limiter.take('k'), 500 - 40 * (i + 1));
  }
  c.now += 100;
  t.equal(limiter.take('k'), 0, 'allowed once the first window is over');
});

t.test('the window starts at the first request of a key, not at a fixed tick', async (t) => {
  const c = clock(1_000_123);
  const limiter = new RateLimiter({ max: 1, windowMs: 1_000 }, 100, c.read);
  limiter.take('k');
  c.now += 999;
  t.equal(limiter.take('k'), 1);
  c.now += 1;
  t.equal(limiter.take('k'), 0);
});

t.test('keys are independent', async (t) => {
  const c = clock();
  const limiter = new RateLimiter({ max: 2, windowMs: 1_000 }, 100, c.read);
  limiter.take('a');
  limiter.take('a');
  t.ok(limiter.take('a') > 0, 'a is limited');
  t.same([limiter.take('b'), limiter.take('b')], [0, 0], 'b has a budget of its own');
  t.ok(limiter.take('b') > 0);
  t.equal(limiter.take('c'), 0);
});

t.test('names of Object.prototype members are ordinary keys', async (t) => {
  const c = clock();
  const limiter = new RateLimiter({ max: 1, windowMs: 1_000 }, 100, c.read);
  for (const key of ['__proto__', 'constructor', 'toString', 'hasOwnProperty']) {
    t.equal(limiter.take(key), 0, `${key}: allowed once`);
    t.equal(limiter.take(key), 1_000, `${key}: then refused`);
  }
});

t.test('max 0 refuses everything, each time for the rest of the window', async (t) => {
  const c = clock();
  const limiter = new RateLimiter({ max: 0, windowMs: 1_000 }, 100, c.read);
  t.equal(limiter.take('k'), 1_000);
  c.now += 250;
  t.equal(limiter.take('k'), 750);
});

t.test('bounded: beyond maxKeys the oldest window is forgotten, the newest are kept', async (t) => {
  const c = clock();
  const limiter = new RateLimiter({ max: 1, windowMs: 60_000 }, 3, c.read);
  for (const key of ['a', 'b', 'c']) t.equal(limiter.take(key), 0);
  for (const key of ['a', 'b', 'c']) t.ok(limiter.take(key) > 0, `${key} is tracked and limited`);
  t.equal(limiter.take('d'), 0, 'a fourth key is admitted');
  t.equal(limiter.take('a'), 0, 'by dropping the oldest (a): its count started again');
  // 'a' came back as the newest, pushing out 'b' (now the oldest).
  t.equal(limiter.take('b'), 0, 'b, the oldest after that, was dropped for it');
  t.ok(limiter.take('d') > 0, 'd is still tracked');
  t.ok(limiter.take('a') > 0, 'a is tracked again');
});

t.test('bounded: a flood of distinct keys only keeps the last maxKeys of them', async (t) => {
  const c = clock();
  const maxKeys = 100;
  const limiter = new RateLimiter({ max: 1, windowMs: 60_000 }, maxKeys, c.read);
  const flood = 10_000;
  let refused = 0;
  for (let i = 0; i < flood; i++) if (limiter.take(`ip-${i}`) !== 0) refused++;
  t.equal(refused, 0, 'every new key is allowed');
  let limited = 0;
  let forgotten = 0;
  // Probe newest first: a probe of a forgotten key adds it, pushing out the oldest tracked one.
  for (let i = flood - 1; i >= flood - 2 * maxKeys; i--) {
    if (limiter.take(`ip-${i}`) > 0) limited++;
    else forgotten++;
  }
  t.equal(limited, maxKeys, 'exactly the last maxKeys keys are still limited');
  t.equal(forgotten, maxKeys, 'the ones before were forgotten');
});

t.test('renewing an expired window does not evict another key', async (t) => {
  const c = clock();
  const limiter = new RateLimiter({ max: 1, windowMs: 100 }, 2, c.read);
  limiter.take('a');
  c.now += 50;
  limiter.take('b');
  c.now += 50;
  t.equal(limiter.take('a'), 0, "a's window is over: allowed in a new one");
  t.equal(limiter.take('b'), 50, 'b, still in its window, is still tracked and limited');
  t.equal(limiter.take('a'), 100, 'a is limited in its new window');
});

t.test('defaults: Date.now and 100 000 keys', async (t) => {
  const limiter = new RateLimiter({ max: 1, windowMs: 60_000 });
  t.equal(limiter.maxKeys, 100_000);
  t.equal(limiter.take('k'), 0);
  const retry = limiter.take('k');
  t.ok(retry > 0 && retry <= 60_000, `refused, retry within the minute (${retry} ms)`);
});
