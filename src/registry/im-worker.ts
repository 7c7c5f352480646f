// ImWorker: this worker's registration in ZooKeeper (the seed's ImWorker): its znode
// <root>/workers/w-<id>, the id ZooKeeper's sequence gave it, and its balance and readiness
// written there. The znode is re-created under the same id after a session expiry or a deletion
// behind its back; balance writes are coalesced (at most one per balanceIntervalMs, the last
// value winning), a change of readiness is written at once. The ZooKeeperRegistry drives it.

import type { Logger } from '../log.js';
import { SwitchboardError } from '../errors.js';
import { ZK_MODE, ZK_RC, hasRc, isConnectionError, isSessionGone, type ZooKeeperSession, type ZooKeeperStat } from './zookeeper-client.js';
import type { ZooKeeperConnection } from './zk-connection.js';
import { WORKER_PREFIX, encodeNode, type ImNode, type WorkerAnnouncement } from './im-node.js';

/** A momentary id reservation: an EPHEMERAL_SEQUENTIAL child of workers/, deleted at once. */
const RESERVATION = 'id-';

export interface ImWorkerOptions {
  zk: ZooKeeperConnection;
  /** `<root>/workers` */
  workersPath: string;
  balanceIntervalMs: number;
  /** Shows what was written in the view at once (the data watch's re-read finds the same). */
  show: (self: ImNode) => void;
  log: Logger;
}

export class ImWorker {
  readonly #o: ImWorkerOptions;
  readonly #zk: ZooKeeperConnection;
  // #self is what the znode should hold; #version the znode's data version.
  #announced: WorkerAnnouncement | undefined;
  #self: ImNode | undefined;
  #path: string | undefined;
  #version = -1;
  /** The epoch in which the znode was last created (or found) and written. */
  #epoch = 0;
  #registeredPending = false;

  // Balance writes: #dirty while the znode may hold an older balance (or readiness) than #self.
  // A change of readiness is #urgent: written at once, not within balanceIntervalMs.
  #dirty = false;
  #urgent = false;
  #writing = false;
  #timer: NodeJS.Timeout | undefined;
  #lastWriteAt = 0;

  constructor(options: ImWorkerOptions) {
    this.#o = options;
    this.#zk = options.zk;
  }

  /** register() was called: this process is a worker, not an observer. */
  get announced(): boolean {
    return this.#announced !== undefined;
  }

  /** The id ZooKeeper's sequence gave this worker, once reserved. */
  get id(): string | undefined {
    return this.#self?.id;
  }

  /** The znode's path, once an id is reserved. */
  get path(): string | undefined {
    return this.#path;
  }

