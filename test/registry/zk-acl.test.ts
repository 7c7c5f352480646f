// ZooKeeper authentication on a real ZooKeeper server: the registry and the OnlineCounter with
// digest identities. Workers (one identity) create every znode with the cluster ACL; the gate's
// identity reads; a client without an identity, or with a wrong password, or with an identity
// of its own, can neither add, change nor delete a worker entry or the online counts (nor read
// them). The conformance suite runs with authentication on, a registry re-authenticates after a
// session expiry, a parent that belongs to someone else stops a worker, and a gate trusts only
// a registry closed to strangers.

import t, { type Test } from 'tap';
import { pino } from 'pino';
import { ZooKeeperRegistry, type ZooKeeperRegistryOptions } from '../../src/registry/zk-registry.js';
import { ZK_MODE, ZK_PERM, ZK_RC, ZooKeeperSession, type ZooKeeperAclEntry, type ZooKeeperDigestAuth } from '../../src/registry/zookeeper-client.js';
import { ClusterAcl, digestId, parseDigestAuth, parseDigestIds } from '../../src/registry/cluster-acl.js';
import { ZooKeeperOnlineCounter } from '../../src/registry/zk-online-counter.js';
import { ZooKeeperConnection } from '../../src/registry/zk-connection.js';
import type { ImNode, WorkerAnnouncement } from '../../src/registry/im-node.js';
import { silentLogger, type Logger } from '../../src/log.js';
import { registryConformance } from './registry.conformance.js';
import { startZooKeeper } from '../helpers/zookeeper.js';
import { ZooKeeperProxy } from '../helpers/zookeeper-proxy.js';

const zk = await startZooKeeper(t);

const WORKER: ZooKeeperDigestAuth = { user: 'sb-worker', password: 'worker-password-for-tests' };
const GATE: ZooKeeperDigestAuth = { user: 'sb-gate', password: 'gate-password-for-tests' };
/** The attackers: nobody, the workers' user with a wrong password, and an identity of one's own. */
const STRANGERS: [string, ZooKeeperDigestAuth | undefined][] = [
  ['an unauthenticated client', undefined],
  ['a client with the workers\' user and a wrong password', { user: WORKER.user, password: 'guessed' }],
  ['a client with an identity of its own', { user: 'mallory', password: 'mallory-password' }],
];
const READERS = [digestId(GATE)];

let roots = 0;
const freshRoot = () => `/sb-acl-${process.pid}-${++roots}`;

function announcement(port: number, overrides: Partial<WorkerAnnouncement> = {}): WorkerAnnouncement {
  return { host: '127.0.0.1', port, balance: 0, startedAt: 1_700_000_000_000, version: '1.2.3-test', ready: true, ...overrides };
}

function makeRegistry(tt: Test, options: Partial<ZooKeeperRegistryOptions> = {}): ZooKeeperRegistry {
  const registry = new ZooKeeperRegistry({ connect: zk.connect, root: freshRoot(), log: silentLogger(), nativeLogLevel: 'off', auth: WORKER, readers: READERS, ...options });
  tt.teardown(() => registry.close());
  return registry;
}

/** A plain ZooKeeper client with `auth` (or none); closed on teardown. */
async function rawSession(tt: Test, auth?: ZooKeeperDigestAuth): Promise<ZooKeeperSession> {
  let session!: ZooKeeperSession;
  await new Promise<void>((resolve) => {
    session = new ZooKeeperSession({ connect: zk.connect, sessionTimeoutMs: 10_000, logLevel: 'off', auth, onConnected: resolve });
  });
  tt.teardown(() => session.close());
  return session;
}

