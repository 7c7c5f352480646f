// MessageLog keeps a user's messages in slabs and typed arrays: what goes in comes out, in
// order, through ring wrap-arounds, growth and slab turnover; slabs no message uses are freed.

import t from 'tap';
import fc from 'fast-check';
import { MessageLog } from '../../src/inbox/message-log.js';

const text = (seq: number) => Buffer.from(`message ${seq} `.repeat(1 + (seq % 7)));

t.test('push, get and shift keep every retained body, in order, across wrap-around and growth', async (t) => {
  const log = new MessageLog();
  let first = 1;
  for (let seq = 1; seq <= 5_000; seq++) {
    log.push(seq, seq * 10, text(seq));
    // Keep between 1 and ~300 messages: the ring wraps and grows many times.
    while (log.length > 1 + (seq % 300)) {
      log.shift();
      first++;
    }
    if (seq % 97 === 0) {
      t.equal(log.firstSeq, first);
      t.equal(log.oldestStoredAt(), first * 10);
      for (let s = first; s <= seq; s++) {
        const m = log.get(s)!;
        if (!t.ok(m && m.seq === s && m.storedAt === s * 10 && m.body.equals(text(s)), `seq ${s} intact at ${seq}`)) return;
      }
    }
  }
  t.equal(log.get(first - 1), undefined, 'shifted away');
  t.equal(log.get(5_001), undefined, 'not yet there');
});

t.test('the body is copied in: changing the caller\'s buffer changes nothing', async (t) => {
  const log = new MessageLog();
  const body = Buffer.from('hello');
  log.push(1, 0, body);
  body.fill(0);
  t.equal(log.get(1)!.body.toString(), 'hello');
});

t.test('seqs must be dense', async (t) => {
  const log = new MessageLog();
  log.push(41, 0, text(1));
  t.throws(() => log.push(43, 0, text(2)), RangeError);
  log.shift();
  t.equal(log.length, 0);
  log.push(100, 0, text(3));
  t.equal(log.firstSeq, 100, 'an empty log starts anew at any seq');
  t.equal(log.oldestStoredAt(), 0);
  log.shift();
  t.equal(log.oldestStoredAt(), Number.POSITIVE_INFINITY);
});

t.test('bodies larger than a slab, and random sizes, round-trip', async (t) => {
  fc.assert(
    fc.property(fc.array(fc.integer({ min: 0, max: 200_000 }), { minLength: 1, maxLength: 40 }), fc.integer({ min: 1, max: 10 }), (sizes, keep) => {
      const log = new MessageLog();
      const bodies = sizes.map((n, i) => Buffer.alloc(n, i % 251));
      bodies.forEach((b, i) => {
        log.push(i + 1, i, b);
        while (log.length > keep) log.shift();
      });
      for (let seq = log.firstSeq; seq < log.firstSeq + log.length; seq++) {
        if (!log.get(seq)!.body.equals(bodies[seq - 1]!)) return false;
      }
      return true;
    }),
    { numRuns: 60 },
  );
});

t.test('memory follows what is retained: slabs of shifted messages are released', async (t) => {
  const log = new MessageLog();
  const body = Buffer.alloc(1000, 1);
  for (let seq = 1; seq <= 2_000; seq++) {
    log.push(seq, 0, body);
    if (log.length > 10) log.shift();
  }
  // Ten 1000-byte bodies live: the slabs of the 1 990 shifted ones (~2 MB) must be gone.
  t.ok(log.slabBytes <= 3 * 64 * 1024, `${log.slabBytes} bytes of slabs held`);
  while (log.length > 0) log.shift();
  t.equal(log.slabBytes, 0, 'emptied: no slab stays');
  log.push(log.firstSeq, 0, body);
  t.equal(log.get(log.firstSeq)!.body.length, 1000, 'and a new message starts a new one');
});

