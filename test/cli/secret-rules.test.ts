// The secret and token-lifetime rules of src/cli/common.ts, and --trust-proxy parsing: what
// development mode allows, what it does not, and errors that name the flag but never the value.

import t from 'tap';
import { DEV_SECRET } from '../../src/auth/token.js';
import { MAX_DEV_TOKEN_TTL_S, MAX_TOKEN_TTL_S, MIN_SECRET_LENGTH, checkSecret, tokenSecretFrom, tokenTtlMsFrom, trustProxyFrom } from '../../src/cli/common.js';
import { catchError as catchAny } from '../helpers/catch-error.js';

const catchError = (fn: () => void) => catchAny(fn) as { code?: string; message?: string } | undefined;

const LONG = 'x'.repeat(MIN_SECRET_LENGTH);
const SHORT = 'y'.repeat(MIN_SECRET_LENGTH - 1);

t.test('the defaults: 32 characters, 30 days, 365 days in development mode', async (t) => {
  t.equal(MIN_SECRET_LENGTH, 32);
  t.equal(MAX_TOKEN_TTL_S, 2_592_000);
  t.equal(MAX_DEV_TOKEN_TTL_S, 31_536_000);
});

t.test('tokenSecretFrom: a secret of 32 characters passes; a shorter one only in development mode', async (t) => {
  t.same(tokenSecretFrom({ secret: LONG, dev: false }, false, t.fail), { secret: LONG, dev: false });
  const err = catchError(() => tokenSecretFrom({ secret: SHORT, dev: false }, true, t.fail));
  t.match(err, { code: 'SB_ERR_CONFIG' });
  t.match(err?.message, /--secret has 31 characters; at least 32/);
  t.notMatch(err?.message, SHORT, 'the error never shows the secret');
  t.same(tokenSecretFrom({ secret: 's', dev: true }, false, t.fail), { secret: 's', dev: true }, '--dev accepts any secret');
  t.equal(catchError(() => tokenSecretFrom({ secret: DEV_SECRET, dev: false }, true, t.fail))?.code, 'SB_ERR_CONFIG', 'the public development secret, given as --secret, is too short too');
});

t.test('tokenSecretFrom: no secret is a development run where the command falls back, else needs --dev', async (t) => {
  const warnings: string[] = [];
  t.same(tokenSecretFrom({ dev: false }, true, (m) => warnings.push(m)), { secret: DEV_SECRET, dev: true }, 'fallback: the development secret, in development mode');
  t.match(warnings, [/development secret/], 'with a warning');
  t.match(catchError(() => tokenSecretFrom({ secret: '', dev: false }, false, t.fail)), { code: 'SB_ERR_CONFIG', message: /needs --secret/ });
  t.same(tokenSecretFrom({ dev: true }, false, () => {}), { secret: DEV_SECRET, dev: true }, '--dev allows it');
});

t.test('checkSecret: the same rule for --cluster-secret', async (t) => {
  t.equal(checkSecret('cluster-secret', LONG, false), LONG);
  t.match(catchError(() => checkSecret('cluster-secret', 'c', false)), { code: 'SB_ERR_CONFIG', message: /^--cluster-secret has 1 characters/ });
  t.equal(checkSecret('cluster-secret', 'c', true), 'c');
  t.equal(catchError(() => checkSecret('secret', 'é'.repeat(31), false))?.code, 'SB_ERR_CONFIG', 'characters are counted, not bytes');
});

t.test('tokenTtlMsFrom: more than 0, at most 30 days, 365 days in development mode, never more', async (t) => {
  t.equal(tokenTtlMsFrom('ttl-s', 86_400, false), 86_400_000);
  t.equal(tokenTtlMsFrom('ttl-s', MAX_TOKEN_TTL_S, false), MAX_TOKEN_TTL_S * 1000, '30 days is allowed');
  t.match(catchError(() => tokenTtlMsFrom('ttl-s', MAX_TOKEN_TTL_S + 1, false)), { code: 'SB_ERR_CONFIG', message: /--ttl-s must be more than 0 and at most 2592000 seconds \(31536000 with --dev\)/ });
  t.equal(tokenTtlMsFrom('token-ttl-s', MAX_TOKEN_TTL_S + 1, true), (MAX_TOKEN_TTL_S + 1) * 1000, 'more in development mode');
  for (const dev of [false, true]) {
    t.equal(catchError(() => tokenTtlMsFrom('ttl-s', 1e15, dev))?.code, 'SB_ERR_CONFIG', `1e15 s is refused (dev ${dev})`);
    t.equal(catchError(() => tokenTtlMsFrom('ttl-s', MAX_DEV_TOKEN_TTL_S + 1, dev))?.code, 'SB_ERR_CONFIG', `365 days + 1 s is refused (dev ${dev})`);
    t.equal(catchError(() => tokenTtlMsFrom('ttl-s', 0, dev))?.code, 'SB_ERR_CONFIG', `0 is refused (dev ${dev})`);
  }
});

t.test('trustProxyFrom: addresses, CIDRs and range names; anything else is SB_ERR_CONFIG', async (t) => {
  t.same(trustProxyFrom(undefined), []);
  t.same(trustProxyFrom(' '), []);
  t.same(trustProxyFrom('10.0.0.1, 10.1.0.0/16,loopback, fd00::/8,::1,uniquelocal,linklocal'), ['10.0.0.1', '10.1.0.0/16', 'loopback', 'fd00::/8', '::1', 'uniquelocal', 'linklocal']);
  for (const bad of ['10.0.0.256', '10.0.0.0/33', 'fd00::/129', 'proxy.internal', '10.0.0.0/8/1', '10.0.0.0/x', '']) {
    t.match(catchError(() => trustProxyFrom(`10.0.0.1,${bad}`)), { code: 'SB_ERR_CONFIG', message: /--trust-proxy/ }, JSON.stringify(bad));
  }
});
