// ZooKeeperOnlineCounter: the cluster's OnlineCounter (online-counter.ts), one ZooKeeper read
// for anyone (the gate, any worker): `<root>/online` holds {users, sessions}. It works on the
// registry's ZooKeeper connection (ZooKeeperRegistry.zookeeper): one session per process, whose
// expiry takes this worker's share with it as it takes its znode.
//
// As in the seed design it lives in ZooKeeper, without the seed's contention and silent
// give-up: each worker adds its local change to the aggregate at most once per `intervalMs`,
// with a versioned write that is retried on the next tick after a conflict (the change is kept,
// never dropped). Each worker also publishes its own counts in an ephemeral node
// `<root>/online-workers/<id>`, which disappears with a crashed worker; the live worker with
// the lowest id compares the aggregate with the sum of those every tick and corrects it, so a
// crashed worker's share disappears and the aggregate is exact within two ticks when idle.
//
// `users` counts distinct users per worker: a user with devices on two workers counts twice.
//
// With a digest identity the nodes get the cluster ACL (cluster-acl.ts): only workers change
// the counts; the gate, a reader, only reads them.

import type { Logger } from '../log.js';
import { ZK_MODE, ZK_RC, hasRc, type ZooKeeperSession } from './zookeeper-client.js';
import { ClusterAcl } from './cluster-acl.js';
import type { ZooKeeperConnection } from './zk-connection.js';
import type { LocalCounts, OnlineCounter, OnlineCounts } from './online-counter.js';

export interface ZooKeeperOnlineCounterOptions extends LocalCounts {
  /** The process's ZooKeeper connection (the registry's), with its root and identity; not closed by close(). */
  zookeeper: ZooKeeperConnection;
  intervalMs?: number;
  log: Logger;
}

const ZERO: OnlineCounts = Object.freeze({ users: 0, sessions: 0 });

function parse(data: Buffer): OnlineCounts {
  try {
    const v = JSON.parse(data.toString('utf8')) as Partial<OnlineCounts>;
    return { users: Number(v.users) || 0, sessions: Number(v.sessions) || 0 };
  } catch {
    return { ...ZERO };
  }
}

function encode(counts: OnlineCounts): Buffer {
  return Buffer.from(JSON.stringify({ users: counts.users, sessions: counts.sessions }));
}

export class ZooKeeperOnlineCounter implements OnlineCounter {
  readonly #o: Required<Omit<ZooKeeperOnlineCounterOptions, 'zookeeper'>>;
  readonly #zk: ZooKeeperConnection;
  readonly #aggregate: string;
  readonly #perWorker: string;
  readonly #acl: ClusterAcl;
  /** The session in which the tree was made (or its ACL set again). */
  #treeSession: ZooKeeperSession | undefined;
  #timer: NodeJS.Timeout | undefined;
  #busy = false;
  #closed = false;
  /** Counts already added to the aggregate by this worker. */
  #flushed: OnlineCounts = { ...ZERO };
  /** What this worker's ephemeral node says, and in which session (a new one has none yet). */
  #published: { counts: OnlineCounts; session: ZooKeeperSession } | undefined;

  constructor(options: ZooKeeperOnlineCounterOptions) {
    const { zookeeper, ...rest } = options;
    this.#o = { intervalMs: 1000, ...rest };
    this.#zk = zookeeper;
    this.#aggregate = zookeeper.path('online');
    this.#perWorker = zookeeper.path('online-workers');
    // The connection's identity, logging as the counter.
    this.#acl = new ClusterAcl(zookeeper.access, options.log);
  }

  start(): void {
    this.#timer = setInterval(() => void this.#tick(), this.#o.intervalMs);
    this.#timer.unref();
  }