t.test('bytes: what pushCost said, what the slabs and the ring hold, and back to empty', async (t) => {
  fc.assert(
    fc.property(fc.array(fc.tuple(fc.integer({ min: 0, max: 70_000 }), fc.integer({ min: 0, max: 3 })), { minLength: 1, maxLength: 300 }), (steps) => {
      const log = new MessageLog();
      let seq = 1;
      for (const [size, shifts] of steps) {
        const before = log.bytes;
        const cost = log.pushCost(size);
        log.push(seq++, 0, Buffer.alloc(size));
        if (log.bytes - before !== cost) return false;
        for (let i = 0; i < shifts; i++) log.shift();
        // The ring: 24 bytes a place, at least one place per message.
        const ring = log.bytes - log.slabBytes;
        if (ring % 24 !== 0 || ring < 24 * log.length) return false;
      }
      while (log.length > 0) log.shift();
      return log.bytes === MessageLog.EMPTY_BYTES;
    }),
    { numRuns: 200 },
  );
  t.pass('200 random histories');
});

t.test('maxCount: a push to a full log forgets the oldest, and the ring is as large as the bound', async (t) => {
  const log = new MessageLog({ maxCount: 10_000 });
  for (let seq = 1; seq <= 25_000; seq++) {
    log.push(seq, seq, text(seq));
    if (seq === 10_000) t.equal(log.bytes - log.slabBytes, 10_000 * 24, '10 000 places for 10 000 messages');
  }
  t.equal(log.length, 10_000);
  t.equal(log.firstSeq, 15_001);
  t.equal(log.oldestStoredAt(), 15_001);
  t.equal(log.bytes - log.slabBytes, 10_000 * 24, 'and no more once it turns over');
  let intact = 0;
  for (let s = 15_001; s <= 25_000; s++) if (log.get(s)?.body.equals(text(s))) intact++;
  t.equal(intact, 10_000, 'every retained body intact');
  t.equal(log.get(15_000), undefined, 'the oldest went');
  const unbounded = new MessageLog();
  for (let seq = 1; seq <= 10_000; seq++) unbounded.push(seq, seq, text(seq));
  t.equal(unbounded.bytes - unbounded.slabBytes, 16_384 * 24, 'without a bound the ring doubles past it');
});

t.test('maxCount, at random: the newest maxCount bodies, and bytes never more than pushCost said', async (t) => {
  fc.assert(
    fc.property(fc.integer({ min: 1, max: 40 }), fc.array(fc.tuple(fc.integer({ min: 0, max: 70_000 }), fc.integer({ min: 0, max: 2 })), { minLength: 1, maxLength: 200 }), (maxCount, steps) => {
      const log = new MessageLog({ maxCount });
      const bodies: Buffer[] = [];
      for (const [size, shifts] of steps) {
        const before = log.bytes;
        const cost = log.pushCost(size);
        const body = Buffer.alloc(size, bodies.length % 251);
        bodies.push(body);
        log.push(bodies.length, 0, body);
        // The oldest forgotten first may give back a slab: at most what pushCost said.
        if (log.bytes - before > cost || log.length > maxCount) return false;
        for (let i = 0; i < shifts; i++) log.shift();
        const ring = log.bytes - log.slabBytes;
        if (ring < 24 * log.length || ring > 24 * Math.max(16, maxCount)) return false;
      }
      for (let seq = log.firstSeq; seq < log.firstSeq + log.length; seq++) if (!log.get(seq)!.body.equals(bodies[seq - 1]!)) return false;
      return log.firstSeq + log.length === bodies.length + 1;
    }),
    { numRuns: 200 },
  );
  t.pass('200 random histories');
});

t.test('a ring pruned to a quarter gives half back', async (t) => {
  const log = new MessageLog();
  for (let seq = 1; seq <= 4096; seq++) log.push(seq, 0, Buffer.alloc(1));
  const grown = log.bytes - log.slabBytes;
  t.equal(grown, 4096 * 24);
  while (log.length > 16) log.shift();
  t.ok(log.bytes - log.slabBytes <= 64 * 24, `${log.bytes - log.slabBytes} bytes of ring for 16 messages`);
  let intact = 0;
  for (let s = log.firstSeq; s < log.firstSeq + log.length; s++) if (log.get(s)?.seq === s) intact++;
  t.equal(intact, 16, 'the messages kept survive the move');
});

