// PairQueue against a plain array of pairs: any sequence of pushes and shifts leaves the same
// pairs, found by the same lowerBound, through growth, wrapping around its ring and shrinking;
// and its bytes follow what it holds (a queue emptied by shifts gives its memory back, one with
// a maxPairs grows to exactly that).

import t from 'tap';
import fc from 'fast-check';
import { PairQueue } from '../../src/inbox/pair-queue.js';

type Op = { push: number } | { shift: number } | { bound: number };

t.test('any pushes and shifts: the same pairs as an array, and the same lowerBound', async (t) => {
  const op = fc.oneof(
    { weight: 6, arbitrary: fc.integer({ min: 1, max: 5 }).map((step): Op => ({ push: step })) },
    { weight: 3, arbitrary: fc.integer({ min: 0, max: 40 }).map((n): Op => ({ shift: n })) },
    { weight: 1, arbitrary: fc.integer({ min: -5, max: 2000 }).map((v): Op => ({ bound: v })) },
  );
  fc.assert(
    fc.property(fc.integer({ min: 1, max: 8 }), fc.option(fc.integer({ min: 1, max: 70 }), { nil: undefined }), fc.array(op, { maxLength: 600 }), (capacity, maxPairs, ops) => {
      const queue = new PairQueue(capacity, maxPairs);
      const model: [number, number][] = [];
      let next = 0;
      for (const o of ops) {
        if ('push' in o) {
          next += o.push;
          const cost = queue.pushCost();
          const before = queue.bytes;
          queue.push(next, next * 3 + 1);
          model.push([next, next * 3 + 1]);
          if (queue.bytes - before !== cost) return false;
        } else if ('shift' in o) {
          queue.shift(o.shift);
          model.splice(0, o.shift);
        } else {
          const expected = model.findIndex(([first]) => first >= o.bound);
          if (queue.lowerBound(o.bound) !== (expected < 0 ? model.length : expected)) return false;
        }
        if (queue.length !== model.length || queue.lastFirst() !== model.at(-1)?.[0]) return false;
        // Within its bound, never more than the bound's room (or its first array).
        if (maxPairs !== undefined && model.length <= maxPairs && queue.bytes > 16 * Math.max(capacity, maxPairs, model.length)) return false;
      }
      for (let i = 0; i < model.length; i++) if (queue.first(i) !== model[i]![0] || queue.second(i) !== model[i]![1]) return false;
      return queue.first(model.length) === undefined && queue.second(-1) === undefined && JSON.stringify(queue.firsts(0, model.length)) === JSON.stringify(model.map(([first]) => first));
    }),
    { numRuns: 500 },
  );
  t.pass('500 random histories');
});

t.test('bytes: doubling as it fills, and given back as it empties', async (t) => {
  const queue = new PairQueue();
  t.equal(queue.bytes, PairQueue.EMPTY_BYTES, 'a new queue holds its first array');
  for (let i = 0; i < 10_000; i++) queue.push(i, i);
  t.equal(queue.bytes, 16 * 16_384, '10 000 pairs in an array of 16 384');
  // Dropping from the front while pushing: the ring wraps rather than grows.
  for (let i = 10_000; i < 50_000; i++) {
    queue.push(i, i);
    queue.shift();
  }
  t.equal(queue.bytes, 16 * 16_384, 'a window of 10 000 moving over 40 000 more pairs stays in its array');
  t.same(queue.firsts(0, 3), [40_000, 40_001, 40_002]);
  queue.shift(9_990);
  t.ok(queue.bytes <= 16 * 64, `10 pairs left hold ${queue.bytes} bytes`);
  queue.shift(100);
  t.equal(queue.length, 0);
  t.equal(queue.bytes, PairQueue.EMPTY_BYTES, 'emptied: back to its first array');
  t.equal(queue.lastFirst(), undefined);
});

t.test('maxPairs: a full inbox\'s index is as large as its bound, not the next power of two', async (t) => {
  const queue = new PairQueue(undefined, 10_001);
  for (let i = 0; i < 10_000; i++) queue.push(i, i);
  t.equal(queue.bytes, 16 * 10_001, '10 000 pairs in an array of 10 001');
  // As its users do: push one more, then drop the oldest. The ring wraps instead of growing.
  for (let i = 10_000; i < 50_000; i++) {
    t.equal(queue.pushCost(), 0);
    queue.push(i, i * 2);
    queue.shift();
  }
  t.equal(queue.bytes, 16 * 10_001, 'a window of 10 000 moving over 40 000 more pairs stays in its array');
  t.same(queue.firsts(0, 3), [40_000, 40_001, 40_002]);
  t.equal(queue.lowerBound(45_000), 5_000, 'searched across the wrap');
  t.equal(queue.second(9_999), 99_998);
  queue.push(50_000, 0);
  queue.push(50_001, 0);
  t.equal(queue.length, 10_002, 'past its bound it still takes pairs');
  t.equal(queue.bytes, 16 * 20_002, 'by doubling');
  queue.shift();
  t.equal(queue.length, 10_001);
  t.equal(queue.bytes, 16 * 10_001, 'back within its bound: back to the bound\'s array');
  t.same(queue.firsts(0, 2), [40_001, 40_002]);
  t.equal(queue.lastFirst(), 50_001);
});

t.test('the smallest history that outgrew its bound: three pushes into a bound of 2, then a shift', async (t) => {
  // Found by the property above (capacity 1, maxPairs 2): the array stayed at 4 pairs for 2.
  const queue = new PairQueue(1, 2);
  for (const v of [1, 2, 3]) queue.push(v, v);
  t.equal(queue.bytes, 16 * 4);
  queue.shift();
  t.equal(queue.bytes, 16 * 2);
  t.same(queue.firsts(0, 2), [2, 3]);
});
