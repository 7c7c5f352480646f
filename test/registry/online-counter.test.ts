// ZooKeeperOnlineCounter on a real ZooKeeper: workers add their local changes to one aggregate
// node, and the lowest live worker corrects it from the workers' own (ephemeral) counts, so a
// crashed worker's share disappears. Each worker's counter runs on a ZooKeeper connection of its
// own, as it runs on its registry's in a worker. And the embedded MemoryOnlineCounter.

import t from 'tap';
import { MemoryOnlineCounter, type OnlineCounts } from '../../src/registry/online-counter.js';
import { ZooKeeperOnlineCounter } from '../../src/registry/zk-online-counter.js';
import { ZooKeeperConnection } from '../../src/registry/zk-connection.js';
import { silentLogger } from '../../src/log.js';
import { startZooKeeper } from '../helpers/zookeeper.js';

const zk = await startZooKeeper(t);
let roots = 0;

async function eventually(what: string, probe: () => Promise<boolean>, withinMs = 8_000): Promise<void> {
  const deadline = Date.now() + withinMs;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`not within ${withinMs} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

type Teardown = { teardown(fn: () => unknown): void };

/** An open ZooKeeper connection (a session) of one process; closed on teardown. */
function connection(t: Teardown, root: string, sessionTimeoutMs: number): ZooKeeperConnection {
  const zookeeper = new ZooKeeperConnection({ connect: zk.connect, root, sessionTimeoutMs, nativeLogLevel: 'off', log: silentLogger() });
  zookeeper.open();
  t.teardown(() => zookeeper.close());
  return zookeeper;
}

function worker(t: Teardown, root: string, id: string, counts: OnlineCounts): ZooKeeperOnlineCounter {
  const counter = new ZooKeeperOnlineCounter({ zookeeper: connection(t, root, 2_000), selfId: () => id, local: () => counts, intervalMs: 100, log: silentLogger() });
  counter.start();
  t.teardown(() => counter.close());
  return counter;
}

t.test('embedded mode: the one worker\'s counts are the whole system\'s', async (t) => {
  const counts = { users: 2, sessions: 3 };
  const counter = new MemoryOnlineCounter({ local: () => counts });
  counter.start();
  t.same(await counter.read(), { users: 2, sessions: 3 });
  counts.sessions = 4;
  t.same(await counter.read(), { users: 2, sessions: 4 }, 'read at once, no tick');
  await counter.close();
});

t.test('the aggregate follows every worker’s counts', async (t) => {
  const root = `/online-${++roots}`;
  const a = { users: 0, sessions: 0 };
  const b = { users: 0, sessions: 0 };
  const ca = worker(t, root, '0000000001', a);
  worker(t, root, '0000000002', b);
  const matches = (users: number, sessions: number) => async () => {
    const c = await ca.read();
    return c.users === users && c.sessions === sessions;
  };
  a.users = 3;
  a.sessions = 4;
  b.users = 2;
  b.sessions = 2;
  await eventually('3+2 users, 4+2 sessions', matches(5, 6));
  // A burst of logins and logouts settles on the exact figure.
  for (let i = 0; i < 50; i++) {
    a.sessions += i % 2 === 0 ? 3 : -1;
    b.sessions += 1;
    await new Promise((r) => setImmediate(r));
  }
  await eventually('after the burst', matches(5, a.sessions + b.sessions));
  a.users = 0;
  a.sessions = 0;
  b.users = 1;
  b.sessions = 1;
  await eventually('after logouts', matches(1, 1));
});

t.test('a worker that disappears without a word is subtracted', async (t) => {
  const root = `/online-${++roots}`;
  const survivor = worker(t, root, '0000000001', { users: 1, sessions: 1 });
  const crashingSession = connection(t, root, 1_000);
  const crashing = new ZooKeeperOnlineCounter({
    zookeeper: crashingSession,
    selfId: () => '0000000002',
    local: () => ({ users: 10, sessions: 12 }),
    intervalMs: 100,
    log: silentLogger(),
  });
  crashing.start();
  await eventually('both counted', async () => (await survivor.read()).sessions === 13);
  // Closing its connection ends its ZooKeeper session: its ephemeral count vanishes as a crash's would.
  await crashing.close();
  await crashingSession.close();
  await eventually('its share is gone', async () => {
    const c = await survivor.read();
    return c.sessions === 1 && c.users === 1;
  });
});
