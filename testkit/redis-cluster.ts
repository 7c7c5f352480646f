// A real Redis Cluster on loopback for tests and for the bench (--redis-cluster): `masters`
// redis-server processes (and `replicasPerMaster` replicas of each) started with
// --cluster-enabled, each in a temp dir of its own, joined by `redis-cli --cluster create`, and
// returned once every node says cluster_state:ok and every node agrees on who serves which
// slots. Needs redis-server and redis-cli (Debian: redis-server, which brings redis-tools).

import { spawn } from 'node:child_process';
import { Redis } from 'ioredis';
import { freePort, startRedisServer, type RedisServer, type RedisServerOptions } from './services.js';
import { until } from './wait.js';

export interface RedisClusterOptions {
  /** Masters, each serving a third (with 3) of the 16384 slots; at least 3 (redis-cli's minimum). Default 3. */
  masters?: number;
  /** Replicas of each master. Default 0. */
  replicasPerMaster?: number;
  /** requirepass (and masterauth) on every node; the URLs then carry `default:<password>@`. */
  password?: string;
  /**
   * cluster-node-timeout: a node unreachable this long is failed over (with replicas). Short, so
   * that a test's failover is quick, but not so short that a loaded test machine fails a
   * healthy node. Default 2000.
   */
  nodeTimeoutMs?: number;
  /** Persistence of every node, as startRedisServer's: none (the default), or AOF with everysec or always. */
  fsync?: RedisServerOptions['fsync'];
}

export interface RedisClusterNode {
  port: number;
  /** The cluster bus port (--cluster-port). */
  busPort: number;
  /** redis://127.0.0.1:PORT, with `default:<password>@` when started with a password. */
  url: string;
  /** The node's id in the cluster (CLUSTER MYID). */
  id: string;
  /** Its role when the cluster was created; a failover changes it (masterOf asks the cluster). */
  role: 'master' | 'replica';
  process: RedisServer['process'];
  /** SIGTERM; false for `alive` afterwards. */
  stop(): Promise<void>;
  /** SIGKILL: a crash. */
  kill(): Promise<void>;
  readonly alive: boolean;
}

export interface RedisCluster {
  /** Every node's URL: what a client (`--redis <seeds> --redis-cluster`) is given. */
  seeds: string[];
  nodes: RedisClusterNode[];
  /** The master serving `key`'s slot now, as a node still running sees it. */
  masterOf(key: string): Promise<RedisClusterNode>;
  stop(): Promise<void>;
  kill(): Promise<void>;
}

const SLOTS = 16_384;
/** A port taken between freePort() and the bind, by another test's server: tried again this often. */
const START_ATTEMPTS = 4;