async function eventually(what: string, probe: () => boolean | Promise<boolean>, withinMs = 5_000): Promise<void> {
  const deadline = Date.now() + withinMs;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`not within ${withinMs} ms: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

function capturingLogger(): { log: Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const log = pino({ level: 'debug' }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
  return { log, lines };
}

const OPEN: ZooKeeperAclEntry[] = [{ scheme: 'world', id: 'anyone', perms: ZK_PERM.ALL }];
const forged = (id: string, port: number) => Buffer.from(JSON.stringify({ id, host: '127.0.0.1', port, balance: 0, startedAt: 1, version: 'forged' }));

/** The ZooKeeper return code a call was refused with (0: it succeeded). */
async function rc(call: Promise<unknown>): Promise<number> {
  try {
    await call;
    return 0;
  } catch (err) {
    return (err as { rc?: number }).rc ?? -1;
  }
}

registryConformance(t, async () => new ZooKeeperRegistry({ connect: zk.connect, root: freshRoot(), log: silentLogger(), nativeLogLevel: 'off', auth: WORKER, readers: READERS }));

t.test('digest ids, and flags that never repeat a password', async (t) => {
  // The example of ZooKeeper's own documentation (DigestAuthenticationProvider).
  t.equal(digestId({ user: 'super', password: 'admin' }), 'super:xQJmxLMiHGwaqBvst5y6rkB6HQs=');
  t.same(parseDigestAuth('sb-worker:pa:ss:word'), { user: 'sb-worker', password: 'pa:ss:word' }, 'the password may contain colons');
  for (const bad of ['no-colon-secret', ':secret-only', 'user:', 'us er:secret']) {
    t.throws(() => parseDigestAuth(bad), { code: 'SB_ERR_CONFIG' }, `${JSON.stringify(bad)} is refused`);
    try {
      parseDigestAuth(bad);
    } catch (err) {
      t.notMatch((err as Error).message, 'secret', 'without repeating it');
    }
  }
  t.same(parseDigestIds(` ${READERS[0]}, ${READERS[0]},${digestId(WORKER)}`), [READERS[0], digestId(WORKER)], 'trimmed and deduplicated');
  t.throws(() => parseDigestIds('sb-gate:gate-password-for-tests'), { code: 'SB_ERR_CONFIG' }, 'a password is not a digest id');
  try {
    parseDigestIds('sb-gate:gate-password-for-tests');
  } catch (err) {
    t.notMatch((err as Error).message, 'gate-password', 'and the error does not repeat it');
    t.match((err as Error).message, '"sb-gate"', 'but names the user');
  }
});

t.test('strangers can neither add, change nor delete a worker entry, nor read the registry', async (t) => {
  const root = freshRoot();
  const registry = makeRegistry(t, { root });
  const info = await registry.register(announcement(42_001));
  const own = `${root}/workers/w-${info.id}`;
  const gate = await rawSession(t, GATE);
  const before = await gate.get(own);
  for (const [who, auth] of STRANGERS) {
    const s = await rawSession(t, auth);
    t.equal(await rc(s.create(`${root}/workers/w-0000099999`, forged('0000099999', 1), ZK_MODE.EPHEMERAL)), ZK_RC.NO_AUTH, `${who} cannot create a worker znode`);
    t.equal(await rc(s.create(`${root}/workers/w-`, forged('', 1), ZK_MODE.EPHEMERAL_SEQUENTIAL)), ZK_RC.NO_AUTH, `${who} cannot create a sequential one`);
    t.equal(await rc(s.set(own, forged(info.id, 1), -1)), ZK_RC.NO_AUTH, `${who} cannot change the worker's znode`);
    t.equal(await rc(s.delete(own, -1)), ZK_RC.NO_AUTH, `${who} cannot delete it`);
    t.equal(await rc(s.setAcl(own, -1, OPEN)), ZK_RC.NO_AUTH, `${who} cannot open its ACL`);
    t.equal(await rc(s.setAcl(`${root}/workers`, -1, OPEN)), ZK_RC.NO_AUTH, `${who} cannot open workers/`);
    t.equal(await rc(s.setAcl(root, -1, OPEN)), ZK_RC.NO_AUTH, `${who} cannot open the root`);
    t.equal(await rc(s.create(`${root}/online`, Buffer.from('{}'), ZK_MODE.PERSISTENT)), ZK_RC.NO_AUTH, `${who} cannot create under the root`);
    t.equal(await rc(s.getChildren(`${root}/workers`)), ZK_RC.NO_AUTH, `${who} cannot list the workers`);
    t.equal(await rc(s.get(own)), ZK_RC.NO_AUTH, `${who} cannot read a worker`);
  }
  const after = await gate.get(own);
  t.same(JSON.parse(after.data.toString()), info, 'the worker znode holds what the worker wrote');
  t.equal(after.stat.version, before.stat.version, 'unchanged');
  t.same(
    registry.workers().map((w) => w.id),
    [info.id],
    'and the view lists the worker alone',
  );
});

