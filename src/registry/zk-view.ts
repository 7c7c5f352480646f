// The ZooKeeper registry's watched view: every worker's ImNode under <root>/workers, kept by a
// children watch and a data watch per worker, and checked against a full read every
// reconcileIntervalMs (a difference means an event was missed: logged and read again). With a
// digest identity it lists only workers whose znode shows it was protected, and nobody while
// workers/ is not known to admit only the workers' identity. The ZooKeeperRegistry drives it.

import type { Logger } from '../log.js';
import { SwitchboardError } from '../errors.js';
import { ZK_RC, hasRc, isConnectionError, isSessionGone, type ZooKeeperSession, type ZooKeeperStat } from './zookeeper-client.js';
import type { ZooKeeperConnection } from './zk-connection.js';
import { WORKER_PREFIX as PREFIX, parseNode, sameNode, viewHash, type ImNode } from './im-node.js';

export interface ZooKeeperViewOptions {
  zk: ZooKeeperConnection;
  /** `<root>/workers` */
  workersPath: string;
  log: Logger;
}

export class ZooKeeperView {
  readonly #zk: ZooKeeperConnection;
  readonly #path: string;
  readonly #log: Logger;
  readonly #listeners = new Set<(workers: readonly ImNode[]) => void>();
  // Workers by id, the names whose data watch is armed, and reads in flight.
  readonly #entries = new Map<string, ImNode>();
  #view: readonly ImNode[] = Object.freeze([]);
  #hash = viewHash([]);
  readonly #watched = new Set<string>();
  #inFlight = 0;
  #reconciling = false;
  /** (name, mzxid) of unparseable or untrusted znodes already logged. */
  readonly #invalidLogged = new Set<string>();
  /**
   * Whether workers/ is known to admit only the workers' identity: always without an identity
   * (nothing is checked), by construction on a worker (it set the ACL), by checkClosed() on an
   * observer. False: the view lists nobody.
   */
  #trusted: boolean;

  constructor(options: ZooKeeperViewOptions) {
    this.#zk = options.zk;
    this.#path = options.workersPath;
    this.#log = options.log;
    this.#trusted = !options.zk.acl.secured;
  }

  workers(): readonly ImNode[] {
    return this.#view;
  }

