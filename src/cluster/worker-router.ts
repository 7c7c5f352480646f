// WorkerRouter: keeps one WorkerReSender per live peer, following the Registry's view (which
// ZooKeeper keeps current with watches and a periodic reconcile). A worker that leaves the view
// has its link stopped; the surviving worker with the lowest id purges its sessions from the
// SessionStore at once (their TTL would remove them later anyway).

import type { Logger } from '../log.js';
import type { Registry } from '../registry/registry.js';
import type { ImNode } from '../registry/im-node.js';
import type { SessionStore } from '../session/session-store.js';
import { WorkerReSender, type WorkerReSenderOptions } from './worker-resender.js';

export type LinkSettings = Omit<WorkerReSenderOptions, 'selfId' | 'peer' | 'log'>;

export interface WorkerRouterOptions {
  registry: Registry;
  store: SessionStore;
  selfId: () => string;
  links: LinkSettings;
  log: Logger;
}

export class WorkerRouter {
  readonly #links = new Map<string, WorkerReSender>();
  readonly #options: WorkerRouterOptions;
  readonly #log: Logger;
  #unsubscribe: (() => void) | undefined;
  #closed = false;

  constructor(options: WorkerRouterOptions) {
    this.#options = options;
    this.#log = options.log;
  }

  /** Starts following the registry (call once this worker is registered). */
  start(): void {
    this.#unsubscribe = this.#options.registry.onChange((workers) => this.#sync(workers));
    this.#sync(this.#options.registry.workers());
  }

  link(nodeId: string): WorkerReSender | undefined {
    return this.#links.get(nodeId);
  }

  get peers(): string[] {
    return [...this.#links.keys()];
  }

  send(nodeId: string, frame: Buffer, uid?: string): void {
    this.#links.get(nodeId)?.send(frame, uid);
  }

  broadcast(frame: Buffer, uid?: string): void {
    for (const link of this.#links.values()) link.send(frame, uid);
  }

  close(): void {
    this.#closed = true;
    this.#unsubscribe?.();
    for (const link of this.#links.values()) link.close();
    this.#links.clear();
  }

  #sync(workers: readonly ImNode[]): void {
    if (this.#closed) return;
    const selfId = this.#options.selfId();
    if (!selfId) return;
    const live = new Map(workers.filter((w) => w.id !== selfId).map((w) => [w.id, w]));
    for (const [id, link] of this.#links) {
      if (live.has(id)) continue;
      link.close();
      this.#links.delete(id);
      this.#log.info({ peer: id }, 'worker left');
      // Only when we are listed ourselves: a worker whose own registration lapsed sees
      // everyone vanish and must not purge them.
      if (workers.some((w) => w.id === selfId)) this.#purgeIfLowest(id, workers);
    }
    for (const [id, info] of live) {
      const existing = this.#links.get(id);
      // Registered without a peer port (not in cluster mode): there is nothing to link to.
      if (info.peerPort === undefined) {
        existing?.close();
        this.#links.delete(id);
        continue;
      }
      if (existing) {
        existing.update(info);
        continue;
      }
      this.#log.info({ peer: id, host: info.host, port: info.port, peerPort: info.peerPort }, 'worker joined');
      this.#links.set(id, new WorkerReSender({ ...this.#options.links, selfId, peer: info, log: this.#log }));
    }
  }

  #purgeIfLowest(deadId: string, workers: readonly ImNode[]): void {
    const lowest = workers.map((w) => w.id).sort()[0];
    if (lowest !== this.#options.selfId()) return;
    this.#options.store.purgeNode(deadId).then(
      (purged) => this.#log.info({ peer: deadId, purged }, 'purged sessions of a departed worker'),
      (err: unknown) => this.#log.error({ err, peer: deadId }, 'session purge failed'),
    );
  }
}
