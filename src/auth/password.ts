// Passwords and user names of accounts: scrypt hashing (Node's crypto.scrypt, which runs on the
// libuv threadpool and so never blocks the event loop) in a self-describing encoding, and the
// rules a new user name and password must pass. The gate hashes at sign-up and verifies at login.
//
//   scrypt$<N>$<r>$<p>$<salt, base64>$<key, base64>      e.g. scrypt$131072$8$1$q2x...$Zk9...
//
// N, r and p are decimal; salt and key are standard base64 without padding, and the key length
// is the decoded key's length. Because every hash records its own parameters, the defaults can
// be raised later and old hashes still verify (PasswordHasher.needsRehash says which to redo).
//
// Cost: at the OWASP defaults one hash holds 128 MiB (128·N·r bytes) and one threadpool thread
// for a few hundred milliseconds. libuv has 4 threads by default, shared with fs and dns.lookup,
// so whoever calls this on untrusted input (the gate) must bound how many run at once.

import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto';
import { SwitchboardError } from '../errors.js';

export interface ScryptParams {
  /** CPU/memory cost: a power of two. */
  N: number;
  /** Block size. */
  r: number;
  /** Parallelism. */
  p: number;
  /** Derived key length in bytes (default 64). */
  keyLength?: number;
  /** Random salt length in bytes (default 16). */
  saltLength?: number;
}

/** OWASP Password Storage Cheat Sheet: N=2^17, r=8, p=1 (128 MiB per hash). */
export const OWASP_SCRYPT_PARAMS: Readonly<Required<ScryptParams>> = Object.freeze({ N: 2 ** 17, r: 8, p: 1, keyLength: 64, saltLength: 16 });

// What a stored hash may ask for. Wider than anything we write, so the defaults can be raised,
// but bounded, so a corrupt or tampered record is rejected as malformed instead of making
// verifyPassword allocate gigabytes or run for minutes. The key minimum matters: scrypt ends in
// PBKDF2, whose shorter outputs are prefixes of longer ones, so a truncated key still verifies;
// the minimum keeps whatever verifies at 128 bits or more.
const LIMITS = {
  maxN: 2 ** 22,
  maxR: 32,
  maxP: 16,
  maxMemory: 1024 * 1024 * 1024,
  minKey: 16,
  maxKey: 256,
  minSalt: 8,
  maxSalt: 256,
} as const;

const SCHEME = 'scrypt';

/** Password rule: 8 to 1024 bytes once encoded as UTF-8, and well-formed Unicode. */
export const MIN_PASSWORD_BYTES = 8;
export const MAX_PASSWORD_BYTES = 1024;

/** User name rule: 3 to 32 characters of a-z, 0-9, '_', '.', '-'; upper case is folded to lower. */
export const MIN_USERNAME_LENGTH = 3;
export const MAX_USERNAME_LENGTH = 32;
const USERNAME = /^[A-Za-z0-9_.-]{3,32}$/;
// In a /u regex a surrogate pair is one code point, so only a lone surrogate is in \p{Cs}.
const LONE_SURROGATE = /\p{Cs}/u;

/**
 * Checks a new password against the policy and throws SB_ERR_BAD_PASSWORD if it fails.
 *
 * The rule: at least 8 and at most 1024 bytes in UTF-8. The minimum follows NIST SP 800-63B;
 * the maximum bounds the work a request can cause (no truncation: every byte counts) and is
 * far above any passphrase. No composition rules (NIST advises against them). A string with a
 * lone UTF-16 surrogate is refused: UTF-8 encoding would replace it with U+FFFD, so distinct
 * strings would hash alike. The password is hashed exactly as given, without trimming or
 * Unicode normalisation.
 */
