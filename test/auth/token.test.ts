// TokenSigner: mint/verify, every way a token can be wrong, expiry through the `now`
// parameters, and binding to a user and device.

import t, { type Test } from 'tap';
import fc from 'fast-check';
import { createHmac } from 'node:crypto';
import { ANY_DEVICE, TokenSigner, parseTokenKeys } from '../../src/auth/token.js';
import { SwitchboardError, type ErrorCode } from '../../src/errors.js';
import { catchError } from '../helpers/catch-error.js';

const SECRET = 'test-secret';
const NOW = 1_700_000_000_000;
const signer = new TokenSigner(SECRET);


function throwsCode(t: Test, fn: () => void, code: ErrorCode, message: string): void {
  const err = catchError(fn);
  t.ok(err instanceof SwitchboardError, `${message}: a SwitchboardError`);
  t.equal((err as SwitchboardError | undefined)?.code, code, `${message}: ${code}`);
}

/** A token with an arbitrary payload, correctly signed with `secret` (as a buggy minter might make). */
function signRaw(payloadJson: string, secret = SECRET): string {
  const payload = Buffer.from(payloadJson).toString('base64url');
  const sig = createHmac('sha256', secret).update(`sb1.${payload}`).digest('base64url');
  return `sb1.${payload}.${sig}`;
}

const B64URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

t.test('mint then verify returns the claims', async (t) => {
  const token = signer.mint({ uid: 'alice', deviceId: 'phone-1', ttlMs: 60_000, now: NOW });
  t.match(token, /^sb2\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}$/, 'sb2.<payload>.<HMAC-SHA256>, base64url');
  t.same(JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()), { k: 'default', u: 'alice', d: 'phone-1', i: NOW, e: NOW + 60_000 }, 'the payload: key id, user, device, issued, expiry');
  const claims = { uid: 'alice', deviceId: 'phone-1', expiresAt: NOW + 60_000, issuedAt: NOW, keyId: 'default' };
  t.strictSame(signer.verify(token, NOW), claims);
  t.strictSame(signer.verifyFor(token, 'alice', 'phone-1', NOW), claims);
  t.equal(new TokenSigner(SECRET).verify(token, NOW).uid, 'alice', 'another signer with the same secret accepts it');
  t.equal(signer.verify(signer.mint({ uid: 'bob', ttlMs: 60_000 })).uid, 'bob', 'default clocks');
  t.equal(signer.verify(signer.mint({ uid: 'bob', ttlMs: 1000, now: NOW }), NOW).deviceId, ANY_DEVICE, 'device defaults to "*"');
});

t.test('property: any uid and device id round-trip', async (t) => {
  fc.assert(
    fc.property(fc.string({ unit: 'grapheme', minLength: 1 }), fc.string({ unit: 'grapheme' }), fc.integer({ min: 1, max: 10 ** 10 }), (uid, deviceId, ttlMs) => {
      const claims = signer.verify(signer.mint({ uid, deviceId, ttlMs, now: NOW }), NOW);
      return claims.uid === uid && claims.deviceId === deviceId && claims.expiresAt === NOW + ttlMs;
    }),
    { numRuns: 300 },
  );
  t.pass('claims survive, including "." and non-ASCII in ids');
});

t.test('a token signed with another secret is invalid', async (t) => {
  const token = new TokenSigner('other-secret').mint({ uid: 'alice', ttlMs: 60_000, now: NOW });
  throwsCode(t, () => signer.verify(token, NOW), 'SB_ERR_TOKEN_INVALID', 'verify');
  throwsCode(t, () => signer.verifyFor(token, 'alice', 'phone', NOW), 'SB_ERR_TOKEN_INVALID', 'verifyFor');
});