  announce(worker: WorkerAnnouncement): void {
    if (this.#announced) throw new SwitchboardError('SB_ERR_CONFIG', 'worker is already registered');
    this.#announced = { ...worker };
  }

  /** Whether the znode is known to be in place in session `epoch`. */
  registeredIn(epoch: number): boolean {
    return this.#path !== undefined && this.#epoch === epoch;
  }

  /** Whether the znode has to be written (again) in session `epoch`. */
  needsWrite(epoch: number): boolean {
    return this.#announced !== undefined && this.#epoch !== epoch;
  }

  /** The znode went (deleted, or missing from a full read): it is written again at the next sync. */
  lost(): void {
    this.#epoch = 0;
  }

  /** A deletion of `path` seen in session `epoch`: true (and logged) if it was this worker's znode. */
  deleted(path: string, epoch: number): boolean {
    if (path !== this.#path || this.#epoch !== epoch) return false;
    // Deleted behind our back while the session lives on: register again, same id.
    this.#o.log.warn({ path }, 'registry node deleted; registering again');
    this.lost();
    return true;
  }

  /** After a write: what was registered, once (the registration or a re-registration to tell). */
  takeRegistered(): ImNode | undefined {
    if (!this.#registeredPending || !this.#self) return undefined;
    this.#registeredPending = false;
    return { ...this.#self };
  }

  /** Coalesced: at most one write per balanceIntervalMs, the last value wins. */
  setBalance(balance: number): void {
    if (this.#zk.closed) return;
    if (!this.#self) {
      if (this.#announced) this.#announced = { ...this.#announced, balance };
      return;
    }
    if (this.#self.balance === balance) return;
    this.#self = { ...this.#self, balance };
    this.#dirty = true;
    this.scheduleBalanceWrite();
  }

  /** Written at once: the gate should stop (or resume) sending logins here without delay. */
  setReady(ready: boolean): void {
    if (this.#zk.closed) return;
    if (!this.#self) {
      if (this.#announced) this.#announced = { ...this.#announced, ready };
      return;
    }
    if (this.#self.ready === ready) return;
    this.#self = { ...this.#self, ready };
    this.#dirty = true;
    this.#urgent = true;
    this.scheduleBalanceWrite();
  }

  /**
   * First time: an id from workers/' own sequence (a reservation `id-N`, deleted at once), then
   * the znode `w-N` as a plain EPHEMERAL node, created together with its ACL so that it is never
   * open during a round trip. After an expiry or a deletion: the same path again, so the worker
   * keeps its id. Nobody else creates `w-N`: N came from ZooKeeper's sequence, used once.
   */
  async write(epoch: number, session: ZooKeeperSession): Promise<void> {
    if (!this.#announced) return;
    if (!this.#self || !this.#path) {
      const id = await this.#reserveId(session);
      if (!this.#zk.current(epoch)) return;
      this.#path = `${this.#o.workersPath}/${WORKER_PREFIX}${id}`;
      // The latest announcement: setBalance() may have changed it meanwhile.
      this.#self = { ...this.#announced, id };
    }
    const written = this.#self;
    const version = await this.#create(epoch, session, this.#path, written);
    if (!this.#zk.current(epoch)) return;
    this.#version = version;
    this.#epoch = epoch;
    this.#dirty = this.#self !== written;
    this.#registeredPending = true;
  }

  /** On close, on a connected session: other views drop this worker at once. */
  async delete(session: ZooKeeperSession): Promise<void> {
    if (!this.registeredIn(this.#zk.epoch)) return;
    try {
      await session.delete(this.#path!, -1);
    } catch (err) {
      // The session's end removes the ephemeral node anyway, a moment later.
      if (!hasRc(err, ZK_RC.NO_NODE)) this.#o.log.warn({ err, path: this.#path }, 'registry node delete failed');
    }
  }

  stop(): void {
    clearTimeout(this.#timer);
  }

  /** A fresh sequence number of workers/ (the suffix of EPHEMERAL_SEQUENTIAL children). */
  async #reserveId(session: ZooKeeperSession): Promise<string> {
    const path = `${this.#o.workersPath}/${RESERVATION}`;
    const reserved = await session.create(path, Buffer.alloc(0), ZK_MODE.EPHEMERAL_SEQUENTIAL).catch((err: unknown) => {
      throw this.#zk.acl.explain(err, this.#o.workersPath, 'create a child of');
    });
    // Nothing waits for it: a reservation left behind goes with the session, and no view lists it.
    session.delete(reserved, -1).catch((err: unknown) => this.#o.log.debug({ err, path: reserved }, 'id reservation delete failed'));
    return reserved.slice(reserved.lastIndexOf('/') + 1 + RESERVATION.length);
  }

  /** Creates this worker's znode at its path; resolves its data version. */
  async #create(epoch: number, session: ZooKeeperSession, path: string, info: ImNode): Promise<number> {
    const acl = this.#zk.acl;
    try {
      return await acl.create(session, path, encodeNode(info), ZK_MODE.EPHEMERAL);
    } catch (err) {
      if (!hasRc(err, ZK_RC.NODE_EXISTS) || !this.#zk.current(epoch)) throw err;
    }
    // Left by an earlier session of ours that the server has not expired yet, or made by this
    // one before its answer was lost: replaced, so that its ACL and its data are known to be ours.
    await session.delete(path, -1).catch((err: unknown) => {
      if (!hasRc(err, ZK_RC.NO_NODE)) throw err;
    });
    if (!this.#zk.current(epoch)) throw new SwitchboardError('SB_ERR_REGISTRY_UNAVAILABLE', 'zookeeper session changed during registration');
    return acl.create(session, path, encodeNode(info), ZK_MODE.EPHEMERAL);
  }

  // --- balance ------------------------------------------------------------------------------

  scheduleBalanceWrite(): void {
    if (!this.#dirty || this.#writing || this.#zk.closed) return;
    if (this.#timer && !this.#urgent) return;
    clearTimeout(this.#timer);
    const waitMs = this.#urgent ? 0 : Math.max(0, this.#lastWriteAt + this.#o.balanceIntervalMs - Date.now());
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      void this.#writeBalance();
    }, waitMs);
    this.#timer.unref();
  }

  async #writeBalance(): Promise<void> {
    const epoch = this.#zk.epoch;
    const session = this.#zk.session;
    const path = this.#path;
    // Not connected or not (re-)registered yet: the (re-)registration writes #self whole.
    if (!this.#dirty || !session || !path || this.#zk.status !== 'connected' || this.#epoch !== epoch) return;
    const info = this.#self!;
    const urgent = this.#urgent;
    this.#dirty = false;
    this.#urgent = false;
    this.#writing = true;
    this.#lastWriteAt = Date.now();
    try {
      const stat = await this.#setData(epoch, session, path, info);
      if (!this.#zk.current(epoch)) return;
      this.#version = stat.version;
      this.#o.show(info);
    } catch (err) {
      if (!this.#zk.current(epoch)) return;
      this.#dirty = true;
      this.#urgent ||= urgent;
      if (!isConnectionError(err) && !isSessionGone(err)) this.#o.log.warn({ err, path }, 'balance write failed');
    } finally {
      this.#writing = false;
      if (this.#zk.current(epoch)) this.scheduleBalanceWrite();
    }
  }

  /** A versioned write; on a version conflict, re-read the version and write again. */
  async #setData(epoch: number, session: ZooKeeperSession, path: string, info: ImNode): Promise<ZooKeeperStat> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await session.set(path, encodeNode(info), this.#version);
      } catch (err) {
        if (!hasRc(err, ZK_RC.BAD_VERSION) || attempt >= 3 || !this.#zk.current(epoch)) throw err;
        const stat = await session.exists(path);
        if (!stat) throw err;
        this.#version = stat.version;
      }
    }
  }
}
