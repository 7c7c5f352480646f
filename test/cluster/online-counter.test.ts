// OnlineCounter on a real ZooKeeper: workers add their local changes to one aggregate node,
// and the lowest live worker corrects it from the workers' own (ephemeral) counts, so a
// crashed worker's share disappears.

import t from 'tap';
import { OnlineCounter, type OnlineCounts } from '../../src/cluster/online-counter.js';
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

function worker(t: { teardown(fn: () => unknown): void }, root: string, id: string, counts: OnlineCounts): OnlineCounter {
  const counter = new OnlineCounter({ connect: zk.connect, root, sessionTimeoutMs: 2_000, selfId: () => id, local: () => counts, intervalMs: 100, log: silentLogger() });
  counter.start();
  t.teardown(() => counter.close());
  return counter;
}

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
  const crashing = new OnlineCounter({
    connect: zk.connect,
    root,
    sessionTimeoutMs: 1_000,
    selfId: () => '0000000002',
    local: () => ({ users: 10, sessions: 12 }),
    intervalMs: 100,
    log: silentLogger(),
  });
  crashing.start();
  await eventually('both counted', async () => (await survivor.read()).sessions === 13);
  // close() ends its ZooKeeper session: its ephemeral count vanishes as a crash's would.
  await crashing.close();
  await eventually('its share is gone', async () => {
    const c = await survivor.read();
    return c.sessions === 1 && c.users === 1;
  });
});
