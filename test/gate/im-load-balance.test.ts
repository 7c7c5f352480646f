// ImLoadBalance (chooseWorker): the least loaded worker wins; workers within the margin of the
// least balance (10 %, at least one session) are picked among at random, so `random` is
// injected; the rest come back as fallbacks, least loaded first.

import t from 'tap';
import { chooseWorker } from '../../src/gate/im-load-balance.js';
import type { ImNode } from '../../src/registry/im-node.js';

function worker(id: string, balance: number): ImNode {
  return { id, host: '127.0.0.1', port: 9000 + Number(id.replace(/\D/g, '') || 0), balance, startedAt: 0, version: 'test', ready: true };
}

const ids = (workers: readonly ImNode[]) => workers.map((w) => w.id);

/** A `random` that returns `values` in turn (and fails the test if asked more often). */
function sequence(...values: number[]): () => number {
  let i = 0;
  return () => {
    if (i >= values.length) throw new Error('random() called more often than expected');
    return values[i++]!;
  };
}

t.test('no workers: undefined, and random is not consulted', async (t) => {
  t.equal(
    chooseWorker([], () => {
      throw new Error('random() called');
    }),
    undefined,
  );
});

t.test('a single worker is chosen, with no fallbacks', async (t) => {
  const only = worker('w1', 42);
  for (const r of [0, 0.5, 0.999999]) t.same(chooseWorker([only], () => r), { worker: only, fallbacks: [] });
});

t.test('the least balance wins, whatever random says', async (t) => {
  const workers = [worker('w1', 5), worker('w2', 2), worker('w3', 9), worker('w4', 3)];
  for (const r of [0, 0.25, 0.5, 0.75, 0.999999]) {
    t.equal(chooseWorker(workers, () => r)!.worker.id, 'w2', `random ${r}`);
  }
  t.equal(chooseWorker([worker('a', 0), worker('b', 1)], () => 0.999999)!.worker.id, 'a', 'at 0 sessions, 1 more is not a tie');
  t.equal(chooseWorker([worker('a', 11), worker('b', 10)], () => 0.999999)!.worker.id, 'b', 'one session above 10 is not a tie (margin 1)');
});

t.test('exact ties: random picks among the tied workers (sorted by id), never a more loaded one', async (t) => {
  const workers = [worker('w3', 7), worker('w2', 3), worker('w1', 3)];
  t.equal(chooseWorker(workers, () => 0)!.worker.id, 'w1');
  t.equal(chooseWorker(workers, () => 0.49)!.worker.id, 'w1');
  t.equal(chooseWorker(workers, () => 0.5)!.worker.id, 'w2');
  t.equal(chooseWorker(workers, () => 0.999999)!.worker.id, 'w2');
});

t.test('near ties: within 10 % of the least balance count as equal, the limit itself does not', async (t) => {
  // least 100: the margin is floor(100 * 0.1) = 10, so 100..109 are near and 110 is not.
  const workers = [worker('w1', 110), worker('w2', 100), worker('w3', 109), worker('w4', 105)];
  const chosen = new Set<string>();
  const draws = 300;
  for (let i = 0; i < draws; i++) chosen.add(chooseWorker(workers, () => i / draws)!.worker.id);
  t.same([...chosen].sort(), ['w2', 'w3', 'w4'], 'each near worker is reachable, w1 (110) never');
  t.equal(chooseWorker(workers, () => 0.999999)!.worker.id, 'w3', 'the top of the range: the most loaded near worker');
});

t.test('spread: evenly spaced random values share the near workers out evenly', async (t) => {
  const workers = [worker('w1', 20), worker('w2', 21), worker('w3', 20), worker('w4', 30)];
  const counts = new Map<string, number>();
  const draws = 600;
  for (let i = 0; i < draws; i++) {
    const id = chooseWorker(workers, () => i / draws)!.worker.id;
    counts.set(id, (counts.get(id) ?? 0) + 1);
  }
  t.same(Object.fromEntries(counts), { w1: 200, w2: 200, w3: 200 }, 'a third each; w4 (30) never');
});

t.test('with Math.random, a burst against tied workers lands on each of them', async (t) => {
  const workers = [worker('w1', 4), worker('w2', 4), worker('w3', 4), worker('w4', 50)];
  const seen = new Set<string>();
  // The chance that 500 uniform draws miss one of three workers is below 3 * (2/3)^500.
  for (let i = 0; i < 500; i++) seen.add(chooseWorker(workers)!.worker.id);
  t.same([...seen].sort(), ['w1', 'w2', 'w3']);
});

t.test('fallbacks: every other worker, least loaded first, ties by id', async (t) => {
  const workers = [worker('w5', 8), worker('w3', 2), worker('w1', 2), worker('w4', 1), worker('w2', 8)];
  const first = chooseWorker(workers, sequence(0))!;
  t.equal(first.worker.id, 'w4');
  t.same(ids(first.fallbacks), ['w1', 'w3', 'w2', 'w5']);

  const tied = [worker('w2', 3), worker('w1', 3), worker('w3', 5)];
  const second = chooseWorker(tied, sequence(0.9))!;
  t.equal(second.worker.id, 'w2', 'the second of the tied ones');
  t.same(ids(second.fallbacks), ['w1', 'w3'], 'the other tied worker comes first among the fallbacks');
});

t.test('the input is not reordered or changed', async (t) => {
  const workers = Object.freeze([worker('w3', 9), worker('w1', 1), worker('w2', 5)].map((w) => Object.freeze(w)));
  const before = JSON.stringify(workers);
  const choice = chooseWorker(workers, () => 0)!;
  t.equal(JSON.stringify(workers), before);
  t.equal(choice.worker, workers[1], 'the chosen worker is the caller\'s object');
});

t.test('random is called once per choice', async (t) => {
  let calls = 0;
  chooseWorker([worker('w1', 1), worker('w2', 1)], () => {
    calls++;
    return 0.3;
  });
  t.equal(calls, 1);
});

t.test('an unready worker is never chosen, nor a fallback, however idle', async (t) => {
  const workers = [{ ...worker('w1', 0), ready: false }, worker('w2', 7), worker('w3', 9)];
  for (const r of [0, 0.5, 0.999999]) {
    const choice = chooseWorker(workers, () => r)!;
    t.equal(choice.worker.id, 'w2', `random ${r}`);
    t.same(ids(choice.fallbacks), ['w3'], 'w1 is not among the fallbacks');
  }
});

t.test('an unreachable worker is not chosen; it comes after every reachable one among the fallbacks', async (t) => {
  const down = new Set(['w1', 'w4']);
  const reachable = (w: ImNode) => !down.has(w.id);
  const workers = [worker('w1', 0), worker('w2', 7), worker('w3', 9), worker('w4', 1)];
  for (const r of [0, 0.5, 0.999999]) {
    const choice = chooseWorker(workers, () => r, reachable)!;
    t.equal(choice.worker.id, 'w2', `random ${r}: the least loaded reachable worker`);
    t.same(ids(choice.fallbacks), ['w3', 'w1', 'w4'], 'the unreachable ones last, least loaded first');
  }
});

t.test('no worker both ready and reachable: undefined, and random is not consulted', async (t) => {
  const never = () => {
    throw new Error('random() called');
  };
  t.equal(chooseWorker([{ ...worker('w1', 0), ready: false }, worker('w2', 3)], never, (w) => w.id !== 'w2'), undefined);
  t.equal(chooseWorker([{ ...worker('w1', 0), ready: false }], never), undefined);
});
