// The Redis InboxStore on a real 3-master Redis Cluster: the shared conformance suites, whose
// users land on different masters. Appends are batched per inbox there (a script runs in one
// slot), so a message and its own copy are two scripts on two nodes: a call that touched keys of
// several slots would fail with CROSSSLOT here.

import t from 'tap';
import { Cluster } from 'ioredis';
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
