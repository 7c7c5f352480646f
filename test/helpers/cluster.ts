// A cluster of real worker processes for a test: `node bin/switchboard.js worker` on free ports,
// sharing one ZooKeeper (a root of their own per cluster) and one Redis. Each worker's JSON log
// lines are kept so that a test can wait for what the worker says it did ('worker joined',
// 'peer link status', 'purged sessions of a departed worker', ...) instead of sleeping. Also
// tokens and SDK clients bound to a worker. bin/switchboard.js runs the compiled dist/:
// `npm run build` (npm test does) first.

import type { Test } from 'tap';
import { TokenSigner } from '../../src/auth/token.js';
import { ImClient, type ImClientOptions, type IncomingMessage } from '../../src/client/im-client.js';
import { RedisInboxStore } from '../../src/inbox/redis-inbox-store.js';
import { RedisSessionStore } from '../../src/session/redis-session-store.js';
import type { SessionRecord } from '../../src/session/session-store.js';
import { digestId, parseDigestAuth } from '../../src/registry/cluster-acl.js';
import { freePort } from '../../testkit/services.js';
import { SwitchboardProcess, assertBuilt } from '../../testkit/switchboard-process.js';
import { DEFAULT_WAIT_MS, until } from '../../testkit/wait.js';
import { startRedis, type TestRedis } from './redis.js';
import type { TestZooKeeper } from './zookeeper.js';

/** What a cluster needs of ZooKeeper: a connect string, one server's or an ensemble's. */
export type ClusterZooKeeper = Pick<TestZooKeeper, 'connect'>;

export const CLUSTER_TOKEN_SECRET = 'cluster-test-token-secret-of-32-characters-or-more';
export const CLUSTER_PEER_SECRET = 'cluster-test-peer-secret-of-32-characters-or-more';

/**
 * The ZooKeeper identities of the harness's clusters: the workers' (--zk-auth), and the gates',
 * which the workers grant read access (--zk-readers). Clusters run with ZooKeeper
 * authentication on, as production must.
 */
export const CLUSTER_ZK_WORKER_AUTH = 'sb-worker:cluster-test-zk-worker-password';
export const CLUSTER_ZK_GATE_AUTH = 'sb-gate:cluster-test-zk-gate-password';
/** The same, for in-process clients (ZooKeeperRegistry, OnlineCounter, ZooKeeperSession). */
export const CLUSTER_ZK_WORKER = parseDigestAuth(CLUSTER_ZK_WORKER_AUTH);
export const CLUSTER_ZK_GATE = parseDigestAuth(CLUSTER_ZK_GATE_AUTH);

/**
 * Short enough that a crashed worker leaves within seconds, long enough that a loaded test
 * machine does not expire a healthy session (the harness's ZooKeeper grants 400 ms..30 s).
 */
export const ZK_SESSION_TIMEOUT_MS = 2_000;

/**
 * The worker flags the cluster tests run with: every housekeeping period short, so what the
 * cluster does after a join, a crash or an expiry happens within the test's bounds. The route
 * cache TTL is short too: a new session re-reads its inbox 1 s and TTL + 1 s after login, and a
 * test that checks live forwarding waits those rechecks out, so they cannot hide a lost frame.
 */
export const CLUSTER_FLAGS: Readonly<Record<string, WorkerFlag>> = Object.freeze({
  'zk-session-timeout-ms': ZK_SESSION_TIMEOUT_MS,
  'peer-reconnect-ms': 100,
  'session-refresh-ms': 500,
  'reconcile-ms': 1_000,
  'route-cache-ttl-ms': 1_000,
  'close-grace-ms': 200,
  // The tests' users have tokens, not accounts; the recipient check has tests of its own.
  'allow-unknown-recipients': true,
});

/** A worker flag's value: true for a boolean flag that is given, false for one left out. */
export type WorkerFlag = string | number | boolean;

/** `--name value` per flag; a boolean flag is `--name` alone, or nothing when false. */
export function flagArgs(flags: Readonly<Record<string, WorkerFlag>>): string[] {
  return Object.entries(flags).flatMap(([k, v]) => (v === true ? [`--${k}`] : v === false ? [] : [`--${k}`, String(v)]));
}

/** The rechecks a login schedules are over once this long has passed since it. */
export const LOGIN_RECHECKS_MS = 1_000 + Number(CLUSTER_FLAGS['route-cache-ttl-ms']) + 500;

/** One worker process (testkit's SwitchboardProcess). `nodeId` and `peerPort` are known once spawnWorker() has resolved it. */
export class WorkerProcess extends SwitchboardProcess {
  /** The port other workers link to (`--peer-port 0`: the one it picked and announced). */
  peerPort = 0;
  nodeId = '';

