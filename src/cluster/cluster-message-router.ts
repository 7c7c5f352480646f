// ClusterMessageRouter: the cluster's MessageRouter (server/cluster-seam.ts). Delivers a stored
// message to the recipient's sessions on this worker and forwards one PEER_DELIVER frame to each
// other worker that holds any of them (RouteCache, so no SessionStore read per message), through
// the WorkerRouter's peer links. Logins and logouts are announced to every peer (SESSION_ON /
// SESSION_OFF, the original notification types) so their caches drop the user. When the lookup
// fails (the session store does not answer), every peer is told to read the user's inbox
// (PEER_NUDGE) instead. A nudge (a resend found stored what nothing delivered) goes as PEER_NUDGE
// the same way: to the workers holding the user's sessions, or to every one.
//
// A message stored while a peer still had a stale "not here" entry for a user who just logged
// in on this worker would miss that session; so each new session re-reads its inbox once the
// announcement has had time to spread and once more after a cache TTL (recheck queue).
// A worker that registers again after its ZooKeeper session expired was dropped by the others
// meanwhile (links closed, frames dropped, its sessions purged): once SessionDistributed has
// published its sessions again, it treats them all as new logins, announcing them again and
// scheduling the same rechecks.
//
// Group entries are broadcast to the workers a worker links to; one that does not know this
// worker yet (just registered, or registered again) sends it nothing. So the rechecks of the
// sessions opened within a recheck window of the (re-)registration read their groups too.

import type { Logger } from '../log.js';
import { encodeMessageFrame } from '../protocol/codec.js';
import { peerDeliverFrame } from '../protocol/chat-frames.js';
import { notification } from '../protocol/messages.js';
import { HeadType, NotificationType, type Receipt } from '../protocol/types.js';
import type { LocalSession } from '../session/local-session.js';
import type { SessionDistributed } from '../session/session-distributed.js';
import type { LocalPort, MessageRouter } from '../server/cluster-seam.js';
import type { RouteCache } from './route-cache.js';
import type { WorkerRouter } from './worker-router.js';

export interface ClusterMessageRouterOptions {
  local: LocalPort;
  workers: WorkerRouter;
  routes: RouteCache;
  selfId: () => string;
  routeCacheTtlMs: number;
  /** Followed for the re-publishing after a re-registration (after a session expiry). */
  directory: Pick<SessionDistributed, 'onRepublished'>;
  log: Logger;
}

const RECHECK_TICK_MS = 250;

export class ClusterMessageRouter implements MessageRouter {
  readonly #o: ClusterMessageRouterOptions;
  /**
   * Users whose local sessions re-read their inbox at `at`: one queue per delay, so each is in
   * time order as it is appended to (no sort per login).
   */
  readonly #rechecks: { uid: string; at: number; groups: boolean }[][] = [[], []];
  /** When this worker last registered (or registered again): what the group rechecks are counted from. */
  #registeredAt = Date.now();
  /** Sessions announced by this worker (opened and not closed): what a re-registration re-announces. */
  readonly #open = new Set<LocalSession>();
  readonly #timer: NodeJS.Timeout;
  readonly #unsubscribe: () => void;

