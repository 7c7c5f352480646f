// The abstract conformance suite of Registry: the static single-node registry and the
// ZooKeeper one both run it. A registry may make changes visible later than the call that made
// them (ZooKeeper coalesces balance writes to about one a second), so every check of the view
// polls for a few seconds instead of expecting the change at once. `makeRegistry` must return
// a fresh registry that has not registered yet.

import type { Test } from 'tap';
import type { Registry } from '../../src/registry/registry.js';
import type { ImNode, WorkerAnnouncement } from '../../src/registry/im-node.js';

/** How long a change may take to show in the view. */
const VISIBLE_WITHIN_MS = 5_000;

async function eventually<T>(what: string, probe: () => T | undefined, withinMs = VISIBLE_WITHIN_MS): Promise<T> {
  const deadline = Date.now() + withinMs;
  for (;;) {
    const value = probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`not within ${withinMs} ms: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

function announcement(overrides: Partial<WorkerAnnouncement> = {}): WorkerAnnouncement {
  return { host: '127.0.0.1', port: 40_123, peerPort: 40_124, balance: 0, startedAt: 1_700_000_000_000, version: '9.8.7-test', ready: true, ...overrides };
}

function self(registry: Registry, id: string): ImNode | undefined {
  return registry.workers().find((w) => w.id === id);
}

export function registryConformance(t: Test, makeRegistry: () => Promise<Registry>): void {
  async function fresh(tt: Test): Promise<{ registry: Registry; close: () => Promise<void> }> {
    const registry = await makeRegistry();
    let closed = false;
    const close = async () => {
      if (closed) return;
      closed = true;
      await registry.close();
    };
    tt.teardown(close);
    return { registry, close };
  }

  t.test('register resolves the announced fields and an id', async (t) => {
    const { registry } = await fresh(t);
    const announced = announcement({ port: 40_001, balance: 3 });
    const info = await registry.register(announced);
    t.type(info.id, 'string');
    t.ok(info.id.length > 0, 'the id is not empty');
    t.match(info, announced);
  });

  t.test('workers() contains the registered worker', async (t) => {
    const { registry } = await fresh(t);
    const announced = announcement({ port: 40_002, balance: 2 });
    const info = await registry.register(announced);
    const seen = await eventually('worker in view', () => self(registry, info.id));
    t.same(seen, info, 'the view has the worker as registered');
    t.equal(registry.workers().filter((w) => w.id === info.id).length, 1, 'exactly once');
  });

  t.test('setBalance becomes visible in workers()', async (t) => {
    const { registry } = await fresh(t);
    const info = await registry.register(announcement({ port: 40_003 }));
    await eventually('worker in view', () => self(registry, info.id));
    registry.setBalance(42);
    const seen = await eventually('balance 42', () => (self(registry, info.id)?.balance === 42 ? self(registry, info.id) : undefined));
    t.match(seen, { ...info, balance: 42 }, 'only the balance changed');
  });

  t.test('the last of several quick setBalance calls wins', async (t) => {
    const { registry } = await fresh(t);
    const info = await registry.register(announcement({ port: 40_004 }));
    await eventually('worker in view', () => self(registry, info.id));
    registry.setBalance(3);
    registry.setBalance(5);
    registry.setBalance(9);
    await eventually('balance 9', () => (self(registry, info.id)?.balance === 9 ? true : undefined));
    registry.setBalance(1);
    await eventually('balance back to 1', () => (self(registry, info.id)?.balance === 1 ? true : undefined));
    t.pass('the view followed the balance both ways');
  });

  t.test('setReady becomes visible in workers(), both ways, and only readiness changes', async (t) => {
    const { registry } = await fresh(t);
    const info = await registry.register(announcement({ port: 40_009, balance: 2 }));
    t.equal(info.ready, true, 'registered ready, as announced');
    await eventually('worker in view', () => self(registry, info.id));
    registry.setReady(false);
    const unready = await eventually('ready false', () => (self(registry, info.id)?.ready === false ? self(registry, info.id) : undefined));
    t.same(unready, { ...info, ready: false }, 'only ready changed');
    registry.setReady(true);
    await eventually('ready again', () => (self(registry, info.id)?.ready === true ? true : undefined));
    t.pass('and back');
  });

  t.test('a worker announced unready is registered unready', async (t) => {
    const { registry } = await fresh(t);
    const info = await registry.register(announcement({ port: 40_010, ready: false }));
    t.equal(info.ready, false);
    const seen = await eventually('worker in view', () => self(registry, info.id));
    t.equal(seen.ready, false, 'the view has it unready');
  });

  t.test('onChange listeners see changes; unsubscribing stops them', async (t) => {
    const { registry } = await fresh(t);
    const kept: (readonly ImNode[])[] = [];
    const dropped: (readonly ImNode[])[] = [];
    registry.onChange((view) => kept.push(view));
    const unsubscribe = registry.onChange((view) => dropped.push(view));

    const info = await registry.register(announcement({ port: 40_005 }));
    await eventually('listener sees the registration', () => kept.find((view) => view.some((w) => w.id === info.id)));
    await eventually('second listener sees it too', () => dropped.find((view) => view.some((w) => w.id === info.id)));

    registry.setBalance(7);
    const view = await eventually('listener sees balance 7', () => kept.find((v) => v.some((w) => w.id === info.id && w.balance === 7)));
    t.same(view, registry.workers(), 'the listener gets the current view');

    unsubscribe();
    const droppedCalls = dropped.length;
    registry.setBalance(8);
    await eventually('listener sees balance 8', () => kept.find((v) => v.some((w) => w.id === info.id && w.balance === 8)));
    // Give a late notification to the unsubscribed listener a chance to show up.
    await new Promise((resolve) => setTimeout(resolve, 100));
    t.equal(dropped.length, droppedCalls, 'the unsubscribed listener was not called again');
    t.notOk(
      dropped.some((v) => v.some((w) => w.balance === 8)),
      'the unsubscribed listener never saw balance 8',
    );
  });

  t.test('onRegistered listeners get the registered worker; unsubscribing stops them', async (t) => {
    const { registry } = await fresh(t);
    const kept: ImNode[] = [];
    const dropped: ImNode[] = [];
    registry.onRegistered((info) => kept.push(info));
    const unsubscribe = registry.onRegistered((info) => dropped.push(info));
    unsubscribe();

    const info = await registry.register(announcement({ port: 40_007, balance: 4 }));
    t.same(kept, [info], 'called once, with what register() resolved, by the time it resolved');
    t.same(dropped, [], 'the unsubscribed listener was not called');
    kept[0]!.balance = 99;
    t.equal(self(registry, info.id)?.balance ?? 4, 4, 'the listener got a copy, not the view entry');
  });

  t.test('registered() is true from registration until close()', async (t) => {
    const { registry, close } = await fresh(t);
    t.equal(registry.registered(), false, 'not before register()');
    const inListener: boolean[] = [];
    registry.onRegistered(() => inListener.push(registry.registered()));
    await registry.register(announcement({ port: 40_008 }));
    t.same(inListener, [true], 'already true when onRegistered listeners run');
    t.equal(registry.registered(), true, 'true once register() resolved');
    await close();
    t.equal(registry.registered(), false, 'false after close()');
  });

  t.test('close() removes the worker from the view', async (t) => {
    const { registry, close } = await fresh(t);
    const info = await registry.register(announcement({ port: 40_006 }));
    await eventually('worker in view', () => self(registry, info.id));
    await close();
    await eventually('worker gone', () => (self(registry, info.id) === undefined ? true : undefined));
    t.pass('the closed worker left the view');
  });
}