  onChange(listener: (workers: readonly ImNode[]) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  get reconciling(): boolean {
    return this.#reconciling;
  }

  /** A new session: no watch of the old one is armed, and its reads in flight do not count. */
  reset(): void {
    this.#watched.clear();
    this.#inFlight = 0;
  }

  /** workers/ is known to admit only the workers' identity (see #trusted). */
  trust(): void {
    this.#trusted = true;
  }

  /** workers/ is not (known to be) closed to strangers: nobody is listed. */
  distrustAll(): void {
    this.#trusted = false;
    this.#entries.clear();
    this.#watched.clear();
    this.#publish();
  }

  /** The registry closes: an empty view, and nobody told of a change after. */
  close(): void {
    this.#entries.clear();
    this.#watched.clear();
    this.#publish();
    this.#listeners.clear();
  }

  /** This worker's own entry as just written. */
  show(self: ImNode): void {
    if (sameNode(this.#entries.get(self.id), self)) return;
    this.#entries.set(self.id, self);
    this.#publish();
  }

  /** A data watch of `name` fired: it is no longer armed. */
  unwatched(name: string): void {
    this.#watched.delete(name);
  }

  remove(name: string): void {
    if (this.#entries.delete(name.slice(PREFIX.length))) this.#publish();
  }

  /** Lists the children (re-arming the children watch) and reads every unwatched one. */
  async readChildren(epoch: number, session: ZooKeeperSession): Promise<void> {
    if (!this.#trusted) return;
    this.#inFlight++;
    let names: string[];
    try {
      names = await session.getChildren(this.#path, true);
    } catch (err) {
      if (hasRc(err, ZK_RC.NO_AUTH)) throw this.#notReadable(err);
      if (!hasRc(err, ZK_RC.NO_NODE)) throw err;
      names = []; // workers/ is gone (or not made yet): so are all workers.
    } finally {
      if (this.#zk.current(epoch)) this.#inFlight--;
    }
    if (!this.#zk.current(epoch)) return;
    const live = new Set(names.filter((n) => n.startsWith(PREFIX)));
    let removed = false;
    for (const id of this.#entries.keys()) {
      if (!live.has(PREFIX + id)) removed = this.#entries.delete(id) || removed;
    }
    for (const name of this.#watched) if (!live.has(name)) this.#watched.delete(name);
    // Bounded by the live children: what was logged about a node that went is forgotten.
    for (const key of this.#invalidLogged) if (!live.has(key.slice(0, key.lastIndexOf('@')))) this.#invalidLogged.delete(key);
    if (removed) this.#publish();
    await Promise.all([...live].filter((n) => !this.#watched.has(n)).map((n) => this.readWorker(epoch, session, n)));
  }

  /** Reads one worker's znode with a data watch and updates the view. */
  async readWorker(epoch: number, session: ZooKeeperSession, name: string): Promise<void> {
    this.#watched.add(name);
    this.#inFlight++;
    let result: { stat: ZooKeeperStat; data: Buffer };
    try {
      result = await session.get(`${this.#path}/${name}`, true);
    } catch (err) {
      if (!this.#zk.current(epoch)) return;
      this.#watched.delete(name);
      if (hasRc(err, ZK_RC.NO_AUTH)) {
        // Not readable by this identity: not made for this cluster's readers. No watch was set;
        // the periodic reconcile looks again.
        this.#distrusted(name, 'not readable by this identity', 'no-auth');
        return;
      }
      if (!hasRc(err, ZK_RC.NO_NODE)) throw err;
      this.remove(name);
      return;
    } finally {
      if (this.#zk.current(epoch)) this.#inFlight--;
    }
    if (!this.#zk.current(epoch)) return;
    if (!this.#zk.acl.protects(result.stat)) {
      // Open to anyone (still being created, or made without an identity): its data watch is
      // armed, and the write that follows its ACL brings it back here.
      this.#distrusted(name, 'its ACL was never set', result.stat.mzxid);
      return;
    }
    const id = name.slice(PREFIX.length);
    const info = parseNode(id, result.data);
    if (!info) {
      const key = `${name}@${result.stat.mzxid}`;
      if (!this.#invalidLogged.has(key)) {
        this.#invalidLogged.add(key);
        this.#log.warn({ path: `${this.#path}/${name}` }, 'registry node is not a worker');
      }
      this.remove(name);
      return;
    }
    if (sameNode(this.#entries.get(id), info)) return;
    this.#entries.set(id, info);
    this.#publish();
  }

  /**
   * Compares the watched view with a fresh full read. A difference means an event was missed:
   * it is logged, and the differing workers are unwatched, so that the sync the caller runs next
   * reads them again through the watched path (never copied from the full read, which may
   * already be older than the view). Resolves the ids the full read found when it differed;
   * undefined when it did not (or could not tell). `busy`: a sync is running, which makes any
   * difference moot (the view is about to change anyway).
   */
  async reconcile(epoch: number, session: ZooKeeperSession, busy: () => boolean): Promise<ReadonlySet<string> | undefined> {
    this.#reconciling = true;
    try {
      const fresh = await this.#readAll(session);
      // Reads triggered by watches still in flight: the view is about to change anyway.
      if (!this.#zk.current(epoch) || this.#inFlight > 0 || busy()) return undefined;
      if (viewHash(fresh.values()) === this.#hash) return undefined;
      const missing = [...fresh.keys()].filter((id) => !this.#entries.has(id));
      const stale = [...this.#entries.keys()].filter((id) => !fresh.has(id));
      const changed = [...fresh.values()].filter((w) => this.#entries.has(w.id) && !sameNode(this.#entries.get(w.id), w)).map((w) => w.id);
      this.#log.warn({ missing, stale, changed }, 'registry view repaired');
      for (const id of [...missing, ...stale, ...changed]) this.#watched.delete(PREFIX + id);
      return new Set(fresh.keys());
    } catch (err) {
      if (this.#zk.current(epoch) && !isConnectionError(err) && !isSessionGone(err)) this.#log.warn({ err }, 'registry reconcile failed');
      return undefined;
    } finally {
      this.#reconciling = false;
    }
  }

  /** Every worker under workers/ as a plain read (no watch) finds it. */
  async #readAll(session: ZooKeeperSession): Promise<Map<string, ImNode>> {
    const fresh = new Map<string, ImNode>();
    let names: string[];
    try {
      names = await session.getChildren(this.#path);
    } catch (err) {
      if (!hasRc(err, ZK_RC.NO_NODE)) throw err;
      names = [];
    }
    await Promise.all(
      names
        .filter((n) => n.startsWith(PREFIX))
        .map(async (name) => {
          const result = await session.get(`${this.#path}/${name}`).catch((err: unknown) => {
            if (hasRc(err, ZK_RC.NO_NODE, ZK_RC.NO_AUTH)) return undefined;
            throw err;
          });
          const info = result && this.#zk.acl.protects(result.stat) ? parseNode(name.slice(PREFIX.length), result.data) : undefined;
          if (info) fresh.set(info.id, info);
        }),
    );
    return fresh;
  }

  /** Left out of the view, logged once per (name, version of its data). */
  #distrusted(name: string, reason: string, version: number | string): void {
    const key = `${name}@${version}`;
    if (!this.#invalidLogged.has(key)) {
      this.#invalidLogged.add(key);
      this.#log.warn({ path: `${this.#path}/${name}`, reason }, 'registry node is not trusted');
    }
    this.remove(name);
  }

  #notReadable(err: unknown): SwitchboardError {
    const auth = this.#zk.acl.auth;
    const who = auth ? `ZooKeeper user ${JSON.stringify(auth.user)}` : 'a client without an identity';
    return new SwitchboardError('SB_ERR_REGISTRY_ACL', `${who} may not read ${this.#path}: add its digest id to the workers' --zk-readers (OPERATIONS.md, ZooKeeper authentication)`, {
      cause: err,
    });
  }

  #publish(): void {
    const view = [...this.#entries.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    const hash = viewHash(view);
    if (hash === this.#hash) return;
    this.#hash = hash;
    this.#view = Object.freeze(view.map((w) => Object.freeze({ ...w })));
    for (const listener of this.#listeners) {
      try {
        listener(this.#view);
      } catch (err) {
        this.#log.error({ err }, 'registry listener failed');
      }
    }
  }
}
