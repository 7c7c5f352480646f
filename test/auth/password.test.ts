// Password hashing (scrypt, self-describing encoding) and the user name and password rules.
// Most tests use cheap parameters (N=2^14); one hashes at the OWASP defaults.

import fc from 'fast-check';
import t, { type Test } from 'tap';
import { scryptSync } from 'node:crypto';
import { checkPassword, checkUsername, hashPassword, normalizeUsername, OWASP_SCRYPT_PARAMS, PasswordHasher, verifyPassword, type ScryptParams } from '../../src/auth/password.js';
import { SwitchboardError, type ErrorCode } from '../../src/errors.js';

const CHEAP: ScryptParams = { N: 2 ** 14, r: 8, p: 1 };
const cheap = new PasswordHasher(CHEAP);
const PASSWORD = 'correct horse battery staple';
const B64 = '[A-Za-z0-9+/]';

function throwsCode(t: Test, fn: () => unknown, code: ErrorCode, message: string): void {
  let err: unknown;
  try {
    fn();
  } catch (e) {
    err = e;
  }
  t.ok(err instanceof SwitchboardError, `${message}: a SwitchboardError`);
  t.equal((err as SwitchboardError | undefined)?.code, code, `${message}: ${code}`);
}

function parts(encoded: string) {
  const [scheme, N, r, p, salt, key] = encoded.split('$') as [string, string, string, string, string, string];
  return { scheme, N, r, p, salt, key, saltBytes: Buffer.from(salt, 'base64'), keyBytes: Buffer.from(key, 'base64') };
}

t.test('OWASP defaults: N=2^17, r=8, p=1, 64-byte key, 16-byte salt, recorded in the encoding', async (t) => {
  t.same({ ...OWASP_SCRYPT_PARAMS }, { N: 131072, r: 8, p: 1, keyLength: 64, saltLength: 16 });
  const started = process.hrtime.bigint();
  const encoded = await hashPassword(PASSWORD);
  const ms = Number(process.hrtime.bigint() - started) / 1e6;
  t.comment(`one OWASP scrypt hash took ${ms.toFixed(0)} ms`);
  // 16 bytes are 22 base64 characters unpadded, 64 bytes are 86.
  t.match(encoded, new RegExp(`^scrypt\\$131072\\$8\\$1\\$${B64}{22}\\$${B64}{86}$`));
  t.equal(await verifyPassword(PASSWORD, encoded), true);
  t.equal(new PasswordHasher().needsRehash(encoded), false);
  t.same(new PasswordHasher().params, OWASP_SCRYPT_PARAMS, 'the class defaults to OWASP too');
});

t.test('round trip with cheap parameters', async (t) => {
  const encoded = await cheap.hash(PASSWORD);
  t.match(encoded, new RegExp(`^scrypt\\$16384\\$8\\$1\\$${B64}{22}\\$${B64}{86}$`));
  t.equal(await cheap.verify(PASSWORD, encoded), true);
  t.equal(await verifyPassword(PASSWORD, encoded), true, 'the free function reads the parameters from the encoding');
  t.equal(cheap.needsRehash(encoded), false);
});

t.test('a wrong password resolves false', async (t) => {
  const encoded = await cheap.hash(PASSWORD);
  for (const wrong of ['', 'correct horse battery stapl', 'correct horse battery staple ', 'Correct horse battery staple', 'correct\u00a0horse battery staple', 'x'.repeat(2000)]) {
    t.equal(await verifyPassword(wrong, encoded), false, JSON.stringify(wrong.slice(0, 40)));
  }
});

t.test('unicode passwords are hashed as UTF-8 without normalisation', async (t) => {
  const nfc = 'pässwörd-\u00e9';
  const nfd = nfc.normalize('NFD');
  const encoded = await cheap.hash(nfc);
  t.equal(await verifyPassword(nfc, encoded), true);
  t.equal(await verifyPassword(nfd, encoded), false, 'NFD is a different byte string');
  const emoji = await cheap.hash('🔑🔑🔑🔑');
  t.equal(await verifyPassword('🔑🔑🔑🔑', emoji), true);
});

