// The secret rules as a user meets them, on the real `switchboard` command: a short --secret or
// --cluster-secret is refused outside development mode without being echoed, token lifetimes
// are bounded (30 days, 365 in development mode, 1e15 s never), --help shows no secret from the
// environment, and a worker whose Redis refuses its password does not log the password.
// bin/switchboard.js runs the compiled dist/: `npm run build` first.

import t, { type Test } from 'tap';
import { Redis } from 'ioredis';
import { TokenSigner, DEV_SECRET } from '../../src/auth/token.js';
import { CliProcess } from '../helpers/cli-process.js';
import { startRedis } from '../helpers/redis.js';

// A dozen short-lived processes, one after the other: more than the default on a loaded machine.
t.setTimeout(180_000);

/** A secret the commands accept outside development mode. */
const SECRET = 'cli-secrets-test-secret-of-at-least-32-characters';
const SHORT_SECRET = 'short-secret-31-characters-long';
/** Flags that make a cluster command valid up to its secret checks (nothing listens there: the checks come first). */
const NOWHERE = ['--zk', '127.0.0.1:1', '--redis', 'redis://127.0.0.1:1'];

async function run(t: Test, args: string[], env: Record<string, string> = {}) {
  const p = new CliProcess(t, args.join(' '), args, env);
  p.child.stdin.end();
  const { code } = await p.exit(60_000);
  return { code, stdout: p.stdout, stderr: p.stderr };
}

t.test('a --secret or --cluster-secret under 32 characters is refused outside development mode, and never echoed', async (t) => {
  t.equal(SHORT_SECRET.length, 31);
  for (const [what, args] of [
    ['token', ['token', '--user', 'alice', '--secret', SHORT_SECRET]],
    ['start', ['start', '--port', '0', '--gate-port', '0', '--secret', SHORT_SECRET]],
    ['worker', ['worker', '--port', '0', '--secret', SHORT_SECRET]],
    ['worker --zk', ['worker', '--port', '0', ...NOWHERE, '--secret', SECRET, '--cluster-secret', SHORT_SECRET]],
    ['gate', ['gate', '--port', '0', ...NOWHERE, '--secret', SHORT_SECRET]],
  ] as const) {
    const { code, stdout, stderr } = await run(t, [...args]);
    t.equal(code, 1, `${what}: exit 1`);
    const flag = what === 'worker --zk' ? 'cluster-secret' : 'secret';
    t.match(stderr, `SB_ERR_CONFIG --${flag} has 31 characters; at least 32 are needed`, `${what}: names --${flag} and says why`);
    t.notMatch(stdout + stderr, SHORT_SECRET, `${what}: without showing the secret`);
  }
  const dev = await run(t, ['token', '--user', 'alice', '--secret', 's', '--dev']);
  t.equal(dev.code, 0, 'token --dev accepts a short secret');
  t.equal(new TokenSigner('s').verify(dev.stdout.trim()).uid, 'alice');
});

t.test('a --cluster-secret equal to --secret is refused: the gates hold the token secret', async (t) => {
  const { code, stdout, stderr } = await run(t, ['worker', '--port', '0', ...NOWHERE, '--secret', SECRET, '--cluster-secret', SECRET]);
  t.equal(code, 1, 'exit 1');
  t.match(stderr, 'SB_ERR_CONFIG --cluster-secret must differ from --secret', 'says why');
  t.notMatch(stdout + stderr, SECRET, 'without showing the secret');
});

t.test('token lifetimes: at most 30 days, 365 in development mode, 1e15 s never', async (t) => {
  const month = 30 * 86_400;
  for (const [what, args] of [
    ['1e15 s, development secret', ['token', '--user', 'alice', '--ttl-s', '1e15']],
    ['1e15 s, --dev', ['token', '--user', 'alice', '--ttl-s', '1e15', '--secret', SECRET, '--dev']],
    ['30 days + 1 s with a real secret', ['token', '--user', 'alice', '--ttl-s', String(month + 1), '--secret', SECRET]],
    ['gate --token-ttl-s over 30 days', ['gate', '--port', '0', ...NOWHERE, '--secret', SECRET, '--token-ttl-s', String(month + 1)]],
    ['start --token-ttl-s 1e15 (a development run)', ['start', '--port', '0', '--gate-port', '0', '--token-ttl-s', '1e15']],
  ] as const) {
    const r = await run(t, [...args]);
    t.equal(r.code, 1, `${what}: refused`);
    t.match(r.stderr, /SB_ERR_CONFIG --(token-)?ttl-s must be more than 0 and at most/, `${what}: SB_ERR_CONFIG`);
    t.notMatch(r.stdout, /sb1\./, `${what}: no token printed`);
  }
  for (const [what, args, secret] of [
    ['--dev', ['token', '--user', 'alice', '--ttl-s', String(month + 1), '--secret', SECRET, '--dev'], SECRET],
    ['the development secret', ['token', '--user', 'alice', '--ttl-s', String(month + 1)], DEV_SECRET],
  ] as const) {
    const r = await run(t, [...args]);
    t.equal(r.code, 0, `30 days + 1 s with ${what}: allowed (development mode)`);
    t.ok(new TokenSigner(secret).verify(r.stdout.trim()).expiresAt > Date.now() + month * 1000, 'and the token lives that long');
  }
});

t.test('--help never shows a secret from the environment', async (t) => {
  const env = {
    SWITCHBOARD_SECRET: 'env-token-secret-that-must-not-be-shown',
    SWITCHBOARD_CLUSTER_SECRET: 'env-cluster-secret-that-must-not-be-shown',
    SWITCHBOARD_REDIS: 'redis://app:env-redis-password-not-shown@10.0.0.7:6379',
    SWITCHBOARD_PASSWORD: 'env-chat-password-not-shown',
    SWITCHBOARD_TOKEN: 'sb1.env-token-not-shown.sig',
  };
  for (const command of [['start'], ['worker'], ['gate'], ['token'], ['chat'], ['bench'], ['bench', 'chat']]) {
    const what = command.join(' ');
    const { code, stdout, stderr } = await run(t, [...command, '--help'], env);
    t.equal(code, 0, `${what} --help: exit 0`);
    t.match(stdout, /usage: switchboard/);
    for (const value of [...Object.values(env), 'env-redis-password-not-shown']) t.notMatch(stdout + stderr, value, `${what} --help does not show ${value}`);
  }
});

t.test('a worker whose Redis refuses its password does not log the password', async (t) => {
  const redis = await startRedis(t);
  // Required once the server is up (the harness checks readiness with an unauthenticated PING).
  const admin = new Redis(redis.url);
  await admin.config('SET', 'requirepass', 'the-right-password-for-redis');
  admin.disconnect();
  const wrong = 'the-wrong-password-the-worker-offers';
  const worker = new CliProcess(t, 'worker', ['worker', '--port', '0', '--secret', SECRET, '--redis', `redis://default:${wrong}@127.0.0.1:${redis.port}`]);
  await worker.waitFor('the worker logged the refusal', () => worker.stdout.includes('WRONGPASS'), 30_000);
  t.notMatch(worker.stdout + worker.stderr, wrong, 'the password is in no log line');
  t.ok(worker.lines.some((l) => l.msg === 'redis connection error'), 'the refusal itself is logged');
});
