// Which recipients a worker stores messages for, when it knows where the accounts live: only
// users who exist, addressed by their uid (the user name in lower case, as the gate makes it),
// so `Alice` reaches alice and a typo or an invented name is refused instead of filling an
// inbox nobody can read. Accounts are never deleted, so a user found once is remembered (a
// bounded set, oldest forgotten first) and the check costs a Set lookup; a name not found is
// never remembered, so a user who registered a moment ago is reachable at once.

import { normalizeUsername } from '../auth/password.js';
import type { UserStore } from '../users/user-store.js';

export class RecipientCheck {
  readonly #users: UserStore;
  readonly #known = new Set<string>();
  readonly #maxKnown: number;

  constructor(users: UserStore, maxKnown: number) {
    this.#users = users;
    this.#maxKnown = Math.max(1, maxKnown);
  }

  /** The uid `name` addresses, or undefined when no account could have it (the user name rule). */
  uidOf(name: string): string | undefined {
    return normalizeUsername(name);
  }

  /** True when `uid` is known to exist: no lookup needed. */
  known(uid: string): boolean {
    return this.#known.has(uid);
  }

  /** Asks the UserStore; remembers a user who exists. Rejects when the store cannot answer. */
  async exists(uid: string): Promise<boolean> {
    const exists = await this.#users.exists(uid);
    if (exists && !this.#known.has(uid)) {
      if (this.#known.size >= this.#maxKnown) this.#known.delete(this.#known.values().next().value!);
      this.#known.add(uid);
    }
    return exists;
  }

  /** Users remembered (for tests and the limits table). */
  get size(): number {
    return this.#known.size;
  }
}