export function checkPassword(password: unknown): asserts password is string {
  if (typeof password !== 'string') throw new SwitchboardError('SB_ERR_BAD_PASSWORD', 'password must be a string');
  if (LONE_SURROGATE.test(password)) throw new SwitchboardError('SB_ERR_BAD_PASSWORD', 'password is not well-formed Unicode');
  const bytes = Buffer.byteLength(password, 'utf8');
  if (bytes < MIN_PASSWORD_BYTES) throw new SwitchboardError('SB_ERR_BAD_PASSWORD', `password must be at least ${MIN_PASSWORD_BYTES} bytes`);
  if (bytes > MAX_PASSWORD_BYTES) throw new SwitchboardError('SB_ERR_BAD_PASSWORD', `password must be at most ${MAX_PASSWORD_BYTES} bytes`);
}

/**
 * Checks a user name and returns it normalised to lower case; throws SB_ERR_BAD_USERNAME
 * unless it is 3 to 32 characters of [A-Za-z0-9_.-]. The check runs before folding, so
 * non-ASCII letters that lower-case to ASCII (the Kelvin sign K → k) are refused, not
 * folded. The normalised name is the user's uid everywhere (see UserStore).
 */
export function checkUsername(name: unknown): string {
  if (typeof name !== 'string') throw new SwitchboardError('SB_ERR_BAD_USERNAME', 'user name must be a string');
  if (!USERNAME.test(name)) {
    throw new SwitchboardError('SB_ERR_BAD_USERNAME', `user name must be ${MIN_USERNAME_LENGTH} to ${MAX_USERNAME_LENGTH} characters of a-z, 0-9, '_', '.', '-'`);
  }
  return name.toLowerCase();
}

/**
 * The uid `name` addresses: checkUsername's result, or undefined where it would throw. For the
 * chat hot path: one pass over the characters, no exception, and no new string unless the name
 * has an upper-case letter.
 */
export function normalizeUsername(name: string): string | undefined {
  const length = name.length;
  if (length < MIN_USERNAME_LENGTH || length > MAX_USERNAME_LENGTH) return undefined;
  let upper = false;
  for (let i = 0; i < length; i++) {
    const c = name.charCodeAt(i);
    if ((c >= 0x61 && c <= 0x7a) || (c >= 0x30 && c <= 0x39) || c === 0x5f || c === 0x2e || c === 0x2d) continue; // a-z 0-9 _ . -
    if (c >= 0x41 && c <= 0x5a) upper = true; // A-Z
    else return undefined;
  }
  return upper ? name.toLowerCase() : name;
}

/** Hashes and verifies passwords with fixed scrypt parameters. */
export class PasswordHasher {
  readonly params: Readonly<Required<ScryptParams>>;

  /** Throws SB_ERR_CONFIG for parameters scrypt would refuse or that exceed the limits. */
  constructor(params: ScryptParams = OWASP_SCRYPT_PARAMS) {
    const full = { ...params, keyLength: params.keyLength ?? OWASP_SCRYPT_PARAMS.keyLength, saltLength: params.saltLength ?? OWASP_SCRYPT_PARAMS.saltLength };
    const problem = paramsProblem(full.N, full.r, full.p, full.keyLength, full.saltLength);
    if (problem) throw new SwitchboardError('SB_ERR_CONFIG', `invalid scrypt parameters: ${problem}`);
    this.params = Object.freeze(full);
  }

  /** Hashes with a fresh random salt. The password is not checked against the policy here. */
  async hash(password: string): Promise<string> {
    const { N, r, p, keyLength, saltLength } = this.params;
    const salt = randomBytes(saltLength);
    const key = await derive(password, salt, keyLength, N, r, p);
    return [SCHEME, N, r, p, b64(salt), b64(key)].join('$');
  }

  /** See verifyPassword: the parameters come from `encoded`, not from this hasher. */
  verify(password: string, encoded: string): Promise<boolean> {
    return verifyPassword(password, encoded);
  }

  /** True when `encoded` is malformed or was made with other parameters than this hasher's. */
  needsRehash(encoded: string): boolean {
    const parsed = parse(encoded);
    if (!parsed) return true;
    const { N, r, p, keyLength, saltLength } = this.params;
    return parsed.N !== N || parsed.r !== r || parsed.p !== p || parsed.key.length !== keyLength || parsed.salt.length !== saltLength;
  }
}

