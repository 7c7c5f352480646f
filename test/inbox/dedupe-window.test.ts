// DedupeWindow on its own: the msg_id key rules, and the ascending runs through growth,
// compaction and shrinking, which small stores in the store-level tests never reach.

import v8 from 'node:v8';
import vm from 'node:vm';
import t from 'tap';
import { DedupeWindow, dedupeKey } from '../../src/inbox/dedupe-window.js';

t.test('dedupeKey: canonical decimals below 2^53 are numbers, everything else its string', async (t) => {
  t.equal(dedupeKey('1'), 1);
  t.equal(dedupeKey('999999999999999'), 999_999_999_999_999, '15 digits');
  t.equal(dedupeKey('1796000000000001'), 1_796_000_000_000_001, '16 digits');
  t.equal(dedupeKey('9007199254740991'), Number.MAX_SAFE_INTEGER, '2^53 - 1');
  for (const msgId of ['9007199254740992', '9007199254740993', '9999999999999999', '10000000000000000', '18446744073709551615']) {
    t.equal(dedupeKey(msgId), msgId, `${msgId} is past 2^53 - 1: a string`);
  }
  for (const msgId of ['016', '00', '0x10', '1e3', ' 16', '16 ', '-1', '+1', '1.0', '１']) {
    t.equal(dedupeKey(msgId), msgId, `${JSON.stringify(msgId)} is not canonical: a string`);
  }
});

t.test('an ascending run through growth and compaction: every remembered id found, no forgotten one', async (t) => {
  const window = new DedupeWindow(1_000);
  const base = 1_796_000_000_000_000;
  const total = 5_000;
  for (let k = 0; k < total; k++) window.add('alice', base + k, k + 1, k);
  t.equal(window.size, 1_000, 'capped');
  let found = 0;
  let wrong = 0;
  for (let k = 0; k < total; k++) {
    const seq = window.find('alice', base + k);
    if (k < total - 1_000) {
      if (seq !== undefined) wrong++;
    } else if (seq === k + 1) found++;
    else wrong++;
  }
  t.equal(found, 1_000, 'the newest 1 000 are found with their seqs');
  t.equal(wrong, 0, 'nothing forgotten is found, nothing remembered is wrong');
  t.equal(window.find('alice', base + total), undefined, 'an id above the run');
  t.equal(window.find('alice', base - 1), undefined, 'an id below the run');
  t.equal(window.find('bob', base + total - 1), undefined, 'another sender has its own ids');
});

t.test('a run that shrinks by expiry keeps working, and an emptied sender starts afresh', async (t) => {
  const window = new DedupeWindow(100_000);
  for (let k = 0; k < 4_096; k++) window.add('alice', k + 1, k + 1, k < 4_000 ? 10 : 20);
  window.expire(10);
  t.equal(window.size, 96, 'the entries expiring at 10 are gone');
  const kept = Array.from({ length: 96 }, (_, i) => window.find('alice', 4_001 + i));
  t.same(kept, Array.from({ length: 96 }, (_, i) => 4_001 + i), 'the later ones are all found');
  t.equal(window.find('alice', 4_000), undefined, 'the last expired one is not');
  window.add('alice', 5_000, 5_000, 30);
  t.equal(window.find('alice', 5_000), 5_000, 'pushing after the shrink');
  window.expire(30);
  t.equal(window.size, 0);
  t.equal(window.find('alice', 5_000), undefined);
  window.add('alice', 7, 6_000, 40);
  t.equal(window.find('alice', 7), 6_000, 'an emptied sender takes a smaller id as a new run');
});

t.test('ids out of order, and string ids, live beside the run and leave in insertion order', async (t) => {
  const window = new DedupeWindow(6);
  window.add('alice', 10, 1, 0); // run
  window.add('alice', 5, 2, 0); // below the run: others
  window.add('alice', '016', 3, 0); // a string: others
  window.add('alice', 11, 4, 0); // run
  window.add('alice', 7, 5, 0); // below again: others
  t.same(
    [10, 5, '016', 11, 7].map((key) => window.find('alice', key)),
    [1, 2, 3, 4, 5],
  );
  t.equal(window.find('alice', 16), undefined, '16 is not "016"');
  window.add('alice', 12, 6, 0);
  window.add('alice', 13, 7, 0); // the 7th entry: 10 goes
  t.equal(window.find('alice', 10), undefined, 'the oldest, from the run, went first');
  window.add('alice', 14, 8, 0); // 5 goes
  t.equal(window.find('alice', 5), undefined, 'then the oldest of the others');
  t.same(
    ['016', 11, 7, 12, 13, 14].map((key) => window.find('alice', key)),
    [3, 4, 5, 6, 7, 8],
    'the rest stay',
  );
});

t.test('many senders interleaved, with a cap: eviction is global and oldest first', async (t) => {
  const window = new DedupeWindow(300);
  const senders = ['a', 'b', 'c', 'd'];
  for (let k = 0; k < 2_000; k++) window.add(senders[k % 4]!, 1_000 + Math.floor(k / 4), k + 1, 0);
  t.equal(window.size, 300);
  let ok = 0;
  for (let k = 0; k < 2_000; k++) {
    const expected = k >= 1_700 ? k + 1 : undefined;
    if (window.find(senders[k % 4]!, 1_000 + Math.floor(k / 4)) === expected) ok++;
  }
  t.equal(ok, 2_000, 'exactly the newest 300 entries are remembered');
});

t.test('memory per entry stays small, for one busy sender and for many senders of one id each', async (t) => {
  v8.setFlagsFromString('--expose-gc');
  const gc = vm.runInNewContext('gc') as () => void;
  const cap = 10_000;
  const base = 1_796_000_000_000_000;
  function bytesPerEntry(fill: (window: DedupeWindow) => void): number {
    gc();
    const before = process.memoryUsage();
    const windows = Array.from({ length: 10 }, () => new DedupeWindow(cap));
    for (const window of windows) fill(window);
    gc();
    const after = process.memoryUsage();
    t.equal(windows[9]!.size, cap, 'every window is at its cap');
    return (after.heapUsed - before.heapUsed + after.arrayBuffers - before.arrayBuffers) / (windows.length * cap);
  }
  // Each bound is about 1.5x what was measured (Node 20): what they catch is a structure that
  // grows with what was evicted, or a per-sender cost of a Map and arrays sized for many.
  const busy = bytesPerEntry((w) => {
    for (let k = 0; k < cap * 5; k++) w.add('alice', base + k, k + 1, k);
  });
  t.ok(busy <= 150, `one sender, 5x the cap of rising ids: ${busy.toFixed(0)} bytes per entry`);
  const many = bytesPerEntry((w) => {
    for (let k = 0; k < cap; k++) w.add(`user${k}`, base + k, k + 1, k);
  });
  t.ok(many <= 330, `${cap} senders of one id each: ${many.toFixed(0)} bytes per entry`);
});
