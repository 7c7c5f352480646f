// Access tokens: an HMAC-SHA256 signature over user id, device id, issue time and expiry, so a
// worker can verify a login with nothing but the signing keys. Minted by the gate (and
// `switchboard token`). Formats:
//
//   sb2.<base64url(JSON {k, u, d, i, e})>.<base64url(HMAC(key k, "sb2." + payload))>   minted now
//   sb1.<base64url(JSON {u, d, e})>.<base64url(HMAC(key "default", "sb1." + payload))> still verified
//
// `k` names the key (a TokenKeys id), so several keys can be accepted at once while one signs:
// a secret is rotated with no outage (OPERATIONS.md, "Rotating the token keys"). `i` is the issue
// time, which revocations compare against (a token issued before its user's or device's
// revocation is refused); an sb1 token has none and counts as issued at 0. `d` = "*" binds the
// token to any device of that user (development tokens only).

import { createHmac, timingSafeEqual } from 'node:crypto';
import { SwitchboardError } from '../errors.js';

const PREFIX = 'sb2';
const LEGACY_PREFIX = 'sb1';
export const ANY_DEVICE = '*';
/** The key id of `--secret`: the only key sb1 tokens verify with. */
export const DEFAULT_KEY_ID = 'default';

/** The secret every command falls back to; its use is logged as a warning. */
export const DEV_SECRET = 'switchboard-development-secret';

/** The latest time a Date can hold (ms since the epoch): no expiry may lie beyond it. */
const MAX_DATE_MS = 8.64e15;
/** What a key id may be: short, and safe in a log line and a file of `kid secret` lines. */
const KEY_ID = /^[A-Za-z0-9_.-]{1,32}$/;

export interface TokenClaims {
  uid: string;
  deviceId: string;
  /** Expiry, milliseconds since the epoch. */
  expiresAt: number;
  /** Issue time, milliseconds since the epoch; 0 for an sb1 token (it carries none). */
  issuedAt: number;
  /** The id of the key that signed it (`default` for sb1). */
  keyId: string;
}

export interface MintOptions {
  uid: string;
  deviceId?: string;
  ttlMs: number;
  now?: number;
}

/** Several keys by id, one of which signs: `--token-keys`, or `--secret` as the one key `default`. */
export interface TokenKeys {
  /** The id of the key new tokens are signed with; must be among `keys`. */
  signing: string;
  /** Every key accepted, by id. */
  keys: Readonly<Record<string, string>>;
}

/** One secret as a key ring: the key `default`, which signs. */
export function singleKey(secret: string): TokenKeys {
  return { signing: DEFAULT_KEY_ID, keys: { [DEFAULT_KEY_ID]: secret } };
}

/** What TokenSigner refuses (SB_ERR_CONFIG), for a caller that checks before building anything. */
export function checkTokenSecret(secret: string | TokenKeys): void {
  const keys = typeof secret === 'string' ? singleKey(secret) : secret;
  const ids = Object.keys(keys.keys);
  if (ids.length === 0) throw new SwitchboardError('SB_ERR_CONFIG', 'token keys: at least one key is needed');
  for (const id of ids) {
    if (!KEY_ID.test(id)) throw new SwitchboardError('SB_ERR_CONFIG', `token key id ${JSON.stringify(id)} must be 1 to 32 of A-Z a-z 0-9 _ . -`);
    if (keys.keys[id]!.length === 0) throw new SwitchboardError('SB_ERR_CONFIG', `token key ${id}: the secret must not be empty`);
  }
  if (!Object.hasOwn(keys.keys, keys.signing)) throw new SwitchboardError('SB_ERR_CONFIG', `token keys: the signing key ${JSON.stringify(keys.signing)} is not among them (${ids.join(', ')})`);
}

export class TokenSigner {
  readonly #keys: Map<string, Buffer>;
  readonly #signing: string;

  constructor(secret: string | TokenKeys) {
    checkTokenSecret(secret);
    const keys = typeof secret === 'string' ? singleKey(secret) : secret;
    this.#keys = new Map(Object.entries(keys.keys).map(([id, s]) => [id, Buffer.from(s, 'utf8')]));
    this.#signing = keys.signing;
  }

  /** The id new tokens are signed with. */
  get signingKeyId(): string {
    return this.#signing;
  }

