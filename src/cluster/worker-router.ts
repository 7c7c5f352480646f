// WorkerRouter: keeps one WorkerReSender per live peer, following the Registry's view (which
// ZooKeeper keeps current with watches and a periodic reconcile), and sends frames to a peer by
// its node id (the seed's name: it routes frames to workers; which workers a message goes to is
// ClusterMessageRouter's). A worker that leaves the view has its link stopped, and the session
// directory is told (SessionDistributed.departed: the lowest live worker purges its sessions).

import type { Logger } from '../log.js';
import type { Registry } from '../registry/registry.js';
import type { ImNode } from '../registry/im-node.js';
import type { SessionDistributed } from '../session/session-distributed.js';
import { WorkerReSender, type WorkerReSenderOptions } from './worker-resender.js';

export type LinkSettings = Omit<WorkerReSenderOptions, 'selfId' | 'peer' | 'log'>;

export interface WorkerRouterOptions {
  registry: Registry;
  /** Told of every worker that left. */
  directory: Pick<SessionDistributed, 'departed'>;
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

  /** `nudgeAll`: a frame dropped on a link makes that peer re-read every session's messages after the reconnect. */
  broadcast(frame: Buffer, uid?: string, nudgeAll = false): void {
    for (const link of this.#links.values()) link.send(frame, uid, nudgeAll);
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
      this.#options.directory.departed(id, workers);
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
}