export async function startRedisCluster(options: RedisClusterOptions = {}): Promise<RedisCluster> {
  const { masters = 3, replicasPerMaster = 0, password, nodeTimeoutMs = 2_000, fsync } = options;
  if (!Number.isInteger(masters) || masters < 3) throw new Error(`a Redis Cluster needs at least 3 masters, not ${masters}`);
  const count = masters * (1 + replicasPerMaster);
  const settled = await Promise.allSettled(Array.from({ length: count }, () => startNode(password, nodeTimeoutMs, fsync)));
  const started = settled.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
  const admins: Redis[] = [];
  const killAll = () => Promise.all(started.map((n) => n.server.kill()));
  try {
    const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    if (failed) throw failed.reason;
    await createCluster(started.map((n) => n.server.port), replicasPerMaster, password);
    for (const n of started) admins.push(adminClient(n.server.port, password));
    await until(
      () => `the ${count} nodes of the Redis Cluster agree on the slots (${masters} masters, ${replicasPerMaster} replicas each)`,
      () => settledCluster(admins, masters, replicasPerMaster),
      20_000,
      50,
    );
  } catch (err) {
    for (const a of admins) a.disconnect();
    await killAll();
    throw err;
  }

  const nodes: RedisClusterNode[] = [];
  for (const [i, n] of started.entries()) {
    const admin = admins[i]!;
    const id = String(await admin.call('CLUSTER', 'MYID'));
    const role = ((await admin.call('ROLE')) as [string])[0] === 'master' ? 'master' : 'replica';
    let alive = true;
    const end = (how: () => Promise<void>) => async () => {
      alive = false;
      admin.disconnect();
      await how();
    };
    nodes.push({
      port: n.server.port,
      busPort: n.busPort,
      url: n.server.url,
      id,
      role,
      process: n.server.process,
      stop: end(n.server.stop),
      kill: end(n.server.kill),
      get alive() {
        return alive;
      },
    });
  }

  const masterOf = async (key: string): Promise<RedisClusterNode> => {
    const i = nodes.findIndex((n) => n.alive);
    if (i < 0) throw new Error('no node of the Redis Cluster is running');
    const admin = admins[i]!;
    const slot = Number(await admin.call('CLUSTER', 'KEYSLOT', key));
    const ranges = (await admin.call('CLUSTER', 'SLOTS')) as SlotRange[];
    const range = ranges.find(([start, end]) => slot >= start && slot <= end);
    const node = range && nodes.find((n) => n.port === Number(range[2][1]));
    if (!node) throw new Error(`no node serves slot ${slot} (of ${JSON.stringify(key)})`);
    return node;
  };

  return {
    seeds: nodes.map((n) => n.url),
    nodes,
    masterOf,
    stop: async () => void (await Promise.all(nodes.map((n) => n.stop()))),
    kill: async () => void (await Promise.all(nodes.map((n) => n.kill()))),
  };
}

interface StartedNode {
  server: RedisServer;
  busPort: number;
}

/** One cluster-enabled redis-server; a port someone took meanwhile is tried again with others. */
async function startNode(password: string | undefined, nodeTimeoutMs: number, fsync: RedisServerOptions['fsync']): Promise<StartedNode> {
  let last: unknown;
  for (let attempt = 1; attempt <= START_ATTEMPTS; attempt++) {
    const busPort = await freePort();
    const extraArgs = [
      '--cluster-enabled', 'yes',
      // Relative to the node's own temp dir (--dir), where redis-server runs.
      '--cluster-config-file', 'nodes.conf',
      '--cluster-node-timeout', String(nodeTimeoutMs),
      '--cluster-port', String(busPort),
      // A replica's first sync at once, not after the default 5 s wait for more replicas.
      '--repl-diskless-sync-delay', '0',
      ...(password === undefined ? [] : ['--masterauth', password]),
    ];
    let server: RedisServer | undefined;
    try {
      server = await startRedisServer({ password, extraArgs, ...(fsync === undefined ? {} : { fsync }) });
      // The PING that said "started" may have come from another server that took the port
      // first, while ours was still failing to bind: the node must be ours, and in cluster mode.
      const admin = adminClient(server.port, password);
      try {
        const info = String(await admin.call('INFO', 'server'));
        const pid = /process_id:(\d+)/.exec(info)?.[1];
        const cluster = String(await admin.call('INFO', 'cluster'));
        if (Number(pid) !== server.process.pid || !cluster.includes('cluster_enabled:1')) throw new Error(`port ${server.port} is another server's`);
      } finally {
        admin.disconnect();
      }
      return { server, busPort };
    } catch (err) {
      last = err;
      await server?.kill();
    }
  }
  throw new Error(`cannot start a cluster-enabled redis-server (${START_ATTEMPTS} attempts): ${(last as Error).message}`);
}

