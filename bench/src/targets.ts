// What a bench run measures, started by the bench or pointed at: `embedded` is one
// `switchboard start` process (gate + worker, in-memory stores unless --inbox redis);
// `cluster` is a real ZooKeeper and Redis, N `switchboard worker` processes and a
// `switchboard gate`; `external` is a running deployment given by --worker and --gate. The
// Redis the bench starts is one redis-server, or with `redisCluster` a 3-master Redis Cluster.

import { randomBytes } from 'node:crypto';
import { digestId } from '../../src/registry/cluster-acl.js';
import { listeningLine, listeningPort, siblingModule, tlsPortIn, spawnServer, started, startGateProcess, startWorkerProcess, type ProcessSampler, type ServerOptions, type Started } from './processes.js';
import { GroupAdmin, LoopDelayReader } from './group-admin.js';
import { startRedisServer, startZooKeeperServer, type RedisServer, type ZooKeeperServer } from '../../testkit/services.js';
import { startRedisCluster } from '../../testkit/redis-cluster.js';
import { sleep } from '../../testkit/wait.js';

export type TargetKind = 'embedded' | 'cluster' | 'external';

export interface TargetOptions {
  kind: TargetKind;
  /** cluster: worker processes (default 2). */
  workers?: number;
  /** embedded: where the inbox lives (cluster: always Redis). */
  inbox?: 'memory' | 'redis';
  /** Redis persistence when the bench starts Redis (every node of a Redis Cluster). */
  fsync?: 'none' | 'everysec' | 'always';
  /** The Redis the bench starts is a Redis Cluster of 3 masters (the stores get its seeds and --redis-cluster). */
  redisCluster?: boolean;
  /** Token signing secret of the target (external: must match the deployment's). */
  secret: string;
  /** external: worker endpoints host:port, and the gate's base URL. */
  workerEndpoints?: string[];
  gateUrl?: string;
  /** Extra flags for every worker (and the embedded node). */
  workerArgs?: string[];
  /** Extra flags for the gate (and the embedded node). */
  gateArgs?: string[];
  /**
   * embedded: the node's groups are created through its gate (groupAdmin) and its event-loop
   * delay is read from the probe preloaded into it (loopDelay, loop-delay-probe.ts).
   */
  groups?: boolean;
  sampler?: ProcessSampler;
}

export interface WorkerEndpoint {
  name: string;
  host: string;
  port: number;
  /** The TLS client port, when the worker was started with one (--tls-port). */
  tlsPort?: number;
  /** Present when the bench started it. */
  process?: Started;
}

export interface RunningTarget {
  kind: TargetKind;
  /** e.g. "embedded (memory inbox)", "cluster of 3 workers (redis)". */
  label: string;
  secret: string;
  workers: WorkerEndpoint[];
  gateUrl?: string;
  /** cluster: the connect strings, for a worker started later (or restarted). */
  zk?: ZooKeeperServer;
  /** The one Redis the bench started (not with redisCluster). */
  redis?: RedisServer;
  /** The URLs of the Redis servers the bench started that hold data: the one Redis, or each master of the Redis Cluster. */
  redisMasters?: string[];
  /** Starts one more worker in the cluster (cluster only). */
  addWorker?(): Promise<WorkerEndpoint>;
  /** With `groups`: creates the groups of a run. */
  groupAdmin?: GroupAdmin;
  /** With `groups`: the node's event-loop delay over a span of the run. */
  loopDelay?: LoopDelayReader;
  stop(): Promise<void>;
}

const LOOPBACK = '127.0.0.1';

/** The cluster (peer) secret of a cluster target started with token secret `secret`. */
export const clusterSecretOf = (secret: string) => `${secret}-cluster`;

/**
 * The bench measures the server, not its abuse limits: every worker it starts (and the
 * embedded node) runs with the message rate and the connection caps raised out of reach (its
 * drivers send far above a client's rate and open thousands of connections per source
 * address), so what they cost per message and per connection is measured while they refuse
 * nothing; it accepts any recipient (its users have tokens, not accounts) and has room for the
 * memory inboxes of a long run. A scenario's own workerArgs come after these and win.
 */
const OUT_OF_REACH = '1000000000';
export const BENCH_WORKER_ARGS: readonly string[] = Object.freeze([
  '--msg-rate', OUT_OF_REACH,
  '--msg-burst', OUT_OF_REACH,
  '--user-msg-rate', OUT_OF_REACH,
  '--user-msg-burst', OUT_OF_REACH,
  '--max-connections-per-ip', OUT_OF_REACH,
  '--max-unauthenticated', OUT_OF_REACH,
  '--allow-unknown-recipients',
  '--inbox-memory-mb', '16384',
]);

