// The ZooKeeper naming service. Each worker is an ephemeral znode <root>/workers/w-<sequence>
// holding its ImNode as JSON; every registry keeps a watched view of all of them, checked
// against a full read every reconcileIntervalMs. When the session expires the registry opens a
// new one, re-creates its znode under the same id and tells onRegistered listeners. With a
// digest identity every znode gets the cluster ACL (cluster-acl.ts), and the view lists only
// workers whose znode shows it was protected.

import type { Logger } from '../log.js';
import { SwitchboardError } from '../errors.js';
import type { Registry } from './registry.js';
import { parseNode, encodeNode, sameNode, viewHash, type ImNode, type WorkerAnnouncement } from './im-node.js';
import {
  ZK_MODE,
  ZK_RC,
  ZooKeeperSession,
  hasRc,
  isConnectionError,
  isSessionGone,
  type ZooKeeperDigestAuth,
  type ZooKeeperLogLevel,
  type ZooKeeperStat,
} from './zookeeper-client.js';
import { ClusterAcl, checkClosed } from './cluster-acl.js';

/**
 * connecting: no session yet (first one, or a new one after an expiry).
 * connected: the session is up.
 * suspended: disconnected, but the session has not expired (yet); the client reconnects.
 * expired: the session is gone, and with it this worker's znode; a new one is on its way.
 * closed: close() was called, or retryStrategy gave up.
 */
export type ZooKeeperStatus = 'connecting' | 'connected' | 'suspended' | 'expired' | 'closed';

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

const WORKERS = 'workers';
const PREFIX = 'w-';
/** A momentary id reservation: an EPHEMERAL_SEQUENTIAL child of workers/, deleted at once. */
const RESERVATION = 'id-';

const defaultRetryStrategy = (attempt: number): number => Math.min(100 * 2 ** (attempt - 1), 5_000);

export class ZooKeeperRegistry implements Registry {
  readonly #connect: string;
  readonly #workersPath: string;
  readonly #sessionTimeoutMs: number;
  readonly #reconcileIntervalMs: number;
  readonly #balanceIntervalMs: number;
  readonly #connectTimeoutMs: number;
  readonly #retryStrategy: (attempt: number) => number | null;
  readonly #nativeLogLevel: ZooKeeperLogLevel;
  readonly #log: Logger;
  readonly #root: string;
  readonly #acl: ClusterAcl;

  readonly #changeListeners = new Set<(workers: readonly ImNode[]) => void>();
  readonly #registeredListeners = new Set<(self: ImNode) => void>();
  readonly #statusListeners = new Set<(status: ZooKeeperStatus, previous: ZooKeeperStatus) => void>();

  #status: ZooKeeperStatus = 'connecting';
  /** Bumped for every session (and on close): callbacks of an older one are ignored. */
  #epoch = 0;
  #session: ZooKeeperSession | undefined;
  #closed = false;
  #closing: Promise<void> | undefined;
  /** Consecutive failures (session losses, failed syncs) since the last successful sync. */
  #attempt = 0;
  #retryTimer: NodeJS.Timeout | undefined;
  #reconcileTimer: NodeJS.Timeout | undefined;

  // This worker. #self is what its znode should hold; #ownVersion the znode's data version.
  #announced: WorkerAnnouncement | undefined;
  #self: ImNode | undefined;
  #ownPath: string | undefined;
  #ownVersion = -1;
  /** The epoch in which the znode was last created (or found) and written. */
  #ownEpoch = 0;
  #announcePending = false;
  #pendingRegister: { resolve: (info: ImNode) => void; reject: (err: Error) => void } | undefined;
  /** observe(): resolved once the first view has been read. */
  #pendingObserve: { resolve: () => void; reject: (err: Error) => void } | undefined;
  /** The session epoch for which `<root>/workers` is known to exist (and, secured, to be closed). */
  #treeEpoch = 0;
  /**
   * Whether workers/ is known to admit only the workers' identity: always without an identity
   * (nothing is checked), by construction on a worker (it set the ACL), by checkClosed() on an
   * observer. False: the view lists nobody.
   */
  #parentTrusted: boolean;
  /**
   * A worker with an identity: whether workers/ is known not to have been open to strangers
   * before this worker closed it (checked once, at the first session that finds it made).
   */
  #strangersChecked = false;

