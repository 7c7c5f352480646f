// The ZooKeeper naming service, in the manner of ioredis's split by job: the session and its
// status (zk-connection.ts), this worker's own znode <root>/workers/w-<sequence> (ImWorker,
// im-worker.ts), and the watched view of all of them with its periodic reconcile (zk-view.ts).
// This file is the public class that ties them together: one sync at a time brings ZooKeeper
// and the view in line after every (re)connection. When the session expires the connection
// opens a new one, the worker's znode is re-created under the same id and onRegistered
// listeners are told. With a digest identity every znode gets the cluster ACL (cluster-acl.ts).
// The OnlineCounter shares the connection (`zookeeper`): one ZooKeeper session per process.

import type { Logger } from '../log.js';
import { SwitchboardError } from '../errors.js';
import type { Registry } from './registry.js';
import { WORKERS, WORKER_PREFIX, type ImNode, type WorkerAnnouncement } from './im-node.js';
import { ZK_RC, hasRc, isConnectionError, isSessionGone, type ZooKeeperDigestAuth, type ZooKeeperLogLevel, type ZooKeeperSession } from './zookeeper-client.js';
import { checkClosed } from './cluster-acl.js';
import { ZooKeeperConnection, type ZooKeeperStatus } from './zk-connection.js';
import { ImWorker } from './im-worker.js';
import { ZooKeeperView } from './zk-view.js';

export type { ZooKeeperStatus } from './zk-connection.js';

export interface ZooKeeperRegistryOptions {
  /** host:port[,host:port...] of the ensemble. */
  connect: string;
  /** Parent of `workers`; default '/switchboard'. */
  root?: string;
  /** Requested session timeout (the server clamps it); default 10 s. */
  sessionTimeoutMs?: number;
  /** How often the watched view is checked against a full read; default 30 s. */
  reconcileIntervalMs?: number;
  /** At most one balance write per this interval, the last value winning; default 1 s. */
  balanceIntervalMs?: number;
  /** register() fails with SB_ERR_REGISTRY_UNAVAILABLE if not registered by then; default 10 s. */
  connectTimeoutMs?: number;
  /**
   * Delay before the attempt-th consecutive retry (a new session after an expiry, a failed
   * re-registration); null gives up and closes the registry. Default: 100 ms doubling to 5 s.
   */
  retryStrategy?: (attempt: number) => number | null;
  /** The C client's own stderr logging (process-wide); default 'error'. */
  nativeLogLevel?: ZooKeeperLogLevel;
  /**
   * This process's ZooKeeper digest identity. A worker creates every znode with the cluster
   * ACL; a registry that only observes (the gate) creates nothing and checks that the registry
   * is closed to clients without an identity. Unset: nothing is protected (development).
   */
  auth?: ZooKeeperDigestAuth;
  /** Digest ids a worker grants READ on its znodes: the gates'. */
  readers?: readonly string[];
  log: Logger;
}

export class ZooKeeperRegistry implements Registry {
  /** The process's ZooKeeper connection, for the OnlineCounter to share. */
  readonly zookeeper: ZooKeeperConnection;
  readonly #zk: ZooKeeperConnection;
  readonly #workersPath: string;
  readonly #reconcileIntervalMs: number;
  readonly #connectTimeoutMs: number;
  readonly #log: Logger;
  readonly #worker: ImWorker;
  readonly #view: ZooKeeperView;
  readonly #registeredListeners = new Set<(self: ImNode) => void>();

  #closed = false;
  #closing: Promise<void> | undefined;
  #reconcileTimer: NodeJS.Timeout | undefined;
  #pendingRegister: { resolve: (info: ImNode) => void; reject: (err: Error) => void } | undefined;
  /** observe(): resolved once the first view has been read. */
  #pendingObserve: { resolve: () => void; reject: (err: Error) => void } | undefined;
  /** The session epoch for which `<root>/workers` is known to exist (and, secured, to be closed). */
  #treeEpoch = 0;
  /**
   * A worker with an identity: whether workers/ is known not to have been open to strangers
   * before this worker closed it (checked once, at the first session that finds it made).
   */
  #strangersChecked = false;
  #syncing = false;
  /** The epoch a sync was asked for while one ran (0: none). */
  #syncRequested = 0;

