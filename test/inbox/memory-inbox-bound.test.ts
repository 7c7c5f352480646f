// The memory inbox's bound on all inboxes together. The attack: one client writes to a new
// recipient per message, so every message makes an inbox; without a bound the process grew to
// 3.3 GB and never shrank. Here the accounted total never passes the bound, the append that
// would is refused with SB_ERR_STORE_FULL and leaves nothing behind, the inboxes that exist
// keep a share for themselves, pruning gives memory back, the bookkeeping matches a recount
// under any sequence of operations, and the accounting is not below what V8 really spends.

import t from 'tap';
import fc from 'fast-check';
import v8 from 'node:v8';
import vm from 'node:vm';
import { MemoryInboxStore } from '../../src/inbox/memory-inbox-store.js';
import { isSwitchboardError } from '../../src/errors.js';

/** A range without its epoch (random per store), for exact comparisons. */
function withoutEpoch<T extends { epoch: number }>({ epoch: _epoch, ...rest }: T): Omit<T, 'epoch'> {
  return rest;
}

const MiB = 1024 * 1024;
const DAY = 24 * 3600_000;
const body = (bytes: number, fill = 0x61) => Buffer.alloc(bytes, fill);

/** The code append threw, or undefined when it stored. */
function refusal(store: MemoryInboxStore, uid: string, msgId: string, bytes = 100, conversation?: string): string | undefined {
  try {
    store.append({ uid, sender: 'mallory', msgId, body: body(bytes), ...(conversation === undefined ? {} : { conversation }) });
    return undefined;
  } catch (err) {
    if (!isSwitchboardError(err)) throw err;
    return err.code;
  }
}

t.test('a flood of new recipients stops at the bound; the refused leave nothing behind', async (t) => {
  const store = new MemoryInboxStore({ maxBytes: 2 * MiB });
  t.teardown(() => store.close());
  let stored = 0;
  let code: string | undefined;
  let over = 0;
  for (let i = 0; i < 100_000 && code === undefined; i++) {
    code = refusal(store, `victim-${i}`, String(i + 1));
    if (code === undefined) stored++;
    if (store.bytes > store.maxBytes) over++;
  }
  t.equal(code, 'SB_ERR_STORE_FULL', `refused after ${stored} new inboxes`);
  t.equal(over, 0, 'the accounted total never passed the bound');
  t.ok(store.bytes <= (store.maxBytes * 7) / 8, 'new inboxes stop at 7/8 of the bound');
  t.equal(store.inboxes, stored, 'a refused append made no inbox');
  t.same(withoutEpoch(await store.range(`victim-${stored}`, 0, 10)), { head: 0, oldest: 1, messages: [] }, 'nothing stored for the refused recipient');
  let refused = 0;
  for (let i = 0; i < 1000; i++) if (refusal(store, `more-${i}`, '1') === 'SB_ERR_STORE_FULL') refused++;
  t.equal(refused, 1000, '1000 more new recipients refused too');
  t.equal(store.inboxes, stored);

  // The inboxes that exist keep the last eighth for themselves.
  let more = 0;
  for (let i = 0; i < 100_000; i++) {
    code = refusal(store, `victim-${i % 10}`, String(1_000_000 + i));
    if (code !== undefined) break;
    more++;
  }
  t.ok(more > 0, `existing inboxes stored ${more} more`);
  t.equal(code, 'SB_ERR_STORE_FULL', 'until the bound itself');
  t.ok(store.bytes <= store.maxBytes, `${store.bytes} ≤ ${store.maxBytes}`);
  t.equal(store.audit(), store.bytes, 'the running total is the recount');
});