/** `redis-cli --cluster create`: assigns the slots, pairs replicas with masters, joins the nodes. */
async function createCluster(ports: number[], replicas: number, password: string | undefined): Promise<void> {
  const args = [
    ...(password === undefined ? [] : ['-a', password, '--no-auth-warning']),
    '--cluster', 'create', ...ports.map((p) => `127.0.0.1:${p}`),
    '--cluster-replicas', String(replicas),
    '--cluster-yes',
  ];
  const child = spawn('redis-cli', args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  const code = await new Promise<number | Error>((resolve) => {
    child.once('error', resolve);
    child.once('close', (c) => resolve(c ?? -1));
  });
  if (code instanceof Error) throw new Error(`cannot run redis-cli (is it installed? Debian: redis-tools): ${code.message}`);
  if (code !== 0 || !output.includes('[OK] All 16384 slots covered')) throw new Error(`redis-cli --cluster create failed (exit ${code}):\n${output}`);
}

function adminClient(port: number, password: string | undefined): Redis {
  const client = new Redis({ host: '127.0.0.1', port, password, maxRetriesPerRequest: 1, enableOfflineQueue: true, retryStrategy: () => 100 });
  client.on('error', () => {}); // a node killed by its test: what it refuses is asserted elsewhere
  return client;
}

/** CLUSTER SLOTS: [start, end, [host, port, id], ...replicas]. */
type SlotRange = [number, number, [string, number, string], ...[string, number, string][]];

/**
 * Every node says cluster_state:ok and gives the same CLUSTER NODES (no node failing or joining,
 * every link connected, no slot migrating), with `masters` masters covering every slot and
 * `replicas` replicas each, and every replica's link to its master is up. CLUSTER NODES, not
 * CLUSTER SLOTS: Redis leaves a replica out of CLUSTER SLOTS until its master's first
 * replication ping (repl-ping-replica-period, 10 s) has moved its offset.
 */
async function settledCluster(admins: Redis[], masters: number, replicas: number): Promise<boolean> {
  try {
    const views = await Promise.all(
      admins.map(async (admin) => {
        if (!String(await admin.call('CLUSTER', 'INFO')).includes('cluster_state:ok')) return undefined;
        const replication = String(await admin.call('INFO', 'replication'));
        if (replication.includes('role:slave') && !replication.includes('master_link_status:up')) return undefined;
        return nodesView(String(await admin.call('CLUSTER', 'NODES')));
      }),
    );
    const [first] = views;
    if (!first || views.some((v) => v === undefined || JSON.stringify(v) !== JSON.stringify(first))) return false;
    const serving = first.filter((n) => n.role === 'master' && n.slots > 0);
    return (
      serving.length === masters &&
      serving.reduce((sum, n) => sum + n.slots, 0) === SLOTS &&
      serving.every((m) => first.filter((n) => n.role === 'slave' && n.master === m.port).length === replicas)
    );
  } catch {
    return false;
  }
}

interface NodeView {
  port: number;
  role: string;
  /** A replica's master's port (0 for a master). */
  master: number;
  slots: number;
}

/** CLUSTER NODES as one node sees it, sorted by port; undefined while anything is in flux. */
function nodesView(text: string): NodeView[] | undefined {
  const lines = text.trim().split('\n').map((line) => line.trim().split(' '));
  const portOf = new Map(lines.map(([id, address]) => [id, Number(/:(\d+)@/.exec(address ?? '')?.[1])]));
  const out: NodeView[] = [];
  for (const [, address, flags = '', master = '-', , , , link, ...slots] of lines) {
    const flagSet = flags.split(',');
    if (['fail', 'fail?', 'handshake', 'noaddr'].some((f) => flagSet.includes(f)) || link !== 'connected') return undefined;
    if (slots.some((s) => s.startsWith('['))) return undefined;
    const count = slots.reduce((n, s) => {
      const [a, b = a] = s.split('-').map(Number);
      return n + b! - a! + 1;
    }, 0);
    out.push({ port: Number(/:(\d+)@/.exec(address ?? '')?.[1]), role: flagSet.includes('master') ? 'master' : 'slave', master: master === '-' ? 0 : (portOf.get(master) ?? -1), slots: count });
  }
  return out.sort((a, b) => a.port - b.port);
}