t.test('the gate identity reads the view and the counts, and can write neither', async (t) => {
  const root = freshRoot();
  const registry = makeRegistry(t, { root });
  const info = await registry.register(announcement(42_011, { balance: 4 }));
  // On the worker's registry session, as in a worker.
  const counter = new ZooKeeperOnlineCounter({ zookeeper: registry.zookeeper, selfId: () => info.id, local: () => ({ users: 2, sessions: 3 }), intervalMs: 50, log: silentLogger() });
  counter.start();
  t.teardown(() => counter.close());

  const observer = makeRegistry(t, { root, auth: GATE, readers: undefined });
  await observer.observe();
  t.same(observer.workers(), [info], 'the gate sees the worker');
  registry.setBalance(9);
  await eventually('the gate follows its balance', () => observer.workers()[0]?.balance === 9);
  // On the gate's registry session, as in the gate.
  const reader = new ZooKeeperOnlineCounter({ zookeeper: observer.zookeeper, selfId: () => '', local: () => ({ users: 0, sessions: 0 }), log: silentLogger() });
  t.teardown(() => reader.close());
  await eventually('the gate reads the counts', async () => (await reader.read()).sessions === 3);

  const gate = await rawSession(t, GATE);
  const own = `${root}/workers/w-${info.id}`;
  t.equal(await rc(gate.create(`${root}/workers/w-0000099999`, forged('0000099999', 1), ZK_MODE.EPHEMERAL)), ZK_RC.NO_AUTH, 'cannot add a worker');
  t.equal(await rc(gate.set(own, forged(info.id, 1), -1)), ZK_RC.NO_AUTH, 'cannot change one');
  t.equal(await rc(gate.delete(own, -1)), ZK_RC.NO_AUTH, 'cannot delete one');
  t.equal(await rc(gate.setAcl(own, -1, OPEN)), ZK_RC.NO_AUTH, 'cannot change an ACL');
  t.equal(await rc(gate.set(`${root}/online`, Buffer.from('{"users":0,"sessions":0}'), -1)), ZK_RC.NO_AUTH, 'cannot change the counts');
  t.equal(await rc(gate.create(`${root}/online-workers/0000099999`, Buffer.from('{}'), ZK_MODE.EPHEMERAL)), ZK_RC.NO_AUTH, 'cannot add a worker\'s counts');
});

t.test('strangers cannot change the online counts', async (t) => {
  const root = freshRoot();
  const counts = { users: 1, sessions: 2 };
  const zookeeper = new ZooKeeperConnection({ connect: zk.connect, root, sessionTimeoutMs: 5_000, nativeLogLevel: 'off', auth: WORKER, readers: READERS, log: silentLogger() });
  zookeeper.open();
  t.teardown(() => zookeeper.close());
  const counter = new ZooKeeperOnlineCounter({ zookeeper, selfId: () => '0000000001', local: () => counts, intervalMs: 50, log: silentLogger() });
  counter.start();
  t.teardown(() => counter.close());
  const gate = await rawSession(t, GATE);
  await eventually('the counts are published', async () => (await gate.exists(`${root}/online-workers/0000000001`)) !== undefined && JSON.parse((await gate.get(`${root}/online`)).data.toString() || '{}').sessions === 2);
  for (const [who, auth] of STRANGERS) {
    const s = await rawSession(t, auth);
    t.equal(await rc(s.set(`${root}/online`, Buffer.from('{"users":999,"sessions":999}'), -1)), ZK_RC.NO_AUTH, `${who} cannot change the aggregate`);
    t.equal(await rc(s.delete(`${root}/online`, -1)), ZK_RC.NO_AUTH, `${who} cannot delete it`);
    t.equal(await rc(s.set(`${root}/online-workers/0000000001`, Buffer.from('{"users":999,"sessions":999}'), -1)), ZK_RC.NO_AUTH, `${who} cannot change a worker's counts`);
    t.equal(await rc(s.delete(`${root}/online-workers/0000000001`, -1)), ZK_RC.NO_AUTH, `${who} cannot delete them`);
    t.equal(await rc(s.create(`${root}/online-workers/0000000000`, Buffer.from('{"users":999,"sessions":999}'), ZK_MODE.EPHEMERAL)), ZK_RC.NO_AUTH, `${who} cannot add counts of a worker of its own`);
    t.equal(await rc(s.setAcl(`${root}/online-workers`, -1, OPEN)), ZK_RC.NO_AUTH, `${who} cannot open online-workers/`);
  }
  t.equal(JSON.parse((await gate.get(`${root}/online`)).data.toString()).sessions, 2, 'the aggregate is the workers\'');
});