t.test('rewrite: in place when it fits, beside the slabs when larger; bytes follow, and shift frees both', async (t) => {
  const log = new MessageLog();
  for (let seq = 1; seq <= 4; seq++) log.push(seq, 1000 + seq, Buffer.from(`message number ${seq}`));
  const bytes = log.bytes;
  t.equal(log.rewriteCost(2, 4), 0, 'a smaller body fits its place');
  t.equal(log.rewrite(2, Buffer.from('gone')), true);
  t.equal(log.bytes, bytes, 'in place: nothing more held');
  t.same([log.get(2)!.body.toString(), log.get(2)!.storedAt], ['gone', 1002]);
  t.same(log.get(3)!.body.toString(), 'message number 3', 'its neighbour untouched');
  const larger = Buffer.from('x'.repeat(100));
  t.equal(log.rewriteCost(3, larger.length), 100);
  log.rewrite(3, larger);
  t.equal(log.bytes, bytes + 100, 'a larger body is held beside the slabs');
  larger.fill(0x79);
  t.equal(log.get(3)!.body.toString(), 'x'.repeat(100), 'copied in');
  log.rewrite(3, Buffer.from('y'.repeat(120)));
  t.equal(log.bytes, bytes + 120, 'rewritten again: the previous one released');
  t.equal(log.rewrite(9, Buffer.from('z')), false, 'not retained');
  log.shift();
  log.shift();
  log.shift();
  t.equal(log.get(3), undefined);
  t.ok(log.bytes <= bytes, 'shifted: the body beside the slabs is released with its message');
  t.same(log.get(4)!.body.toString(), 'message number 4');
});

t.test('reused slabs: a body read before its slab went to another log stays what it was', async (t) => {
  // Two full inboxes turning over: alice's oldest slab is released when her log moves past it,
  // and bob's next slab is that one, written with his messages. A body alice's log handed out
  // before (a replay page, a history page still being sent) must not change under its reader.
  const alice = new MessageLog({ reuseSlabs: true });
  const bob = new MessageLog({ reuseSlabs: true });
  const body = (who: string, seq: number) => Buffer.from(`${who} ${seq} `.padEnd(200, who[0]));
  let seq = 0;
  // The first message in a 64 KiB slab (the first slabs are smaller, and never reused).
  let first64 = 0;
  while (alice.slabBytes < 6 * 64 * 1024) {
    const before = alice.slabBytes;
    alice.push(++seq, seq, body('alice', seq));
    if (first64 === 0 && alice.slabBytes - before === 64 * 1024) first64 = seq;
  }
  const read = alice.get(first64)!;
  const spares = MessageLog.spareSlabs;
  // Past that slab and the next (each holds 327 of these bodies).
  while (alice.firstSeq <= first64 + 700) alice.shift();
  t.ok(MessageLog.spareSlabs > spares, 'alice\'s emptied 64 KiB slabs became spares');
  for (let s = 1; s <= 2_000; s++) bob.push(s, s, body('bob', s));
  t.ok(MessageLog.spareSlabs < spares + 2, 'bob took the spares');
  t.equal(read.body.toString(), body('alice', first64).toString(), 'what alice\'s log returned is unchanged');
  for (let s = alice.firstSeq; s <= seq; s++) if (!t.ok(alice.get(s)!.body.equals(body('alice', s)), `alice ${s}`)) return;
  for (let s = 1; s <= 2_000; s++) if (!t.ok(bob.get(s)!.body.equals(body('bob', s)), `bob ${s}`)) return;
});

t.test('spare slabs are bounded, and logs without reuse neither give nor take them', async (t) => {
  const body = Buffer.alloc(1000, 1);
  const logs = Array.from({ length: 100 }, () => new MessageLog({ reuseSlabs: true }));
  for (const log of logs) for (let s = 1; s <= 200; s++) log.push(s, s, body);
  for (const log of logs) while (log.length > 0) log.shift();
  t.equal(MessageLog.spareSlabs, 64, 'at most 64 (4 MiB) kept');
  const plain = new MessageLog();
  for (let s = 1; s <= 300; s++) plain.push(s, s, body);
  t.equal(MessageLog.spareSlabs, 64, 'a log without reuse allocates its own');
  // Below the bound again: a log without reuse gives nothing back either.
  const taker = new MessageLog({ reuseSlabs: true });
  for (let s = 1; s <= 300; s++) taker.push(s, s, body);
  const spares = MessageLog.spareSlabs;
  t.ok(spares < 64, 'a reusing log took some');
  while (plain.length > 0) plain.shift();
  t.equal(MessageLog.spareSlabs, spares, 'the plain log freed its slabs');
});