t.test('a tampered payload is invalid', async (t) => {
  const token = signer.mint({ uid: 'alice', deviceId: 'phone', ttlMs: 60_000, now: NOW });
  const [prefix, payload, sig] = token.split('.') as [string, string, string];
  const forge = (claims: object): string => `${prefix}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.${sig}`;
  throwsCode(t, () => signer.verify(forge({ u: 'admin', d: 'phone', e: NOW + 60_000 }), NOW), 'SB_ERR_TOKEN_INVALID', 'another uid');
  throwsCode(t, () => signer.verify(forge({ u: 'alice', d: '*', e: NOW + 60_000 }), NOW), 'SB_ERR_TOKEN_INVALID', 'widened to any device');
  throwsCode(t, () => signer.verify(forge({ u: 'alice', d: 'phone', e: NOW + 10 ** 12 }), NOW), 'SB_ERR_TOKEN_INVALID', 'extended expiry');
  // Every single-character change of the payload text.
  let accepted = 0;
  for (let i = 0; i < payload.length; i++) {
    const c = B64URL[B64URL.indexOf(payload[i]!) ^ 1]!;
    const tampered = `${prefix}.${payload.slice(0, i)}${c}${payload.slice(i + 1)}.${sig}`;
    const err = catchError(() => signer.verify(tampered, NOW));
    if (!(err instanceof SwitchboardError && err.code === 'SB_ERR_TOKEN_INVALID')) accepted++;
  }
  t.equal(accepted, 0, `all ${payload.length} one-character payload changes are rejected`);
});

t.test('a tampered signature is invalid, including non-canonical spellings of the same bytes', async (t) => {
  const token = signer.mint({ uid: 'alice', ttlMs: 60_000, now: NOW });
  const [prefix, payload, sig] = token.split('.') as [string, string, string];
  const withSig = (s: string): string => `${prefix}.${payload}.${s}`;
  // Flipping the lowest bit of each character: in the last character that bit is padding, so
  // the decoded bytes stay the same; the token text is still not the one that was minted.
  for (let i = 0; i < sig.length; i++) {
    const c = B64URL[B64URL.indexOf(sig[i]!) ^ 1]!;
    throwsCode(t, () => signer.verify(withSig(sig.slice(0, i) + c + sig.slice(i + 1)), NOW), 'SB_ERR_TOKEN_INVALID', `signature char ${i} changed`);
  }
  throwsCode(t, () => signer.verify(withSig(sig.slice(0, -1)), NOW), 'SB_ERR_TOKEN_INVALID', 'truncated signature');
  throwsCode(t, () => signer.verify(withSig(sig + 'A'), NOW), 'SB_ERR_TOKEN_INVALID', 'extended signature');
  throwsCode(t, () => signer.verify(withSig(sig + '='), NOW), 'SB_ERR_TOKEN_INVALID', 'padded signature');
  throwsCode(t, () => signer.verify(withSig(sig + '!'), NOW), 'SB_ERR_TOKEN_INVALID', 'stray character after the signature');
  throwsCode(t, () => signer.verify(withSig(`${sig.slice(0, 10)}\n${sig.slice(10)}`), NOW), 'SB_ERR_TOKEN_INVALID', 'whitespace inside the signature');
  throwsCode(t, () => signer.verify(withSig(Buffer.from(sig, 'base64url').toString('base64')), NOW), 'SB_ERR_TOKEN_INVALID', 'standard base64 spelling');
  throwsCode(t, () => signer.verify(withSig(''), NOW), 'SB_ERR_TOKEN_INVALID', 'empty signature');
  t.equal(signer.verify(withSig(sig), NOW).uid, 'alice', 'the original still verifies');
});

t.test('malformed tokens are invalid', async (t) => {
  const good = signer.mint({ uid: 'alice', ttlMs: 60_000, now: NOW });
  const cases: Record<string, string> = {
    'the uid itself (what original clients send)': 'alice',
    'two parts': good.split('.').slice(0, 2).join('.'),
    'four parts': `${good}.x`,
    'wrong prefix': good.replace(/^sb2/, 'sb3'),
    'sb2 payload under sb1': good.replace(/^sb2/, 'sb1'),
    'no prefix': good.replace(/^sb2/, ''),
    'dots only': '..',
    'a JWT': 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJl',
  };
  for (const [name, token] of Object.entries(cases)) {
    throwsCode(t, () => signer.verify(token, NOW), 'SB_ERR_TOKEN_INVALID', name);
  }
});