  constructor(options: ZooKeeperRegistryOptions) {
    const { log } = options;
    this.#zk = this.zookeeper = new ZooKeeperConnection(options, {
      opening: () => this.#view.reset(),
      connected: (epoch) => this.#connected(epoch),
      watch: (epoch, event, path) => this.#watchFired(epoch, event, path),
      gaveUp: (err) => this.#failRegister(err),
    });
    this.#workersPath = this.#zk.path(WORKERS);
    this.#reconcileIntervalMs = options.reconcileIntervalMs ?? 30_000;
    this.#connectTimeoutMs = options.connectTimeoutMs ?? 10_000;
    this.#log = log;
    this.#view = new ZooKeeperView({ zk: this.#zk, workersPath: this.#workersPath, log });
    this.#worker = new ImWorker({
      zk: this.#zk,
      workersPath: this.#workersPath,
      balanceIntervalMs: options.balanceIntervalMs ?? 1_000,
      show: (self) => this.#view.show(self),
      log,
    });
  }

  get status(): ZooKeeperStatus {
    return this.#zk.status;
  }

  /** The live session's id and password, for tests that expire it from a second client. */
  sessionCredentials(): { id: string; password: string } | undefined {
    return this.#zk.credentials();
  }

  onStatus(listener: (status: ZooKeeperStatus, previous: ZooKeeperStatus) => void): () => void {
    return this.#zk.onStatus(listener);
  }

  onChange(listener: (workers: readonly ImNode[]) => void): () => void {
    return this.#view.onChange(listener);
  }

  onRegistered(listener: (self: ImNode) => void): () => void {
    this.#registeredListeners.add(listener);
    return () => this.#registeredListeners.delete(listener);
  }

  registered(): boolean {
    return this.#zk.status === 'connected' && this.#worker.registeredIn(this.#zk.epoch);
  }

  workers(): readonly ImNode[] {
    return this.#view.workers();
  }

  /**
   * Opens the session, creates `<root>/workers` if missing and this worker's znode (the id is a
   * number of ZooKeeper's sequence for workers/), and resolves once the view includes it. A
   * registry whose register() failed is closed.
   */
  async register(worker: WorkerAnnouncement): Promise<ImNode> {
    if (this.#closed) throw new SwitchboardError('SB_ERR_REGISTRY_CLOSED');
    this.#worker.announce(worker);
    const registered = new Promise<ImNode>((resolve, reject) => {
      this.#pendingRegister = { resolve, reject };
    });
    const timer = setTimeout(() => {
      this.#failRegister(
        new SwitchboardError('SB_ERR_REGISTRY_UNAVAILABLE', `not registered with ZooKeeper at ${this.#zk.connect} within ${this.#connectTimeoutMs} ms`),
      );
    }, this.#connectTimeoutMs);
    timer.unref();
    this.#startReconcile();
    try {
      this.#zk.open();
    } catch (err) {
      this.#failRegister(new SwitchboardError('SB_ERR_REGISTRY_UNAVAILABLE', `cannot open a ZooKeeper session with ${this.#zk.connect}`, { cause: err }));
    }
    try {
      return await registered;
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Follows the view without registering (the gate): opens the session and resolves once the
   * workers have been read; watches and the periodic reconcile keep the view current after.
   */
  async observe(): Promise<void> {
    if (this.#closed) throw new SwitchboardError('SB_ERR_REGISTRY_CLOSED');
    if (this.#zk.opened || this.#worker.announced) throw new SwitchboardError('SB_ERR_CONFIG', 'registry is already in use');
    const observed = new Promise<void>((resolve, reject) => (this.#pendingObserve = { resolve, reject }));
    this.#startReconcile();
    this.#zk.open();
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new SwitchboardError('SB_ERR_REGISTRY_UNAVAILABLE', `no view from ZooKeeper at ${this.#zk.connect} within ${this.#connectTimeoutMs} ms`)),
        this.#connectTimeoutMs,
      );
      timer.unref();
    });
    try {
      await Promise.race([observed, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Coalesced: at most one write per balanceIntervalMs, the last value wins. */
  setBalance(balance: number): void {
    this.#worker.setBalance(balance);
  }

  /** Written at once: the gate should stop (or resume) sending logins here without delay. */
  setReady(ready: boolean): void {
    this.#worker.setReady(ready);
  }

  /** Deletes this worker's znode (other views drop it at once) and ends the session. */
  close(): Promise<void> {
    this.#closing ??= this.#shutdown();
    return this.#closing;
  }

  async #shutdown(): Promise<void> {
    this.#closed = true;
    this.#worker.stop();
    clearInterval(this.#reconcileTimer);
    await this.#zk.close((session) => this.#worker.delete(session));
    this.#failRegister(new SwitchboardError('SB_ERR_REGISTRY_CLOSED', 'the registry was closed before the worker was registered'));
    this.#view.close();
    this.#registeredListeners.clear();
  }

  #startReconcile(): void {
    this.#reconcileTimer = setInterval(() => void this.#reconcile(), this.#reconcileIntervalMs);
    this.#reconcileTimer.unref();
  }

  #current(epoch: number): boolean {
    return this.#zk.current(epoch);
  }

  #connected(epoch: number): void {
    // First connection: register. Again after a disconnection: the watches survived (the
    // client re-sets them), but re-read whatever a failed call left unwatched.
    this.#sync(epoch);
    this.#worker.scheduleBalanceWrite();
  }

  #failRegister(err: Error): void {
    const pending = this.#pendingRegister;
    this.#pendingRegister = undefined;
    if (pending) pending.reject(err);
    if (!this.#closed) void this.close();
  }

  // --- registration and the view ----------------------------------------------------------

  /**
   * Brings ZooKeeper and the view in line: own znode, children watch, unwatched children. One
   * runs at a time; a request meanwhile (for this session or a newer one) runs right after.
   */
  #sync(epoch: number): void {
    this.#syncRequested = epoch;
    if (this.#syncing) return;
    this.#syncing = true;
    void (async () => {
      try {
        while (this.#syncRequested !== 0) {
          const requested = this.#syncRequested;
          this.#syncRequested = 0;
          if (!this.#current(requested)) continue;
          try {
            await this.#syncOnce(requested);
            if (this.#current(requested)) this.#zk.succeeded();
          } catch (err) {
            this.#callFailed(requested, 'sync', err);
          }
        }
      } finally {
        this.#syncing = false;
      }
    })();
  }

  async #syncOnce(epoch: number): Promise<void> {
    const session = this.#zk.session;
    if (!session || !this.#current(epoch)) return;
    if (this.#treeEpoch !== epoch) {
      if (!(await this.#prepareTree(epoch, session)) || !this.#current(epoch)) return;
    }
    if (this.#worker.needsWrite(epoch)) {
      await this.#worker.write(epoch, session);
      if (!this.#current(epoch)) return;
    }
    await this.#view.readChildren(epoch, session);
    if (this.#pendingObserve && this.#current(epoch)) {
      this.#pendingObserve.resolve();
      this.#pendingObserve = undefined;
    }
    if (this.#current(epoch)) this.#announceRegistered();
  }

  /** After a (re-)registration: the log line, the listeners, then register()'s promise. */
  #announceRegistered(): void {
    const self = this.#worker.takeRegistered();
    if (!self) return;
    this.#log.info({ id: self.id, path: this.#worker.path }, 'registered with zookeeper');
    const pending = this.#pendingRegister;
    this.#pendingRegister = undefined;
    for (const listener of this.#registeredListeners) {
      try {
        listener({ ...self });
      } catch (err) {
        this.#log.error({ err }, 'registry listener failed');
      }
    }
    pending?.resolve(self);
    this.#worker.scheduleBalanceWrite();
  }

  /**
   * Once per session, before anything else: a worker makes the tree exist with the cluster ACL
   * (set again on every session, which repairs it); an observer with an identity creates
   * nothing and checks that workers/ is closed to strangers. False: not ready (yet) to list.
   */
  async #prepareTree(epoch: number, session: ZooKeeperSession): Promise<boolean> {
    if (this.#worker.announced || !this.#zk.acl.secured) return this.#makeTree(epoch, session);
    const check = await checkClosed({ connect: this.#zk.connect, path: this.#workersPath, timeoutMs: this.#connectTimeoutMs, logLevel: this.#zk.nativeLogLevel });
    if (!this.#current(epoch)) return false;
    if (check === 'open') {
      this.#view.distrustAll();
      throw new SwitchboardError(
        'SB_ERR_REGISTRY_ACL',
        `${this.#workersPath} lets clients without an identity in: it is not protected by the cluster ACL, so no worker listed there is trusted ` +
          '(start the workers with --zk-auth, which sets it; OPERATIONS.md, ZooKeeper authentication)',
      );
    }
    if (check === 'absent') {
      // No worker has made it yet: list nobody, and look again once it is created.
      this.#view.distrustAll();
      if ((await session.exists(this.#workersPath, true)) === undefined) return true;
      return this.#prepareTree(epoch, session);
    }
    this.#view.trust();
    this.#treeEpoch = epoch;
    return true;
  }

  /** A worker, or anyone without an identity: makes the tree exist (with the cluster ACL). */
  async #makeTree(epoch: number, session: ZooKeeperSession): Promise<boolean> {
    // workers/ open to strangers (a cluster that ran without --zk-auth, or a tree a stranger
    // made): an entry made there can look protected (its own ACL set, then its data written)
    // and stays writable by anyone, so none is kept; workers of ours re-create theirs.
    const wasOpen = this.#zk.acl.secured && !this.#strangersChecked && (await this.#openToStrangers(session));
    if (!this.#current(epoch)) return false;
    await this.#zk.acl.ensureTree(session, this.#zk.root, [this.#workersPath]);
    if (!this.#current(epoch)) return false;
    if (wasOpen) await this.#purgeEntries(epoch, session);
    if (!this.#current(epoch)) return false;
    this.#strangersChecked = true;
    this.#view.trust();
    this.#treeEpoch = epoch;
    return true;
  }

  /** Whether clients without an identity may list or create under an existing workers/. */
  async #openToStrangers(session: ZooKeeperSession): Promise<boolean> {
    if ((await session.exists(this.#workersPath)) === undefined) return false; // made by us, below
    const check = await checkClosed({ connect: this.#zk.connect, path: this.#workersPath, timeoutMs: this.#connectTimeoutMs, logLevel: this.#zk.nativeLogLevel });
    return check === 'open';
  }

  /** Deletes every worker entry under workers/, just closed to strangers: none can be told from a stranger's. */
  async #purgeEntries(epoch: number, session: ZooKeeperSession): Promise<void> {
    const names = (await session.getChildren(this.#workersPath)).filter((n) => n.startsWith(WORKER_PREFIX));
    await Promise.all(
      names.map((name) =>
        session.delete(`${this.#workersPath}/${name}`, -1).catch((err: unknown) => {
          if (!hasRc(err, ZK_RC.NO_NODE)) throw err;
        }),
      ),
    );
    if (names.length > 0 && this.#current(epoch)) this.#log.warn({ path: this.#workersPath, deleted: names.length }, 'worker entries made while workers/ was open deleted');
  }

  #watchFired(epoch: number, event: 'created' | 'deleted' | 'changed' | 'child', path: string): void {
    const session = this.#zk.session;
    if (!session) return;
    if (path === this.#workersPath) {
      // Created at last (an observer was waiting for it): check it, then list.
      if (this.#treeEpoch !== epoch) {
        this.#sync(epoch);
        return;
      }
      // The children changed (or workers/ itself went): list again, which re-arms the watch.
      void this.#view.readChildren(epoch, session).catch((err) => this.#callFailed(epoch, 'children', err));
      return;
    }
    if (!path.startsWith(`${this.#workersPath}/`)) return;
    const name = path.slice(this.#workersPath.length + 1);
    this.#view.unwatched(name);
    if (event === 'deleted') {
      this.#view.remove(name);
      if (this.#worker.deleted(path, epoch)) this.#sync(epoch);
      return;
    }
    void this.#view.readWorker(epoch, session, name).catch((err) => this.#callFailed(epoch, 'read', err));
  }

  /** A ZooKeeper call failed: wait for the reconnect, leave it to the expiry, or retry. */
  #callFailed(epoch: number, what: string, err: unknown): void {
    if (!this.#current(epoch) || isSessionGone(err)) return;
    if (err instanceof SwitchboardError && err.code === 'SB_ERR_REGISTRY_ACL') {
      // Not something a retry mends soon: a worker does not start, a gate does not serve.
      if (this.#pendingRegister) {
        this.#failRegister(err);
        return;
      }
      if (this.#pendingObserve) {
        this.#pendingObserve.reject(err);
        this.#pendingObserve = undefined;
        return;
      }
    }
    // Disconnected: the 'connect' that follows runs a sync, which redoes what failed.
    if (isConnectionError(err) && this.#zk.status !== 'connected') return;
    this.#log.error({ err, what }, 'registry zookeeper call failed');
    this.#zk.retry(what, () => this.#current(epoch) && this.#sync(epoch));
  }

  /** The periodic check of the watched view (zk-view.ts); a difference is repaired by a sync. */
  async #reconcile(): Promise<void> {
    const epoch = this.#zk.epoch;
    const session = this.#zk.session;
    if (!session || this.#zk.status !== 'connected' || this.#view.reconciling || this.#syncing || !this.#current(epoch)) return;
    if (this.#treeEpoch !== epoch) {
      // The tree is not ready (an observer waiting for workers/ to be made, or a failed check).
      this.#sync(epoch);
      return;
    }
    const fresh = await this.#view.reconcile(epoch, session, () => this.#syncing);
    if (!fresh) return;
    const id = this.#worker.id;
    if (id !== undefined && this.#worker.registeredIn(epoch) && !fresh.has(id)) this.#worker.lost(); // our node is gone: re-create
    this.#sync(epoch);
  }
}