  constructor(options: ClusterMessageRouterOptions) {
    this.#o = options;
    this.#timer = setInterval(() => this.#runRechecks(), RECHECK_TICK_MS);
    this.#timer.unref();
    this.#unsubscribe = options.directory.onRepublished(() => this.#registeredAgain());
    void options.local.nodeId.then(() => (this.#registeredAt = Date.now()));
  }

  deliver(uid: string, seq: number, body: Uint8Array, epoch: number, id?: number): void {
    this.#o.local.deliver(uid, seq, body, epoch, id);
    const nodes = this.#o.routes.lookup(uid);
    if (nodes instanceof Promise) {
      nodes.then(
        (n) => this.#forward(n, uid, seq, body, epoch),
        (err: unknown) => {
          this.#o.log.warn({ err, uid }, 'route lookup failed; the recipient gets the message by sync');
          // Its sessions elsewhere read their inbox now, not at the next message: after a
          // failover to a lagging replica that next one may bear the number after theirs while
          // the dropped one reused a number they were sent, which only a read shows.
          this.#o.workers.broadcast(nudgeFrame(uid), uid);
        },
      );
    } else if (nodes.size > 0) {
      this.#forward(nodes, uid, seq, body, epoch);
    }
  }

  /** Local sessions, then one PEER_GROUP to every other worker: each knows its own sessions of the group's members. */
  deliverGroup(group: string, seq: number, body: Uint8Array | undefined, sender?: LocalSession): void {
    this.#o.local.deliverGroup(group, seq, body, sender);
    // Dropped on a link that is down: the peer re-reads every session's groups after the reconnect.
    this.#o.workers.broadcast(encodeMessageFrame({ type: HeadType.PEER_GROUP, peerGroup: { group, seq, ...(body ? { body } : {}) } }), undefined, true);
  }

  receipt(uid: string, receipt: Receipt): void {
    this.#o.local.receipt(uid, receipt);
    const forward = (nodes: ReadonlySet<string>) => {
      if (nodes.size === 0) return;
      const frame = encodeMessageFrame({ type: HeadType.PEER_RECEIPT, peerReceipt: { uid, receipt } });
      for (const nodeId of nodes) this.#o.workers.send(nodeId, frame);
    };
    const nodes = this.#o.routes.lookup(uid);
    // At most once: a failed lookup loses the receipt (the next one covers it).
    if (nodes instanceof Promise) nodes.then(forward, (err: unknown) => this.#o.log.debug({ err, uid }, 'route lookup failed; receipt dropped'));
    else forward(nodes);
  }

  nudge(uid: string): void {
    this.#o.local.nudge([uid]);
    const forward = (nodes: ReadonlySet<string>) => {
      if (nodes.size === 0) return;
      const frame = nudgeFrame(uid);
      for (const nodeId of nodes) this.#o.workers.send(nodeId, frame, uid);
    };
    const nodes = this.#o.routes.lookup(uid);
    if (nodes instanceof Promise) {
      nodes.then(forward, (err: unknown) => {
        // Not knowing where the sessions are: every worker reads for them.
        this.#o.log.debug({ err, uid }, 'route lookup failed; every worker nudged');
        this.#o.workers.broadcast(nudgeFrame(uid), uid);
      });
    } else {
      forward(nodes);
    }
  }

  sessionOpened(session: LocalSession): void {
    this.#open.add(session);
    this.#opened([session.uid]);
  }

  sessionClosed(session: LocalSession): void {
    this.#open.delete(session);
    this.#announce(NotificationType.SESSION_OFF, session.uid);
  }

  async close(): Promise<void> {
    this.#unsubscribe();
    clearInterval(this.#timer);
    for (const queue of this.#rechecks) queue.length = 0;
    this.#open.clear();
    this.#o.workers.close();
    this.#o.routes.clear();
  }

  #forward(nodes: ReadonlySet<string>, uid: string, seq: number, body: Uint8Array, epoch: number): void {
    if (nodes.size === 0) return;
    const frame = peerDeliverFrame(uid, seq, body, epoch);
    for (const nodeId of nodes) this.#o.workers.send(nodeId, frame, uid);
  }

  /** Announces the users' sessions and schedules their inbox re-reads (see the module comment). */
  #opened(uids: Iterable<string>): void {
    const now = Date.now();
    const groups = now - this.#registeredAt <= this.#o.routeCacheTtlMs + 1000;
    for (const uid of uids) {
      this.#announce(NotificationType.SESSION_ON, uid);
      this.#rechecks[0]!.push({ uid, at: now + 1000, groups });
      this.#rechecks[1]!.push({ uid, at: now + this.#o.routeCacheTtlMs + 1000, groups });
    }
  }

  #registeredAgain(): void {
    const uids = new Set([...this.#open].map((s) => s.uid));
    this.#registeredAt = Date.now();
    this.#o.log.info({ users: uids.size }, 'registered again: sessions announced anew');
    this.#opened(uids);
  }

  #announce(type: NotificationType, uid: string): void {
    this.#o.workers.broadcast(encodeMessageFrame(notification(type, { uid, nodeId: this.#o.selfId() })), uid);
  }

  #runRechecks(): void {
    const now = Date.now();
    const uids = new Set<string>();
    const withGroups = new Set<string>();
    for (const queue of this.#rechecks) {
      let due = 0;
      while (due < queue.length && queue[due]!.at <= now) due++;
      for (const r of queue.splice(0, due)) (r.groups ? withGroups : uids).add(r.uid);
    }
    for (const uid of withGroups) uids.delete(uid);
    if (uids.size > 0) this.#o.local.nudge([...uids]);
    if (withGroups.size > 0) this.#o.local.nudge([...withGroups], true);
  }
}

/** PEER_NUDGE: the receiving worker's sessions of `uid` read their inbox. */
function nudgeFrame(uid: string): Buffer {
  return encodeMessageFrame({ type: HeadType.PEER_NUDGE, peerNudge: { uids: [uid] } });
}
