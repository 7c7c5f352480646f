// MessageRate: the token buckets per session and per user, and what counts as a flood. The
// clock is the caller's (a connection's last read time), so these tests pass times directly.

import t from 'tap';
import { DEFAULT_LIMITS, type WorkerLimits } from '../../src/config.js';
import { MessageRate } from '../../src/server/message-rate.js';
import { LocalSession, type Outbound } from '../../src/session/local-session.js';
import { LocalSessionMap } from '../../src/session/local-session-map.js';

const outbound: Outbound = { sendFrame() {}, close() {}, congested: false, drained: async () => {}, queuedBytes: 0, handedOffBytes: 0 };
const T0 = 1_700_000_000_000;

function limits(overrides: Partial<WorkerLimits>): WorkerLimits {
  return { ...DEFAULT_LIMITS, ...overrides };
}

let sessions = 0;
function session(uid: string): LocalSession {
  return new LocalSession(`s${++sessions}`, uid, `d${sessions}`, 0, outbound);
}

/** How many of `count` messages sent at `at` are admitted. */
function admitted(rate: MessageRate, s: LocalSession, count: number, at: number): number {
  let n = 0;
  for (let i = 0; i < count; i++) if (rate.take(s, at) === undefined) n++;
  return n;
}

t.test('a connection may send its burst at once, then at its rate', async (t) => {
  const rate = new MessageRate(limits({ messageRate: 10, messageBurst: 50, userMessageRate: 0 }));
  const s = session('alice');
  t.equal(admitted(rate, s, 50, T0), 50, 'the burst');
  t.match(rate.take(s, T0), { code: 'SB_ERR_RATE_LIMITED', reason: /10 messages\/s .*this connection/ }, 'one more is refused');
  t.equal(admitted(rate, s, 5, T0 + 99), 0, 'less than a token refilled in 99 ms');
  t.equal(admitted(rate, s, 5, T0 + 100), 1, 'one token per 100 ms');
  // Ten seconds at exactly the rate: every one admitted, none more.
  let ok = 0;
  for (let ms = 200; ms <= 10_100; ms += 100) ok += admitted(rate, s, 2, T0 + ms);
  t.equal(ok, 100, 'ten a second for ten seconds, the second of each pair refused');
  t.equal(admitted(rate, s, 200, T0 + 60_000), 50, 'idle for long: the burst again, no more');
});

t.test("a user's sessions share the user's bucket; a refusal there costs the device nothing", async (t) => {
  const rate = new MessageRate(limits({ messageRate: 100, messageBurst: 30, userMessageRate: 10, userMessageBurst: 40 }));
  const phone = session('bob');
  const laptop = session('bob');
  t.equal(admitted(rate, phone, 25, T0), 25);
  t.equal(admitted(rate, laptop, 25, T0), 15, 'the laptop gets what the phone left of the 40');
  t.match(rate.take(laptop, T0), { code: 'SB_ERR_RATE_LIMITED', reason: /for this user on this worker/ });
  t.equal(admitted(rate, session('carol'), 30, T0), 30, 'another user is unaffected');
  // The laptop was refused 11 times by the user's bucket: its own 30 are still 15 + refunds.
  t.equal(admitted(rate, laptop, 30, T0 + 60_000), 30, 'once the user bucket refilled, the device bucket is its own size');
});

t.test('the flood rule: N refusals within one window close, fewer per window never do', async (t) => {
  const rate = new MessageRate(limits({ messageRate: 1, messageBurst: 1, userMessageRate: 0, floodRefusals: 5, floodWindowMs: 1000 }));
  const slow = session('dave');
  rate.take(slow, T0);
  // One admitted and four refused in each of many windows: never a flood.
  for (let w = 1; w <= 20; w++) {
    t.equal(admitted(rate, slow, 5, T0 + w * 1000), 1);
    t.notOk(rate.flooded(slow), `window ${w}: 4 refusals`);
  }
  const fast = session('erin');
  rate.take(fast, T0);
  for (let i = 0; i < 4; i++) rate.take(fast, T0 + i);
  t.notOk(rate.flooded(fast), '4 refusals');
  rate.take(fast, T0 + 999);
  t.ok(rate.flooded(fast), 'the 5th within the window is a flood');
  t.match(rate.flood, { code: 'SB_ERR_FLOOD' });
  const never = new MessageRate(limits({ messageRate: 1, messageBurst: 1, userMessageRate: 0, floodRefusals: 0 }));
  const s = session('frank');
  for (let i = 0; i < 1000; i++) never.take(s, T0);
  t.notOk(never.flooded(s), 'floodRefusals 0: never');
});

t.test("a user's bucket outlives the last session until it has refilled", async (t) => {
  const rate = new MessageRate(limits({ messageRate: 0, userMessageRate: 10, userMessageBurst: 100 }));
  const map = new LocalSessionMap();
  const first = session('gina');
  map.add(first);
  t.equal(admitted(rate, first, 150, T0), 100);
  map.remove(first);
  rate.sweep(T0 + 1000, map);
  t.equal(rate.users, 1, 'kept: not refilled yet');
  const again = session('gina');
  map.add(again);
  t.equal(admitted(rate, again, 150, T0 + 1000), 10, 'logging in again buys no fresh burst');
  map.remove(again);
  rate.sweep(T0 + 1000 + 9_999, map);
  t.equal(rate.users, 1, 'not quite refilled');
  rate.sweep(T0 + 1000 + 10_000, map);
  t.equal(rate.users, 1, 'refilled, but the buckets were walked less than 5 s ago');
  rate.sweep(T0 + 1000 + 15_000, map);
  t.equal(rate.users, 0, 'refilled: forgotten');
  const online = session('hank');
  map.add(online);
  rate.take(online, T0);
  rate.sweep(T0 + 3_600_000, map);
  rate.sweep(T0 + 7_200_000, map);
  t.equal(rate.users, 1, 'a user with a session keeps the bucket');
});

t.test('rate 0 switches a bucket off; a clock that goes back refills nothing', async (t) => {
  const off = new MessageRate(limits({ messageRate: 0, userMessageRate: 0 }));
  t.equal(admitted(off, session('ivan'), 100_000, T0), 100_000);
  t.equal(off.users, 0, 'no user buckets are made');
  const rate = new MessageRate(limits({ messageRate: 10, messageBurst: 10, userMessageRate: 0 }));
  const s = session('judy');
  t.equal(admitted(rate, s, 10, T0), 10);
  t.equal(admitted(rate, s, 10, T0 - 60_000), 0, 'an hour back: nothing refilled, nothing taken away');
  t.equal(admitted(rate, s, 10, T0 - 60_000 + 100), 1, 'and the rate runs on from there');
});