  constructor(
    name: string,
    /** The client port. */
    readonly port: number,
    args: string[],
  ) {
    super(name, ['worker', ...args]);
  }
}

/**
 * Starts `switchboard worker` with `flags` on a free port (killed on teardown) and resolves once
 * it listens, its nodeId known.
 */
export async function spawnWorker(t: Test, name: string, flags: Readonly<Record<string, WorkerFlag>>): Promise<WorkerProcess> {
  // freePort() cannot reserve the port: if another process takes it first, try another.
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    const args = ['--port', String(port), ...flagArgs(flags)];
    const worker = new WorkerProcess(name, port, args);
    t.teardown(() => worker.kill());
    try {
      const listening = await worker.waitForLog({ msg: 'worker listening' }, { timeoutMs: 20_000 });
      worker.nodeId = String(listening.nodeId);
      // A cluster worker's peer listener listens (and logs it) before the worker registers.
      const peer = worker.logs({ msg: 'peer listener listening' })[0];
      if (peer) worker.peerPort = Number(peer.port);
      else if (flags.zk !== undefined) throw new Error(`worker ${name} registered without a peer listener\n${worker.tail()}`);
      return worker;
    } catch (err) {
      await worker.kill();
      if (attempt >= 3 || !worker.tail().includes('EADDRINUSE')) throw err;
    }
  }
}

/**
 * One worker process on its own (no ZooKeeper, no peers) keeping its inboxes in `redis`: what a
 * test of the inbox against a real Redis and a real worker needs. Tokens as for a cluster.
 */
export async function startRedisWorker(t: Test, redis: TestRedis, flags: Readonly<Record<string, WorkerFlag>> = {}): Promise<WorkerProcess> {
  assertBuilt();
  return spawnWorker(t, 'worker', { redis: redis.url, secret: CLUSTER_TOKEN_SECRET, 'log-level': 'info', 'close-grace-ms': 200, 'allow-unknown-recipients': true, ...flags });
}

export interface StartWorkerOptions {
  /** ZooKeeper connect string for this worker (e.g. a ZooKeeperProxy's); default the cluster's. */
  zk?: string;
  /** Flags replacing or adding to CLUSTER_FLAGS, e.g. { 'route-cache-ttl-ms': 5000 }. */
  flags?: Record<string, WorkerFlag>;
}

export interface ClientOptions extends Partial<ImClientOptions> {
  /** Connect and log in before returning (default true). */
  connect?: boolean;
}

let clusters = 0;

export class TestCluster {
  readonly zk: ClusterZooKeeper;
  readonly redis: TestRedis;
  /** This cluster's ZooKeeper root: no other test sees its workers. */
  readonly root: string;
  readonly signer = new TokenSigner(CLUSTER_TOKEN_SECRET);
  /** Every worker started, in order (stopped and killed ones included). */
  readonly workers: WorkerProcess[] = [];
  readonly #t: Test;
  #sessions: RedisSessionStore | undefined;
  #inbox: RedisInboxStore | undefined;

  constructor(t: Test, zk: ClusterZooKeeper, redis: TestRedis) {
    assertBuilt();
    this.#t = t;
    this.zk = zk;
    this.redis = redis;
    this.root = `/sb-cluster-${process.pid}-${++clusters}`;
  }

  /** Workers that have not exited. */
  get live(): WorkerProcess[] {
    return this.workers.filter((w) => w.alive);
  }

