// `switchboard worker` processes that cannot serve: one whose Redis refuses its password exits 1
// with SB_ERR_STORE_UNAVAILABLE and Redis's reason (never the password) without ever appearing
// in ZooKeeper; one whose ZooKeeper cannot be reached exits 1 with SB_ERR_REGISTRY_UNAVAILABLE
// instead of listening on, kept alive by its open connections. Real ZooKeeper, Redis and
// processes (the compiled dist/: `npm run build` first).

import t from 'tap';
import { ZooKeeperRegistry } from '../../src/registry/zk-registry.js';
import type { ImNode } from '../../src/registry/im-node.js';
import { silentLogger } from '../../src/log.js';
import { CliProcess } from '../helpers/cli-process.js';
import { CLUSTER_PEER_SECRET, CLUSTER_TOKEN_SECRET, CLUSTER_ZK_WORKER_AUTH } from '../helpers/cluster.js';
import { freePort } from '../../testkit/services.js';
import { requirePassword, startRedis } from '../helpers/redis.js';
import { startZooKeeper } from '../helpers/zookeeper.js';

// Cluster processes and the registry's 10 s connect timeout.
t.setTimeout(120_000);

const zk = await startZooKeeper(t);
/** Far beyond what either refusal takes: a worker still running then is the defect. */
const EXIT_MS = 40_000;

function workerArgs(root: string, redisUrl: string, zkConnect = zk.connect): string[] {
  return ['worker', '--port', '0', '--zk', zkConnect, '--zk-root', root, '--redis', redisUrl, '--secret', CLUSTER_TOKEN_SECRET, '--cluster-secret', CLUSTER_PEER_SECRET, '--zk-auth', CLUSTER_ZK_WORKER_AUTH, '--log-level', 'info'];
}

t.test('a wrong Redis password: exit 1, SB_ERR_STORE_UNAVAILABLE and the reason, never registered, the password never printed', async (t) => {
  const redis = await startRedis(t);
  await requirePassword(redis, 'the-right-one');
  const root = `/sb-worker-start-${process.pid}-pw`;
  const observer = new ZooKeeperRegistry({ connect: zk.connect, root, log: silentLogger(), nativeLogLevel: 'off' });
  t.teardown(() => observer.close());
  await observer.observe();
  const seen: (readonly ImNode[])[] = [];
  observer.onChange((view) => seen.push(view));

  const worker = new CliProcess(t, 'worker with a wrong password', workerArgs(root, redis.url.replace('redis://', 'redis://:not-the-password@')));
  t.same(await worker.exit(EXIT_MS), { code: 1, signal: null }, 'exit code 1');
  t.match(worker.stderr, /^switchboard worker: SB_ERR_STORE_UNAVAILABLE .*WRONGPASS/m, 'one line: the code and the reason');
  t.notMatch(worker.stdout + worker.stderr, /not-the-password/, 'the password is printed nowhere, logs included');
  t.notOk(worker.lines.some((l) => l.msg === 'worker listening' || l.msg === 'registered with zookeeper'), 'it never listened nor registered');
  t.same(seen.flat(), [], 'ZooKeeper never listed it');
  t.same(observer.workers(), []);
});

t.test('an unreachable ZooKeeper: exit 1 with SB_ERR_REGISTRY_UNAVAILABLE instead of listening on', async (t) => {
  const redis = await startRedis(t);
  const nobody = `127.0.0.1:${await freePort()}`;
  const worker = new CliProcess(t, 'worker without ZooKeeper', workerArgs(`/sb-worker-start-${process.pid}-zk`, redis.url, nobody));
  t.same(await worker.exit(EXIT_MS), { code: 1, signal: null }, 'exit code 1');
  t.match(worker.stderr, /^switchboard worker: SB_ERR_REGISTRY_UNAVAILABLE /m, 'saying why');
  t.ok(worker.lines.some((l) => l.msg === 'worker stopped'), 'after stopping what it had started');
});
