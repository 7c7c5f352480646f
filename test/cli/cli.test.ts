// The real `switchboard` command, spawned as a process: token minting, errors, --help, the
// environment, a worker that clients can log in to and that SIGTERM stops cleanly, a worker
// whose --redis inbox outlives it, and a chat session driven through stdin.
// bin/switchboard.js runs the compiled dist/; it is rebuilt here when older than src/.

import t, { type Test } from 'tap';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TokenSigner, DEV_SECRET } from '../../src/auth/token.js';
import { ImClient, type IncomingMessage } from '../../src/client/im-client.js';
import { RedisUserStore } from '../../src/users/redis-user-store.js';
import { startNode } from '../helpers/node.js';
import { startRedis } from '../helpers/redis.js';
import { CliProcess } from '../helpers/cli-process.js';
import { freePort } from '../../testkit/services.js';
import { assertBuilt } from '../../testkit/switchboard-process.js';
import { until } from '../../testkit/wait.js';

// `npm test` builds dist/ before tap runs; the CLI under test is the compiled one.
assertBuilt();

// Each test spawns its own processes and picks its own ports: run a few at once.
t.jobs = 4;

/** A secret the commands accept outside development mode (at least 32 characters). */
const SECRET = 'cli-test-secret-of-at-least-32-characters';

/** Runs `switchboard <args>` with stdin closed and resolves its exit code and output. */
async function runCli(t: Test, args: string[], env: Record<string, string> = {}) {
  const p = new CliProcess(t, args.join(' '), args, env);
  p.child.stdin.end();
  const { code } = await p.exited;
  return { code, stdout: p.stdout, stderr: p.stderr };
}

t.test('token prints a token the same secret verifies for that user', async (t) => {
  const { code, stdout, stderr } = await runCli(t, ['token', '--user', 'alice', '--secret', SECRET]);
  t.equal(code, 0);
  const token = stdout.trim();
  t.match(token, /^sb2\.[\w-]+\.[\w-]+$/);
  const claims = new TokenSigner(SECRET).verify(token);
  t.equal(claims.keyId, 'default', '--secret is the one key "default"');
  t.equal(claims.uid, 'alice');
  t.ok(new TokenSigner(SECRET).verifyFor(token, 'alice', 'any-device'), 'bound to any device by default');
  t.ok(claims.expiresAt > Date.now() + 3_600_000, 'valid for a day by default');
  t.throws(() => new TokenSigner('other').verify(token), { code: 'SB_ERR_TOKEN_INVALID' }, 'signed with SECRET, not another secret');
  t.notMatch(stderr, /development secret/, 'no warning when a secret is given');
});

t.test('token --token-keys signs with --token-signing-key; a key file with --secret, a short key or an unknown signer is refused', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'sb-keys-'));
  const keys = join(dir, 'keys');
  writeFileSync(keys, `k1 ${SECRET}\nk2 ${SECRET.replace('cli', 'two')}\n`);
  const signed = await runCli(t, ['token', '--user', 'alice', '--token-keys', keys, '--token-signing-key', 'k2']);
  t.equal(signed.code, 0);
  t.equal(new TokenSigner({ signing: 'k1', keys: { k1: SECRET, k2: SECRET.replace('cli', 'two') } }).verify(signed.stdout.trim()).keyId, 'k2');
  t.equal(new TokenSigner({ signing: 'k1', keys: { k1: SECRET, k2: SECRET.replace('cli', 'two') } }).verify((await runCli(t, ['token', '--user', 'alice', '--token-keys', keys])).stdout.trim()).keyId, 'k1', 'the first key by default');
  const both = await runCli(t, ['token', '--user', 'alice', '--token-keys', keys, '--secret', SECRET]);
  t.match(both.stderr, /SB_ERR_CONFIG --secret and --token-keys both given/);
  const unknown = await runCli(t, ['token', '--user', 'alice', '--token-keys', keys, '--token-signing-key', 'k9']);
  t.match(unknown.stderr, /SB_ERR_CONFIG token keys: the signing key "k9" is not among them/);
  writeFileSync(keys, 'k1 short\n');
  const short = await runCli(t, ['token', '--user', 'alice', '--token-keys', keys]);
  t.match(short.stderr, /SB_ERR_CONFIG --token-keys \(key k1\) has 5 characters/);
  t.notMatch(short.stderr, /short/, 'never the secret');
});