  // Balance writes: #balanceDirty while the znode may hold an older balance (or readiness) than
  // #self. A change of readiness is #urgent: written at once, not within balanceIntervalMs.
  #balanceDirty = false;
  #urgent = false;
  #balanceWriting = false;
  #balanceTimer: NodeJS.Timeout | undefined;
  #lastBalanceWriteAt = 0;

  // The view: workers by id, the names whose data watch is armed, and reads in flight.
  #entries = new Map<string, ImNode>();
  #view: readonly ImNode[] = Object.freeze([]);
  #viewHash = viewHash([]);
  readonly #watched = new Set<string>();
  #inFlight = 0;
  #syncing = false;
  /** The epoch a sync was asked for while one ran (0: none). */
  #syncRequested = 0;
  #reconciling = false;
  /** (name, mzxid) of unparseable znodes already logged. */
  readonly #invalidLogged = new Set<string>();

  constructor(options: ZooKeeperRegistryOptions) {
    const root = options.root ?? '/switchboard';
    if (!root.startsWith('/')) throw new SwitchboardError('SB_ERR_CONFIG', `zookeeper root must start with '/': ${root}`);
    this.#connect = options.connect;
    this.#root = root.replace(/\/+$/, '') || '/';
    this.#workersPath = `${this.#root === '/' ? '' : this.#root}/${WORKERS}`;
    this.#sessionTimeoutMs = options.sessionTimeoutMs ?? 10_000;
    this.#reconcileIntervalMs = options.reconcileIntervalMs ?? 30_000;
    this.#balanceIntervalMs = options.balanceIntervalMs ?? 1_000;
    this.#connectTimeoutMs = options.connectTimeoutMs ?? 10_000;
    this.#retryStrategy = options.retryStrategy ?? defaultRetryStrategy;
    this.#nativeLogLevel = options.nativeLogLevel ?? 'error';
    this.#log = options.log;
    this.#acl = new ClusterAcl({ auth: options.auth, readers: options.readers }, options.log);
    this.#parentTrusted = !this.#acl.secured;
  }

  get status(): ZooKeeperStatus {
    return this.#status;
  }

  /** The live session's id and password, for tests that expire it from a second client. */
  sessionCredentials(): { id: string; password: string } | undefined {
    return this.#status === 'connected' ? this.#session?.credentials : undefined;
  }

  onStatus(listener: (status: ZooKeeperStatus, previous: ZooKeeperStatus) => void): () => void {
    this.#statusListeners.add(listener);
    return () => this.#statusListeners.delete(listener);
  }

  onChange(listener: (workers: readonly ImNode[]) => void): () => void {
    this.#changeListeners.add(listener);
    return () => this.#changeListeners.delete(listener);
  }

  onRegistered(listener: (self: ImNode) => void): () => void {
    this.#registeredListeners.add(listener);
    return () => this.#registeredListeners.delete(listener);
  }

  registered(): boolean {
    return this.#status === 'connected' && this.#ownPath !== undefined && this.#ownEpoch === this.#epoch;
  }

  workers(): readonly ImNode[] {
    return this.#view;
  }