export async function startTarget(o: TargetOptions): Promise<RunningTarget> {
  if (o.kind === 'external') return externalTarget(o);
  if (o.groups && o.kind !== 'embedded') throw new Error('bench group runs on --target embedded (--inbox memory or redis): the event-loop delay probe is preloaded into that node');
  const stops: (() => Promise<void>)[] = [];
  const stop = async () => {
    for (const fn of stops.reverse()) await fn().catch(() => {});
  };
  try {
    return o.kind === 'embedded' ? await embedded(o, stops, stop) : await cluster(o, stops, stop);
  } catch (err) {
    await stop();
    throw err;
  }
}

function externalTarget(o: TargetOptions): RunningTarget {
  if (!o.workerEndpoints?.length) throw new Error('--target external needs --worker host:port (one or more, comma-separated)');
  const workers = o.workerEndpoints.map((endpoint, i) => {
    const m = /^(.*):(\d+)$/.exec(endpoint);
    if (!m) throw new Error(`--worker ${endpoint}: expected host:port`);
    return { name: `worker-${i}`, host: m[1]!, port: Number(m[2]) };
  });
  return { kind: 'external', label: `external (${o.workerEndpoints.join(', ')})`, secret: o.secret, workers, ...(o.gateUrl ? { gateUrl: o.gateUrl } : {}), stop: async () => {} };
}

async function embedded(o: TargetOptions, stops: (() => Promise<void>)[], stop: () => Promise<void>): Promise<RunningTarget> {
  const extra: string[] = [];
  const redis = o.inbox === 'redis' ? await startRedis(o, stops) : undefined;
  if (redis) extra.push(...redis.args);
  // The bench's group owners create and fill their groups at once: the gate's per-user limit out of reach too.
  if (o.groups) extra.push('--rate-group-changes', OUT_OF_REACH);
  // `start` logs "worker listening" and then "gate listening": both are waited for from the start.
  const options: ServerOptions = {
    name: 'node',
    role: 'node',
    ...(o.groups ? { nodeArgs: probeArgs() } : {}),
    args: ['start', '--port', '0', '--gate-port', '0', '--secret', o.secret, '--log-level', 'info', ...extra, ...BENCH_WORKER_ARGS, ...(o.workerArgs ?? []), ...(o.gateArgs ?? [])],
  };
  const server = spawnServer(options);
  const stopServer = started(options, server, 0).stop;
  stops.push(stopServer);
  const loopDelay = o.groups ? new LoopDelayReader(server) : undefined;
  const [line, gatePort] = await Promise.all([listeningLine(server, 'worker listening'), listeningPort(server, 'gate listening')]);
  const node = { ...started(options, server, Number(line.port)), ...tlsPortIn(line) };
  o.sampler?.add('node', 'node', node.child.pid);
  const inbox = redis ? `redis inbox${o.groups ? ' and groups' : ''}${redis.kind === 'redis' ? '' : ` on a ${redis.kind}`}, fsync ${o.fsync ?? 'none'}` : `memory inbox${o.groups ? ' and groups' : ''}`;
  const gateUrl = `http://${LOOPBACK}:${gatePort}`;
  return {
    kind: 'embedded',
    label: `embedded (${inbox})`,
    secret: o.secret,
    workers: [{ name: 'node', host: LOOPBACK, port: node.port, ...(node.tlsPort === undefined ? {} : { tlsPort: node.tlsPort }), process: node }],
    gateUrl,
    ...(redis ? redis.target : {}),
    ...(o.groups ? { groupAdmin: new GroupAdmin(gateUrl, o.secret), loopDelay } : {}),
    stop,
  };
}

/** The Redis a target's stores live in, as the bench started it: the flags that point the servers at it. */
interface StartedRedis {
  /** For the target's label. */
  kind: 'redis' | '3-master redis cluster';
  /** --redis URL, or --redis <seeds> --redis-cluster. */
  args: string[];
  target: Pick<RunningTarget, 'redis' | 'redisMasters'>;
}

/** Masters of the Redis Cluster the bench starts (redis-cli's minimum). */
const CLUSTER_MASTERS = 3;
/**
 * The cluster's node timeout: with no replicas a node taken for failed fails its slots, so a
 * node descheduled on a loaded machine must not look failed (Redis's own default).
 */