t.test('a device position of a new device is not kept at the bound; a known one is updated', async (t) => {
  const store = new MemoryInboxStore({ maxBytes: MiB });
  t.teardown(() => store.close());
  store.append({ uid: 'bob', sender: 'alice', msgId: '1', body: body(10) });
  const { epoch } = await store.range('bob', 0, 0);
  await store.saveCursor('bob', 'phone', 0, epoch);
  for (let i = 0; refusal(store, `filler-${i}`, '1') === undefined; i++);
  // Devices of bob until one is not remembered: the store is within a position of its bound.
  let devices = 0;
  for (; devices < 100_000; devices++) {
    await store.saveCursor('bob', `device-${devices}`, 1, epoch);
    if ((await store.cursor('bob', `device-${devices}`)) === undefined) break;
  }
  t.ok(devices > 0 && devices < 100_000, `${devices} devices remembered, then one not`);
  const full = store.bytes;
  await store.saveCursor('bob', 'phone', 1, epoch);
  t.equal(await store.cursor('bob', 'phone'), 1, 'the known device moved on');
  await store.saveCursor('bob', 'tablet', 1, epoch);
  await store.saveCursor('nobody', 'phone', 1, epoch);
  t.equal(await store.cursor('bob', 'tablet'), undefined, 'a new device is not remembered at the bound');
  t.equal(await store.range('nobody', 0, 0).then((r) => r.head), 0);
  t.equal(store.bytes, full, 'nothing grew');
  t.ok(store.bytes <= store.maxBytes);
});

t.test('pruning gives memory back: by count at once, by age in the sweep, to inboxes nobody touches', async (t) => {
  let now = 1_000_000;
  const store = new MemoryInboxStore({ maxBytes: 4 * MiB, maxMessages: 50, maxAgeMs: DAY }, () => now);
  t.teardown(() => store.close());
  // By count: one inbox written far past maxMessages stays the size of 50 messages.
  for (let i = 1; i <= 50; i++) store.append({ uid: 'bob', sender: 'alice', msgId: String(i), body: body(1000) });
  const fifty = store.bytes;
  for (let i = 51; i <= 5000; i++) store.append({ uid: 'bob', sender: 'alice', msgId: String(i), body: body(1000) });
  t.ok(store.bytes <= fifty + 64 * 1024 + 50 * 100, `5000 appends, 50 kept: ${store.bytes} bytes against ${fifty} after the first 50`);
  t.equal(store.audit(), store.bytes);

  // By age: fill the store with new recipients, then let a day pass without touching them.
  let i = 0;
  while (refusal(store, `victim-${i}`, '1', 500) === undefined) i++;
  const full = store.bytes;
  now += DAY + 1;
  for (let n = 0; n < Math.ceil(store.inboxes / 10_000) + 1; n++) store.sweep();
  const emptied = store.bytes;
  t.ok(emptied < full / 10, `the sweep pruned what nobody read: ${full} → ${emptied} bytes`);
  t.equal(store.inboxes, i + 1, 'every inbox is still there (its sequence)');
  t.equal(store.audit(), store.bytes, 'the recount agrees');
  t.same(withoutEpoch(await store.range('victim-0', 0, 10)), { head: 1, oldest: 2, messages: [] }, 'the message is gone, its sequence is not');
  t.equal(refusal(store, 'victim-0', '2', 500), undefined, 'the room is there again');
  t.same(await store.range('victim-0', 0, 10).then((r) => r.messages.map((m) => m.seq)), [2]);
});

