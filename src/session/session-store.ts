// Where the cluster records which worker holds which session. Embedded mode keeps it in
// memory; cluster mode keeps it in Redis. Both pass test/session/session-store.conformance.ts.
// Records live for `ttlMs` unless refreshed (name-server style): a crashed worker's sessions
// disappear by themselves even if no other worker purges them.

export interface SessionRecord {
  sessionId: string;
  uid: string;
  deviceId: string;
  nodeId: string;
  platform: number;
  loginAt: number;
}

export interface SessionStore {
  /** Records a session. Adding an existing sessionId overwrites it. */
  add(record: SessionRecord): Promise<void>;
  /** Removes one session of a user; resolves false when it was not recorded. */
  remove(uid: string, sessionId: string): Promise<boolean>;
  /** All recorded sessions of a user, in no particular order. */
  byUser(uid: string): Promise<SessionRecord[]>;
  /** Removes every session held by a node (after it left the cluster); resolves the count. */
  purgeNode(nodeId: string): Promise<number>;
  /** Rewrites the records with a fresh time to live (each worker, for its own sessions). */
  refresh(records: readonly SessionRecord[]): Promise<void>;
  /** Resolves once the store answers; rejects with SB_ERR_STORE_UNAVAILABLE, in bounded time. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

/** Default time to live of a session record that is not refreshed. */
export const DEFAULT_SESSION_TTL_MS = 120_000;