t.test('every hash has its own random salt', async (t) => {
  const hashes = await Promise.all(Array.from({ length: 8 }, () => cheap.hash(PASSWORD)));
  t.equal(new Set(hashes.map((h) => parts(h).salt)).size, hashes.length, 'distinct salts');
  t.equal(new Set(hashes.map((h) => parts(h).key)).size, hashes.length, 'distinct keys');
  for (const h of hashes) t.equal(await verifyPassword(PASSWORD, h), true);
});

t.test('parameters are recorded and honoured', async (t) => {
  const params = { N: 1024, r: 4, p: 2, keyLength: 32, saltLength: 24 };
  const encoded = await new PasswordHasher(params).hash(PASSWORD);
  const { scheme, N, r, p, saltBytes, keyBytes } = parts(encoded);
  t.same([scheme, N, r, p], ['scrypt', '1024', '4', '2']);
  t.equal(saltBytes.length, 24);
  t.equal(keyBytes.length, 32);
  t.same(keyBytes, scryptSync(PASSWORD, saltBytes, 32, { N: 1024, r: 4, p: 2 }), 'the key is scrypt with exactly those parameters');
  t.equal(await verifyPassword(PASSWORD, encoded), true);
});

t.test('RFC 7914 test vector verifies (independent of our own hashing)', async (t) => {
  // scrypt(P="pleaseletmein", S="SodiumChloride", N=16384, r=8, p=1, dkLen=64), RFC 7914 §12.
  const key = Buffer.from(
    '7023bdcb3afd7348461c06cd81fd38ebfda8fbba904f8e3ea9b543f6545da1f2d5432955613f0fcf62d49705242a9af9e61e85dc0d651e40dfcf017b45575887',
    'hex',
  );
  const b64 = (b: Buffer) => b.toString('base64').replace(/=+$/, '');
  const encoded = `scrypt$16384$8$1$${b64(Buffer.from('SodiumChloride'))}$${b64(key)}`;
  t.equal(await verifyPassword('pleaseletmein', encoded), true);
  t.equal(await verifyPassword('pleaseletmeout', encoded), false);
});

t.test('old hashes verify after the parameters are raised; needsRehash says so', async (t) => {
  const old = await cheap.hash(PASSWORD);
  const current = new PasswordHasher({ N: 2 ** 15, r: 8, p: 1 });
  t.equal(await current.verify(PASSWORD, old), true, 'a cheap-params hash verifies under a costlier hasher');
  t.equal(current.needsRehash(old), true);
  t.equal(current.needsRehash(await current.hash(PASSWORD)), false);
  t.equal(new PasswordHasher({ ...CHEAP, keyLength: 32 }).needsRehash(old), true, 'key length counts');
  t.equal(current.needsRehash('garbage'), true, 'a malformed encoding needs a new hash');
});