t.test('a registry authenticates its new session after an expiry, and protects the re-created znode', async (t) => {
  const root = freshRoot();
  const proxy = await ZooKeeperProxy.start(t, zk.port);
  const registry = makeRegistry(t, { root, connect: proxy.connect, sessionTimeoutMs: 2_000 });
  const observer = makeRegistry(t, { root, auth: GATE, readers: undefined });
  const registrations: ImNode[] = [];
  registry.onRegistered((self) => registrations.push(self));
  const info = await registry.register(announcement(42_021, { balance: 1 }));
  await observer.observe();
  await eventually('the gate sees the worker', () => observer.workers().some((w) => w.id === info.id));

  // As in zk-registry.test.ts: a second client takes the session over and closes it while the
  // registry's own connection is held down.
  const old = registry.sessionCredentials()!;
  proxy.partition();
  await new Promise<void>((resolve) => {
    const thief = new ZooKeeperSession({ connect: zk.connect, sessionTimeoutMs: 2_000, logLevel: 'off', credentials: old, onConnected: () => thief.close(), onClosed: () => resolve() });
  });
  await eventually('the gate saw it leave', () => !observer.workers().some((w) => w.id === info.id));
  proxy.heal();
  await eventually('registered again', () => registrations.length === 2, 10_000);
  t.same(registrations[1], info, 'under the same id');
  await eventually('the gate lists it again', () => observer.workers().some((w) => w.id === info.id));
  registry.setBalance(7);
  await eventually('balance writes work on the new session', () => observer.workers().find((w) => w.id === info.id)?.balance === 7);
  const own = `${root}/workers/w-${info.id}`;
  for (const [who, auth] of STRANGERS) {
    const s = await rawSession(t, auth);
    t.equal(await rc(s.set(own, forged(info.id, 1), -1)), ZK_RC.NO_AUTH, `${who} cannot change the re-created znode`);
  }
});

t.test('a parent made without an identity is taken over; one owned by another identity stops the worker', async (t) => {
  const { log, lines } = capturingLogger();
  const open = freshRoot();
  const anyone = await rawSession(t);
  await anyone.create(open, Buffer.alloc(0), ZK_MODE.PERSISTENT);
  await anyone.create(`${open}/workers`, Buffer.alloc(0), ZK_MODE.PERSISTENT);
  t.equal(await rc(anyone.create(`${open}/workers/w-0000000077`, forged('0000000077', 1), ZK_MODE.EPHEMERAL)), 0, 'a stranger could add workers before');
  const registry = makeRegistry(t, { root: open, log });
  const info = await registry.register(announcement(42_031));
  t.ok(info.id, 'the worker registered');
  t.equal(await rc(anyone.create(`${open}/workers/w-0000000078`, forged('0000000078', 1), ZK_MODE.EPHEMERAL)), ZK_RC.NO_AUTH, 'and now it cannot');
  t.same(
    lines.filter((l) => l.msg === 'zookeeper node was open to anyone; cluster acl set').map((l) => l.path),
    [open, `${open}/workers`],
    'the repair is logged per node',
  );
  t.notOk(registry.workers().some((w) => w.id === '0000000077'), 'the stranger\'s worker, made while it was open, is not listed');
  t.ok(lines.some((l) => l.msg === 'worker entries made while workers/ was open deleted' && l.path === `${open}/workers` && l.deleted === 1), 'it is deleted, and that logged');

  const squatted = freshRoot();
  const mallory = await rawSession(t, { user: 'mallory', password: 'mallory-password' });
  await mallory.create(squatted, Buffer.alloc(0), ZK_MODE.PERSISTENT);
  await mallory.setAcl(squatted, -1, [
    { scheme: 'digest', id: digestId({ user: 'mallory', password: 'mallory-password' }), perms: ZK_PERM.ALL },
    { scheme: 'world', id: 'anyone', perms: ZK_PERM.READ },
  ]);
  const refused = makeRegistry(t, { root: squatted, connectTimeoutMs: 5_000 });
  const err = await refused.register(announcement(42_032)).then(
    () => undefined,
    (e: unknown) => e as Error & { code?: string },
  );
  t.equal(err?.code, 'SB_ERR_REGISTRY_ACL', 'the worker refuses to start: SB_ERR_REGISTRY_ACL');
  t.match(err?.message, new RegExp(`"sb-worker" may not .* ${squatted}`), 'naming the identity and the node');
  t.notMatch(err?.message, WORKER.password, 'never the password');
  await eventually('and the registry is closed', () => refused.status === 'closed');

  const noIdentity = makeRegistry(t, { root: open, auth: undefined, readers: undefined, connectTimeoutMs: 5_000 });
  const err2 = await noIdentity.register(announcement(42_033)).then(
    () => undefined,
    (e: unknown) => e as Error & { code?: string },
  );
  t.equal(err2?.code, 'SB_ERR_REGISTRY_ACL', 'a worker without an identity cannot join a protected registry');
  t.match(err2?.message, /--zk-auth/, 'and is told what it lacks');
});

