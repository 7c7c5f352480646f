// Where accounts live: the gate creates them at sign-up and reads them at login. Embedded mode
// keeps them in memory; cluster mode keeps them in Redis. Both pass
// test/users/user-store.conformance.ts.
//
// The uid is the user name. The workers (tokens, sessions, inboxes) know a user only by uid, so
// making the uid the normalised user name (checkUsername: lower case, [a-z0-9_.-]{3,32}) needs
// no second lookup and no id allocator, and a token minted by `switchboard token` for a uid
// addresses the same user. The price: a user cannot be renamed without moving their inbox.
// Stores compare names exactly; normalising is the caller's job (pass checkUsername's result).

export interface UserRecord {
  /** Equal to `username`: see above. */
  uid: string;
  username: string;
  /** A verifyPassword encoding (src/auth/password.ts); never the password. */
  passwordHash: string;
  /** Milliseconds since the epoch. */
  createdAt: number;
}

export interface NewUser {
  username: string;
  passwordHash: string;
  createdAt: number;
}

export interface UserStore {
  /**
   * Creates the account; resolves false, changing nothing, when the name is already taken.
   * Atomic: of any number of concurrent creates of one name, exactly one resolves true.
   */
  create(user: NewUser): Promise<boolean>;
  /** The account, or undefined when there is none. The record is a copy. */
  get(username: string): Promise<UserRecord | undefined>;
  /**
   * True when the account exists: what a worker asks before storing a message for a recipient
   * (cheaper than get(), which reads the whole record).
   */
  exists(username: string): Promise<boolean>;
  /** The number of accounts created. */
  count(): Promise<number>;
  /**
   * The user's receipts privacy setting (PROTOCOL.md §14): true, the default, unless the user
   * turned receipts off. A name without an account: true.
   */
  receipts(username: string): Promise<boolean>;
  /** Sets it; resolves false, changing nothing, when there is no such account. */
  setReceipts(username: string, on: boolean): Promise<boolean>;
  /** Resolves once the store answers; rejects with SB_ERR_STORE_UNAVAILABLE, in bounded time. */
  ping(): Promise<void>;
  close(): Promise<void>;
}