t.test('tampered and malformed encodings resolve false, never throw', async (t) => {
  const encoded = await cheap.hash(PASSWORD);
  const { salt, key } = parts(encoded);
  const flip = (s: string, i: number) => s.slice(0, i) + (s[i] === 'A' ? 'B' : 'A') + s.slice(i + 1);
  const cases: Record<string, unknown> = {
    'key changed': `scrypt$16384$8$1$${salt}$${flip(key, 10)}`,
    'salt changed': `scrypt$16384$8$1$${flip(salt, 3)}$${key}`,
    'N changed': `scrypt$32768$8$1$${salt}$${key}`,
    'r changed': `scrypt$16384$4$1$${salt}$${key}`,
    'p changed': `scrypt$16384$8$2$${salt}$${key}`,
    'key truncated to 15 bytes': `scrypt$16384$8$1$${salt}$${Buffer.from(key, 'base64').subarray(0, 15).toString('base64').replace(/=+$/, '')}`,
    'other scheme': `bcrypt$16384$8$1$${salt}$${key}`,
    'upper-case scheme': `SCRYPT$16384$8$1$${salt}$${key}`,
    'a part missing': `scrypt$16384$8$${salt}$${key}`,
    'an extra part': `${encoded}$x`,
    'trailing newline': `${encoded}\n`,
    'padded base64': `scrypt$16384$8$1$${salt}==$${key}`,
    'base64url characters': `scrypt$16384$8$1$${salt}$${key.replace(/\+/g, '-').replace(/\//g, '_')}${/[+/]/.test(key) ? '' : '-'}`,
    'stray character in the key': `scrypt$16384$8$1$${salt}$${key.slice(0, 20)}*${key.slice(20)}`,
    'empty salt': `scrypt$16384$8$1$$${key}`,
    'empty key': `scrypt$16384$8$1$${salt}$`,
    'N not a power of two': `scrypt$16383$8$1$${salt}$${key}`,
    'N = 1': `scrypt$1$8$1$${salt}$${key}`,
    'N huge (would need 128 GiB)': `scrypt$134217728$8$1$${salt}$${key}`,
    'r huge': `scrypt$16384$100000$1$${salt}$${key}`,
    'p huge': `scrypt$16384$8$1000000$${salt}$${key}`,
    'N with a leading zero': `scrypt$016384$8$1$${salt}$${key}`,
    'N in hex': `scrypt$0x4000$8$1$${salt}$${key}`,
    'N with an exponent': `scrypt$1.6384e4$8$1$${salt}$${key}`,
    'negative r': `scrypt$16384$-8$1$${salt}$${key}`,
    'p = 0': `scrypt$16384$8$0$${salt}$${key}`,
    'N beyond 2^53': `scrypt$18014398509481984$8$1$${salt}$${key}`,
    empty: '',
    'just the scheme': 'scrypt',
    'very long': `scrypt$16384$8$1$${salt}$${'A'.repeat(100_000)}`,
    'not a string (null)': null,
    'not a string (number)': 42,
    'not a string (object)': { toString: () => encoded },
  };
  for (const [name, bad] of Object.entries(cases)) {
    t.equal(await verifyPassword(PASSWORD, bad as string), false, name);
  }
  t.equal(await verifyPassword(undefined as unknown as string, encoded), false, 'a non-string password');
  t.equal(await verifyPassword(PASSWORD, encoded), true, 'the untampered encoding still verifies');
  // scrypt ends in PBKDF2, whose shorter outputs are prefixes of longer ones: a key cut to the
  // 16-byte minimum still verifies (128 bits); below that it is refused as malformed (above).
  const cut = Buffer.from(key, 'base64').subarray(0, 16).toString('base64').replace(/=+$/, '');
  t.equal(await verifyPassword(PASSWORD, `scrypt$16384$8$1$${salt}$${cut}`), true, 'a key cut to 16 bytes is a prefix of the key');
});

t.test('PasswordHasher refuses parameters scrypt would refuse or that exceed the limits', async (t) => {
  const bad: Record<string, ScryptParams> = {
    'N not a power of two': { N: 1000, r: 8, p: 1 },
    'N = 1': { N: 1, r: 8, p: 1 },
    'N too large': { N: 2 ** 23, r: 8, p: 1 },
    'N fractional': { N: 1024.5, r: 8, p: 1 },
    'r = 0': { N: 1024, r: 0, p: 1 },
    'p = 0': { N: 1024, r: 8, p: 0 },
    'p NaN': { N: 1024, r: 8, p: NaN },
    'memory above 1 GiB': { N: 2 ** 21, r: 8, p: 1 },
    'key too short': { N: 1024, r: 8, p: 1, keyLength: 8 },
    'salt too short': { N: 1024, r: 8, p: 1, saltLength: 4 },
  };
  for (const [name, params] of Object.entries(bad)) throwsCode(t, () => new PasswordHasher(params), 'SB_ERR_CONFIG', name);
  await t.rejects(hashPassword(PASSWORD, { N: 3, r: 1, p: 1 }), { code: 'SB_ERR_CONFIG' }, 'hashPassword rejects (a promise), not throws');
});

