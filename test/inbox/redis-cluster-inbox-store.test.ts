// The Redis InboxStore on a real 3-master Redis Cluster: the shared conformance suites, whose
// users land on different masters. Appends are batched per inbox there (a script runs in one
// slot), so a message and its own copy are two scripts on two nodes: a call that touched keys of
// several slots would fail with CROSSSLOT here.

import t from 'tap';
import { Cluster, Redis } from 'ioredis';
import { RedisInboxStore } from '../../src/inbox/redis-inbox-store.js';
import { startRedisCluster } from '../helpers/redis.js';
import { inboxStoreConformance } from './inbox-store.conformance.js';
import { conversationsConformance } from './conversations.conformance.js';

const cluster = await startRedisCluster(t);
let n = 0;
const make = async (limits?: object, now?: () => number) => new RedisInboxStore({ url: { cluster: cluster.seeds }, limits, keyPrefix: `t${++n}:`, now });
inboxStoreConformance(t, make);
conversationsConformance(t, make);

t.test('a message and its own copy land on the masters of their users, each in its own slot', async (t) => {
  const inbox = await make();
  t.teardown(() => inbox.close());
  t.ok(inbox.redis instanceof Cluster, 'a Cluster client');
  // Users whose inboxes live on different masters.
  const prefix = `t${n}:`;
  const users: string[] = [];
  const masters = new Set<number>();
  for (let i = 0; users.length < 2 && i < 100; i++) {
    const master = await cluster.masterOf(`${prefix}{u${i}}:seq`);
    if (!masters.has(master.port)) {
      masters.add(master.port);
      users.push(`u${i}`);
    }
  }
  const [alice, bob] = users as [string, string];
  const [message, copy] = await inbox.appendPair(
    { uid: bob, sender: alice, msgId: '7', body: Buffer.from('hi'), conversation: alice },
    { uid: alice, sender: `${alice}\0${bob}`, msgId: '7', body: Buffer.from('hi'), conversation: bob, own: true },
  );
  t.match([message, copy], [{ seq: 1, duplicate: false }, { seq: 1, duplicate: false }]);
  t.same((await inbox.range(bob, 0, 10)).messages.map((m) => m.body.toString()), ['hi']);
  t.same((await inbox.range(alice, 0, 10)).messages.map((m) => m.body.toString()), ['hi']);
  t.not((await cluster.masterOf(`${prefix}{${alice}}:lg`)).port, (await cluster.masterOf(`${prefix}{${bob}}:lg`)).port, 'on two masters');
});

t.test('a slot being resharded: its inboxes are refused or read right until it has moved, never written on the wrong node', async (t) => {
  const prefix = 'mig:';
  const store = new RedisInboxStore({ url: { cluster: cluster.seeds }, keyPrefix: prefix });
  t.teardown(() => store.close());
  for (let i = 1; i <= 3; i++) await store.append({ uid: 'bob', sender: 'alice', msgId: String(i), body: Buffer.from(`m${i}`), conversation: 'alice' });
  const admin = (url: string) => {
    const a = new Redis(url, { maxRetriesPerRequest: 1 });
    t.teardown(() => a.disconnect());
    return a;
  };
  // The first step of a resharding (redis-cli --cluster reshard): the slot is marked on both
  // sides, then its keys move with MIGRATE. Here none has moved yet.
  const key = `${prefix}{bob}:seq`;
  const from = await cluster.masterOf(key);
  const to = cluster.nodes.find((n) => n !== from && n.alive && n.role === 'master')!;
  const [source, target] = [admin(from.url), admin(to.url)];
  const slot = Number(await source.call('CLUSTER', 'KEYSLOT', key));
  const epoch = Number(await source.get(`${prefix}{bob}:ep`));
  await target.call('CLUSTER', 'SETSLOT', slot, 'IMPORTING', from.id);
  await source.call('CLUSTER', 'SETSLOT', slot, 'MIGRATING', to.id);
  const read = await store.range('bob', 0, 10).then(
    (r) => ({ head: r.head, epoch: r.epoch }),
    (err: { code?: string }) => err.code,
  );
  // Redis answers a call whose keys are split between the two nodes TRYAGAIN (retried by the client).
  t.ok(read === 'SB_ERR_STORE_UNAVAILABLE' || (typeof read === 'object' && read.head === 3 && read.epoch === epoch), `a read meanwhile: refused or the source's inbox (${JSON.stringify(read)})`);
  t.same(await target.call('CLUSTER', 'GETKEYSINSLOT', slot, 100), [], 'nothing was written on the importing node');
  const keys = (await source.call('CLUSTER', 'GETKEYSINSLOT', slot, 1000)) as string[];
  t.equal(await source.call('MIGRATE', '127.0.0.1', to.port, '', 0, 5000, 'KEYS', ...keys), 'OK', 'the resharding moves the keys');
  for (const node of cluster.nodes.filter((n) => n.alive && n.role === 'master')) await admin(node.url).call('CLUSTER', 'SETSLOT', slot, 'NODE', to.id);
  t.match(await store.append({ uid: 'bob', sender: 'alice', msgId: '4', body: Buffer.from('m4') }), { seq: 4, duplicate: false, epoch }, 'the inbox goes on where it was, in its epoch, on its new master');
  t.same((await store.range('bob', 0, 10)).messages.map((m) => m.body.toString()), ['m1', 'm2', 'm3', 'm4']);
});

t.test('close() with appends of this turn pending: sent and answered before the connections close', async (t) => {
  const inbox = new RedisInboxStore({ url: { cluster: cluster.seeds }, keyPrefix: 'close:' });
  await inbox.ping();
  const pending = inbox.append({ uid: 'carol', sender: 'dave', msgId: '1', body: Buffer.from('last words') });
  await inbox.close();
  t.match(await pending, { seq: 1, duplicate: false });
});
