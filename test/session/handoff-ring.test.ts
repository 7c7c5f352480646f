// HandoffRing: the delivered position of a legacy device is the last delivery whose frame ends
// within what the kernel took; never more, also when the ring is full and coarsens.

import t from 'tap';
import fc from 'fast-check';
import { HandoffRing, MAX_PENDING } from '../../src/session/handoff-ring.js';

t.test('a delivery counts once its whole frame is handed off', async (t) => {
  const ring = new HandoffRing(4);
  t.equal(ring.confirm(1_000_000), 4, 'nothing written: the starting position');
  ring.push(5, 100);
  ring.push(6, 250);
  ring.push(8, 400); // a gap (7 pruned) is fine
  t.equal(ring.pending, 3);
  t.equal(ring.confirm(99), 4, 'part of a frame is not enough');
  t.equal(ring.confirm(100), 5);
  t.equal(ring.confirm(300), 6);
  t.equal(ring.confirm(200), 6, 'a lower reading moves nothing back');
  t.equal(ring.confirm(400), 8);
  t.equal(ring.pending, 0);
});

t.test('it grows up to MAX_PENDING, then drops the oldest: coarser, never ahead', async (t) => {
  const ring = new HandoffRing(0);
  const n = MAX_PENDING + 500;
  for (let i = 1; i <= n; i++) ring.push(i, i * 10);
  t.equal(ring.pending, MAX_PENDING, 'bounded');
  t.equal(ring.confirm(4000), 0, 'the deliveries ending by 4000 were dropped: not counted yet');
  t.equal(ring.confirm(5010), 501, 'the oldest kept one counts once its frame is in');
  t.equal(ring.confirm(n * 10), n);
  ring.compact();
  ring.push(n + 1, n * 10 + 7);
  t.equal(ring.confirm(n * 10 + 7), n + 1, 'usable again after compact()');
});

t.test('model: the position is the last seq whose end is within the highest reading', async (t) => {
  fc.assert(
    fc.property(fc.array(fc.tuple(fc.integer({ min: 1, max: 300 }), fc.nat({ max: 2000 })), { maxLength: 300 }), (steps) => {
      const ring = new HandoffRing(0);
      const written: [number, number][] = [];
      let end = 0;
      let handed = 0;
      for (const [size, reading] of steps) {
        end += size;
        written.push([written.length + 1, end]);
        if (ring.full) ring.confirm(handed);
        ring.push(written.length, end);
        handed = Math.min(end, Math.max(handed, handed + reading - 1000));
        const got = ring.confirm(handed);
        const want = written.filter(([, e]) => e <= handed).at(-1)?.[0] ?? 0;
        if (got !== want) return false;
      }
      return true;
    }),
    { numRuns: 300 },
  );
});