  /** The cluster-wide counts as ZooKeeper has them now. */
  async read(): Promise<OnlineCounts> {
    const zk = await this.#zk.whenConnected();
    try {
      return parse((await zk.get(this.#aggregate)).data);
    } catch (err) {
      if (hasRc(err, ZK_RC.NO_NODE)) return { ...ZERO };
      throw err;
    }
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearInterval(this.#timer);
  }

  async #tick(): Promise<void> {
    const selfId = this.#o.selfId();
    if (this.#busy || this.#closed || !selfId) return;
    this.#busy = true;
    try {
      const zk = await this.#zk.whenConnected();
      if (this.#treeSession !== zk) {
        await this.#acl.ensureTree(zk, this.#zk.root, [this.#perWorker, this.#aggregate]);
        this.#treeSession = zk;
      }
      // One reading for the whole tick, copied: local() may hand out an object that changes
      // across the awaits below, and a figure remembered as published but never written would
      // stay out of this worker's node, and so out of the aggregate, until the counts change again.
      const { users, sessions } = this.#o.local();
      const local = { users, sessions };
      await this.#publish(zk, selfId, local);
      await this.#addDelta(zk, local);
      await this.#correctIfLowest(zk, selfId);
    } catch (err) {
      // Kept for the next tick: the delta is only marked flushed once written. Closed meanwhile
      // (the connection too, which ends a wait for it): nothing to report.
      if (!this.#closed) this.#o.log.warn({ err }, 'online counter update failed');
    } finally {
      this.#busy = false;
    }
  }

  async #publish(zk: ZooKeeperSession, selfId: string, local: OnlineCounts): Promise<void> {
    const published = this.#published?.session === zk ? this.#published.counts : undefined;
    if (published && published.users === local.users && published.sessions === local.sessions) return;
    const path = `${this.#perWorker}/${selfId}`;
    try {
      await this.#acl.create(zk, path, encode(local), ZK_MODE.EPHEMERAL);
    } catch (err) {
      if (!hasRc(err, ZK_RC.NODE_EXISTS)) throw err;
      await zk.set(path, encode(local), -1);
    }
    this.#published = { counts: { ...local }, session: zk };
  }

  /** Adds what changed locally since the last flush: one versioned read-modify-write. */
  async #addDelta(zk: ZooKeeperSession, local: OnlineCounts): Promise<void> {
    const delta = { users: local.users - this.#flushed.users, sessions: local.sessions - this.#flushed.sessions };
    if (delta.users === 0 && delta.sessions === 0) return;
    await this.#update(zk, (current) => ({ users: Math.max(0, current.users + delta.users), sessions: Math.max(0, current.sessions + delta.sessions) }));
    this.#flushed = { ...local };
  }

  async #correctIfLowest(zk: ZooKeeperSession, selfId: string): Promise<void> {
    const workers = (await zk.getChildren(this.#perWorker)).sort();
    if (workers[0] !== selfId) return;
    const parts = await Promise.all(workers.map((id) => zk.get(`${this.#perWorker}/${id}`).then((r) => parse(r.data), () => ({ ...ZERO }))));
    const exact = parts.reduce((a, b) => ({ users: a.users + b.users, sessions: a.sessions + b.sessions }), { ...ZERO });
    await this.#update(zk, (current) => (current.users === exact.users && current.sessions === exact.sessions ? undefined : exact));
  }

  /** Versioned read-modify-write of the aggregate; `change` returning undefined writes nothing. */
  async #update(zk: ZooKeeperSession, change: (current: OnlineCounts) => OnlineCounts | undefined): Promise<void> {
    let current: OnlineCounts;
    let version: number;
    try {
      const { stat, data } = await zk.get(this.#aggregate);
      current = parse(data);
      version = stat.version;
    } catch (err) {
      if (!hasRc(err, ZK_RC.NO_NODE)) throw err;
      const next = change({ ...ZERO });
      try {
        await this.#acl.create(zk, this.#aggregate, encode(next ?? ZERO), ZK_MODE.PERSISTENT);
        return;
      } catch (createErr) {
        if (!hasRc(createErr, ZK_RC.NODE_EXISTS)) throw createErr;
        return this.#update(zk, change);
      }
    }
    const next = change(current);
    if (next) await zk.set(this.#aggregate, encode(next), version); // BAD_VERSION: retried next tick
  }
}
