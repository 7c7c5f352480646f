// ClusterRouter: delivers a stored message to the recipient's sessions on this worker and
// forwards one PEER_DELIVER frame to each other worker that holds any of them (RouteCache, so
// no SessionStore read per message). Logins and logouts are announced to every peer
// (SESSION_ON / SESSION_OFF, the original notification types) so their caches drop the user.
//
// A message stored while a peer still had a stale "not here" entry for a user who just logged
// in on this worker would miss that session; so each new session re-reads its inbox once the
// announcement has had time to spread and once more after a cache TTL (recheck queue).

import type { Logger } from '../log.js';
import { encodeMessageFrame } from '../protocol/codec.js';
import { notification } from '../protocol/messages.js';
import { HeadType, NotificationType } from '../protocol/types.js';
import type { LocalSession } from '../session/local-session.js';
import type { LocalPort, MessageRouter } from '../server/router.js';
import type { RouteCache } from './route-cache.js';
import type { WorkerRouter } from './worker-router.js';

export interface ClusterRouterOptions {
  local: LocalPort;
  workers: WorkerRouter;
  routes: RouteCache;
  selfId: () => string;
  routeCacheTtlMs: number;
  log: Logger;
}

const RECHECK_TICK_MS = 250;

export class ClusterRouter implements MessageRouter {
  readonly #o: ClusterRouterOptions;
  /** Users whose local sessions re-read their inbox at `at`, in time order. */
  readonly #rechecks: { uid: string; at: number }[] = [];
  readonly #timer: NodeJS.Timeout;

  constructor(options: ClusterRouterOptions) {
    this.#o = options;
    this.#timer = setInterval(() => this.#runRechecks(), RECHECK_TICK_MS);
    this.#timer.unref();
  }

  deliver(uid: string, seq: number, body: Uint8Array): void {
    this.#o.local.deliver(uid, seq, body);
    const nodes = this.#o.routes.lookup(uid);
    if (nodes instanceof Promise) {
      nodes.then(
        (n) => this.#forward(n, uid, seq, body),
        (err: unknown) => this.#o.log.warn({ err, uid }, 'route lookup failed; the recipient gets the message by sync'),
      );
    } else if (nodes.size > 0) {
      this.#forward(nodes, uid, seq, body);
    }
  }

  sessionOpened(session: LocalSession): void {
    this.#announce(NotificationType.SESSION_ON, session.uid);
    const now = Date.now();
    this.#rechecks.push({ uid: session.uid, at: now + 1000 }, { uid: session.uid, at: now + this.#o.routeCacheTtlMs + 1000 });
    if (this.#rechecks.length > 1) this.#rechecks.sort((a, b) => a.at - b.at);
  }

  sessionClosed(session: LocalSession): void {
    this.#announce(NotificationType.SESSION_OFF, session.uid);
  }

  async close(): Promise<void> {
    clearInterval(this.#timer);
    this.#rechecks.length = 0;
    this.#o.workers.close();
    this.#o.routes.clear();
  }

  #forward(nodes: ReadonlySet<string>, uid: string, seq: number, body: Uint8Array): void {
    if (nodes.size === 0) return;
    const frame = encodeMessageFrame({ type: HeadType.PEER_DELIVER, peerDeliver: { uid, seq, body } });
    for (const nodeId of nodes) this.#o.workers.send(nodeId, frame, uid);
  }

  #announce(type: NotificationType, uid: string): void {
    this.#o.workers.broadcast(encodeMessageFrame(notification(type, { uid, nodeId: this.#o.selfId() })), uid);
  }

  #runRechecks(): void {
    const now = Date.now();
    let due = 0;
    while (due < this.#rechecks.length && this.#rechecks[due]!.at <= now) due++;
    if (due === 0) return;
    const uids = new Set(this.#rechecks.splice(0, due).map((r) => r.uid));
    this.#o.local.nudge([...uids]);
  }
}
