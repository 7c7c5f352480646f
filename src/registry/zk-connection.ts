// The ZooKeeper connection of one process: one session at a time (a new one after an expiry),
// its status, an epoch per session so that callbacks of an older one are ignored, and the retry
// strategy. Everything switchboard keeps in ZooKeeper goes through it under one root and one
// identity: the registry, which owns it, and the OnlineCounter, which shares it (one ZooKeeper
// session per process). As in ioredis the status is a union changed only through setStatus().

import type { Logger } from '../log.js';
import { SwitchboardError } from '../errors.js';
import { ZooKeeperSession, type ZooKeeperLogLevel } from './zookeeper-client.js';
import { ClusterAcl, type ClusterAclOptions } from './cluster-acl.js';

/**
 * connecting: no session yet (first one, or a new one after an expiry).
 * connected: the session is up.
 * suspended: disconnected, but the session has not expired (yet); the client reconnects.
 * expired: the session is gone, and with it this worker's znode; a new one is on its way.
 * closed: close() was called, or retryStrategy gave up.
 */
export type ZooKeeperStatus = 'connecting' | 'connected' | 'suspended' | 'expired' | 'closed';

export interface ZooKeeperConnectionOptions {
  /** host:port[,host:port...] of the ensemble. */
  connect: string;
  /** Parent of everything switchboard keeps in ZooKeeper; default '/switchboard'. */
  root?: string;
  /** Requested session timeout (the server clamps it); default 10 s. */
  sessionTimeoutMs?: number;
  /**
   * Delay before the attempt-th consecutive retry (a new session after an expiry, a failed
   * call of the owner's); null gives up. Default: 100 ms doubling to 5 s.
   */
  retryStrategy?: (attempt: number) => number | null;
  /** The C client's own stderr logging (process-wide); default 'error'. */
  nativeLogLevel?: ZooKeeperLogLevel;
  /**
   * This process's ZooKeeper digest identity, sent on every connection; what it creates gets the
   * cluster ACL (cluster-acl.ts). Unset: nothing is protected (development).
   */
  auth?: ClusterAclOptions['auth'];
  /** Digest ids granted READ on the znodes this process creates: the gates'. */
  readers?: ClusterAclOptions['readers'];
  log: Logger;
}

/** What the owner of the connection hears of it; each callback names the session's epoch. */
export interface ZooKeeperConnectionEvents {
  /** A new session is being opened: whatever was in flight in the previous one is void. */
  opening?(epoch: number): void;
  /** The session is connected, the first time or again after a disconnection. */
  connected?(epoch: number): void;
  /** A watch set in the session fired. */
  watch?(epoch: number, event: 'created' | 'deleted' | 'changed' | 'child', path: string): void;
  /** retryStrategy gave up; the owner closes the connection. Unset: it closes itself. */
  gaveUp?(err: SwitchboardError): void;
}

const defaultRetryStrategy = (attempt: number): number => Math.min(100 * 2 ** (attempt - 1), 5_000);

export class ZooKeeperConnection {
  readonly connect: string;
  /** Normalised: no trailing '/', '/' itself for the ZooKeeper root. */
  readonly root: string;
  /** The identity and readers, for a sharer that logs its ACL work under its own name. */
  readonly access: ClusterAclOptions;
  readonly acl: ClusterAcl;
  readonly nativeLogLevel: ZooKeeperLogLevel;
  readonly #sessionTimeoutMs: number;
  readonly #retryStrategy: (attempt: number) => number | null;
  readonly #log: Logger;
  readonly #events: ZooKeeperConnectionEvents;
  readonly #statusListeners = new Set<(status: ZooKeeperStatus, previous: ZooKeeperStatus) => void>();
  /** whenConnected() callers waiting for a session to connect. */
  readonly #waiters: { resolve: (session: ZooKeeperSession) => void; reject: (err: Error) => void }[] = [];

  #status: ZooKeeperStatus = 'connecting';
  /** Bumped for every session (and on close): callbacks of an older one are ignored. */
  #epoch = 0;
  #session: ZooKeeperSession | undefined;
  /** The current session has connected at least once. */
  #sessionConnected = false;
  #opened = false;
  #closed = false;
  #closing: Promise<void> | undefined;
  /** Consecutive failures (session losses, failed calls of the owner) since the last success. */
  #attempt = 0;
  #retryTimer: NodeJS.Timeout | undefined;

  constructor(options: ZooKeeperConnectionOptions, events: ZooKeeperConnectionEvents = {}) {
    const root = options.root ?? '/switchboard';
    if (!root.startsWith('/')) throw new SwitchboardError('SB_ERR_CONFIG', `zookeeper root must start with '/': ${root}`);
    this.connect = options.connect;
    this.root = root.replace(/\/+$/, '') || '/';
    this.access = { auth: options.auth, readers: options.readers };
    this.acl = new ClusterAcl(this.access, options.log);
    this.nativeLogLevel = options.nativeLogLevel ?? 'error';
    this.#sessionTimeoutMs = options.sessionTimeoutMs ?? 10_000;
    this.#retryStrategy = options.retryStrategy ?? defaultRetryStrategy;
    this.#log = options.log;
    this.#events = events;
  }