/** Hashes with `params` (default: OWASP) and a fresh random salt. */
export async function hashPassword(password: string, params: ScryptParams = OWASP_SCRYPT_PARAMS): Promise<string> {
  return new PasswordHasher(params).hash(password);
}

/**
 * True when `password` matches `encoded`, using the parameters recorded in it. Resolves false
 * for a wrong password and for an encoding that is malformed or asks for parameters beyond
 * the limits; the final comparison is constant-time. Rejects only if scrypt itself fails on
 * parameters that passed the checks (e.g. the process is out of memory).
 */
export async function verifyPassword(password: string, encoded: string): Promise<boolean> {
  if (typeof password !== 'string') return false;
  const parsed = parse(encoded);
  if (!parsed) return false;
  const key = await derive(password, parsed.salt, parsed.key.length, parsed.N, parsed.r, parsed.p);
  return timingSafeEqual(key, parsed.key);
}

interface Parsed {
  N: number;
  r: number;
  p: number;
  salt: Buffer;
  key: Buffer;
}

const DECIMAL = /^[1-9][0-9]{0,9}$/;

function parse(encoded: unknown): Parsed | undefined {
  if (typeof encoded !== 'string' || encoded.length > 2048) return undefined;
  const parts = encoded.split('$');
  if (parts.length !== 6 || parts[0] !== SCHEME) return undefined;
  const [, n, r, p, salt, key] = parts as [string, string, string, string, string, string];
  if (!DECIMAL.test(n) || !DECIMAL.test(r) || !DECIMAL.test(p)) return undefined;
  const saltBytes = unb64(salt);
  const keyBytes = unb64(key);
  if (!saltBytes || !keyBytes) return undefined;
  const parsed = { N: Number(n), r: Number(r), p: Number(p), salt: saltBytes, key: keyBytes };
  if (paramsProblem(parsed.N, parsed.r, parsed.p, keyBytes.length, saltBytes.length)) return undefined;
  return parsed;
}

function paramsProblem(N: number, r: number, p: number, keyLength: number, saltLength: number): string | undefined {
  const int = (x: number) => Number.isSafeInteger(x) && x > 0;
  if (!int(N) || N < 2 || N > LIMITS.maxN || (N & (N - 1)) !== 0) return `N must be a power of two from 2 to ${LIMITS.maxN}`;
  if (!int(r) || r > LIMITS.maxR) return `r must be 1 to ${LIMITS.maxR}`;
  if (!int(p) || p > LIMITS.maxP) return `p must be 1 to ${LIMITS.maxP}`;
  if (scryptMemory(N, r, p) > LIMITS.maxMemory) return `N, r and p need more than ${LIMITS.maxMemory} bytes`;
  if (!int(keyLength) || keyLength < LIMITS.minKey || keyLength > LIMITS.maxKey) return `key length must be ${LIMITS.minKey} to ${LIMITS.maxKey} bytes`;
  if (!int(saltLength) || saltLength < LIMITS.minSalt || saltLength > LIMITS.maxSalt) return `salt length must be ${LIMITS.minSalt} to ${LIMITS.maxSalt} bytes`;
  return undefined;
}

/** The memory OpenSSL's scrypt allocates, which Node compares with `maxmem`: 128·r·(N + p + 2). */
function scryptMemory(N: number, r: number, p: number): number {
  return 128 * r * (N + p + 2);
}

function derive(password: string, salt: Buffer, keyLength: number, N: number, r: number, p: number): Promise<Buffer> {
  const options: ScryptOptions = { N, r, p, maxmem: scryptMemory(N, r, p) };
  return new Promise((resolve, reject) => {
    scrypt(password, salt, keyLength, options, (err, key) => (err ? reject(err) : resolve(key)));
  });
}

function b64(bytes: Buffer): string {
  return bytes.toString('base64').replace(/=+$/, '');
}

/** Strict decoding: Buffer.from ignores stray characters, so the text must re-encode to itself. */
function unb64(text: string): Buffer | undefined {
  if (text.length === 0) return undefined;
  const bytes = Buffer.from(text, 'base64');
  return b64(bytes) === text ? bytes : undefined;
}
