// ZooKeeperOnlineCounter on a real ZooKeeper: workers add their local changes to one aggregate
// node, and the lowest live worker corrects it from the workers' own (ephemeral) counts, so a
// crashed worker's share disappears. Each worker's counter runs on a ZooKeeper connection of its
// own, as it runs on its registry's in a worker; one shares its registry's session through an
// expiry, as in a worker; counts that change while a tick writes them still get written. And the
// embedded MemoryOnlineCounter.

import t from 'tap';
import { MemoryOnlineCounter, type OnlineCounts } from '../../src/registry/online-counter.js';
import { ZooKeeperOnlineCounter } from '../../src/registry/zk-online-counter.js';
import { ZooKeeperConnection } from '../../src/registry/zk-connection.js';
import { ZooKeeperRegistry } from '../../src/registry/zk-registry.js';
import { ZooKeeperSession } from '../../src/registry/zookeeper-client.js';
import { silentLogger } from '../../src/log.js';
import { startZooKeeper } from '../helpers/zookeeper.js';
import { ZooKeeperProxy } from '../helpers/zookeeper-proxy.js';
import { until } from '../../testkit/wait.js';

const zk = await startZooKeeper(t);
let roots = 0;

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
  await until('3+2 users, 4+2 sessions', matches(5, 6), 8_000);
  // A burst of logins and logouts settles on the exact figure.
  for (let i = 0; i < 50; i++) {
    a.sessions += i % 2 === 0 ? 3 : -1;
    b.sessions += 1;
    await new Promise((r) => setImmediate(r));
  }
  await until('after the burst', matches(5, a.sessions + b.sessions), 8_000);
  a.users = 0;
  a.sessions = 0;
  b.users = 1;
  b.sessions = 1;
  await until('after logouts', matches(1, 1), 8_000);
});

t.test('counts that change while a tick writes them are written by the next tick', async (t) => {
  const root = `/online-${++roots}`;
  const zookeeper = connection(t, root, 2_000);
  // One live object, as local() may hand out: it changes in a microtask of the first reading, so
  // while the first tick's create of the worker's node (sent with sessions 1) waits for its answer.
  const counts = { users: 1, sessions: 1 };
  let reads = 0;
  const counter = new ZooKeeperOnlineCounter({
    zookeeper,
    selfId: () => '0000000001',
    local: () => {
      if (++reads === 1) queueMicrotask(() => (counts.sessions = 2));
      return counts;
    },
    intervalMs: 100,
    log: silentLogger(),
  });
  counter.start();
  t.teardown(() => counter.close());
  const raw = await zookeeper.whenConnected();
  const share = `${root}/online-workers/0000000001`;
  let seen: [node: OnlineCounts | undefined, aggregate: OnlineCounts | undefined] = [undefined, undefined];
  await until(
    () => `its node and the aggregate say 2 sessions (seen: ${JSON.stringify(seen)})`,
    async () => {
      const node = await raw.get(share).then((r) => JSON.parse(r.data.toString('utf8')) as OnlineCounts, () => undefined);
      const aggregate = await counter.read();
      seen = [node, aggregate];
      return node?.sessions === 2 && aggregate.sessions === 2;
    },
    8_000,
  );
  t.same(seen, [{ users: 1, sessions: 2 }, { users: 1, sessions: 2 }]);
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
  await until('both counted', async () => (await survivor.read()).sessions === 13, 8_000);
  // Closing its connection ends its ZooKeeper session: its ephemeral count vanishes as a crash's would.
  await crashing.close();
  await crashingSession.close();
  await until('its share is gone', async () => {
    const c = await survivor.read();
    return c.sessions === 1 && c.users === 1;
  }, 8_000);
});

t.test('a counter on its registry\'s session is re-created after an expiry, owned by the new session', async (t) => {
  const root = `/online-${++roots}`;
  const proxy = await ZooKeeperProxy.start(t, zk.port);
  const registry = new ZooKeeperRegistry({ connect: proxy.connect, root, sessionTimeoutMs: 2_000, nativeLogLevel: 'off', log: silentLogger() });
  t.teardown(() => registry.close());
  const info = await registry.register({ host: '127.0.0.1', port: 1, peerPort: 2, balance: 0, startedAt: 1, version: 'x', ready: true });
  const counts = { users: 3, sessions: 5 };
  const counter = new ZooKeeperOnlineCounter({ zookeeper: registry.zookeeper, selfId: () => info.id, local: () => counts, intervalMs: 100, log: silentLogger() });
  counter.start();
  t.teardown(() => counter.close());

  const observer = new ZooKeeperRegistry({ connect: zk.connect, root, nativeLogLevel: 'off', log: silentLogger() });
  t.teardown(() => observer.close());
  await observer.observe();
  const reader = new ZooKeeperOnlineCounter({ zookeeper: observer.zookeeper, selfId: () => '', local: () => ({ users: 0, sessions: 0 }), log: silentLogger() });
  const raw = await observer.zookeeper.whenConnected();
  const share = `${root}/online-workers/${info.id}`;
  await until('counted', async () => (await reader.read()).sessions === 5, 8_000);
  const before = await raw.exists(share);

  // The registry's session is ended on the server by a second client that attaches to it and
  // closes it, the registry's own connection held down meanwhile (as in zk-registry.test.ts).
  const old = registry.sessionCredentials()!;
  proxy.partition();
  await new Promise<void>((resolve) => {
    const thief = new ZooKeeperSession({ connect: zk.connect, sessionTimeoutMs: 2_000, logLevel: 'off', credentials: old, onConnected: () => thief.close(), onClosed: () => resolve() });
  });
  await until('its share went with the session', async () => (await raw.exists(share)) === undefined, 8_000);
  proxy.heal();
  await until('registered again', () => registry.registered(), 10_000);
  counts.sessions = 6;
  await until('its share is back', async () => (await raw.exists(share)) !== undefined, 8_000);

  const after = await raw.exists(share);
  const own = await raw.exists(`${root}/workers/w-${info.id}`);
  t.not(after?.ephemeralOwner, before?.ephemeralOwner, 'owned by the new session');
  t.equal(after?.ephemeralOwner, own?.ephemeralOwner, 'the same session as the worker\'s znode');
  await until('the aggregate is right', async () => (await reader.read()).sessions === 6, 8_000);
  t.same(await reader.read(), { users: 3, sessions: 6 });
});