t.test('correctly signed payloads without valid claims are invalid, not a crash', async (t) => {
  const payloads: Record<string, string> = {
    'not JSON': 'not json',
    'JSON null': 'null',
    'JSON number': '42',
    'JSON string': '"alice"',
    'JSON array': '[]',
    'no u': JSON.stringify({ d: '*', e: NOW + 1000 }),
    'numeric u': JSON.stringify({ u: 1, d: '*', e: NOW + 1000 }),
    'no d': JSON.stringify({ u: 'alice', e: NOW + 1000 }),
    'string e': JSON.stringify({ u: 'alice', d: '*', e: String(NOW + 1000) }),
    'no e': JSON.stringify({ u: 'alice', d: '*' }),
  };
  for (const [name, json] of Object.entries(payloads)) {
    throwsCode(t, () => signer.verify(signRaw(json), NOW), 'SB_ERR_TOKEN_INVALID', name);
  }
  const notJson = catchError(() => signer.verify(signRaw('not json'), NOW));
  t.ok((notJson as Error).cause instanceof SyntaxError, 'the JSON error is kept as cause');
  t.equal(signer.verify(signRaw(JSON.stringify({ u: 'alice', d: '*', e: NOW + 1000 })), NOW).uid, 'alice', 'the same helper signs valid tokens');
});

t.test('fuzz: garbage strings throw a SwitchboardError, never anything else', async (t) => {
  const b64 = fc.string({ unit: fc.constantFrom(...B64URL.split('')), maxLength: 60 });
  const garbage = fc.oneof(
    fc.string(),
    fc.string({ unit: 'binary' }),
    fc.tuple(b64, b64).map(([p, s]) => `sb1.${p}.${s}`),
    fc.string({ unit: 'grapheme' }).map((j) => `sb1.${Buffer.from(j).toString('base64url')}.${'A'.repeat(43)}`),
    fc.array(fc.constantFrom('sb1', '.', 'A', '=', '-', '_', '{', '"'), { maxLength: 20 }).map((a) => a.join('')),
  );
  fc.assert(
    fc.property(garbage, (token) => {
      const err = catchError(() => signer.verify(token, NOW));
      if (!(err instanceof SwitchboardError)) return false;
      return token === '' ? err.code === 'SB_ERR_NO_TOKEN' : err.code === 'SB_ERR_TOKEN_INVALID';
    }),
    { numRuns: 1000 },
  );
  t.pass('every garbage token was rejected with a typed error');
});

t.test('expiry is checked against the `now` parameter', async (t) => {
  const token = signer.mint({ uid: 'alice', deviceId: 'phone', ttlMs: 500, now: 1000 });
  t.equal(signer.verify(token, 1000).expiresAt, 1500);
  t.equal(signer.verify(token, 1499).uid, 'alice', 'valid until the last millisecond');
  throwsCode(t, () => signer.verify(token, 1500), 'SB_ERR_TOKEN_EXPIRED', 'at expiresAt');
  throwsCode(t, () => signer.verify(token, NOW), 'SB_ERR_TOKEN_EXPIRED', 'long after');
  throwsCode(t, () => signer.verifyFor(token, 'alice', 'phone', 1500), 'SB_ERR_TOKEN_EXPIRED', 'verifyFor');
  throwsCode(t, () => signer.verify(signer.mint({ uid: 'alice', ttlMs: 0, now: NOW }), NOW), 'SB_ERR_TOKEN_EXPIRED', 'ttl 0');
});

