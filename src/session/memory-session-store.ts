// In-memory SessionStore: the embedded default, and the reference the Redis store must match.
// Sized for many idle sessions: a user's records are a small array (a user has a few devices
// at most), and a refresh of an unchanged record only moves its expiry.

import { DEFAULT_SESSION_TTL_MS, type SessionRecord, type SessionStore } from './session-store.js';

/** A copy of the record, with its expiry. */
interface Entry extends SessionRecord {
  expiresAt: number;
}

export class MemorySessionStore implements SessionStore {
  readonly #byUser = new Map<string, Entry[]>();
  readonly #ttlMs: number;

  constructor({ ttlMs = DEFAULT_SESSION_TTL_MS }: { ttlMs?: number } = {}) {
    this.#ttlMs = ttlMs;
  }

  async add(record: SessionRecord): Promise<void> {
    this.#put(record, Date.now() + this.#ttlMs);
  }

  async refresh(records: readonly SessionRecord[]): Promise<void> {
    const expiresAt = Date.now() + this.#ttlMs;
    for (const record of records) this.#put(record, expiresAt);
  }

  async remove(uid: string, sessionId: string): Promise<boolean> {
    const entries = this.#byUser.get(uid);
    const i = entries ? entries.findIndex((e) => e.sessionId === sessionId) : -1;
    if (!entries || i < 0) return false;
    if (entries.length === 1) this.#byUser.delete(uid);
    else entries.splice(i, 1);
    return true;
  }

  async byUser(uid: string): Promise<SessionRecord[]> {
    const entries = this.#byUser.get(uid);
    if (!entries) return [];
    const now = Date.now();
    const live = entries.filter((e) => e.expiresAt > now);
    if (live.length === 0) this.#byUser.delete(uid);
    else if (live.length < entries.length) this.#byUser.set(uid, live);
    return live.map(recordOf);
  }

  async purgeNode(nodeId: string): Promise<number> {
    let purged = 0;
    for (const [uid, entries] of this.#byUser) {
      const kept = entries.filter((e) => e.nodeId !== nodeId);
      purged += entries.length - kept.length;
      if (kept.length === 0) this.#byUser.delete(uid);
      else if (kept.length < entries.length) this.#byUser.set(uid, kept);
    }
    return purged;
  }

  /** Memory always answers. */
  async ping(): Promise<void> {}

  async close(): Promise<void> {
    this.#byUser.clear();
  }

  #put(record: SessionRecord, expiresAt: number): void {
    const entries = this.#byUser.get(record.uid);
    if (!entries) {
      this.#byUser.set(record.uid, [entryOf(record, expiresAt)]);
      return;
    }
    const i = entries.findIndex((e) => e.sessionId === record.sessionId);
    const existing = entries[i];
    if (existing && sameRecord(existing, record)) existing.expiresAt = expiresAt;
    else if (existing) entries[i] = entryOf(record, expiresAt);
    else entries.push(entryOf(record, expiresAt));
  }
}

/**
 * Written out rather than `{ ...record, expiresAt }`: V8 gave most objects built by that spread
 * a hidden class of their own (about 300 bytes each), this literal shares one.
 */
function entryOf(r: SessionRecord, expiresAt: number): Entry {
  return { sessionId: r.sessionId, uid: r.uid, deviceId: r.deviceId, nodeId: r.nodeId, platform: r.platform, loginAt: r.loginAt, expiresAt };
}

function sameRecord(a: SessionRecord, b: SessionRecord): boolean {
  return a.deviceId === b.deviceId && a.nodeId === b.nodeId && a.platform === b.platform && a.loginAt === b.loginAt;
}

function recordOf(e: Entry): SessionRecord {
  return { sessionId: e.sessionId, uid: e.uid, deviceId: e.deviceId, nodeId: e.nodeId, platform: e.platform, loginAt: e.loginAt };
}
