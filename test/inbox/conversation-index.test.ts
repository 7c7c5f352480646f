// ConversationIndex's bookkeeping: under any appends (with conversations evicted past the bound
// and indexes trimmed to what the inbox retains), history pages, read marks and expiry, `bytes`
// is always the recount of what it holds. A review found appends that shrank an index booked
// the bytes given back twice, so an inbox's accounted memory fell below zero.

import t from 'tap';
import fc from 'fast-check';
import { ConversationIndex } from '../../src/inbox/conversation-index.js';

type Op = { add: number; own: boolean; run: number } | { history: number } | { read: number } | { expire: number };

t.test('any operations: bytes is the recount', async (t) => {
  const op = fc.oneof(
    { weight: 6, arbitrary: fc.record({ add: fc.integer({ min: 0, max: 5 }), own: fc.boolean(), run: fc.integer({ min: 1, max: 300 }) }) },
    { weight: 1, arbitrary: fc.record({ history: fc.integer({ min: 0, max: 5 }) }) },
    { weight: 1, arbitrary: fc.record({ read: fc.integer({ min: 0, max: 5 }) }) },
    { weight: 1, arbitrary: fc.record({ expire: fc.integer({ min: 0, max: 400 }) }) },
  );
  fc.assert(
    fc.property(fc.array(op, { maxLength: 80 }), (ops: Op[]) => {
      // At most 4 conversations, each indexing the inbox's last 200 seqs.
      const index = new ConversationIndex(4, 200);
      let seq = 0;
      for (const o of ops) {
        if ('add' in o) {
          for (let k = 0; k < o.run; k++) index.add(`peer-${o.add}`, ++seq, seq, o.own);
        } else if ('history' in o) {
          const c = index.get(`peer-${o.history}`);
          if (c) index.history(c, 0, 20, Math.max(1, seq - 150));
        } else if ('read' in o) {
          const c = index.get(`peer-${o.read}`);
          if (c) index.markRead(c, seq, Math.max(1, seq - 150));
        } else {
          index.expire(seq - o.expire);
        }
        if (index.bytes !== index.recount()) return false;
      }
      return true;
    }),
    { numRuns: 500 },
  );
  t.pass('500 random histories');
});

t.test('the review case: a conversation whose index shrinks as another grows', async (t) => {
  const index = new ConversationIndex(10, 200);
  let seq = 0;
  for (let i = 0; i < 100; i++) index.add('a', ++seq, seq, false);
  for (let i = 0; i < 200; i++) index.add('b', ++seq, seq, false);
  index.add('a', ++seq, seq, false);
  t.equal(index.bytes, index.recount());
});

t.test('any appends: a history page is exactly the conversation’s retained seqs', async (t) => {
  // Trimming drops one entry per append in a busy conversation and a run of them in one appended
  // to after a while: both against a model of the seqs.
  const op = fc.record({ peer: fc.integer({ min: 0, max: 3 }), run: fc.integer({ min: 1, max: 120 }) });
  fc.assert(
    fc.property(fc.array(op, { maxLength: 60 }), (ops) => {
      const maxIndexed = 50;
      const index = new ConversationIndex(4, maxIndexed);
      const model = new Map<string, number[]>();
      let seq = 0;
      for (const o of ops) {
        const id = `peer-${o.peer}`;
        for (let k = 0; k < o.run; k++) {
          index.add(id, ++seq, seq, false);
          (model.get(id) ?? model.set(id, []).get(id)!).push(seq);
        }
        const oldest = Math.max(1, seq - maxIndexed + 1);
        for (const [peer, seqs] of model) {
          const c = index.get(peer)!;
          const page = index.history(c, 0, 1000, oldest);
          const want = seqs.filter((s) => s >= oldest);
          if (page.seqs.length !== want.length || page.seqs.some((s, i) => s !== want[i])) return false;
        }
        if (index.bytes !== index.recount()) return false;
      }
      return true;
    }),
    { numRuns: 300 },
  );
  t.pass('300 random histories');
});

t.test('a busy conversation past its bound: its index never grows again', async (t) => {
  // The index is a PairQueue bounded at maxIndexed + 1, which copies its pairs whenever it crosses
  // that bound: each append here must push one seq into room it has, then trim one.
  const maxIndexed = 1_000;
  const index = new ConversationIndex(1, maxIndexed);
  let seq = 0;
  while (seq < maxIndexed + 1) index.add('peer', ++seq, seq, false);
  const full = index.bytes;
  let growing = 0;
  for (let k = 0; k < 20_000; k++) {
    if (index.addCost('peer') !== 0) growing++;
    index.add('peer', ++seq, seq, false);
  }
  t.equal(growing, 0, 'no append past the bound grows the index');
  t.equal(index.bytes, full, 'the bound\'s array throughout');
  t.equal(index.bytes, index.recount());
});