t.test('token --device and --ttl-s end up in the claims', async (t) => {
  const { code, stdout } = await runCli(t, ['token', '--user', 'bob', '--device', 'phone', '--ttl-s', '60', '--secret', SECRET]);
  t.equal(code, 0);
  const signer = new TokenSigner(SECRET);
  const claims = signer.verify(stdout.trim());
  t.equal(claims.deviceId, 'phone');
  t.ok(claims.expiresAt <= Date.now() + 60_000 && claims.expiresAt > Date.now(), 'expires within 60 s');
  t.throws(() => signer.verifyFor(stdout.trim(), 'bob', 'laptop'), { code: 'SB_ERR_TOKEN_MISMATCH' });
});

t.test('token without --user fails with SB_ERR_CONFIG', async (t) => {
  const { code, stdout, stderr } = await runCli(t, ['token', '--secret', SECRET]);
  t.not(code, 0);
  t.match(stderr, /SB_ERR_CONFIG/);
  t.match(stderr, /--user/);
  t.equal(stdout, '', 'no token printed');
});

t.test('a bad number option fails with SB_ERR_CONFIG', async (t) => {
  const { code, stderr } = await runCli(t, ['token', '--user', 'alice', '--ttl-s', 'soon']);
  t.not(code, 0);
  t.match(stderr, /SB_ERR_CONFIG/);
});

t.test('an unknown command fails and shows the commands', async (t) => {
  const { code, stderr } = await runCli(t, ['frobnicate']);
  t.not(code, 0);
  t.match(stderr, /unknown command/);
  for (const name of ['start', 'worker', 'chat', 'token']) t.match(stderr, new RegExp(`\\b${name}\\b`));
});

t.test('SWITCHBOARD_SECRET is honoured by token, and --secret wins over it', async (t) => {
  const envSecret = 'env-secret-of-at-least-32-characters';
  const fromEnv = await runCli(t, ['token', '--user', 'alice'], { SWITCHBOARD_SECRET: envSecret });
  t.equal(fromEnv.code, 0);
  t.equal(new TokenSigner(envSecret).verify(fromEnv.stdout.trim()).uid, 'alice');
  t.throws(() => new TokenSigner(DEV_SECRET).verify(fromEnv.stdout.trim()), { code: 'SB_ERR_TOKEN_INVALID' }, 'not the development secret');
  t.notMatch(fromEnv.stderr, /development secret/);

  const flagSecret = 'flag-secret-of-at-least-32-characters';
  const flagWins = await runCli(t, ['token', '--user', 'alice', '--secret', flagSecret], { SWITCHBOARD_SECRET: envSecret });
  t.equal(new TokenSigner(flagSecret).verify(flagWins.stdout.trim()).uid, 'alice');

  const { code, stdout, stderr } = await runCli(t, ['token', '--user', 'alice', '--secret', SECRET], { SWITCHBOARD_USER: 'bob' });
  t.equal(code, 0);
  t.equal(new TokenSigner(SECRET).verify(stdout.trim()).uid, 'alice', '--user wins over SWITCHBOARD_USER');
  t.notMatch(stderr, /warning/);

  const noSecret = await runCli(t, ['token', '--user', 'alice']);
  t.equal(new TokenSigner(DEV_SECRET).verify(noSecret.stdout.trim()).uid, 'alice', 'no secret: the development one');
  t.match(noSecret.stderr, /development secret/, 'with a warning');
});

const SERVE_FLAGS = [
  'host',
  'port',
  'announce-host',
  'secret',
  'log-level',
  'max-frame-length',
  'login-timeout-ms',
  'heartbeat-interval-ms',
  'idle-intervals',
  'max-devices',
  'max-outbound-bytes',
  'drain-timeout-ms',
  'prelogin-queue',
  'inbound-queue',
  'close-grace-ms',
  'ack-timeout-ms',
  'sync-batch',
  'redis',
  'inbox-max-messages',
  'inbox-max-age-s',
  'dedupe-window-s',
  'inbox-memory-mb',
  'allow-unknown-recipients',
  'msg-rate',
  'msg-burst',
  'user-msg-rate',
  'user-msg-burst',
  'flood-refusals',
  'flood-window-ms',
  'max-connections-per-ip',
  'max-unauthenticated',
  'recipient-cache-size',
];

