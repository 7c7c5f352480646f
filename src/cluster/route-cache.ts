// Which other workers hold sessions of a user: read from the SessionStore on a miss, then kept
// for a short TTL, and dropped at once when a peer announces a login or logout of that user
// (SESSION_ON / SESSION_OFF). Misses for one user share one read, so deliveries that wait on
// it keep their order. Bounded: the oldest entries go first.

import type { SessionStore } from '../session/session-store.js';

type Entry = { nodes: ReadonlySet<string>; expiresAt: number } | { pending: Promise<ReadonlySet<string>> };

export interface RouteCacheOptions {
  store: SessionStore;
  /** This worker's id: its own sessions are delivered locally, never routed. */
  selfId: () => string;
  ttlMs: number;
  maxEntries: number;
}

export class RouteCache {
  readonly #entries = new Map<string, Entry>();
  readonly #options: RouteCacheOptions;

  constructor(options: RouteCacheOptions) {
    this.#options = options;
  }

  get size(): number {
    return this.#entries.size;
  }

  /** The other nodes with sessions of `uid`: at once when cached, else once read. */
  lookup(uid: string): ReadonlySet<string> | Promise<ReadonlySet<string>> {
    const entry = this.#entries.get(uid);
    if (entry) {
      if ('pending' in entry) return entry.pending;
      if (entry.expiresAt > Date.now()) return entry.nodes;
      this.#entries.delete(uid);
    }
    const pending = this.#read(uid);
    this.#set(uid, { pending });
    return pending;
  }

  invalidate(uid: string): void {
    this.#entries.delete(uid);
  }

  clear(): void {
    this.#entries.clear();
  }

  async #read(uid: string): Promise<ReadonlySet<string>> {
    const self = this.#options.selfId();
    try {
      const records = await this.#options.store.byUser(uid);
      const nodes: ReadonlySet<string> = new Set(records.map((r) => r.nodeId).filter((id) => id !== self));
      // Still our read (not invalidated meanwhile): cache it.
      const current = this.#entries.get(uid);
      if (current && 'pending' in current) this.#set(uid, { nodes, expiresAt: Date.now() + this.#options.ttlMs });
      return nodes;
    } catch (err) {
      this.#entries.delete(uid);
      throw err;
    }
  }

  #set(uid: string, entry: Entry): void {
    this.#entries.delete(uid);
    if (this.#entries.size >= this.#options.maxEntries) this.#entries.delete(this.#entries.keys().next().value!);
    this.#entries.set(uid, entry);
  }
}