t.test('a missing token is SB_ERR_NO_TOKEN', async (t) => {
  throwsCode(t, () => signer.verify(undefined, NOW), 'SB_ERR_NO_TOKEN', 'undefined');
  throwsCode(t, () => signer.verify('', NOW), 'SB_ERR_NO_TOKEN', 'empty string (proto3 default of an absent token)');
  throwsCode(t, () => signer.verifyFor(undefined, 'alice', 'phone', NOW), 'SB_ERR_NO_TOKEN', 'verifyFor undefined');
  throwsCode(t, () => signer.verifyFor('', 'alice', 'phone', NOW), 'SB_ERR_NO_TOKEN', 'verifyFor empty');
});

t.test('verifyFor binds the token to its user and device', async (t) => {
  const token = signer.mint({ uid: 'alice', deviceId: 'phone', ttlMs: 60_000, now: NOW });
  t.equal(signer.verifyFor(token, 'alice', 'phone', NOW).uid, 'alice');
  throwsCode(t, () => signer.verifyFor(token, 'bob', 'phone', NOW), 'SB_ERR_TOKEN_MISMATCH', 'another uid');
  throwsCode(t, () => signer.verifyFor(token, 'Alice', 'phone', NOW), 'SB_ERR_TOKEN_MISMATCH', 'uid differs in case');
  throwsCode(t, () => signer.verifyFor(token, 'alice', 'tablet', NOW), 'SB_ERR_TOKEN_MISMATCH', 'another device');
  throwsCode(t, () => signer.verifyFor(token, 'alice', ANY_DEVICE, NOW), 'SB_ERR_TOKEN_MISMATCH', 'a client claiming device "*"');
  throwsCode(t, () => signer.verifyFor(token, 'alice', '', NOW), 'SB_ERR_TOKEN_MISMATCH', 'empty device id');
});

t.test('a "*" device token is valid for any device of its user only', async (t) => {
  const token = signer.mint({ uid: 'alice', deviceId: ANY_DEVICE, ttlMs: 60_000, now: NOW });
  for (const device of ['phone', 'tablet', '', ANY_DEVICE]) {
    t.strictSame(signer.verifyFor(token, 'alice', device, NOW), { uid: 'alice', deviceId: ANY_DEVICE, expiresAt: NOW + 60_000, issuedAt: NOW, keyId: 'default' }, `device ${JSON.stringify(device)}`);
  }
  throwsCode(t, () => signer.verifyFor(token, 'bob', 'phone', NOW), 'SB_ERR_TOKEN_MISMATCH', 'another uid');
});

t.test('empty secret and empty uid are configuration errors', async (t) => {
  throwsCode(t, () => new TokenSigner(''), 'SB_ERR_CONFIG', 'empty secret');
  throwsCode(t, () => signer.mint({ uid: '', ttlMs: 1000 }), 'SB_ERR_CONFIG', 'empty uid');
});

t.test('an expiry beyond what a Date holds is a configuration error, not a token', async (t) => {
  const signer = new TokenSigner(SECRET);
  for (const ttlMs of [1e15 * 1000, Number.POSITIVE_INFINITY, Number.NaN, 8.64e15]) {
    t.match(catchError(() => signer.mint({ uid: 'alice', ttlMs, now: 1_000 })), { code: 'SB_ERR_CONFIG' }, `ttlMs ${ttlMs}`);
  }
  const longest = signer.mint({ uid: 'alice', ttlMs: 8.64e15 - 1_000, now: 1_000 });
  t.equal(signer.verify(longest, 2_000).expiresAt, 8.64e15, 'the latest Date is still an expiry');
});

