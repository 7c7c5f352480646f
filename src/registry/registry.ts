// The naming service: which workers are alive, where they listen and how loaded they are.
// A static single-node registry serves embedded mode; ZooKeeper serves a cluster. Both pass
// test/registry/registry.conformance.ts. What it lists of each worker is its ImNode (im-node.ts).

import type { ImNode, WorkerAnnouncement } from './im-node.js';

export interface Registry {
  /** Registers this worker; resolves its info with the id the registry assigned. */
  register(worker: WorkerAnnouncement): Promise<ImNode>;
  /** Publishes this worker's balance. Implementations may coalesce writes (ZooKeeper: ≤ 1/s). */
  setBalance(balance: number): void;
  /** Publishes whether this worker accepts logins; written promptly (not coalesced to 1/s). */
  setReady(ready: boolean): void;
  /** The current view of live workers, this one included once registered. */
  workers(): readonly ImNode[];
  /**
   * Whether this worker's registration is known to be in place now. False before register()
   * and after close(); ZooKeeper: also while disconnected (the session may be expiring, and the
   * others purging this worker's sessions) and after an expiry until the re-registration.
   */
  registered(): boolean;
  /** Calls `listener` after every change of the view; returns a function that unsubscribes. */
  onChange(listener: (workers: readonly ImNode[]) => void): () => void;
  /**
   * Calls `listener` after this worker's registration and after every re-registration (a
   * registry whose session expired registers again, under the same id): the worker then
   * re-publishes what other nodes may have purged meanwhile (its sessions).
   */
  onRegistered(listener: (self: ImNode) => void): () => void;
  /** Removes this worker from the registry and stops watching. */
  close(): Promise<void>;
}
