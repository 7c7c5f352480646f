// In-memory UserStore: the embedded default, and the reference the Redis store must match.
// A Map, never an object, so names like `__proto__` are ordinary keys.

import type { NewUser, UserRecord, UserStore } from './user-store.js';

export class MemoryUserStore implements UserStore {
  readonly #users = new Map<string, UserRecord>();
  /** Users who turned receipts off (accounts only: bounded by the accounts). */
  readonly #noReceipts = new Set<string>();

  async create({ username, passwordHash, createdAt }: NewUser): Promise<boolean> {
    if (this.#users.has(username)) return false;
    this.#users.set(username, { uid: username, username, passwordHash, createdAt });
    return true;
  }

  async get(username: string): Promise<UserRecord | undefined> {
    const user = this.#users.get(username);
    return user && { ...user };
  }

  async exists(username: string): Promise<boolean> {
    return this.#users.has(username);
  }

  async count(): Promise<number> {
    return this.#users.size;
  }

  async receipts(username: string): Promise<boolean> {
    return !this.#noReceipts.has(username);
  }

  async setReceipts(username: string, on: boolean): Promise<boolean> {
    if (!this.#users.has(username)) return false;
    if (on) this.#noReceipts.delete(username);
    else this.#noReceipts.add(username);
    return true;
  }

  /** Memory always answers. */
  async ping(): Promise<void> {}

  async close(): Promise<void> {
    this.#users.clear();
    this.#noReceipts.clear();
  }
}
