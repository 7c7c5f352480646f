// In-memory UserStore: the embedded default, and the reference the Redis store must match.
// A Map, never an object, so names like `__proto__` are ordinary keys.

import { familyEnded, MAX_DEVICE_REVOCATIONS, NO_REVOCATIONS, type FamilyOutcome, type FamilyUse, type NewFamily, type NewUser, type RefreshFamily, type Revocation, type Revocations, type UserRecord, type UserStore } from './user-store.js';

interface StoredFamily extends RefreshFamily {
  tokenHash: string;
}

function publicFamily({ tokenHash: _, ...family }: StoredFamily): RefreshFamily {
  return family;
}

export class MemoryUserStore implements UserStore {
  readonly #users = new Map<string, UserRecord>();
  /** Users who turned receipts off (accounts only: bounded by the accounts). */
  readonly #noReceipts = new Set<string>();
  /** Refresh families per user: at most NewFamily.maxFamilies each. */
  readonly #families = new Map<string, Map<string, StoredFamily>>();
  /** Revocations per user: one user-wide time and at most MAX_DEVICE_REVOCATIONS devices each. */
  readonly #revocations = new Map<string, { before: number; devices: Map<string, number> }>();

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

  async setPasswordHash(username: string, passwordHash: string): Promise<boolean> {
    const user = this.#users.get(username);
    if (!user) return false;
    user.passwordHash = passwordHash;
    return true;
  }

  async createFamily(uid: string, family: NewFamily): Promise<string[]> {
    let families = this.#families.get(uid);
    if (!families) this.#families.set(uid, (families = new Map()));
    for (const [id, f] of families) if (f.expiresAt <= family.now) families.delete(id);
    const { id, deviceId, tokenHash, now, expiresAt } = family;
    families.set(id, { id, deviceId, generation: 1, createdAt: now, usedAt: now, expiresAt, tokenHash });
    const evicted: string[] = [];
    // Oldest first: a Map iterates in insertion order, which is creation order here.
    for (const old of families.keys()) {
      if (families.size <= family.maxFamilies) break;
      families.delete(old);
      evicted.push(old);
    }
    return evicted;
  }

  async useFamily(uid: string, familyId: string, use: FamilyUse): Promise<FamilyOutcome> {
    const families = this.#families.get(uid);
    const family = families?.get(familyId);
    if (!families || !family) return { outcome: 'invalid' };
    if (familyEnded(family, use.now, use.idleMs)) {
      families.delete(familyId);
      return { outcome: 'invalid' };
    }
    if (use.generation < family.generation) {
      families.delete(familyId);
      return { outcome: 'reused', family: publicFamily(family) };
    }
    if (use.generation !== family.generation || use.tokenHash !== family.tokenHash) return { outcome: 'invalid' };
    if (use.action === 'revoke') {
      families.delete(familyId);
      return { outcome: 'rotated', family: publicFamily(family) };
    }
    family.generation++;
    family.tokenHash = use.action.rotate;
    family.usedAt = use.now;
    return { outcome: 'rotated', family: publicFamily(family) };
  }

  async families(uid: string, now: number, idleMs: number): Promise<RefreshFamily[]> {
    return [...(this.#families.get(uid)?.values() ?? [])].filter((f) => !familyEnded(f, now, idleMs)).map(publicFamily);
  }

  async revokeFamilies(uid: string): Promise<number> {
    const n = this.#families.get(uid)?.size ?? 0;
    this.#families.delete(uid);
    return n;
  }

  async revoke({ uid, deviceId, before }: Revocation, keepMs: number): Promise<void> {
    let r = this.#revocations.get(uid);
    if (!r) this.#revocations.set(uid, (r = { before: 0, devices: new Map() }));
    if (deviceId === undefined) {
      r.before = Math.max(r.before, before);
      return;
    }
    // Re-inserted, so the map stays in order of revocation: the oldest is dropped first.
    const at = Math.max(r.devices.get(deviceId) ?? 0, before);
    r.devices.delete(deviceId);
    r.devices.set(deviceId, at);
    for (const [device, time] of r.devices) {
      if (time >= before - keepMs && r.devices.size <= MAX_DEVICE_REVOCATIONS) break;
      r.devices.delete(device);
    }
  }

  async revocations(uids: readonly string[]): Promise<Map<string, Revocations>> {
    return new Map(
      uids.map((uid) => {
        const r = this.#revocations.get(uid);
        return [uid, r ? { before: r.before, devices: new Map(r.devices) } : NO_REVOCATIONS];
      }),
    );
  }

  /** Memory always answers. */
  async ping(): Promise<void> {}

  async close(): Promise<void> {
    this.#users.clear();
    this.#noReceipts.clear();
    this.#families.clear();
    this.#revocations.clear();
  }
}
