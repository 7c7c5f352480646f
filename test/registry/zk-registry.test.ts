// ZooKeeperRegistry on a real ZooKeeper server started by the harness: the shared Registry
// conformance suite, then what only a distributed registry has to get right: other views,
// crashed workers, balance coalescing, session expiry, partitions and missed watch events.

import t, { type Test } from 'tap';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { ZooKeeperRegistry, type ZooKeeperRegistryOptions, type ZooKeeperStatus } from '../../src/registry/zk-registry.js';
import { ZooKeeperSession } from '../../src/registry/zookeeper-client.js';
import { viewHash, type ImNode, type WorkerAnnouncement } from '../../src/registry/im-node.js';
import { silentLogger, type Logger } from '../../src/log.js';
import { registryConformance } from './registry.conformance.js';
import { startZooKeeper } from '../helpers/zookeeper.js';
import { ZooKeeperProxy } from '../helpers/zookeeper-proxy.js';
import { freePort } from '../../testkit/services.js';

const zk = await startZooKeeper(t);

let roots = 0;
/** A root of its own for every test, so that tests never see each other's workers. */
const freshRoot = () => `/sb-test-${process.pid}-${++roots}`;

type Options = Partial<ZooKeeperRegistryOptions>;

function makeRegistry(tt: Test, options: Options = {}): ZooKeeperRegistry {
  const registry = new ZooKeeperRegistry({ connect: zk.connect, root: freshRoot(), log: silentLogger(), nativeLogLevel: 'off', ...options });
  tt.teardown(() => registry.close());
  return registry;
}

function announcement(port: number, overrides: Partial<WorkerAnnouncement> = {}): WorkerAnnouncement {
  return { host: '127.0.0.1', port, peerPort: port + 1, balance: 0, startedAt: 1_700_000_000_000, version: '1.2.3-test', ready: true, ...overrides };
}