t.test('password rule: 8 to 1024 UTF-8 bytes, well-formed', async (t) => {
  const good: Record<string, string> = {
    '8 ASCII bytes': '12345678',
    '1024 ASCII bytes': 'a'.repeat(1024),
    'spaces count': '        ',
    '4 characters, 8 bytes (é is 2 bytes)': 'éééé',
    'one emoji pair is 4 bytes': '🔑🔑',
    '512 two-byte characters': 'é'.repeat(512),
    'a well-formed surrogate pair': `pass\u{1F600}word`,
  };
  for (const [name, password] of Object.entries(good)) t.doesNotThrow(() => checkPassword(password), name);

  const bad: Record<string, unknown> = {
    empty: '',
    '7 bytes': '1234567',
    '3 two-byte characters': 'ééé',
    '1025 bytes': 'a'.repeat(1025),
    '513 two-byte characters (1026 bytes)': 'é'.repeat(513),
    'a lone high surrogate': 'password\uD83D',
    'a lone low surrogate': '\uDE00password',
    'not a string': 12345678,
    undefined: undefined,
  };
  for (const [name, password] of Object.entries(bad)) throwsCode(t, () => checkPassword(password), 'SB_ERR_BAD_PASSWORD', name);
});

t.test('user name rule: 3 to 32 of [a-z0-9_.-], folded to lower case', async (t) => {
  const good: [string, string][] = [
    ['alice', 'alice'],
    ['Alice', 'alice'],
    ['ALICE_99', 'alice_99'],
    ['abc', 'abc'],
    ['a.b', 'a.b'],
    ['a-b', 'a-b'],
    ['123', '123'],
    ['...', '...'],
    ['x'.repeat(32), 'x'.repeat(32)],
    ['__proto__', '__proto__'],
    ['constructor', 'constructor'],
    ['hasOwnProperty', 'hasownproperty'],
    ['toString', 'tostring'],
  ];
  for (const [input, normalised] of good) t.equal(checkUsername(input), normalised, `${input} → ${normalised}`);

  const bad: Record<string, unknown> = {
    empty: '',
    '2 characters': 'ab',
    '33 characters': 'x'.repeat(33),
    space: 'al ice',
    'leading space': ' alice',
    'trailing newline': 'alice\n',
    '@': 'al@ce',
    '/': 'a/b',
    ':': 'a:b',
    'hash-tag braces': 'a{b}',
    '$': 'a$b',
    '+': 'a+b',
    'non-ASCII letter': 'ålice',
    'Kelvin sign (lower-cases to k)': '\u212Aelvin',
    'dotted capital I (lower-cases to two code points)': '\u0130stanbul',
    'ligature ﬀ': '\uFB00oo',
    'full-width letters': 'ａｂｃ',
    'NUL': 'abc\u0000',
    'not a string': 12345,
    null: null,
  };
  for (const [name, input] of Object.entries(bad)) throwsCode(t, () => checkUsername(input), 'SB_ERR_BAD_USERNAME', name);
  for (const [input, normalised] of good) t.equal(normalizeUsername(input), normalised, `normalizeUsername: ${input} → ${normalised}`);
  for (const [name, input] of Object.entries(bad)) if (typeof input === 'string') t.equal(normalizeUsername(input), undefined, `normalizeUsername refuses: ${name}`);
});

t.test('normalizeUsername is checkUsername without the throw, on any string', async (t) => {
  const agrees = (name: string) => {
    let expected: string | undefined;
    try {
      expected = checkUsername(name);
    } catch {
      expected = undefined;
    }
    return normalizeUsername(name) === expected;
  };
  // Names near the rule (its alphabet, a few neighbours, any length around the bounds) and any string.
  const near = fc.string({ unit: fc.constantFrom(...'aZz09_.-@AÅ\u212A \u0130'.split('')), minLength: 0, maxLength: 35 });
  fc.assert(fc.property(fc.oneof(near, fc.string({ maxLength: 40 }), fc.string({ unit: 'binary', maxLength: 40 })), agrees), { numRuns: 5000 });
  t.pass('5000 names agree');
});
