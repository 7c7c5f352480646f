// What a new user does first, with the real command: `switchboard start` (a worker and its
// embedded gate), then two `switchboard chat --gate ... --register` terminals (stdin piped):
// both sign up, log in with their passwords, alice's "@bob hello" shows up in bob's terminal,
// "@Bob" is bob too, "@nobody" is refused, and /quit exits 0. Also: coming back with --register, a wrong password, and a gate port that
// is taken.

import t, { type Test } from 'tap';
import net from 'node:net';
import { CliProcess } from '../helpers/cli-process.js';

// Two CLI processes per chat, OWASP-cost password hashes: more than the default.
t.setTimeout(120_000);

const ALICE_PASSWORD = 'alice has a long passphrase';
const BOB_PASSWORD = 'bob types his at the prompt';

/** `switchboard start` on free ports; resolves once the gate listens. */
async function start(t: Test): Promise<{ server: CliProcess; gateUrl: string }> {
  const server = new CliProcess(t, 'start', ['start', '--port', '0', '--gate-port', '0', '--log-level', 'info']);
  const listening = await server.waitForLog({ msg: 'gate listening' });
  const gateUrl = `http://127.0.0.1:${String(listening.port)}`;
  await server.waitFor('the banner names the gate', () => server.stderr.includes(`gate ${gateUrl}`));
  return { server, gateUrl };
}

function chat(t: Test, name: string, args: string[]): CliProcess {
  return new CliProcess(t, name, ['chat', ...args]);
}

async function quit(t: Test, p: CliProcess): Promise<void> {
  p.write('/quit\n');
  t.same(await p.exit(), { code: 0, signal: null }, `${p.name}: /quit exits 0`);
}

t.test('two new users sign up through the embedded gate and chat', async (t) => {
  const { server, gateUrl } = await start(t);
  t.match(server.stderr, new RegExp(`chat --gate ${gateUrl.replace(/[.]/g, '\\.')} --user alice --register`), 'the banner says how to chat');

  const alice = chat(t, 'alice', ['--gate', gateUrl, '--user', 'alice', '--register', '--password', ALICE_PASSWORD]);
  // bob gives his password as the first line of input (off a terminal there is no prompt), and
  // his name with a capital.
  const bob = chat(t, 'bob', ['--gate', gateUrl, '--user', 'Bob', '--register']);
  bob.write(`${BOB_PASSWORD}\n`);

  await alice.waitFor('alice logged in', () => alice.stdout.includes('logged in as alice'));
  await bob.waitFor('bob logged in', () => bob.stdout.includes('logged in as bob'));
  t.pass('both registered and logged in through the gate');
  t.equal(server.lines.filter((l) => l.msg === 'user registered').length, 2, 'the gate registered two users');

  alice.write('@bob hello\n');
  await bob.waitFor('bob is shown alice\'s message', () => /alice: hello$/m.test(bob.stdout));
  t.pass('bob\'s terminal shows "alice: hello"');
  bob.write('@alice hi, welcome\n');
  await alice.waitFor('alice is shown bob\'s answer', () => /bob: hi, welcome$/m.test(alice.stdout));
  t.pass('and alice\'s shows bob\'s answer');
  t.notMatch(alice.stdout + bob.stdout, /not sent/, 'nothing failed to send');

  // Names are accounts: `@Bob` is bob, and a name without an account is refused, not stored.
  alice.write('@Bob by any case\n');
  await bob.waitFor('bob is shown the message to Bob', () => /alice: by any case$/m.test(bob.stdout));
  alice.write('@nobody are you there\n');
  await alice.waitFor('alice is told nobody has no account', () => /not sent to nobody: SB_ERR_UNKNOWN_RECIPIENT/.test(alice.stdout));
  t.pass('@Bob reached bob; @nobody was refused with SB_ERR_UNKNOWN_RECIPIENT');

  // A chat in which a line was refused says so in its exit code, as piped input needs.
  alice.write('/quit\n');
  t.same(await alice.exit(), { code: 1, signal: null }, 'alice: /quit exits 1, one of her lines was refused');
  await quit(t, bob);

  // Coming back: --register again is harmless, the account is logged in to.
  const again = chat(t, 'alice again', ['--gate', gateUrl, '--user', 'alice', '--register', '--password', ALICE_PASSWORD]);
  await again.waitFor('alice logged in again', () => again.stdout.includes('logged in as alice'));
  await quit(t, again);

  // Refusals end the process although stdin stays open, as a terminal's does.
  const wrong = chat(t, 'alice, wrong password', ['--gate', gateUrl, '--user', 'alice', '--password', 'not her passphrase']);
  t.same(await wrong.exit(), { code: 1, signal: null }, 'a wrong password exits 1');
  t.match(wrong.stderr, /^switchboard chat: SB_ERR_LOGIN_FAILED /m, 'saying SB_ERR_LOGIN_FAILED');
  t.notMatch(wrong.stdout, /logged in/);
  const weak = chat(t, 'carol, weak password', ['--gate', gateUrl, '--user', 'carol', '--register', '--password', 'short']);
  t.same(await weak.exit(), { code: 1, signal: null }, 'a password the rule refuses exits 1');
  t.match(weak.stderr, /^switchboard chat: SB_ERR_BAD_PASSWORD /m, 'saying SB_ERR_BAD_PASSWORD');
  t.equal(server.lines.filter((l) => l.msg === 'user registered').length, 2, 'no account was made for carol');

  t.same(await server.stop(), { code: 0, signal: null }, 'the server exits 0 on SIGTERM');
});

t.test('start exits 1 when the gate port is taken, instead of running on without its gate', async (t) => {
  const holder = net.createServer();
  await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => holder.close(() => resolve())));
  const busy = (holder.address() as net.AddressInfo).port;
  const server = new CliProcess(t, 'start on a busy gate port', ['start', '--port', '0', '--gate-port', String(busy)]);
  t.same(await server.exit(), { code: 1, signal: null }, 'exit code 1');
  t.match(server.stderr, /^switchboard start: EADDRINUSE /m, 'saying EADDRINUSE');
  t.ok(server.lines.some((l) => l.msg === 'worker stopped'), 'the worker it had started was stopped');
});