const CLUSTER_NODE_TIMEOUT_MS = 15_000;

/** Starts one Redis, or a Redis Cluster, with the target's persistence; sampled as redis (redis-0, -1, -2). */
async function startRedis(o: TargetOptions, stops: (() => Promise<void>)[]): Promise<StartedRedis> {
  const fsync = o.fsync ?? 'none';
  if (!o.redisCluster) {
    const redis = await startRedisServer({ fsync });
    stops.push(redis.kill);
    o.sampler?.add('redis', 'redis', redis.process.pid);
    return { kind: 'redis', args: ['--redis', redis.url], target: { redis, redisMasters: [redis.url] } };
  }
  const cluster = await startRedisCluster({ masters: CLUSTER_MASTERS, fsync, nodeTimeoutMs: CLUSTER_NODE_TIMEOUT_MS });
  stops.push(cluster.kill);
  for (const [i, node] of cluster.nodes.entries()) o.sampler?.add(`redis-${i}`, 'redis', node.process.pid);
  return {
    kind: '3-master redis cluster',
    args: ['--redis', cluster.seeds.join(','), '--redis-cluster'],
    target: { redisMasters: cluster.nodes.filter((n) => n.role === 'master').map((n) => n.url) },
  };
}

/** Node arguments that preload the event-loop delay probe (and, run from source, its loader). */
function probeArgs(): string[] {
  const loader = siblingModule('loop-delay-probe');
  const probe = loader.pop()!;
  return [...loader, '--import', probe];
}

async function cluster(o: TargetOptions, stops: (() => Promise<void>)[], stop: () => Promise<void>): Promise<RunningTarget> {
  // Both start at once; whichever started is stopped again if the other failed.
  const [zkStarted, redisStarted] = await Promise.allSettled([startZooKeeperServer(), startRedis(o, stops)]);
  if (zkStarted.status === 'fulfilled') stops.push(zkStarted.value.kill);
  if (zkStarted.status === 'rejected') throw zkStarted.reason;
  if (redisStarted.status === 'rejected') throw redisStarted.reason;
  const [zk, redis] = [zkStarted.value, redisStarted.value];
  o.sampler?.add('zookeeper', 'zookeeper', zk.process.pid);
  const root = `/bench-${process.pid}`;
  // ZooKeeper authentication on, as in production: an identity for the workers, one for the gate.
  const zkWorker = { user: 'sb-bench-worker', password: randomBytes(18).toString('base64url') };
  const zkGate = { user: 'sb-bench-gate', password: randomBytes(18).toString('base64url') };
  const clusterArgs = [
    '--zk', zk.connect, '--zk-root', root, ...redis.args, '--cluster-secret', clusterSecretOf(o.secret),
    '--zk-auth', `${zkWorker.user}:${zkWorker.password}`, '--zk-readers', digestId(zkGate),
  ];
  const workers: WorkerEndpoint[] = [];
  const addWorker = async () => {
    const name = `worker-${workers.length}`;
    const worker = await startWorkerProcess(name, o.secret, [...clusterArgs, ...BENCH_WORKER_ARGS, ...(o.workerArgs ?? [])]);
    stops.push(worker.stop);
    o.sampler?.add(name, 'worker', worker.child.pid);
    const endpoint = { name, host: LOOPBACK, port: worker.port, ...(worker.tlsPort === undefined ? {} : { tlsPort: worker.tlsPort }), process: worker };
    workers.push(endpoint);
    return endpoint;
  };
  const n = o.workers ?? 2;
  for (let i = 0; i < n; i++) await addWorker();
  const gate = await startGateProcess('gate', o.secret, ['--zk', zk.connect, '--zk-root', root, '--zk-auth', `${zkGate.user}:${zkGate.password}`, ...redis.args, ...(o.gateArgs ?? [])]);
  stops.push(gate.stop);
  o.sampler?.add('gate', 'gate', gate.child.pid);
  // Peer links come up within a second of registration; the gate's view follows its watches.
  await sleep(1500);
  return {
    kind: 'cluster',
    label: `cluster of ${n} workers (${redis.kind}, fsync ${o.fsync ?? 'none'})`,
    secret: o.secret,
    workers,
    gateUrl: `http://${LOOPBACK}:${gate.port}`,
    zk,
    ...redis.target,
    addWorker,
    stop,
  };
}
