// The GroupNotifier contract: changes reach every listener of the process after the current
// tick, in order, as copies; unsubscribing and closing stop them; publish never throws. Run by
// group-notifier.test.ts (memory, one Redis) and redis-cluster-group-notifier.test.ts (a Redis
// Cluster); a new implementation adds such a run.

import type { Test } from 'tap';
import type { GroupChange, GroupNotifier, GroupNotifierListener } from '../../src/groups/group-notifier.js';
import { newGroupId } from '../../src/groups/group-store.js';
import { sleep, until } from '../../testkit/wait.js';

export interface Subject {
  notifier: GroupNotifier;
  /** Resolves once `count` listeners' subscriptions are active (Redis: the subscriber is subscribed). */
  subscribed(): Promise<void>;
}

export type MakeNotifier = (t: Test) => Promise<Subject>;

/** A listener that records what it is told. */
export function recorder(): GroupNotifierListener & { changes: GroupChange[]; missed: () => void; misses: number } {
  const r = {
    changes: [] as GroupChange[],
    misses: 0,
    change: (c: GroupChange) => void r.changes.push(c),
    missed: () => void r.misses++,
  };
  return r;
}

export function groupNotifierConformance(t: Test, make: MakeNotifier): void {
  t.test('a change reaches every listener, after the current tick, as a copy', async (t) => {
    const { notifier, subscribed } = await make(t);
    const a = recorder();
    const b = recorder();
    notifier.subscribe(a);
    notifier.subscribe(b);
    await subscribed();
    const group = newGroupId();
    const added = ['bob', 'carol'];
    notifier.publish({ group, seq: 3, added });
    t.same(a.changes, [], 'not synchronously: the publisher finishes its request first');
    added.push('mallory');
    await until('both listeners heard it', () => a.changes.length === 1 && b.changes.length === 1);
    t.same(a.changes, [{ group, seq: 3, added: ['bob', 'carol'] }], 'with its added uids, as published');
    t.same(b.changes, a.changes);
    t.equal(a.misses, 0, 'nothing was missed');
  });

  t.test('without added: none is made up; many changes arrive in order', async (t) => {
    const { notifier, subscribed } = await make(t);
    const r = recorder();
    notifier.subscribe(r);
    await subscribed();
    const group = newGroupId();
    for (let seq = 1; seq <= 50; seq++) notifier.publish({ group, seq });
    await until('all 50 arrived', () => r.changes.length === 50);
    t.same(r.changes.map((c) => c.seq), Array.from({ length: 50 }, (_, i) => i + 1), 'in publish order');
    t.notOk(r.changes.some((c) => 'added' in c), 'no added field');
  });

  t.test('unsubscribed: a listener hears nothing more; the others still do', async (t) => {
    const { notifier, subscribed } = await make(t);
    const kept = recorder();
    const gone = recorder();
    notifier.subscribe(kept);
    const stop = notifier.subscribe(gone);
    await subscribed();
    stop();
    const group = newGroupId();
    notifier.publish({ group, seq: 1 });
    notifier.publish({ group, seq: 2 });
    await until('the kept listener heard both', () => kept.changes.length === 2);
    await sleep(50);
    t.same(gone.changes, [], 'the unsubscribed one heard nothing');
  });

  t.test('closed: publish does not throw and nothing is heard', async (t) => {
    const { notifier, subscribed } = await make(t);
    const r = recorder();
    notifier.subscribe(r);
    await subscribed();
    await notifier.close();
    t.doesNotThrow(() => notifier.publish({ group: newGroupId(), seq: 1 }));
    await sleep(100);
    t.same(r.changes, []);
    await notifier.close();
    t.pass('close twice is fine');
  });
}