  /** `<root>/<name>` */
  path(name: string): string {
    return `${this.root === '/' ? '' : this.root}/${name}`;
  }

  get status(): ZooKeeperStatus {
    return this.#status;
  }

  get epoch(): number {
    return this.#epoch;
  }

  /** The current session, connected or not; undefined between an expiry and the next one. */
  get session(): ZooKeeperSession | undefined {
    return this.#session;
  }

  /** open() was called. */
  get opened(): boolean {
    return this.#opened;
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Whether `epoch` is the current session's, and the connection not closed. */
  current(epoch: number): boolean {
    return epoch === this.#epoch && !this.#closed;
  }

  /** The live session's id and password, for tests that expire it from a second client. */
  credentials(): { id: string; password: string } | undefined {
    return this.#status === 'connected' ? this.#session?.credentials : undefined;
  }

  onStatus(listener: (status: ZooKeeperStatus, previous: ZooKeeperStatus) => void): () => void {
    this.#statusListeners.add(listener);
    return () => this.#statusListeners.delete(listener);
  }

  /**
   * The current session once it has connected (it may be disconnected again since: its calls
   * then wait for the reconnect or fail with a connection error); after an expiry, the next one.
   */
  whenConnected(): Promise<ZooKeeperSession> {
    if (this.#closed) return Promise.reject(new SwitchboardError('SB_ERR_REGISTRY_CLOSED', 'the ZooKeeper connection was closed'));
    if (this.#session && this.#sessionConnected) return Promise.resolve(this.#session);
    return new Promise((resolve, reject) => this.#waiters.push({ resolve, reject }));
  }

  /** Opens a session now; the C client connects and reconnects by itself until it expires. */
  open(): void {
    this.#opened = true;
    const epoch = ++this.#epoch;
    this.#sessionConnected = false;
    this.#events.opening?.(epoch);
    this.#setStatus('connecting');
    this.#session = new ZooKeeperSession({
      connect: this.connect,
      sessionTimeoutMs: this.#sessionTimeoutMs,
      logLevel: this.nativeLogLevel,
      auth: this.acl.auth,
      onConnected: () => this.current(epoch) && this.#connected(epoch),
      onDisconnected: () => this.current(epoch) && this.#setStatus('suspended'),
      onClosed: (rc) => this.current(epoch) && this.#lost(rc),
      onWatch: (event, path) => this.current(epoch) && this.#events.watch?.(epoch, event, path),
    });
  }

  /** Runs `action` after retryStrategy's delay, or gives up (see ZooKeeperConnectionEvents.gaveUp). */
  retry(what: string, action: () => void): void {
    const attempt = ++this.#attempt;
    const delayMs = this.#retryStrategy(attempt);
    clearTimeout(this.#retryTimer);
    if (delayMs === null) {
      const err = new SwitchboardError('SB_ERR_REGISTRY_UNAVAILABLE', `gave up on ZooKeeper after ${attempt} attempts (${what})`);
      this.#log.error({ err }, 'registry gave up');
      if (this.#events.gaveUp) this.#events.gaveUp(err);
      else void this.close();
      return;
    }
    this.#retryTimer = setTimeout(() => {
      this.#retryTimer = undefined;
      if (!this.#closed) action();
    }, delayMs);
    this.#retryTimer.unref();
  }

  /** The owner's work for the current session succeeded: the next failure is a first attempt again. */
  succeeded(): void {
    this.#attempt = 0;
  }

  /**
   * Ends the session (the server deletes its ephemeral nodes at once). `last` runs first, on a
   * connected session (a worker deletes its znode, so that other views drop it at once); no
   * callback of the session runs any more meanwhile.
   */
  close(last?: (session: ZooKeeperSession) => Promise<void>): Promise<void> {
    this.#closing ??= this.#end(last);
    return this.#closing;
  }

  async #end(last: ((session: ZooKeeperSession) => Promise<void>) | undefined): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#retryTimer);
    const session = this.#session;
    if (session && last && this.#status === 'connected') await last(session);
    this.#epoch++;
    this.#session = undefined;
    session?.close();
    const err = new SwitchboardError('SB_ERR_REGISTRY_CLOSED', 'the ZooKeeper connection was closed');
    for (const waiter of this.#waiters.splice(0)) waiter.reject(err);
    this.#setStatus('closed');
    this.#statusListeners.clear();
  }

  #connected(epoch: number): void {
    this.#setStatus('connected');
    this.#sessionConnected = true;
    this.#events.connected?.(epoch);
    const session = this.#session!;
    for (const waiter of this.#waiters.splice(0)) waiter.resolve(session);
  }

  /** The session is finished without close(): expired (the usual case) or given up on. */
  #lost(rc: number): void {
    this.#session = undefined;
    this.#epoch++;
    this.#setStatus('expired', { rc });
    this.retry('session', () => this.open());
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
}
