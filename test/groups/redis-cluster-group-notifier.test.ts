// RedisGroupNotifier on a real 3-master Redis Cluster: the GroupNotifier contract, then what a
// cluster adds. Redis forwards a PUBLISH to every node, and the notifier subscribes on one node
// of its own choosing: a change published on any other node, or by a gate's notifier, reaches
// it. When its node's connection ends (CLIENT KILL) or the node dies (SIGKILL), it subscribes on
// another node and reports missed() once it is back, and changes flow again.

import t, { type Test } from 'tap';
import { Writable } from 'node:stream';
import { Redis } from 'ioredis';
import { RedisGroupNotifier } from '../../src/groups/redis-group-notifier.js';
import { newGroupId } from '../../src/groups/group-store.js';
import { createLogger, type Logger } from '../../src/log.js';
import { startRedisCluster } from '../helpers/redis.js';
import { until } from '../../testkit/wait.js';
import type { RedisClusterNode } from '../../testkit/redis-cluster.js';
import { groupNotifierConformance, recorder } from './group-notifier.conformance.js';

const cluster = await startRedisCluster(t);
const url = { cluster: cluster.seeds };
const direct = new Map(cluster.nodes.map((node) => [node.port, new Redis(node.url, { maxRetriesPerRequest: 1 })]));
for (const client of direct.values()) client.on('error', () => {});
t.teardown(() => direct.forEach((client) => client.disconnect()));
let n = 0;

/** A plain connection to `node`. */
const on = (node: RedisClusterNode) => direct.get(node.port)!;

/** Subscribers of `channel` on every node still running (each node counts its own). */
async function subscribers(channel: string): Promise<number> {
  const counts = await Promise.all(cluster.nodes.filter((node) => node.alive).map(async (node) => ((await on(node).call('PUBSUB', 'NUMSUB', channel)) as [string, number])[1]));
  return counts.reduce((a, b) => a + b, 0);
}

/** A notifier on its own prefix; `lines` are its log lines. */
function clusterNotifier(t: Test, prefix = `t${++n}:`) {
  const lines: Record<string, unknown>[] = [];
  const log: Logger = createLogger({ level: 'info' }, new Writable({ write: (chunk: Buffer, _e, done) => (lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>), done()) }));
  const notifier = new RedisGroupNotifier({ url, keyPrefix: prefix, timeoutMs: 1_000, log });
  t.teardown(() => notifier.close());
  return { notifier, lines, subscribed: () => until(`subscribed to ${notifier.channel}`, async () => (await subscribers(notifier.channel)) >= 1) };
}

/** The node that holds `notifier`'s subscription now, as the nodes report it. */
async function subscriberNode(notifier: RedisGroupNotifier): Promise<RedisClusterNode> {
  let found: RedisClusterNode | undefined;
  await until(`one node holds the subscription to ${notifier.channel}`, async () => {
    const holders = [];
    for (const node of cluster.nodes.filter((node) => node.alive)) {
      if (((await on(node).call('PUBSUB', 'NUMSUB', notifier.channel)) as [string, number])[1] > 0) holders.push(node);
    }
    found = holders.length === 1 ? holders[0] : undefined;
    return found !== undefined;
  });
  return found!;
}

groupNotifierConformance(t, async (t) => clusterNotifier(t));

t.test('published on any node, or by a gate notifier: heard by a notifier subscribed on another', async (t) => {
  const worker = clusterNotifier(t, 'across:');
  const gate = clusterNotifier(t, 'across:');
  const heard = recorder();
  worker.notifier.subscribe(heard);
  await worker.subscribed();
  const home = await subscriberNode(worker.notifier);
  t.equal(await subscribers('across:groups'), 1, 'one subscription in the whole cluster');
  t.equal(((await on(home).call('PUBSUB', 'NUMSUB', 'across:groups')) as [string, number])[1], 1, `on node ${home.port}`);
  const group = newGroupId();
  const others = cluster.nodes.filter((node) => node !== home);
  for (const [i, node] of others.entries()) await on(node).publish('across:groups', JSON.stringify({ group, seq: i + 1 }));
  await until('both changes published on the other nodes arrived', () => heard.changes.length === 2);
  // Each node forwards a publish over its own cluster-bus link: two nodes' publishes may arrive in either order.
  t.same(heard.changes.map((c) => c.seq).sort((x, y) => x - y), [1, 2]);
  for (let seq = 3; seq <= 22; seq++) gate.notifier.publish({ group, seq, added: [`u${seq}`] });
  await until("the gate notifier's 20 changes arrived", () => heard.changes.length === 22);
  t.same(heard.changes.slice(2).map((c) => c.seq), Array.from({ length: 20 }, (_, i) => i + 3), "the gate notifier's in order");
  t.equal(gate.notifier.subscriber, undefined, 'the publishing side holds no subscription');
  t.equal(heard.misses, 0);
});

t.test('CLIENT KILL of the subscription: it subscribes on another node, missed() once, changes flow', async (t) => {
  const { notifier, subscribed, lines } = clusterNotifier(t);
  const a = recorder();
  notifier.subscribe(a);
  await subscribed();
  const first = await subscriberNode(notifier);
  t.equal(await on(first).call('CLIENT', 'KILL', 'TYPE', 'pubsub'), 1, `the subscription on ${first.port} was killed`);
  await until('missed() once the subscription is back', () => a.misses === 1);
  const second = await subscriberNode(notifier);
  t.not(second.port, first.port, `now on another node (${second.port})`);
  t.ok(lines.some((l) => l.msg === 'group notifier lost its node; subscribing on another'), 'logged');
  t.ok(lines.some((l) => l.msg === 'group notifier subscribed' && l.resubscribed === true), 'logged as a resubscription');
  const group = newGroupId();
  await on(first).publish(notifier.channel, JSON.stringify({ group, seq: 7 }));
  await until('a change published on the first node arrives', () => a.changes.some((c) => c.group === group));
  t.equal(a.misses, 1);
});

// Last: it leaves the cluster with a master down.
t.test("the subscription's node dies: it subscribes on a node still running, missed() once, changes flow", async (t) => {
  const { notifier, subscribed } = clusterNotifier(t);
  const a = recorder();
  notifier.subscribe(a);
  await subscribed();
  const doomed = await subscriberNode(notifier);
  await doomed.kill();
  await until('missed() once the subscription is back', () => a.misses === 1);
  const now = await subscriberNode(notifier);
  t.ok(now.alive, `on a running node (${now.port})`);
  const group = newGroupId();
  for (const node of cluster.nodes.filter((node) => node.alive)) await on(node).publish(notifier.channel, JSON.stringify({ group, seq: node.port }));
  await until('the changes published on both running nodes arrive', () => a.changes.filter((c) => c.group === group).length === 2);
  t.equal(a.misses, 1);
});