const HELP: Record<string, string[]> = {
  token: ['user', 'device', 'ttl-s', 'secret'],
  chat: ['user', 'host', 'port', 'device', 'token', 'secret'],
  worker: SERVE_FLAGS,
  start: SERVE_FLAGS,
};

for (const [command, flags] of Object.entries(HELP)) {
  t.test(`${command} --help lists its flags and their environment variables`, async (t) => {
    const { code, stdout } = await runCli(t, [command, '--help']);
    t.equal(code, 0);
    t.match(stdout, `usage: switchboard ${command}`);
    for (const flag of flags) {
      t.match(stdout, new RegExp(`--${flag}\\b`), `--${flag}`);
      t.match(stdout, new RegExp(`\\bSWITCHBOARD_${flag.toUpperCase().replace(/-/g, '_')}\\b`), `SWITCHBOARD_${flag.toUpperCase().replace(/-/g, '_')}`);
    }
    t.match(stdout, '--help');
  });
}

t.test('the top-level --help lists the commands', async (t) => {
  const { code, stdout } = await runCli(t, ['--help']);
  t.equal(code, 0);
  for (const name of ['start', 'worker', 'chat', 'token']) t.match(stdout, new RegExp(`\\b${name}\\b`));
});

async function serveAndLogin(t: Test, args: string[], env: Record<string, string>, port: number, secret: string) {
  const worker = new CliProcess(t, 'worker', args, env);
  await worker.waitFor('worker listening', () => worker.lines.some((l) => l.msg === 'worker listening'));
  t.equal(worker.lines.find((l) => l.msg === 'worker listening')?.port, port, 'listening on the given port');

  const alice = new ImClient({ host: '127.0.0.1', port, uid: 'alice', token: new TokenSigner(secret).mint({ uid: 'alice', ttlMs: 60_000 }), retryStrategy: false });
  t.teardown(() => alice.close());
  const closings: string[] = [];
  alice.on('closing', (c) => closings.push(c.code));
  await alice.connect();
  t.equal(alice.status, 'ready', 'a client logs in with a token of the same secret');

  const intruder = new ImClient({ host: '127.0.0.1', port, uid: 'alice', token: new TokenSigner('not-' + secret).mint({ uid: 'alice', ttlMs: 60_000 }), retryStrategy: false });
  t.teardown(() => intruder.close());
  await t.rejects(intruder.connect(), { code: 'SB_ERR_TOKEN_INVALID' }, 'a token of another secret is refused');

  worker.child.kill('SIGTERM');
  const { code, signal } = await worker.exited;
  t.equal(signal, null, 'not killed by the signal');
  t.equal(code, 0, 'SIGTERM shuts down cleanly');
  t.same(closings, ['SB_ERR_SERVER_SHUTDOWN'], 'clients are told why');
  await until('client closed', () => alice.status === 'closed');
  t.ok(worker.lines.some((l) => l.msg === 'worker stopped'), 'logged the stop');
}

t.test('worker serves logins with --secret and stops on SIGTERM with exit code 0', async (t) => {
  const port = await freePort();
  await serveAndLogin(t, ['worker', '--host', '127.0.0.1', '--port', String(port), '--secret', SECRET], {}, port, SECRET);
});

t.test('worker takes its port and secret from SWITCHBOARD_* variables', async (t) => {
  const port = await freePort();
  const envSecret = 'env-secret-of-at-least-32-characters';
  await serveAndLogin(t, ['worker'], { SWITCHBOARD_PORT: String(port), SWITCHBOARD_SECRET: envSecret, SWITCHBOARD_HOST: '127.0.0.1' }, port, envSecret);
});

