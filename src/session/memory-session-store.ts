// In-memory SessionStore: the embedded default, and the reference the Redis store must match.

import type { SessionRecord, SessionStore } from './session-store.js';

export class MemorySessionStore implements SessionStore {
  readonly #byUser = new Map<string, Map<string, SessionRecord>>();

  async add(record: SessionRecord): Promise<void> {
    let sessions = this.#byUser.get(record.uid);
    if (!sessions) this.#byUser.set(record.uid, (sessions = new Map()));
    sessions.set(record.sessionId, { ...record });
  }

  async remove(uid: string, sessionId: string): Promise<boolean> {
    const sessions = this.#byUser.get(uid);
    if (!sessions?.delete(sessionId)) return false;
    if (sessions.size === 0) this.#byUser.delete(uid);
    return true;
  }

  async byUser(uid: string): Promise<SessionRecord[]> {
    return [...(this.#byUser.get(uid)?.values() ?? [])].map((r) => ({ ...r }));
  }

  async purgeNode(nodeId: string): Promise<number> {
    let purged = 0;
    for (const [uid, sessions] of this.#byUser) {
      for (const [id, record] of sessions) {
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
