// Single-node registry: the only live worker is this one. Keeps the Registry seam honest in
// embedded mode, so the gate and stats read balance the same way they will from ZooKeeper.

import { SwitchboardError } from '../errors.js';
import type { Registry } from './registry.js';
import type { ImNode, WorkerAnnouncement } from './im-node.js';

export class StaticRegistry implements Registry {
  readonly #listeners = new Set<(workers: readonly ImNode[]) => void>();
  readonly #registered = new Set<(self: ImNode) => void>();
  #self: ImNode | undefined;
  #view: readonly ImNode[] = [];

  constructor(readonly nodeId = '1') {}

  async register(worker: WorkerAnnouncement): Promise<ImNode> {
    if (this.#self) throw new SwitchboardError('SB_ERR_CONFIG', 'worker is already registered');
    this.#self = { ...worker, id: this.nodeId };
    this.#publish();
    for (const listener of this.#registered) listener({ ...this.#self });
    return { ...this.#self };
  }

  setBalance(balance: number): void {
    if (!this.#self || this.#self.balance === balance) return;
    this.#self = { ...this.#self, balance };
    this.#publish();
  }

  setReady(ready: boolean): void {
    if (!this.#self || this.#self.ready === ready) return;
    this.#self = { ...this.#self, ready };
    this.#publish();
  }

  registered(): boolean {
    return this.#self !== undefined;
  }

  workers(): readonly ImNode[] {
    return this.#view;
  }

  onChange(listener: (workers: readonly ImNode[]) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  onRegistered(listener: (self: ImNode) => void): () => void {
    this.#registered.add(listener);
    return () => this.#registered.delete(listener);
  }

  async close(): Promise<void> {
    this.#self = undefined;
    this.#publish();
    this.#listeners.clear();
    this.#registered.clear();
  }

  #publish(): void {
    this.#view = Object.freeze(this.#self ? [{ ...this.#self }] : []);
    for (const listener of this.#listeners) listener(this.#view);
  }
}