t.test('sb1 tokens (the earlier format) still verify with the secret, as the key "default", issued at 0', async (t) => {
  const legacy = signRaw(JSON.stringify({ u: 'alice', d: 'phone', e: NOW + 1000 }));
  t.strictSame(signer.verifyFor(legacy, 'alice', 'phone', NOW), { uid: 'alice', deviceId: 'phone', expiresAt: NOW + 1000, issuedAt: 0, keyId: 'default' });
  const ring = new TokenSigner({ signing: 'k2', keys: { k2: 'second-secret' } });
  throwsCode(t, () => ring.verify(legacy, NOW), 'SB_ERR_TOKEN_INVALID', 'a ring without the key "default" refuses sb1');
  t.equal(new TokenSigner({ signing: 'k2', keys: { default: SECRET, k2: 'second-secret' } }).verify(legacy, NOW).uid, 'alice', 'one that lists --secret as "default" accepts it');
});

t.test('key rotation: every listed key is accepted, one signs, a retired key is refused by name', async (t) => {
  const before = new TokenSigner({ signing: 'k1', keys: { k1: 'first-secret' } });
  const adding = new TokenSigner({ signing: 'k1', keys: { k1: 'first-secret', k2: 'second-secret' } });
  const switched = new TokenSigner({ signing: 'k2', keys: { k1: 'first-secret', k2: 'second-secret' } });
  const retired = new TokenSigner({ signing: 'k2', keys: { k2: 'second-secret' } });
  const old = before.mint({ uid: 'alice', ttlMs: 60_000, now: NOW });
  const fresh = switched.mint({ uid: 'alice', ttlMs: 60_000, now: NOW });
  t.equal(adding.verify(old, NOW).keyId, 'k1', 'step 1, the new key added: old tokens verify');
  t.equal(adding.verify(fresh, NOW).keyId, 'k2', 'and the new key is accepted before any gate signs with it');
  t.equal(switched.verify(old, NOW).keyId, 'k1', 'step 2, the signer switched: old tokens still verify');
  t.equal(switched.signingKeyId, 'k2');
  t.equal(retired.verify(fresh, NOW).keyId, 'k2', 'step 4, the old key retired: new tokens verify');
  const err = catchError(() => retired.verify(old, NOW));
  t.match(err, { code: 'SB_ERR_TOKEN_INVALID', message: /unknown key id "k1"/ }, 'a token of the retired key: refused, naming its key id');
  // The key id is inside the signed payload: changing it breaks the signature.
  const [, payload, sig] = fresh.split('.');
  const relabelled = `sb2.${Buffer.from(Buffer.from(payload!, 'base64url').toString().replace('"k2"', '"k1"')).toString('base64url')}.${sig}`;
  throwsCode(t, () => switched.verify(relabelled, NOW), 'SB_ERR_TOKEN_INVALID', 'a token relabelled with another key id');
  throwsCode(t, () => new TokenSigner({ signing: 'k3', keys: { k1: 'x' } }), 'SB_ERR_CONFIG', 'a signing key not among the keys');
  throwsCode(t, () => new TokenSigner({ signing: 'a b', keys: { 'a b': 'x' } }), 'SB_ERR_CONFIG', 'a key id with a space');
});

t.test('parseTokenKeys: "<kid> <secret>" lines, comments, the first signs unless one is named', async (t) => {
  const ring = parseTokenKeys('# keys\nk1 first-secret\n\n  k2   second-secret  \n');
  t.same({ signing: ring.signing, keys: { ...ring.keys } }, { signing: 'k1', keys: { k1: 'first-secret', k2: 'second-secret' } });
  t.equal(parseTokenKeys('k1 a\nk2 b', 'k2').signing, 'k2');
  t.equal(parseTokenKeys('__proto__ a').keys.__proto__, 'a', 'any key id is an ordinary key');
  for (const [text, why] of [['', 'no keys'], ['k1', 'no secret'], ['k1 a b', 'three words'], ['k1 a\nk1 b', 'an id twice']] as const) {
    throwsCode(t, () => parseTokenKeys(text), 'SB_ERR_CONFIG', why);
  }
  throwsCode(t, () => parseTokenKeys('k1 a', 'k9'), 'SB_ERR_CONFIG', 'a signing key not listed');
});