t.test('chat: prints what arrived while offline, sends with "@user text", prints what arrives, /quit exits 0', async (t) => {
  const n = await startNode(t, {}, { secret: SECRET });
  const bob = new ImClient({ host: '127.0.0.1', port: n.port, uid: 'bob', deviceId: 'bob-phone', token: n.token('bob'), retryStrategy: false });
  t.teardown(() => bob.close());
  await bob.connect();

  // alice is not running yet: these wait in her inbox.
  t.match(await bob.send('alice', 'sent while you were away'), { seq: 1, duplicate: false }, 'a message to offline alice is stored');
  await bob.send('alice', 'and a second one');
  t.equal(n.node.server.sessions.byUser('alice').length, 0, 'alice was offline');

  const chat = new CliProcess(t, 'chat', ['chat', '--user', 'alice', '--device', 'laptop', '--port', String(n.port), '--secret', SECRET]);
  await chat.waitFor('chat logged in', () => chat.stdout.includes('logged in as alice'));
  await chat.waitFor('chat printed the stored messages', () => chat.stdout.includes('bob: and a second one'));
  const out = chat.stdout;
  t.ok(out.indexOf('bob: sent while you were away') < out.indexOf('bob: and a second one'), 'in the order they were sent');
  t.equal(out.split('bob: sent while you were away').length - 1, 1, 'each printed once');
  t.equal(n.node.server.sessions.byUser('alice').length, 1, 'alice is online');

  const atBob = new Promise<IncomingMessage>((resolve) => bob.once('message', resolve));
  chat.child.stdin.write('@bob hello\n');
  const m = await atBob;
  t.equal(m.from, 'alice');
  t.equal(m.content, 'hello');

  await bob.send('alice', 'hi there alice');
  await chat.waitFor('chat printed the message', () => chat.stdout.includes('bob: hi there alice'));
  t.pass('the live message from bob was printed');

  // A message to a user who is not online is stored for them, not refused.
  chat.child.stdin.write('@nobody are you there\n');
  await chat.waitFor('stored in the inbox of nobody', async () => (await n.node.inbox.range('nobody', 0, 0)).head === 1);
  t.notMatch(chat.stdout, /not sent/, 'chat reports no failure');

  chat.child.stdin.write('/quit\n');
  const { code } = await chat.exit(10_000);
  t.equal(code, 0, '/quit exits 0');
  await until('alice logged out', () => n.node.server.sessions.byUser('alice').length === 0);
  t.equal(bob.status, 'ready', 'bob is unaffected');
});

t.test('worker --redis: messages stored for an offline user survive a worker restart', async (t) => {
  const redis = await startRedis(t);
  // With --redis the worker refuses recipients without an account in the Redis user store,
  // where `switchboard gate` would have made them.
  const users = new RedisUserStore({ url: redis.url });
  t.teardown(() => users.close());
  for (const username of ['alice', 'bob']) await users.create({ username, passwordHash: 'not-a-login-test', createdAt: Date.now() });
  const port = await freePort();
  const args = ['worker', '--port', String(port), '--secret', SECRET, '--redis', redis.url];
  const token = (uid: string) => new TokenSigner(SECRET).mint({ uid, ttlMs: 60_000 });

  const first = new CliProcess(t, 'first worker', args);
  await first.waitFor('first worker listening', () => first.lines.some((l) => l.msg === 'worker listening'));
  const alice = new ImClient({ host: '127.0.0.1', port, uid: 'alice', token: token('alice'), retryStrategy: false });
  t.teardown(() => alice.close());
  await alice.connect();
  t.match(await alice.send('bob', 'kept in redis'), { seq: 1, duplicate: false });
  await t.rejects(alice.send('mallory', 'to nobody'), { code: 'SB_ERR_UNKNOWN_RECIPIENT' }, 'a recipient without an account is refused');
  first.child.kill('SIGTERM');
  t.equal((await first.exited).code, 0, 'the first worker stopped cleanly');

  const second = new CliProcess(t, 'second worker', args);
  await second.waitFor('second worker listening', () => second.lines.some((l) => l.msg === 'worker listening'));
  const bob = new ImClient({ host: '127.0.0.1', port, uid: 'bob', token: token('bob'), retryStrategy: false });
  t.teardown(() => bob.close());
  const got: IncomingMessage[] = [];
  bob.on('message', (m) => got.push(m));
  await bob.connect();
  await second.waitFor('bob got the stored message', () => got.length > 0);
  t.match(got, [{ seq: 1, from: 'alice', content: 'kept in redis' }], 'stored by the first worker, delivered by the second');
  second.child.kill('SIGTERM');
  t.equal((await second.exited).code, 0);
});

t.test('chat refuses to start without --user', async (t) => {
  const { code, stderr } = await runCli(t, ['chat', '--port', '1']);
  t.not(code, 0);
  t.match(stderr, /SB_ERR_CONFIG/);
});
