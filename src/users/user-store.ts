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

/**
 * One login's chain of refresh tokens (src/gate/refresh-tokens.ts): each refresh replaces the
 * current token by the next generation's; only a hash of the current one is kept.
 */
export interface RefreshFamily {
  /** Random, 128 bits, base64url: named inside the family's tokens. */
  id: string;
  deviceId: string;
  /** The current token's generation: 1 at login, one more per refresh. */
  generation: number;
  createdAt: number;
  /** The last login or refresh; with `idleMs` the family ends this long after it. */
  usedAt: number;
  /** The absolute end of the family (createdAt + its lifetime): no refresh after it. */
  expiresAt: number;
}

/** Whether a family has ended by `now`: its absolute end, or `idleMs` since its last use. */
export function familyEnded(family: RefreshFamily, now: number, idleMs: number): boolean {
  return now >= family.expiresAt || (idleMs > 0 && now >= family.usedAt + idleMs);
}

export interface NewFamily {
  id: string;
  deviceId: string;
  /** SHA-256 (hex) of the first token. */
  tokenHash: string;
  now: number;
  expiresAt: number;
  /** The user's families are capped at this: the oldest ones beyond it are evicted. */
  maxFamilies: number;
}

export interface FamilyUse {
  /** The generation the presented token names. */
  generation: number;
  /** SHA-256 (hex) of the presented token. */
  tokenHash: string;
  now: number;
  /** The family ends this long after its last use; 0: no idle end. */
  idleMs: number;
  /** rotate: the next generation, whose token hashes to `nextHash`; revoke: the family ends (logout). */
  action: { rotate: string } | 'revoke';
}

/**
 * What a family use came to. `rotated`: the token was the current one, the family moved on
 * (or, for a revoke, ended). `reused`: it named an earlier generation, so it was already used
 * once: the family is revoked (whoever holds its current token is refused too). `invalid`: no
 * such family (never, expired, revoked, evicted), or the token is not its current one: nothing changed.
 */
export type FamilyOutcome = { outcome: 'rotated'; family: RefreshFamily } | { outcome: 'reused'; family: RefreshFamily } | { outcome: 'invalid' };

/** A revocation: tokens of the user (or of one of its devices) issued at or before `before` are refused. */
export interface Revocation {
  uid: string;
  /** Unset: every device of the user. */
  deviceId?: string;
  /** Milliseconds since the epoch. */
  before: number;
}

/** A user's revocations in force: user-wide, and per device. */
export interface Revocations {
  /** 0: none. */
  before: number;
  devices: ReadonlyMap<string, number>;
}

export const NO_REVOCATIONS: Revocations = Object.freeze({ before: 0, devices: new Map<string, number>() });

/** Whether `revocations` cover a token issued at `issuedAt` for `deviceId`. */
export function revokedBy(revocations: Revocations, deviceId: string, issuedAt: number): boolean {
  if (revocations.before > 0 && issuedAt <= revocations.before) return true;
  const device = revocations.devices.get(deviceId);
  return device !== undefined && device > 0 && issuedAt <= device;
}

/** Device revocations kept per user at most; older ones beyond it are dropped (OPERATIONS.md). */
export const MAX_DEVICE_REVOCATIONS = 100;

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
  /**
   * Replaces the account's password hash (a password change); resolves false, changing
   * nothing, when there is no such account.
   */
  setPasswordHash(username: string, passwordHash: string): Promise<boolean>;

  /**
   * Starts a refresh family of the user at generation 1 and, past `maxFamilies`, evicts the
   * oldest (by createdAt); families past their end are dropped on the way. Resolves the ids evicted.
   */
  createFamily(uid: string, family: NewFamily): Promise<string[]>;
  /**
   * Rotates or revokes a family by one of its tokens, atomically: of concurrent uses of one
   * token exactly one is `rotated`, the others find it `reused` (and so revoke the family).
   */
  useFamily(uid: string, familyId: string, use: FamilyUse): Promise<FamilyOutcome>;
  /** The user's live families (past their ends left out), oldest first. */
  families(uid: string, now: number, idleMs: number): Promise<RefreshFamily[]>;
  /** Ends every family of the user; resolves how many there were. */
  revokeFamilies(uid: string): Promise<number>;

  /**
   * Records a revocation (durably: the workers refuse tokens issued before it at every login).
   * A later `before` replaces an earlier one; device revocations older than `keepMs` are dropped,
   * and beyond MAX_DEVICE_REVOCATIONS the oldest are.
   */
  revoke(revocation: Revocation, keepMs: number): Promise<void>;
  /** The revocations of each of `uids` (NO_REVOCATIONS for one without any). */
  revocations(uids: readonly string[]): Promise<Map<string, Revocations>>;

  /** Resolves once the store answers; rejects with SB_ERR_STORE_UNAVAILABLE, in bounded time. */
  ping(): Promise<void>;
  close(): Promise<void>;
}