t.test('the bookkeeping matches a recount after any sequence of operations', async (t) => {
  type Op =
    | { op: 'append'; uid: number; sender: number; msgId: number; bytes: number; peer: number | null }
    | { op: 'cursor'; uid: number; device: number; seq: number }
    | { op: 'time'; ms: number }
    | { op: 'sweep' }
    | { op: 'range'; uid: number };
  const op: fc.Arbitrary<Op> = fc.oneof(
    { weight: 8, arbitrary: fc.record({ op: fc.constant('append' as const), uid: fc.nat(30), sender: fc.nat(3), msgId: fc.nat(200), bytes: fc.oneof(fc.nat(200), fc.nat(20_000)), peer: fc.option(fc.nat(3)) }) },
    { weight: 1, arbitrary: fc.record({ op: fc.constant('cursor' as const), uid: fc.nat(40), device: fc.nat(3), seq: fc.nat(100) }) },
    { weight: 1, arbitrary: fc.record({ op: fc.constant('time' as const), ms: fc.nat(4000) }) },
    { weight: 1, arbitrary: fc.record({ op: fc.constant('sweep' as const) }) },
    { weight: 1, arbitrary: fc.record({ op: fc.constant('range' as const), uid: fc.nat(40) }) },
  );
  await fc.assert(
    fc.asyncProperty(fc.array(op, { maxLength: 300 }), fc.integer({ min: 64 * 1024, max: 2 * MiB }), async (ops, maxBytes) => {
      let now = 0;
      const store = new MemoryInboxStore({ maxBytes, maxMessages: 40, maxAgeMs: 3000, dedupeWindowMs: 2000 }, () => now);
      const { epoch } = await store.range('u0', 0, 0);
      try {
        for (const o of ops) {
          // With a conversation (a peer) or without: its index grows and shrinks with the inbox.
          if (o.op === 'append') refusal(store, `u${o.uid}`, String(o.msgId), o.bytes, o.peer === null ? undefined : `p${o.peer}`);
          else if (o.op === 'cursor') await store.saveCursor(`u${o.uid}`, `d${o.device}`, o.seq, epoch);
          else if (o.op === 'time') now += o.ms;
          else if (o.op === 'sweep') store.sweep();
          else await store.range(`u${o.uid}`, 0, 100);
          if (store.bytes !== store.audit() || store.bytes > maxBytes) return false;
        }
        return true;
      } finally {
        await store.close();
      }
    }),
    { numRuns: 300 },
  );
  t.pass('300 random histories: the total is always the recount and never above the bound');
});

t.test('the accounting is not below what V8 spends on the inboxes', async (t) => {
  v8.setFlagsFromString('--expose-gc');
  const gc = vm.runInNewContext('gc') as () => void;
  const used = () => {
    gc();
    gc();
    const m = process.memoryUsage();
    return m.heapUsed + m.arrayBuffers;
  };
  const shapes: [name: string, inboxes: number, perInbox: number, bytes: number][] = [
    ['the flood: a new recipient per message', 20_000, 1, 100],
    ['conversations: 200 messages each', 200, 200, 100],
    ['large messages', 100, 100, 4000],
  ];
  for (const [name, inboxes, perInbox, bytes] of shapes) {
    const store = new MemoryInboxStore({ maxBytes: 4096 * MiB });
    const before = used();
    let id = 0;
    for (let i = 0; i < inboxes; i++) {
      for (let k = 0; k < perInbox; k++) store.append({ uid: `recipient-${i}`, sender: 'sender', msgId: String(++id), body: body(bytes) });
    }
    const spent = used() - before;
    t.ok(spent <= store.bytes * 1.15, `${name}: V8 spent ${spent} bytes, accounted ${store.bytes} (${(spent / store.bytes).toFixed(2)})`);
    await store.close();
  }
});

t.test('at the bound, an append makes room with what its own inbox drops by age before it is refused', async (t) => {
  let now = 1_000_000;
  const store = new MemoryInboxStore({ maxBytes: 1 * MiB, maxMessages: 100_000, maxAgeMs: DAY, dedupeWindowMs: DAY }, () => now);
  t.teardown(() => store.close());
  // One inbox fills the store; a day later its own next append must not be refused: what it
  // held is past retention, and the append prunes it first (no sweep has run).
  let i = 0;
  while (refusal(store, 'bob', String(++i), 4000) === undefined);
  t.equal(refusal(store, 'bob', String(i), 4000), 'SB_ERR_STORE_FULL', 'full');
  t.equal(refusal(store, 'bob', String(i), 512 * 1024), 'SB_ERR_STORE_FULL', 'half the store: no room');
  now += DAY + 1;
  t.equal(refusal(store, 'bob', String(i), 512 * 1024), undefined, 'stored: the day-old messages made room');
  t.equal(store.audit(), store.bytes);
});