t.test('a worker entry a stranger made to look protected while the tree was open is not listed after the take-over', async (t) => {
  // The tree of a cluster that ran without --zk-auth (or one a stranger made first), with a
  // forged worker whose ACL (open) was set and whose data was written after, as a real worker's
  // is; workers/ itself re-ACLed too, so that nothing says it was open.
  const open = freshRoot();
  const anyone = await rawSession(t);
  await anyone.create(open, Buffer.alloc(0), ZK_MODE.PERSISTENT);
  await anyone.create(`${open}/workers`, Buffer.alloc(0), ZK_MODE.PERSISTENT);
  await anyone.setAcl(`${open}/workers`, 0, OPEN);
  const fake = `${open}/workers/w-0000000077`;
  await anyone.create(fake, forged('0000000077', 1), ZK_MODE.EPHEMERAL);
  await anyone.setAcl(fake, 0, OPEN);
  await anyone.set(fake, forged('0000000077', 1), 0);
  const registry = makeRegistry(t, { root: open });
  const info = await registry.register(announcement(42_034));
  const gate = makeRegistry(t, { root: open, auth: GATE, readers: undefined });
  await gate.observe();
  t.same(registry.workers().map((w) => w.id), [info.id], 'the worker lists only itself');
  t.same(gate.workers().map((w) => w.id), [info.id], 'the gate lists only the real worker');
  t.equal(await rc(anyone.set(fake, forged('0000000077', 2), -1)), ZK_RC.NO_NODE, 'the forged entry is gone: the stranger cannot change it any more');
});

t.test('the gate trusts a registry only if strangers are kept out of it, and only znodes whose ACL was set', async (t) => {
  // A registry made by a stranger, with a worker that looks protected (its ACL set, its data
  // written after): the gate refuses it.
  const open = freshRoot();
  const anyone = await rawSession(t);
  await anyone.create(open, Buffer.alloc(0), ZK_MODE.PERSISTENT);
  await anyone.create(`${open}/workers`, Buffer.alloc(0), ZK_MODE.PERSISTENT);
  const fake = `${open}/workers/w-0000000001`;
  await anyone.create(fake, forged('0000000001', 1), ZK_MODE.EPHEMERAL);
  await anyone.setAcl(fake, 0, OPEN);
  await anyone.set(fake, forged('0000000001', 1), 0);
  const gate = makeRegistry(t, { root: open, auth: GATE, readers: undefined });
  await t.rejects(gate.observe(), { code: 'SB_ERR_REGISTRY_ACL', message: /lets clients without an identity in/ }, 'the gate does not serve from it');
  t.same(gate.workers(), [], 'and lists nobody');

  // A gate whose identity the workers did not grant READ (here: a wrong password).
  const granted = freshRoot();
  await makeRegistry(t, { root: granted }).register(announcement(42_040));
  const ungranted = makeRegistry(t, { root: granted, auth: { user: GATE.user, password: 'not-the-gate-password' }, readers: undefined });
  await t.rejects(ungranted.observe(), { code: 'SB_ERR_REGISTRY_ACL', message: /"sb-gate" may not read .*--zk-readers/ }, 'a gate the workers did not grant READ says so');

  // A protected registry with a znode whose ACL was never set (as one is for a moment while it
  // is created): left out until its ACL is set and its data written after.
  const root = freshRoot();
  const { log, lines } = capturingLogger();
  const registry = makeRegistry(t, { root });
  const info = await registry.register(announcement(42_041));
  const observer = makeRegistry(t, { root, auth: GATE, readers: undefined, log, reconcileIntervalMs: 100 });
  await observer.observe();
  const worker = await rawSession(t, WORKER);
  const half = `${root}/workers/w-0000088888`;
  await worker.create(half, forged('0000088888', 2), ZK_MODE.EPHEMERAL);
  await eventually('logged', () => lines.some((l) => l.msg === 'registry node is not trusted' && l.path === half));
  await new Promise((resolve) => setTimeout(resolve, 300)); // a few reconciles
  t.same(
    observer.workers().map((w) => w.id),
    [info.id],
    'the open znode is not listed',
  );
  t.equal(lines.filter((l) => l.msg === 'registry view repaired').length, 0, 'nor mistaken for a missed event');
  await worker.setAcl(half, 0, new ClusterAcl({ auth: WORKER, readers: READERS }, silentLogger()).entries);
  await worker.set(half, forged('0000088888', 2), 0);
  await eventually('listed once protected', () => observer.workers().some((w) => w.id === '0000088888'));

  // The gate starts before any worker made the tree: it waits for it, then checks it.
  const later = freshRoot();
  const early = makeRegistry(t, { root: later, auth: GATE, readers: undefined });
  await early.observe();
  t.same(early.workers(), [], 'no workers yet');
  const first = await makeRegistry(t, { root: later }).register(announcement(42_051));
  await eventually('the gate lists the first worker once the tree exists', () => early.workers().some((w) => w.id === first.id));
});