  /** The ids of every accepted key. */
  get keyIds(): string[] {
    return [...this.#keys.keys()];
  }

  mint({ uid, deviceId = ANY_DEVICE, ttlMs, now = Date.now() }: MintOptions): string {
    if (uid.length === 0) throw new SwitchboardError('SB_ERR_CONFIG', 'token user id must not be empty');
    const expiresAt = now + ttlMs;
    // Past this, the expiry is no time at all: verify() could neither compare nor print it.
    if (!Number.isFinite(expiresAt) || Math.abs(expiresAt) > MAX_DATE_MS) throw new SwitchboardError('SB_ERR_CONFIG', `token lifetime ${ttlMs} ms is out of range`);
    const payload = Buffer.from(JSON.stringify({ k: this.#signing, u: uid, d: deviceId, i: now, e: expiresAt })).toString('base64url');
    return `${PREFIX}.${payload}.${sign(this.#keys.get(this.#signing)!, PREFIX, payload)}`;
  }

  /**
   * Checks signature and expiry and returns the claims. Throws SB_ERR_NO_TOKEN,
   * SB_ERR_TOKEN_INVALID (also for a key id not among the keys: a retired key) or SB_ERR_TOKEN_EXPIRED.
   */
  verify(token: string | undefined, now = Date.now()): TokenClaims {
    if (!token) throw new SwitchboardError('SB_ERR_NO_TOKEN');
    const parts = token.split('.');
    const prefix = parts[0];
    if (parts.length !== 3 || (prefix !== PREFIX && prefix !== LEGACY_PREFIX)) throw new SwitchboardError('SB_ERR_TOKEN_INVALID', 'token is not an sb2 (or sb1) token');
    const payload = parts[1]!;
    // The key id is read before the signature is checked (it says which key to check with):
    // nothing else of the payload is trusted until then.
    const claims = parsePayload(payload);
    const keyId = prefix === LEGACY_PREFIX ? DEFAULT_KEY_ID : claims.k;
    if (typeof keyId !== 'string') throw new SwitchboardError('SB_ERR_TOKEN_INVALID', 'token payload names no key id (k)');
    const key = this.#keys.get(keyId);
    if (!key) throw new SwitchboardError('SB_ERR_TOKEN_INVALID', `token is signed with unknown key id ${JSON.stringify(keyId.slice(0, 40))} (a retired key, or another cluster's)`);
    // Compare the text, not the decoded bytes: base64url decoding ignores stray characters and
    // the unused low bits of the last one, so altered signatures would decode to the same bytes.
    const given = Buffer.from(parts[2]!, 'utf8');
    const expected = Buffer.from(sign(key, prefix, payload), 'utf8');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
      throw new SwitchboardError('SB_ERR_TOKEN_INVALID', 'token signature does not verify');
    }
    const issuedAt = prefix === LEGACY_PREFIX ? 0 : claims.i;
    if (typeof claims.u !== 'string' || typeof claims.d !== 'string' || typeof claims.e !== 'number' || typeof issuedAt !== 'number') {
      throw new SwitchboardError('SB_ERR_TOKEN_INVALID', prefix === LEGACY_PREFIX ? 'token payload lacks u, d or e' : 'token payload lacks u, d, i or e');
    }
    if (claims.e <= now) throw new SwitchboardError('SB_ERR_TOKEN_EXPIRED', `token expired at ${new Date(claims.e).toISOString()}`);
    return { uid: claims.u, deviceId: claims.d, expiresAt: claims.e, issuedAt, keyId };
  }

  /** Verifies the token and that it was issued for this user and device. */
  verifyFor(token: string | undefined, uid: string, deviceId: string, now = Date.now()): TokenClaims {
    const claims = this.verify(token, now);
    if (claims.uid !== uid) throw new SwitchboardError('SB_ERR_TOKEN_MISMATCH', 'token was issued for another user');
    if (claims.deviceId !== ANY_DEVICE && claims.deviceId !== deviceId) {
      throw new SwitchboardError('SB_ERR_TOKEN_MISMATCH', 'token was issued for another device');
    }
    return claims;
  }
}

function sign(key: Buffer, prefix: string, payload: string): string {
  return createHmac('sha256', key).update(`${prefix}.${payload}`).digest('base64url');
}

function parsePayload(payload: string): { k?: unknown; u?: unknown; d?: unknown; i?: unknown; e?: unknown } {
  let claims: unknown;
  try {
    claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
  } catch (err) {
    throw new SwitchboardError('SB_ERR_TOKEN_INVALID', 'token payload is not JSON', { cause: err });
  }
  if (typeof claims !== 'object' || claims === null) throw new SwitchboardError('SB_ERR_TOKEN_INVALID', 'token payload is not an object');
  return claims as Record<string, unknown>;
}

/**
 * `--token-keys` file text: one key per line, `<kid> <secret>`; blank lines and lines starting
 * with `#` are skipped. The signing key is `signing` (`--token-signing-key`), default the first.
 */
export function parseTokenKeys(text: string, signing?: string): TokenKeys {
  // No prototype: a key id may be any name, `__proto__` too.
  const keys: Record<string, string> = Object.create(null) as Record<string, string>;
  let first: string | undefined;
  text.split(/\r?\n/).forEach((raw, i) => {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) return;
    const match = /^(\S+)\s+(\S+)$/.exec(line);
    if (!match) throw new SwitchboardError('SB_ERR_CONFIG', `token keys line ${i + 1}: expected "<key id> <secret>"`);
    const [, id, secret] = match as unknown as [string, string, string];
    if (Object.hasOwn(keys, id)) throw new SwitchboardError('SB_ERR_CONFIG', `token keys line ${i + 1}: key id ${id} is listed twice`);
    keys[id] = secret;
    first ??= id;
  });
  const ring = { signing: signing ?? first ?? '', keys };
  checkTokenSecret(ring);
  return ring;
}
