// How the workers learn at once that a user or a device was revoked (logout, a password change,
// an operator, a reused refresh token): the gate records the revocation in the UserStore, then
// publishes it here, and every worker closes the matching sessions it holds
// (src/server/revocation-check.ts). At most once, like the group notifier: a message lost here
// (a Redis reconnect) is made good by the workers' periodic check of the store, and at once
// when the notifier reports `missed`. Embedded mode uses MemoryRevocationNotifier; with --redis
// it is Redis pub/sub on `<prefix>revocations`.

import type { Revocation } from './user-store.js';

export interface RevocationListener {
  revoked(revocation: Revocation): void;
  /** Revocations may have been lost (the subscription was down): check every session against the store. */
  missed(): void;
}

export interface RevocationNotifier {
  /** Tells every worker (this process's too). Never throws; a failure is logged. */
  publish(revocation: Revocation): void;
  /** Starts listening; the returned function stops it. */
  subscribe(listener: RevocationListener): () => void;
  close(): Promise<void>;
}

/** One process: revocations go to this process's listeners, after the current tick. */
export class MemoryRevocationNotifier implements RevocationNotifier {
  readonly #listeners = new Set<RevocationListener>();

  publish(revocation: Revocation): void {
    const copy = { ...revocation };
    setImmediate(() => {
      for (const listener of this.#listeners) listener.revoked(copy);
    });
  }

  subscribe(listener: RevocationListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  async close(): Promise<void> {
    this.#listeners.clear();
  }
}
