// In-memory SessionStore: the embedded default, and the reference the Redis store must match.

import { DEFAULT_SESSION_TTL_MS, type SessionRecord, type SessionStore } from './session-store.js';

interface Entry {
  record: SessionRecord;
  expiresAt: number;
}

export class MemorySessionStore implements SessionStore {
  readonly #byUser = new Map<string, Map<string, Entry>>();
  readonly #ttlMs: number;

  constructor({ ttlMs = DEFAULT_SESSION_TTL_MS }: { ttlMs?: number } = {}) {
    this.#ttlMs = ttlMs;
  }

  async add(record: SessionRecord): Promise<void> {
    let sessions = this.#byUser.get(record.uid);
    if (!sessions) this.#byUser.set(record.uid, (sessions = new Map()));
    sessions.set(record.sessionId, { record: { ...record }, expiresAt: Date.now() + this.#ttlMs });
  }

  async refresh(records: readonly SessionRecord[]): Promise<void> {
    for (const record of records) await this.add(record);
  }

  async remove(uid: string, sessionId: string): Promise<boolean> {
    const sessions = this.#byUser.get(uid);
    if (!sessions?.delete(sessionId)) return false;
    if (sessions.size === 0) this.#byUser.delete(uid);
    return true;
  }

  async byUser(uid: string): Promise<SessionRecord[]> {
    const sessions = this.#byUser.get(uid);
    if (!sessions) return [];
    const now = Date.now();
    const out: SessionRecord[] = [];
    for (const [id, entry] of sessions) {
      if (entry.expiresAt <= now) sessions.delete(id);
      else out.push({ ...entry.record });
    }
    if (sessions.size === 0) this.#byUser.delete(uid);
    return out;
  }

  async purgeNode(nodeId: string): Promise<number> {
    let purged = 0;
    for (const [uid, sessions] of this.#byUser) {
      for (const [id, { record }] of sessions) {
        if (record.nodeId === nodeId) {
          sessions.delete(id);
          purged++;
        }
      }
      if (sessions.size === 0) this.#byUser.delete(uid);
    }
    return purged;
  }

  async close(): Promise<void> {
    this.#byUser.clear();
  }
}