  /** Starts a worker process and resolves once it listens and is registered (its nodeId known). */
  async startWorker(options: StartWorkerOptions = {}): Promise<WorkerProcess> {
    const flags: Record<string, WorkerFlag> = {
      zk: options.zk ?? this.zk.connect,
      'zk-root': this.root,
      redis: this.redis.url,
      secret: CLUSTER_TOKEN_SECRET,
      'cluster-secret': CLUSTER_PEER_SECRET,
      'peer-port': 0,
      'zk-auth': CLUSTER_ZK_WORKER_AUTH,
      'zk-readers': digestId(CLUSTER_ZK_GATE),
      'log-level': 'info',
      ...CLUSTER_FLAGS,
      ...options.flags,
    };
    const worker = await spawnWorker(this.#t, `w${this.workers.length + 1}`, flags);
    this.workers.push(worker);
    return worker;
  }

  /** Starts `count` workers one after the other (ids in start order) and waits for their mesh. */
  async startWorkers(count: number, options: StartWorkerOptions = {}): Promise<WorkerProcess[]> {
    const started: WorkerProcess[] = [];
    for (let i = 0; i < count; i++) started.push(await this.startWorker(options));
    await this.waitForMesh();
    return started;
  }

  /** True when `worker`'s link to `peer` is up: its last word on that peer is 'ready'. */
  linkReady(worker: WorkerProcess, peer: WorkerProcess): boolean {
    const about = worker.logs((l) => l.peer === peer.nodeId && (l.msg === 'peer link status' || l.msg === 'worker left'));
    const last = about.at(-1);
    return last?.msg === 'peer link status' && last.to === 'ready';
  }

  /** Waits until every live worker has a ready link to every other one. */
  async waitForMesh(workers: WorkerProcess[] = this.live, withinMs = DEFAULT_WAIT_MS): Promise<void> {
    for (const w of workers) {
      for (const p of workers) {
        if (w !== p) await until(() => `${w.name} has a ready link to ${p.name} (${p.nodeId})\n${w.tail()}`, () => this.linkReady(w, p), withinMs);
      }
    }
  }

  token(uid: string, deviceId?: string): string {
    return this.signer.mint({ uid, deviceId, ttlMs: 600_000 });
  }

  /**
   * An SDK client of `uid` on `worker`, logged in unless `connect: false`; closed on teardown.
   * It does not reconnect unless given a retryStrategy: a lost connection is final. What it is
   * shown, from the login on, is in `client.got`.
   */
  async client(worker: WorkerProcess, uid: string, deviceId = `${uid}-device`, options: ClientOptions = {}): Promise<TestClient> {
    const { connect = true, ...clientOptions } = options;
    const client = new TestClient({
      host: '127.0.0.1',
      port: worker.port,
      uid,
      deviceId,
      token: this.token(uid, deviceId),
      retryStrategy: false,
      requestTimeoutMs: 20_000,
      ...clientOptions,
    });
    this.#t.teardown(() => client.close());
    if (connect) await client.connect();
    return client;
  }

  /** The session records Redis holds for `uid` (what other workers route by). */
  async sessionsOf(uid: string): Promise<SessionRecord[]> {
    if (!this.#sessions) {
      const store = new RedisSessionStore({ url: this.redis.url });
      this.#sessions = store;
      this.#t.teardown(() => store.close());
    }
    return this.#sessions.byUser(uid);
  }

  /** The highest seq in `uid`'s inbox (0 when empty). */
  async inboxHead(uid: string): Promise<number> {
    return (await this.#inboxStore().range(uid, 0, 0)).head;
  }

  /** The position saved for `uid`'s device: where its next login replays from without last_seq. */
  async cursorOf(uid: string, deviceId: string): Promise<number | undefined> {
    return this.#inboxStore().cursor(uid, deviceId);
  }

  #inboxStore(): RedisInboxStore {
    if (!this.#inbox) {
      const store = new RedisInboxStore({ url: this.redis.url });
      this.#inbox = store;
      this.#t.teardown(() => store.close());
    }
    return this.#inbox;
  }
}

/** A cluster of `workers` processes on `zk` (a server or an ensemble) with a Redis of its own, its mesh of links up. */
export async function startCluster(
  t: Test,
  zk: ClusterZooKeeper,
  { workers = 3, redis, ...options }: { workers?: number; redis?: TestRedis } & StartWorkerOptions = {},
): Promise<TestCluster> {
  const cluster = new TestCluster(t, zk, redis ?? (await startRedis(t)));
  await cluster.startWorkers(workers, options);
  return cluster;
}

/**
 * Everything a client is shown, and a way to wait for more. Listening from before the login
 * matters: the replay can arrive in the same chunk as the LOGIN_RESPONSE, and is emitted before
 * the code awaiting connect() runs.
 */
export class Received {
  readonly messages: IncomingMessage[] = [];

  constructor(readonly client: ImClient) {
    client.on('message', (m) => this.messages.push(m));
  }

  get seqs(): number[] {
    return this.messages.map((m) => m.seq);
  }

  /** Messages from `uid`, in arrival order. */
  from(uid: string): IncomingMessage[] {
    return this.messages.filter((m) => m.from === uid);
  }

  /** Waits until at least `count` messages have been shown. */
  async atLeast(count: number, withinMs = DEFAULT_WAIT_MS): Promise<IncomingMessage[]> {
    await until(() => `${this.client.uid}/${this.client.deviceId} shown ${count} messages (has ${this.messages.length})`, () => this.messages.length >= count, withinMs);
    return this.messages;
  }
}

/** An SDK client that records what it is shown from its first login on. */
export class TestClient extends ImClient {
  readonly got: Received = new Received(this);
}

/** 1..n */
export const oneTo = (n: number): number[] => Array.from({ length: n }, (_, i) => i + 1);
