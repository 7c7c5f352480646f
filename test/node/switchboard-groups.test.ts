// The composition root's groups: one GroupStore and one GroupNotifier per process, in memory
// without --redis and in Redis (the same key prefix, pub/sub on `<prefix>groups`) with it; the
// worker (node.groups) and its embedded gate share them; stop() closes them, and so does an
// assembly that fails after they were built; group limits a store would refuse are refused
// before anything connects.

import t from 'tap';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { createSwitchboard, type SwitchboardConfig, type WorkerConfig } from '../../src/node.js';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { DEFAULT_HEALTH_SETTINGS } from '../../src/server/store-health.js';
import { DEFAULT_INBOX_LIMITS } from '../../src/inbox/inbox-store.js';
import { DEFAULT_GATE_LIMITS } from '../../src/gate/web-gate.js';
import { MemoryGroupStore } from '../../src/groups/memory-group-store.js';
import { RedisGroupStore } from '../../src/groups/redis-group-store.js';
import { MemoryGroupNotifier, type GroupChange } from '../../src/groups/group-notifier.js';
import { RedisGroupNotifier } from '../../src/groups/redis-group-notifier.js';
import { silentLogger } from '../../src/log.js';
import { TEST_SECRET } from '../helpers/node.js';
import { startRedis } from '../helpers/redis.js';
import { until } from '../../testkit/wait.js';

const WORKER: WorkerConfig = {
  host: '127.0.0.1',
  port: 0,
  limits: { ...DEFAULT_LIMITS, closeGraceMs: 200 },
  health: DEFAULT_HEALTH_SETTINGS,
  inboxLimits: DEFAULT_INBOX_LIMITS,
  memoryInboxBytes: 16 * 1024 * 1024,
  checkRecipients: true,
};
const GATE = { host: '127.0.0.1', port: 0, limits: DEFAULT_GATE_LIMITS, registration: true, trustProxy: [] };
const base: SwitchboardConfig = { secret: TEST_SECRET, log: silentLogger() };

t.test('embedded, in memory: one MemoryGroupStore and MemoryGroupNotifier, the worker\'s', async (t) => {
  const switchboard = createSwitchboard({ ...base, worker: WORKER, gate: GATE, groupLimits: { maxGroupsPerUser: 7 } });
  t.teardown(() => switchboard.stop());
  t.type(switchboard.groups, MemoryGroupStore);
  t.type(switchboard.groupNotifier, MemoryGroupNotifier);
  t.equal(switchboard.node!.groups, switchboard.groups, 'the node is handed the same store');
  t.equal(switchboard.node!.groupNotifier, switchboard.groupNotifier, 'and the same notifier');
  await switchboard.start();
  for (let i = 0; i < 7; i++) await switchboard.groups.create('alice', `g${i}`);
  await t.rejects(switchboard.groups.create('alice', 'one too many'), { code: 'SB_ERR_GROUP_TOO_MANY' }, 'the configured limit holds');
});

t.test('group limits a store refuses: SB_ERR_CONFIG before any Redis connection', async (t) => {
  const server = await startRedis(t);
  const admin = new Redis(server.url, { maxRetriesPerRequest: 1 });
  t.teardown(() => admin.disconnect());
  const clients = async () => ((await admin.client('LIST')) as string).split('\n').filter(Boolean).length;
  const before = await clients();
  const redis = { url: server.url, keyPrefix: 'sb:', timeoutMs: 1_000 };
  t.throws(() => createSwitchboard({ ...base, redis, worker: WORKER, gate: GATE, groupLimits: { maxMembers: 1 } }), { code: 'SB_ERR_CONFIG' });
  await sleep(300);
  t.equal(await clients(), before, 'no Redis connection was opened');
});

t.test('with Redis: RedisGroupStore under the key prefix, RedisGroupNotifier on <prefix>groups, all closed by stop()', async (t) => {
  const server = await startRedis(t);
  const admin = new Redis(server.url, { maxRetriesPerRequest: 1 });
  t.teardown(() => admin.disconnect());
  const clients = async () => ((await admin.client('LIST')) as string).split('\n').filter(Boolean).length;
  const before = await clients();
  const switchboard = createSwitchboard({ ...base, redis: { url: server.url, keyPrefix: 'tenant:', timeoutMs: 1_000 }, worker: WORKER, gate: GATE });
  let stopped = false;
  t.teardown(() => (stopped ? undefined : switchboard.stop()));
  t.type(switchboard.groups, RedisGroupStore);
  t.type(switchboard.groupNotifier, RedisGroupNotifier);
  t.equal(switchboard.node!.groups, switchboard.groups);
  t.equal((switchboard.groupNotifier as RedisGroupNotifier).channel, 'tenant:groups');
  await switchboard.start();
  const heard: GroupChange[] = [];
  switchboard.groupNotifier.subscribe({ change: (c) => heard.push(c), missed: () => {} });
  const group = await switchboard.groups.create('alice', 'team', ['bob']);
  const keys = await admin.keys('*');
  t.ok(keys.some((k) => k.startsWith(`tenant:{g:${group.id}}`)), 'the group is stored under the prefix');
  t.ok(keys.every((k) => k.startsWith('tenant:')), 'every key under it');
  await until('the subscription is up', async () => ((await admin.call('PUBSUB', 'NUMSUB', 'tenant:groups')) as [string, number])[1] === 1);
  switchboard.groupNotifier.publish({ group: group.id, seq: 1, added: ['bob'] });
  await until('the change came back over Redis', () => heard.length === 1);
  t.same(heard, [{ group: group.id, seq: 1, added: ['bob'] }]);
  await switchboard.stop();
  stopped = true;
  let after = await clients();
  for (let waited = 0; after !== before && waited < 3_000; waited += 100) {
    await sleep(100);
    after = await clients();
  }
  t.equal(after, before, 'every Redis connection (the group store, both notifier connections) is closed');
});

t.test('an assembly that fails after the groups were built closes them', async (t) => {
  const server = await startRedis(t);
  const admin = new Redis(server.url, { maxRetriesPerRequest: 1 });
  t.teardown(() => admin.disconnect());
  const clients = async () => ((await admin.client('LIST')) as string).split('\n').filter(Boolean).length;
  const before = await clients();
  const limits = { ...GATE.limits, bodyLimit: -1 };
  t.throws(() => createSwitchboard({ ...base, redis: { url: server.url, keyPrefix: 'sb:', timeoutMs: 1_000 }, worker: WORKER, gate: { ...GATE, limits } }));
  let after = await clients();
  for (let waited = 0; after !== before && waited < 3_000; waited += 100) {
    await sleep(100);
    after = await clients();
  }
  t.equal(after, before, 'no Redis connection is left open');
});