  /**
   * Opens the session, creates `<root>/workers` if missing and this worker's EPHEMERAL_SEQUENTIAL
   * znode (the id is its sequence number), and resolves once the view includes it. A registry
   * whose register() failed is closed.
   */
  async register(worker: WorkerAnnouncement): Promise<ImNode> {
    if (this.#closed) throw new SwitchboardError('SB_ERR_REGISTRY_CLOSED');
    if (this.#announced) throw new SwitchboardError('SB_ERR_CONFIG', 'worker is already registered');
    this.#announced = { ...worker };
    const registered = new Promise<ImNode>((resolve, reject) => {
      this.#pendingRegister = { resolve, reject };
    });
    const timer = setTimeout(() => {
      this.#failRegister(
        new SwitchboardError('SB_ERR_REGISTRY_UNAVAILABLE', `not registered with ZooKeeper at ${this.#connect} within ${this.#connectTimeoutMs} ms`),
      );
    }, this.#connectTimeoutMs);
    timer.unref();
    this.#reconcileTimer = setInterval(() => void this.#reconcile(), this.#reconcileIntervalMs);
    this.#reconcileTimer.unref();
    try {
      this.#openSession();
    } catch (err) {
      this.#failRegister(new SwitchboardError('SB_ERR_REGISTRY_UNAVAILABLE', `cannot open a ZooKeeper session with ${this.#connect}`, { cause: err }));
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
    if (this.#session || this.#announced) throw new SwitchboardError('SB_ERR_CONFIG', 'registry is already in use');
    const observed = new Promise<void>((resolve, reject) => (this.#pendingObserve = { resolve, reject }));
    this.#reconcileTimer = setInterval(() => void this.#reconcile(), this.#reconcileIntervalMs);
    this.#reconcileTimer.unref();
    this.#openSession();
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new SwitchboardError('SB_ERR_REGISTRY_UNAVAILABLE', `no view from ZooKeeper at ${this.#connect} within ${this.#connectTimeoutMs} ms`)),
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
    if (this.#closed) return;
    if (!this.#self) {
      if (this.#announced) this.#announced = { ...this.#announced, balance };
      return;
    }
    if (this.#self.balance === balance) return;
    this.#self = { ...this.#self, balance };
    this.#balanceDirty = true;
    this.#scheduleBalanceWrite();
  }

  /** Written at once: the gate should stop (or resume) sending logins here without delay. */
  setReady(ready: boolean): void {
    if (this.#closed) return;
    if (!this.#self) {
      if (this.#announced) this.#announced = { ...this.#announced, ready };
      return;
    }
    if (this.#self.ready === ready) return;
    this.#self = { ...this.#self, ready };
    this.#balanceDirty = true;
    this.#urgent = true;
    this.#scheduleBalanceWrite();
  }

  /** Deletes this worker's znode (other views drop it at once) and ends the session. */
  close(): Promise<void> {
    this.#closing ??= this.#shutdown();
    return this.#closing;
  }

  async #shutdown(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#retryTimer);
    clearTimeout(this.#balanceTimer);
    clearInterval(this.#reconcileTimer);
    const session = this.#session;
    if (session && this.#ownPath && this.#ownEpoch === this.#epoch && this.#status === 'connected') {
      try {
        await session.delete(this.#ownPath, -1);
      } catch (err) {
        // The session's end removes the ephemeral node anyway, a moment later.
        if (!hasRc(err, ZK_RC.NO_NODE)) this.#log.warn({ err, path: this.#ownPath }, 'registry node delete failed');
      }
    }
    this.#epoch++;
    this.#session = undefined;
    session?.close();
    this.#failRegister(new SwitchboardError('SB_ERR_REGISTRY_CLOSED', 'the registry was closed before the worker was registered'));
    this.#entries.clear();
    this.#watched.clear();
    this.#publish();
    this.#setStatus('closed');
    this.#changeListeners.clear();
    this.#registeredListeners.clear();
    this.#statusListeners.clear();
  }

  #setStatus(next: ZooKeeperStatus, fields: Record<string, unknown> = {}): void {
    const from = this.#status;
    if (from === next) return;
    this.#status = next;
    const level = next === 'suspended' || next === 'expired' ? 'warn' : 'info';
    this.#log[level]({ from, to: next, ...fields }, 'zookeeper status');
    for (const listener of this.#statusListeners) {
      try {
        listener(next, from);
      } catch (err) {
        this.#log.error({ err }, 'registry listener failed');
      }
    }
  }

  #current(epoch: number): boolean {
    return epoch === this.#epoch && !this.#closed;
  }

  // --- sessions ---------------------------------------------------------------------------

  #openSession(): void {
    const epoch = ++this.#epoch;
    this.#watched.clear();
    this.#inFlight = 0;
    this.#setStatus('connecting');
    this.#session = new ZooKeeperSession({
      connect: this.#connect,
      sessionTimeoutMs: this.#sessionTimeoutMs,
      logLevel: this.#nativeLogLevel,
      auth: this.#acl.auth,
      onConnected: () => this.#current(epoch) && this.#connected(epoch),
      onDisconnected: () => this.#current(epoch) && this.#setStatus('suspended'),
      onClosed: (rc) => this.#current(epoch) && this.#lost(rc),
      onWatch: (event, path) => this.#current(epoch) && this.#watchFired(epoch, event, path),
    });
  }

  #connected(epoch: number): void {
    this.#setStatus('connected');
    // First connection: register. Again after a disconnection: the watches survived (the
    // client re-sets them), but re-read whatever a failed call left unwatched.
    this.#sync(epoch);
    this.#scheduleBalanceWrite();
  }

  /** The session is finished without close(): expired (the usual case) or given up on. */
  #lost(rc: number): void {
    this.#session = undefined;
    this.#epoch++;
    this.#setStatus('expired', { rc });
    this.#retry('session', () => this.#openSession());
  }

  /** Runs `action` after retryStrategy's delay, or gives up and closes the registry. */
  #retry(what: string, action: () => void): void {
    const attempt = ++this.#attempt;
    const delayMs = this.#retryStrategy(attempt);
    clearTimeout(this.#retryTimer);
    if (delayMs === null) {
      const err = new SwitchboardError('SB_ERR_REGISTRY_UNAVAILABLE', `gave up on ZooKeeper after ${attempt} attempts (${what})`);
      this.#log.error({ err }, 'registry gave up');
      this.#failRegister(err);
      return;
    }
    this.#retryTimer = setTimeout(() => {
      this.#retryTimer = undefined;
      if (!this.#closed) action();
    }, delayMs);
    this.#retryTimer.unref();
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
            if (this.#current(requested)) this.#attempt = 0;
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
    const session = this.#session;
    if (!session || !this.#current(epoch)) return;
    if (this.#treeEpoch !== epoch) {
      if (!(await this.#prepareTree(epoch, session)) || !this.#current(epoch)) return;
    }
    if (this.#announced && this.#ownEpoch !== epoch) {
      await this.#writeOwnNode(epoch, session);
      if (!this.#current(epoch)) return;
    }
    await this.#readChildren(epoch, session);
    if (this.#pendingObserve && this.#current(epoch)) {
      this.#pendingObserve.resolve();
      this.#pendingObserve = undefined;
    }
    if (!this.#current(epoch) || !this.#announcePending || !this.#self) return;
    this.#announcePending = false;
    const self = { ...this.#self };
    this.#log.info({ id: self.id, path: this.#ownPath }, 'registered with zookeeper');
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
    this.#scheduleBalanceWrite();
  }

  /**
   * Once per session, before anything else: a worker makes the tree exist with the cluster ACL
   * (set again on every session, which repairs it); an observer with an identity creates
   * nothing and checks that workers/ is closed to strangers. False: not ready (yet) to list.
   */
  async #prepareTree(epoch: number, session: ZooKeeperSession): Promise<boolean> {
    if (this.#announced || !this.#acl.secured) {
      // workers/ open to strangers (a cluster that ran without --zk-auth, or a tree a stranger
      // made): an entry made there can look protected (its own ACL set, then its data written)
      // and stays writable by anyone, so none is kept; workers of ours re-create theirs.
      const wasOpen = this.#acl.secured && !this.#strangersChecked && (await this.#openToStrangers(session));
      if (!this.#current(epoch)) return false;
      await this.#acl.ensureTree(session, this.#root, [this.#workersPath]);
      if (!this.#current(epoch)) return false;
      if (wasOpen) await this.#purgeEntries(epoch, session);
      if (!this.#current(epoch)) return false;
      this.#strangersChecked = true;
      this.#parentTrusted = true;
      this.#treeEpoch = epoch;
      return true;
    }
    const check = await checkClosed({ connect: this.#connect, path: this.#workersPath, timeoutMs: this.#connectTimeoutMs, logLevel: this.#nativeLogLevel });
    if (!this.#current(epoch)) return false;
    if (check === 'open') {
      this.#distrustAll();
      throw new SwitchboardError(
        'SB_ERR_REGISTRY_ACL',
        `${this.#workersPath} lets clients without an identity in: it is not protected by the cluster ACL, so no worker listed there is trusted ` +
          '(start the workers with --zk-auth, which sets it; OPERATIONS.md, ZooKeeper authentication)',
      );
    }
    if (check === 'absent') {
      // No worker has made it yet: list nobody, and look again once it is created.
      this.#distrustAll();
      if ((await session.exists(this.#workersPath, true)) === undefined) return true;
      return this.#prepareTree(epoch, session);
    }
    this.#parentTrusted = true;
    this.#treeEpoch = epoch;
    return true;
  }

  /** Whether clients without an identity may list or create under an existing workers/. */
  async #openToStrangers(session: ZooKeeperSession): Promise<boolean> {
    if ((await session.exists(this.#workersPath)) === undefined) return false; // made by us, below
    const check = await checkClosed({ connect: this.#connect, path: this.#workersPath, timeoutMs: this.#connectTimeoutMs, logLevel: this.#nativeLogLevel });
    return check === 'open';
  }

  /** Deletes every worker entry under workers/, just closed to strangers: none can be told from a stranger's. */
  async #purgeEntries(epoch: number, session: ZooKeeperSession): Promise<void> {
    const names = (await session.getChildren(this.#workersPath)).filter((n) => n.startsWith(PREFIX));
    await Promise.all(
      names.map((name) =>
        session.delete(`${this.#workersPath}/${name}`, -1).catch((err: unknown) => {
          if (!hasRc(err, ZK_RC.NO_NODE)) throw err;
        }),
      ),
    );
    if (names.length > 0 && this.#current(epoch)) this.#log.warn({ path: this.#workersPath, deleted: names.length }, 'worker entries made while workers/ was open deleted');
  }

  #distrustAll(): void {
    this.#parentTrusted = false;
    this.#entries.clear();
    this.#watched.clear();
    this.#publish();
  }

  /**
   * First time: an id from workers/' own sequence (a reservation `id-N`, deleted at once), then
   * the znode `w-N` as a plain EPHEMERAL node, created together with its ACL so that it is never
   * open during a round trip. After an expiry or a deletion: the same path again, so the worker
   * keeps its id. Nobody else creates `w-N`: N came from ZooKeeper's sequence, used once.
   */
  async #writeOwnNode(epoch: number, session: ZooKeeperSession): Promise<void> {
    if (!this.#announced) return;
    if (!this.#self || !this.#ownPath) {
      const id = await this.#reserveId(session);
      if (!this.#current(epoch)) return;
      this.#ownPath = `${this.#workersPath}/${PREFIX}${id}`;
      // The latest announcement: setBalance() may have changed it meanwhile.
      this.#self = { ...this.#announced, id };
    }
    const written = this.#self;
    const version = await this.#createOwnNode(epoch, session, this.#ownPath, written);
    if (!this.#current(epoch)) return;
    this.#ownVersion = version;
    this.#ownEpoch = epoch;
    this.#balanceDirty = this.#self !== written;
    this.#announcePending = true;
  }

  /** A fresh sequence number of workers/ (the suffix of EPHEMERAL_SEQUENTIAL children). */
  async #reserveId(session: ZooKeeperSession): Promise<string> {
    const path = `${this.#workersPath}/${RESERVATION}`;
    const reserved = await session.create(path, Buffer.alloc(0), ZK_MODE.EPHEMERAL_SEQUENTIAL).catch((err: unknown) => {
      throw this.#acl.explain(err, this.#workersPath, 'create a child of');
    });
    // Nothing waits for it: a reservation left behind goes with the session, and no view lists it.
    session.delete(reserved, -1).catch((err: unknown) => this.#log.debug({ err, path: reserved }, 'id reservation delete failed'));
    return reserved.slice(reserved.lastIndexOf('/') + 1 + RESERVATION.length);
  }

  /** Creates this worker's znode at its path; resolves its data version. */
  async #createOwnNode(epoch: number, session: ZooKeeperSession, path: string, info: ImNode): Promise<number> {
    try {
      return await this.#acl.create(session, path, encodeNode(info), ZK_MODE.EPHEMERAL);
    } catch (err) {
      if (!hasRc(err, ZK_RC.NODE_EXISTS) || !this.#current(epoch)) throw err;
    }
    // Left by an earlier session of ours that the server has not expired yet, or made by this
    // one before its answer was lost: replaced, so that its ACL and its data are known to be ours.
    await session.delete(path, -1).catch((err: unknown) => {
      if (!hasRc(err, ZK_RC.NO_NODE)) throw err;
    });
    if (!this.#current(epoch)) throw new SwitchboardError('SB_ERR_REGISTRY_UNAVAILABLE', 'zookeeper session changed during registration');
    return this.#acl.create(session, path, encodeNode(info), ZK_MODE.EPHEMERAL);
  }

  /** Lists the children (re-arming the children watch) and reads every unwatched one. */
  async #readChildren(epoch: number, session: ZooKeeperSession): Promise<void> {
    if (!this.#parentTrusted) return;
    this.#inFlight++;
    let names: string[];
    try {
      names = await session.getChildren(this.#workersPath, true);
    } catch (err) {
      if (hasRc(err, ZK_RC.NO_AUTH)) throw this.#notReadable(err);
      if (!hasRc(err, ZK_RC.NO_NODE)) throw err;
      names = []; // workers/ is gone (or not made yet): so are all workers.
    } finally {
      if (this.#current(epoch)) this.#inFlight--;
    }
    if (!this.#current(epoch)) return;
    const live = new Set(names.filter((n) => n.startsWith(PREFIX)));
    let removed = false;
    for (const id of this.#entries.keys()) {
      if (!live.has(PREFIX + id)) removed = this.#entries.delete(id) || removed;
    }
    for (const name of this.#watched) if (!live.has(name)) this.#watched.delete(name);
    // Bounded by the live children: what was logged about a node that went is forgotten.
    for (const key of this.#invalidLogged) if (!live.has(key.slice(0, key.lastIndexOf('@')))) this.#invalidLogged.delete(key);
    if (removed) this.#publish();
    await Promise.all([...live].filter((n) => !this.#watched.has(n)).map((n) => this.#readWorker(epoch, session, n)));
  }

  /** Reads one worker's znode with a data watch and updates the view. */
  async #readWorker(epoch: number, session: ZooKeeperSession, name: string): Promise<void> {
    this.#watched.add(name);
    this.#inFlight++;
    let result: { stat: ZooKeeperStat; data: Buffer };
    try {
      result = await session.get(`${this.#workersPath}/${name}`, true);
    } catch (err) {
      if (!this.#current(epoch)) return;
      this.#watched.delete(name);
      if (hasRc(err, ZK_RC.NO_AUTH)) {
        // Not readable by this identity: not made for this cluster's readers. No watch was set;
        // the periodic reconcile looks again.
        this.#distrusted(name, 'not readable by this identity', 'no-auth');
        return;
      }
      if (!hasRc(err, ZK_RC.NO_NODE)) throw err;
      this.#remove(name);
      return;
    } finally {
      if (this.#current(epoch)) this.#inFlight--;
    }
    if (!this.#current(epoch)) return;
    if (!this.#acl.protects(result.stat)) {
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
        this.#log.warn({ path: `${this.#workersPath}/${name}` }, 'registry node is not a worker');
      }
      this.#remove(name);
      return;
    }
    if (sameNode(this.#entries.get(id), info)) return;
    this.#entries.set(id, info);
    this.#publish();
  }

  #remove(name: string): void {
    if (this.#entries.delete(name.slice(PREFIX.length))) this.#publish();
  }

  /** Left out of the view, logged once per (name, version of its data). */
  #distrusted(name: string, reason: string, version: number | string): void {
    const key = `${name}@${version}`;
    if (!this.#invalidLogged.has(key)) {
      this.#invalidLogged.add(key);
      this.#log.warn({ path: `${this.#workersPath}/${name}`, reason }, 'registry node is not trusted');
    }
    this.#remove(name);
  }

  #notReadable(err: unknown): SwitchboardError {
    const who = this.#acl.auth ? `ZooKeeper user ${JSON.stringify(this.#acl.auth.user)}` : 'a client without an identity';
    return new SwitchboardError('SB_ERR_REGISTRY_ACL', `${who} may not read ${this.#workersPath}: add its digest id to the workers' --zk-readers (OPERATIONS.md, ZooKeeper authentication)`, {
      cause: err,
    });
  }

  #watchFired(epoch: number, event: 'created' | 'deleted' | 'changed' | 'child', path: string): void {
    const session = this.#session;
    if (!session) return;
    if (path === this.#workersPath) {
      // Created at last (an observer was waiting for it): check it, then list.
      if (this.#treeEpoch !== epoch) {
        this.#sync(epoch);
        return;
      }
      // The children changed (or workers/ itself went): list again, which re-arms the watch.
      void this.#readChildren(epoch, session).catch((err) => this.#callFailed(epoch, 'children', err));
      return;
    }
    if (!path.startsWith(`${this.#workersPath}/`)) return;
    const name = path.slice(this.#workersPath.length + 1);
    this.#watched.delete(name);
    if (event === 'deleted') {
      this.#remove(name);
      if (path === this.#ownPath && this.#ownEpoch === epoch) {
        // Deleted behind our back while the session lives on: register again, same id.
        this.#log.warn({ path }, 'registry node deleted; registering again');
        this.#ownEpoch = 0;
        this.#sync(epoch);
      }
      return;
    }
    void this.#readWorker(epoch, session, name).catch((err) => this.#callFailed(epoch, 'read', err));
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
    if (isConnectionError(err) && this.#status !== 'connected') return;
    this.#log.error({ err, what }, 'registry zookeeper call failed');
    this.#retry(what, () => this.#current(epoch) && this.#sync(epoch));
  }

  #publish(): void {
    const view = [...this.#entries.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    const hash = viewHash(view);
    if (hash === this.#viewHash) return;
    this.#viewHash = hash;
    this.#view = Object.freeze(view.map((w) => Object.freeze({ ...w })));
    for (const listener of this.#changeListeners) {
      try {
        listener(this.#view);
      } catch (err) {
        this.#log.error({ err }, 'registry listener failed');
      }
    }
  }

  // --- balance ------------------------------------------------------------------------------

  #scheduleBalanceWrite(): void {
    if (!this.#balanceDirty || this.#balanceWriting || this.#closed) return;
    if (this.#balanceTimer && !this.#urgent) return;
    clearTimeout(this.#balanceTimer);
    const waitMs = this.#urgent ? 0 : Math.max(0, this.#lastBalanceWriteAt + this.#balanceIntervalMs - Date.now());
    this.#balanceTimer = setTimeout(() => {
      this.#balanceTimer = undefined;
      void this.#writeBalance();
    }, waitMs);
    this.#balanceTimer.unref();
  }

  async #writeBalance(): Promise<void> {
    const epoch = this.#epoch;
    const session = this.#session;
    const path = this.#ownPath;
    // Not connected or not (re-)registered yet: the (re-)registration writes #self whole.
    if (!this.#balanceDirty || !session || !path || this.#status !== 'connected' || this.#ownEpoch !== epoch) return;
    const info = this.#self!;
    const urgent = this.#urgent;
    this.#balanceDirty = false;
    this.#urgent = false;
    this.#balanceWriting = true;
    this.#lastBalanceWriteAt = Date.now();
    try {
      const stat = await this.#setOwnData(epoch, session, path, info);
      if (!this.#current(epoch)) return;
      this.#ownVersion = stat.version;
      // Show the written balance at once; the data watch's re-read will find the same.
      if (!sameNode(this.#entries.get(info.id), info)) {
        this.#entries.set(info.id, info);
        this.#publish();
      }
    } catch (err) {
      if (!this.#current(epoch)) return;
      this.#balanceDirty = true;
      this.#urgent ||= urgent;
      if (!isConnectionError(err) && !isSessionGone(err)) this.#log.warn({ err, path }, 'balance write failed');
    } finally {
      this.#balanceWriting = false;
      if (this.#current(epoch)) this.#scheduleBalanceWrite();
    }
  }

  /** A versioned write; on a version conflict, re-read the version and write again. */
  async #setOwnData(epoch: number, session: ZooKeeperSession, path: string, info: ImNode): Promise<ZooKeeperStat> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await session.set(path, encodeNode(info), this.#ownVersion);
      } catch (err) {
        if (!hasRc(err, ZK_RC.BAD_VERSION) || attempt >= 3 || !this.#current(epoch)) throw err;
        const stat = await session.exists(path);
        if (!stat) throw err;
        this.#ownVersion = stat.version;
      }
    }
  }

  // --- reconcile ----------------------------------------------------------------------------

  /**
   * Compares the watched view with a fresh full read. A difference means an event was missed:
   * it is logged, and the differing workers are read again through the watched path (never
   * copied from the full read, which may already be older than the view).
   */
  async #reconcile(): Promise<void> {
    const epoch = this.#epoch;
    const session = this.#session;
    if (!session || this.#status !== 'connected' || this.#reconciling || this.#syncing || !this.#current(epoch)) return;
    if (this.#treeEpoch !== epoch) {
      // The tree is not ready (an observer waiting for workers/ to be made, or a failed check).
      this.#sync(epoch);
      return;
    }
    this.#reconciling = true;
    try {
      const fresh = new Map<string, ImNode>();
      let names: string[];
      try {
        names = await session.getChildren(this.#workersPath);
      } catch (err) {
        if (!hasRc(err, ZK_RC.NO_NODE)) throw err;
        names = [];
      }
      await Promise.all(
        names
          .filter((n) => n.startsWith(PREFIX))
          .map(async (name) => {
            const result = await session.get(`${this.#workersPath}/${name}`).catch((err: unknown) => {
              if (hasRc(err, ZK_RC.NO_NODE, ZK_RC.NO_AUTH)) return undefined;
              throw err;
            });
            const info = result && this.#acl.protects(result.stat) ? parseNode(name.slice(PREFIX.length), result.data) : undefined;
            if (info) fresh.set(info.id, info);
          }),
      );
      // Reads triggered by watches still in flight: the view is about to change anyway.
      if (!this.#current(epoch) || this.#inFlight > 0 || this.#syncing) return;
      if (viewHash(fresh.values()) === this.#viewHash) return;
      const missing = [...fresh.keys()].filter((id) => !this.#entries.has(id));
      const stale = [...this.#entries.keys()].filter((id) => !fresh.has(id));
      const changed = [...fresh.values()].filter((w) => this.#entries.has(w.id) && !sameNode(this.#entries.get(w.id), w)).map((w) => w.id);
      this.#log.warn({ missing, stale, changed }, 'registry view repaired');
      for (const id of [...missing, ...stale, ...changed]) this.#watched.delete(PREFIX + id);
      if (this.#self && this.#ownEpoch === epoch && !fresh.has(this.#self.id)) this.#ownEpoch = 0; // our node is gone: re-create
      this.#sync(epoch);
    } catch (err) {
      if (this.#current(epoch) && !isConnectionError(err) && !isSessionGone(err)) this.#log.warn({ err }, 'registry reconcile failed');
    } finally {
      this.#reconciling = false;
    }
  }
}