/** A real session that lets a stranger act on a node between its create and the ACL sent with it. */
class WindowSession extends ZooKeeperSession {
  window: ((path: string) => Promise<void>) | undefined;
  #acl: Promise<unknown> = Promise.resolve();

  override setAcl(path: string, aversion: number, acl: readonly ZooKeeperAclEntry[]): Promise<void> {
    const window = this.window;
    const sent = (window ? window(path) : Promise.resolve()).then(() => super.setAcl(path, aversion, acl));
    this.#acl = sent.catch(() => undefined);
    return sent;
  }

  // What follows the ACL keeps its order behind it, as on the wire.
  override set(path: string, data: Buffer, version: number) {
    return this.#acl.then(() => super.set(path, data, version));
  }
}

t.test('a znode changed by another client while being created is deleted and created again', async (t) => {
  const root = freshRoot();
  const worker = await rawSession(t, WORKER);
  await new ClusterAcl({ auth: WORKER, readers: READERS }, silentLogger()).ensureTree(worker, root, [`${root}/workers`]);
  let session!: WindowSession;
  await new Promise<void>((resolve) => {
    session = new WindowSession({ connect: zk.connect, sessionTimeoutMs: 10_000, logLevel: 'off', auth: WORKER, onConnected: resolve });
  });
  t.teardown(() => session.close());
  const { log, lines } = capturingLogger();
  const acl = new ClusterAcl({ auth: WORKER, readers: READERS }, log);
  const stranger = await rawSession(t);
  const mine = Buffer.from('{"mine":true}');

  // Once: the stranger writes its data into the open node. The write is found, the node made again.
  let windows = 0;
  session.window = async (path) => {
    session.window = undefined;
    windows++;
    await eventually('the node exists', async () => (await stranger.exists(path)) !== undefined);
    t.equal(await rc(stranger.set(path, Buffer.from('{"forged":true}'), -1)), 0, 'the stranger wrote into the open node');
  };
  const path = `${root}/workers/w-0000000042`;
  const version = await acl.create(session, path, mine, ZK_MODE.EPHEMERAL);
  t.equal(windows, 1);
  t.same((await worker.get(path)).data, mine, 'the node holds our data');
  t.equal(version, 1, 'at the version create() resolved');
  t.equal(await rc(stranger.set(path, Buffer.from('{"forged":true}'), -1)), ZK_RC.NO_AUTH, 'and is closed to the stranger now');
  t.equal(lines.filter((l) => l.msg === 'zookeeper node changed by another client while being created; creating it again').length, 1, 'logged');

  // Every time, taking the node's ACL for itself: given up on with SB_ERR_REGISTRY_ACL.
  session.window = async (p) => {
    await eventually('the node exists', async () => (await stranger.exists(p)) !== undefined);
    t.equal(await rc(stranger.setAcl(p, 0, OPEN)), 0, 'the stranger set the open node\'s ACL first');
  };
  const again = `${root}/workers/w-0000000043`;
  await t.rejects(acl.create(session, again, mine, ZK_MODE.EPHEMERAL), { code: 'SB_ERR_REGISTRY_ACL', message: /changed by another client while being created, 3 times/ });
  t.equal(await worker.exists(again), undefined, 'and the last one it made is deleted too');
});