async function eventually(what: string, probe: () => boolean, withinMs = 5_000): Promise<void> {
  const deadline = Date.now() + withinMs;
  while (!probe()) {
    if (Date.now() > deadline) throw new Error(`not within ${withinMs} ms: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

const has = (registry: ZooKeeperRegistry, id: string) => registry.workers().some((w) => w.id === id);
const find = (registry: ZooKeeperRegistry, id: string) => registry.workers().find((w) => w.id === id);

/** A plain ZooKeeper client for looking behind the registry's back; closed on teardown. */
async function rawSession(tt: Test, connect = zk.connect): Promise<ZooKeeperSession> {
  let session!: ZooKeeperSession;
  await new Promise<void>((resolve) => {
    session = new ZooKeeperSession({ connect, sessionTimeoutMs: 10_000, logLevel: 'off', onConnected: resolve });
  });
  tt.teardown(() => session.close());
  return session;
}

/** A logger whose lines the test can read. */
function capturingLogger(): { log: Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const log = pino({ level: 'debug' }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
  return { log, lines };
}

registryConformance(t, async () => new ZooKeeperRegistry({ connect: zk.connect, root: freshRoot(), log: silentLogger(), nativeLogLevel: 'off' }));

t.test('viewHash ignores order and sees every field', async (t) => {
  const a: ImNode = { id: '0000000001', ...announcement(1) };
  const b: ImNode = { id: '0000000002', ...announcement(2) };
  t.equal(viewHash([a, b]), viewHash([b, a]), 'order does not matter');
  t.not(viewHash([a, b]), viewHash([a]), 'a missing worker changes it');
  t.not(viewHash([a, b]), viewHash([a, { ...b, balance: 1 }]), 'a balance changes it');
  t.not(viewHash([a]), viewHash([{ ...a, host: '10.0.0.1' }]), 'a host changes it');
  t.not(viewHash([a]), viewHash([{ ...a, peerPort: 9 }]), 'a peer port changes it');
  t.not(viewHash([a]), viewHash([{ ...a, ready: false }]), 'readiness changes it');
});

t.test('registers an EPHEMERAL_SEQUENTIAL znode whose JSON carries the id', async (t) => {
  const root = freshRoot();
  const registry = makeRegistry(t, { root });
  const info = await registry.register(announcement(41_001, { balance: 2 }));
  t.match(info.id, /^\d{10}$/, 'the id is the sequence suffix');
  const raw = await rawSession(t);
  const { stat, data } = await raw.get(`${root}/workers/w-${info.id}`);
  t.same(JSON.parse(data.toString()), info, 'the znode holds the ImNode, id included');
  t.equal(stat.ephemeralOwner, registry.sessionCredentials()?.id, 'ephemeral, owned by the registry session');
  t.equal(registry.status, 'connected');
});

t.test('two registries see each other within 1 s; a closed one leaves the other view at once', async (t) => {
  const root = freshRoot();
  const one = makeRegistry(t, { root });
  const two = makeRegistry(t, { root });
  const first = await one.register(announcement(41_011));
  const second = await two.register(announcement(41_012));
  t.not(first.id, second.id, 'distinct ids');
  t.ok(has(two, first.id), 'the newcomer read the existing worker while registering');
  await eventually('the first registry sees the second', () => has(one, second.id), 1_000);
  t.same(find(one, second.id), second, 'with its announced fields');

  two.setBalance(6);
  await eventually('the balance shows in the other view', () => find(one, second.id)?.balance === 6);

  await two.close();
  await eventually('the closed worker is gone from the other view', () => !has(one, second.id), 1_000);
  t.same(
    one.workers().map((w) => w.id),
    [first.id],
    'only the first is left',
  );
  t.equal(two.status, 'closed');
  await two.close();
  t.pass('close() twice is fine');
  await t.rejects(two.register(announcement(41_013)), { code: 'SB_ERR_REGISTRY_CLOSED' }, 'a closed registry does not register');
});

t.test('a SIGKILLed worker disappears once its session times out', async (t) => {
  const root = freshRoot();
  const sessionTimeoutMs = 2_000;
  const observer = makeRegistry(t, { root });
  await observer.register(announcement(41_021));

  const fixture = fileURLToPath(new URL('./fixtures/zk-worker.ts', import.meta.url));
  const child = spawn(process.execPath, ['--import', 'tsx', fixture, JSON.stringify({ connect: zk.connect, root, sessionTimeoutMs, nativeLogLevel: 'off' })], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  t.teardown(async () => {
    child.kill('SIGKILL');
    await exited;
  });
  const line = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (out.includes('\n')) resolve(out.slice(0, out.indexOf('\n')));
    });
    child.once('exit', (code) => reject(new Error(`fixture exited (${code}) before registering`)));
  });
  const crashed = JSON.parse(line) as ImNode;
  await eventually('the observer sees the child worker', () => has(observer, crashed.id), 1_000);

  child.kill('SIGKILL');
  await exited;
  t.ok(has(observer, crashed.id), 'no goodbye: the worker is still listed right after the kill');
  await eventually('the crashed worker is gone', () => !has(observer, crashed.id), sessionTimeoutMs + 3_000);
  t.pass('its ephemeral znode went with its session');
});

t.test('setBalance is coalesced into few versioned writes, the last value winning', async (t) => {
  const root = freshRoot();
  const registry = makeRegistry(t, { root, balanceIntervalMs: 300 });
  const info = await registry.register(announcement(41_031));
  const path = `${root}/workers/w-${info.id}`;
  const raw = await rawSession(t);
  const version = async () => (await raw.get(path)).stat.version;
  const start = await version();

  for (let b = 1; b <= 50; b++) registry.setBalance(b);
  await eventually('balance 50 in the view', () => find(registry, info.id)?.balance === 50);
  const afterBurst = await version();
  t.ok(afterBurst - start <= 1, `50 synchronous calls made ${afterBurst - start} write(s)`);

  // 60 changes over about 1.2 s: at most one write per 300 ms, plus the one that ends it.
  for (let b = 100; b < 160; b++) {
    registry.setBalance(b);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  await eventually('balance 159 in the view', () => find(registry, info.id)?.balance === 159);
  t.equal(JSON.parse((await raw.get(path)).data.toString()).balance, 159, 'the znode holds the last value');
  const writes = (await version()) - afterBurst;
  t.ok(writes >= 1 && writes <= 10, `60 spread calls made ${writes} writes (versions ${afterBurst} → ${afterBurst + writes})`);

  // Someone else wrote the node: the versioned write conflicts, re-reads the version, wins.
  const { data } = await raw.get(path);
  await raw.set(path, data, -1);
  registry.setBalance(7);
  await eventually('balance 7 despite the version conflict', () => find(registry, info.id)?.balance === 7);
  t.equal(JSON.parse((await raw.get(path)).data.toString()).balance, 7);
});

t.test('a forced session expiry: expired, then connected again under the same id', async (t) => {
  const root = freshRoot();
  const { log, lines } = capturingLogger();
  const proxy = await ZooKeeperProxy.start(t, zk.port);
  const registry = makeRegistry(t, { root, connect: proxy.connect, sessionTimeoutMs: 2_000, log });
  const observer = makeRegistry(t, { root });
  const statuses: ZooKeeperStatus[] = [];
  const registrations: ImNode[] = [];
  registry.onStatus((status) => statuses.push(status));
  registry.onRegistered((self) => registrations.push(self));
  const info = await registry.register(announcement(41_041, { balance: 3 }));
  await observer.register(announcement(41_042));
  await eventually('the observer sees the worker', () => has(observer, info.id));
  const observed: boolean[] = [];
  observer.onChange((view) => observed.push(view.some((w) => w.id === info.id)));

  // A second client attaches to the registry's session with its id and password and closes it:
  // the server ends the session and deletes its znode. The registry's own connection is held
  // down meanwhile: otherwise its client reconnects within a millisecond and takes the session
  // back before the close arrives (tried: 2 runs in 6 lost that race).
  const old = registry.sessionCredentials()!;
  proxy.partition();
  await new Promise<void>((resolve) => {
    const thief = new ZooKeeperSession({ connect: zk.connect, sessionTimeoutMs: 2_000, logLevel: 'off', credentials: old, onConnected: () => thief.close(), onClosed: () => resolve() });
  });
  await eventually('the session is gone on the server', () => !has(observer, info.id));
  t.equal(registry.status, 'suspended', 'the registry cannot know yet');
  proxy.heal();

  await eventually('re-registered', () => registrations.length === 2, 10_000);
  t.same(registrations, [info, info], 'onRegistered fired again with the same ImNode (same id)');
  t.equal(registry.status, 'connected');
  const expiredAt = statuses.indexOf('expired');
  t.ok(expiredAt >= 0, `went through expired: ${statuses.join(' → ')}`);
  t.ok(statuses.slice(expiredAt).includes('connected'), 'and back to connected');
  t.equal(statuses.at(-1), 'connected');

  const raw = await rawSession(t);
  const { stat, data } = await raw.get(`${root}/workers/w-${info.id}`);
  t.same(JSON.parse(data.toString()), info, 'the znode is back, same path, same data');
  t.not(stat.ephemeralOwner, old.id, 'owned by the new session');
  t.equal(stat.ephemeralOwner, registry.sessionCredentials()?.id);

  await eventually('the observer lists it again', () => has(observer, info.id), 1_000);
  t.ok(observed.includes(false), 'the observer saw it leave (the expiry was real)');
  t.equal(observed.at(-1), true, 'and come back');

  const transitions = lines.filter((l) => l.msg === 'zookeeper status').map((l) => `${l.from}→${l.to}`);
  t.ok(transitions.includes('expired→connecting') && transitions.includes('connecting→connected'), `logged: ${transitions.join(', ')}`);

  registry.setBalance(12);
  await eventually('balance writes work on the new session', () => find(observer, info.id)?.balance === 12);
});

t.test('a partition longer than the session timeout: suspended, expired, registered again', async (t) => {
  const root = freshRoot();
  const proxy = await ZooKeeperProxy.start(t, zk.port);
  const registry = makeRegistry(t, { root, connect: proxy.connect, sessionTimeoutMs: 2_000 });
  const observer = makeRegistry(t, { root });
  const statuses: ZooKeeperStatus[] = [];
  const registrations: ImNode[] = [];
  registry.onStatus((status) => statuses.push(status));
  registry.onRegistered((self) => registrations.push(self));
  const info = await registry.register(announcement(41_051));
  await observer.register(announcement(41_052));
  await eventually('the observer sees the worker', () => has(observer, info.id));

  proxy.partition();
  t.equal(registry.registered(), true, 'registered while connected');
  await eventually('suspended', () => registry.status === 'suspended');
  t.ok(has(registry, info.id), 'a suspended registry keeps its last view');
  t.equal(registry.registered(), false, 'a suspended registry does not claim its registration');
  await eventually('the server expired the session: the worker left the observer view', () => !has(observer, info.id), 8_000);
  t.equal(registry.status, 'suspended', 'the partitioned registry cannot know yet');

  proxy.heal();
  await eventually('registered again', () => registrations.length === 2, 10_000);
  t.same(registrations[1], info, 'same id');
  t.equal(registry.registered(), true, 'registered again');
  t.same(statuses.slice(statuses.indexOf('suspended')), ['suspended', 'expired', 'connecting', 'connected']);
  await eventually('the observer lists it again', () => has(observer, info.id), 1_000);
});

t.test('the periodic reconcile repairs a view that missed watch events', async (t) => {
  const root = freshRoot();
  const proxy = await ZooKeeperProxy.start(t, zk.port);
  proxy.dropWatchEvents = true;
  const { log, lines } = capturingLogger();
  const deaf = makeRegistry(t, { root, connect: proxy.connect, reconcileIntervalMs: 300, log });
  const other = makeRegistry(t, { root, balanceIntervalMs: 50 });
  const own = await deaf.register(announcement(41_061));
  const repairs = () => lines.filter((l) => l.msg === 'registry view repaired');

  const joined = await other.register(announcement(41_062));
  await eventually('the deaf registry finds the newcomer', () => has(deaf, joined.id));
  t.ok(proxy.dropped > 0, `the child event was dropped (${proxy.dropped} notifications so far)`);
  t.match(repairs()[0], { missing: [joined.id], stale: [], changed: [] }, 'found missing by the reconcile, and logged');

  other.setBalance(5);
  await eventually('the deaf registry finds the new balance', () => find(deaf, joined.id)?.balance === 5);
  t.match(repairs().at(-1), { changed: [joined.id] });

  // A worker znode made and deleted behind everyone's back (a registry would re-create its own).
  const raw = await rawSession(t);
  const ghost = { id: '0000099999', ...announcement(41_063) };
  await raw.create(`${root}/workers/w-${ghost.id}`, Buffer.from(JSON.stringify(ghost)), 0);
  await eventually('the deaf registry finds the ghost', () => has(deaf, ghost.id));
  t.same(find(deaf, ghost.id), ghost);
  await raw.delete(`${root}/workers/w-${ghost.id}`, -1);
  await eventually('the deaf registry drops the ghost', () => !has(deaf, ghost.id));
  t.match(repairs().at(-1), { stale: [ghost.id] });
  t.ok(has(deaf, own.id) && has(deaf, joined.id), 'and keeps the live workers');
});

t.test('a znode that is not a worker is left out of the view and logged once', async (t) => {
  const root = freshRoot();
  const { log, lines } = capturingLogger();
  const registry = makeRegistry(t, { root, log, reconcileIntervalMs: 100 });
  const info = await registry.register(announcement(41_091));
  const raw = await rawSession(t);
  await raw.create(`${root}/workers/w-0000088888`, Buffer.from('not json'), 0);
  await raw.create(`${root}/workers/w-0000088889`, Buffer.from(JSON.stringify({ host: 'h', port: 'eighty' })), 0);
  await eventually('both logged', () => lines.filter((l) => l.msg === 'registry node is not a worker').length >= 2);
  await new Promise((resolve) => setTimeout(resolve, 350)); // a few reconciles
  t.same(
    registry.workers().map((w) => w.id),
    [info.id],
    'only the real worker is listed',
  );
  t.equal(lines.filter((l) => l.msg === 'registry node is not a worker').length, 2, 'each logged once');
  t.equal(lines.filter((l) => l.msg === 'registry view repaired').length, 0, 'and not mistaken for a missed event');
});

t.test('readiness in the znode: absent (an older worker) is ready, a non-boolean is not a worker', async (t) => {
  const root = freshRoot();
  const { log, lines } = capturingLogger();
  const registry = makeRegistry(t, { root, log });
  const info = await registry.register(announcement(41_093));
  const raw = await rawSession(t);
  const older = { host: '127.0.0.1', port: 41_094, balance: 0, startedAt: 1, version: '0.0.9' };
  await raw.create(`${root}/workers/w-0000077777`, Buffer.from(JSON.stringify(older)), 0);
  await raw.create(`${root}/workers/w-0000077778`, Buffer.from(JSON.stringify({ ...older, port: 41_095, ready: 'yes' })), 0);
  await eventually('the older worker is listed', () => has(registry, '0000077777'));
  t.same(find(registry, '0000077777'), { id: '0000077777', ...older, ready: true }, 'listed as ready');
  await eventually('the bad one is logged', () => lines.some((l) => l.msg === 'registry node is not a worker' && String(l.path).endsWith('w-0000077778')));
  t.same(registry.workers().map((w) => w.id).sort(), ['0000077777', info.id].sort(), 'the bad one is left out');
});

t.test('a change of readiness is written at once, not coalesced behind balance writes', async (t) => {
  const root = freshRoot();
  // Balance writes at most every 60 s: a readiness write that waited for the interval would not show.
  const registry = makeRegistry(t, { root, balanceIntervalMs: 60_000 });
  const observer = makeRegistry(t, { root });
  const info = await registry.register(announcement(41_096));
  await observer.observe();
  await eventually('observer sees the worker', () => has(observer, info.id));
  registry.setBalance(5); // the first write goes out at once and starts the interval
  await eventually('observer sees balance 5', () => find(observer, info.id)?.balance === 5);
  registry.setBalance(6); // waits for the interval
  registry.setReady(false);
  await eventually('observer sees it unready', () => find(observer, info.id)?.ready === false, 10_000);
  t.equal(find(observer, info.id)?.balance, 6, 'written whole: the pending balance went with it');
  const { data } = await (await rawSession(t)).get(`${root}/workers/w-${info.id}`);
  t.match(JSON.parse(data.toString()), { ready: false, balance: 6 }, 'the znode holds it');
});

t.test('a deleted own znode is created again under the same id', async (t) => {
  const root = freshRoot();
  const registry = makeRegistry(t, { root });
  const registrations: ImNode[] = [];
  registry.onRegistered((self) => registrations.push(self));
  const info = await registry.register(announcement(41_071));
  const raw = await rawSession(t);
  await raw.delete(`${root}/workers/w-${info.id}`, -1);
  await eventually('registered again', () => registrations.length === 2);
  t.same(registrations[1], info);
  t.ok(await raw.exists(`${root}/workers/w-${info.id}`), 'the znode is back');
  await eventually('in the view', () => has(registry, info.id));
});

t.test('register() fails with SB_ERR_REGISTRY_UNAVAILABLE when ZooKeeper cannot be reached', async (t) => {
  const nobody = await freePort();
  const registry = makeRegistry(t, { connect: `127.0.0.1:${nobody}`, connectTimeoutMs: 500 });
  await t.rejects(registry.register(announcement(41_081)), { code: 'SB_ERR_REGISTRY_UNAVAILABLE' });
  await eventually('closed', () => registry.status === 'closed');
  t.pass('and the registry is closed');
});
