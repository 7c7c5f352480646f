// `switchboard chat` as a user meets it, a real process (the compiled dist/: `npm run build`
// first) against a real node: piped input sent in full and acknowledged line by line, plain
// output off a terminal, a reason for every failure to connect or reconnect, a replaced session
// that ends the chat, a taken name at --register, and times that are not the sender's clock.
// The terminal-only parts (the password asked twice) are tested as the logic behind them.

import t, { type Test } from 'tap';
import { ImClient, type IncomingMessage } from '../../src/client/im-client.js';
import { SwitchboardError } from '../../src/errors.js';
import { registerThroughGate } from '../../src/client/gate-login.js';
import { gateEndpoint } from '../../src/client/gate-session.js';
import { askNewPassword, formatTime, shownTime } from '../../src/cli/commands/chat.js';
import { CliProcess } from '../helpers/cli-process.js';
import { startNode, type TestNode } from '../helpers/node.js';
import { connectLoggedIn } from '../helpers/raw-session.js';
import { freePort } from '../../testkit/services.js';
import { until } from '../../testkit/wait.js';

t.jobs = 4;
// Processes, and OWASP-cost password hashes in the gate tests (GATE_REGISTER_MS): more than the default.
t.setTimeout(120_000);

const SECRET = 'chat-test-secret-of-at-least-32-characters';
const EXIT_MS = 20_000;
/**
 * From the spawn of `chat --gate --register` to its "logged in" (or its exit, when the login is
 * refused): a process start and two OWASP-cost scrypt hashes at the gate, the sign-up's and the
 * login's (128 MiB and ~0.7 s of a core each). 2.4 s on an idle machine; 19 s measured under
 * load (three copies of this file beside two busy loops on two cores), past the default 15 s wait.
 */
const GATE_REGISTER_MS = 45_000;

function chat(t: Test, n: TestNode | { port: number }, user: string, extra: string[] = []): CliProcess {
  return new CliProcess(t, `chat ${user}`, ['chat', '--user', user, '--port', String(n.port), '--secret', SECRET, ...extra]);
}

async function online(t: Test, n: TestNode, uid: string): Promise<{ client: ImClient; got: IncomingMessage[] }> {
  const client = new ImClient({ host: '127.0.0.1', port: n.port, uid, deviceId: `${uid}-phone`, token: n.token(uid), retryStrategy: false });
  const got: IncomingMessage[] = [];
  client.on('message', (m) => got.push(m));
  t.teardown(() => client.close());
  await client.connect();
  return { client, got };
}

t.test('piped input: lines written before the login are all sent, each marked stored, then it logs out and exits 0, with no escape codes', async (t) => {
  const n = await startNode(t, {}, { secret: SECRET });
  const bob = await online(t, n, 'bob');
  const alice = chat(t, n, 'alice');
  // All of it at once, before the process could have connected, then the end of input.
  const lines = Array.from({ length: 250 }, (_, i) => `@bob line ${i + 1}`);
  alice.child.stdin.end(`${lines.join('\n')}\n`);

  t.same(await alice.exit(EXIT_MS), { code: 0, signal: null }, 'exit 0 at the end of input');
  await until('bob has every line', () => bob.got.length === lines.length);
  t.same(bob.got.map((m) => m.content), lines.map((l) => l.slice('@bob '.length)), 'every line, in order');
  t.equal(alice.stdout.match(/^✓ stored \(bob #\d+\)$/gm)?.length, lines.length, 'one stored mark per line');
  t.notMatch(alice.stdout, /\x1b/, 'no escape codes when stdout is not a terminal');
  t.notMatch(alice.stdout, /alice> /, 'no prompt either');
  await until('alice logged out', () => n.node.server.sessions.byUser('alice').length === 0);
});

t.test('piped input with a refused line: the others are sent, the refusal is said, the exit code is 1', async (t) => {
  const n = await startNode(t, {}, { secret: SECRET });
  const bob = await online(t, n, 'bob');
  const alice = chat(t, n, 'alice');
  alice.child.stdin.end('@bob first\nhello without a recipient\n@bob last\n');
  t.equal((await alice.exit(EXIT_MS)).code, 1);
  await until('bob has both', () => bob.got.length === 2);
  t.match(alice.stdout, /not sent: type "@user message"/);
  t.match(alice.stderr, /SB_ERR_BAD_REQUEST 1 of 3 messages were not sent/);
});

t.test('a first connect that fails exits 1 with the reason', async (t) => {
  const port = await freePort();
  const alice = chat(t, { port }, 'alice');
  t.equal((await alice.exit(EXIT_MS)).code, 1);
  t.match(alice.stderr, new RegExp(`^switchboard chat: SB_ERR_CLIENT_CONNECT_FAILED .*ECONNREFUSED 127\\.0\\.0\\.1:${port}$`, 'm'));
  t.notMatch(alice.stdout, /reconnecting/);
});

t.test('a gate that is down: exit 1 naming the gate and the reason', async (t) => {
  const port = await freePort();
  const alice = new CliProcess(t, 'chat via a dead gate', ['chat', '--user', 'alice', '--gate', `http://127.0.0.1:${port}`, '--password', 'a long enough password']);
  t.equal((await alice.exit(EXIT_MS)).code, 1);
  t.match(alice.stderr, `cannot reach the gate http://127.0.0.1:${port}: connect ECONNREFUSED 127.0.0.1:${port}`);
});

t.test('a session replaced by the same device elsewhere ends the chat with a line saying so', async (t) => {
  const n = await startNode(t, {}, { secret: SECRET });
  const alice = chat(t, n, 'alice');
  await alice.waitFor('logged in', () => alice.stdout.includes('logged in as alice'));
  const other = new ImClient({ host: '127.0.0.1', port: n.port, uid: 'alice', deviceId: 'cli', token: n.token('alice'), retryStrategy: false });
  t.teardown(() => other.close());
  await other.connect();
  // stdin stays open: the chat must end by itself, not at the end of its input.
  t.equal((await alice.exit(EXIT_MS)).code, 1);
  t.match(alice.stderr, /^switchboard chat: SB_ERR_SESSION_REPLACED alice logged in with device "cli" elsewhere/m);
  t.equal(other.status, 'ready', 'the new session was not taken back');
});

t.test('the time shown is not the sender\'s clock', async (t) => {
  const n = await startNode(t, {}, { secret: SECRET });
  const alice = chat(t, n, 'alice');
  await alice.waitFor('logged in', () => alice.stdout.includes('logged in as alice'));
  // A sender whose clock is a year, 6 h 17 min 29 s behind: no digit of its time can match now's.
  const skewed = Date.now() - (365 * 86_400_000 + 6 * 3600_000 + 17 * 60_000 + 29_000);
  const bob = await connectLoggedIn(t, n.port, 'bob', n.token('bob'), 'raw', { acks: true });
  await bob.chatAndWait('alice', 'from a wrong clock', { time: skewed });
  await alice.waitFor('printed', () => alice.stdout.includes('bob: from a wrong clock'));
  const line = alice.stdout.split('\n').find((l) => l.includes('bob: from a wrong clock'))!;
  const sender = new Date(skewed);
  const mmss = `${String(sender.getMinutes()).padStart(2, '0')}:${String(sender.getSeconds()).padStart(2, '0')}`;
  t.notMatch(line, mmss, `not the sender's ${mmss}: ${line}`);
  t.match(line, /^\[\d\d:\d\d:\d\d\] bob: /, "today's time: when it arrived (the server sends no stored time yet)");
  alice.child.stdin.end();
  t.equal((await alice.exit(EXIT_MS)).code, 0);
});

t.test('through the gate: --register with a taken name says so; with its own password it logs in; a failed reconnect prints the gate\'s code and message', async (t) => {
  // Five logins and registrations a minute per address, and one refresh: the chat's reconnect
  // (a refresh, no password) is the second.
  const node = new CliProcess(t, 'start', ['start', '--port', '0', '--gate-port', '0', '--dev', '--secret', SECRET, '--log-level', 'info', '--rate-ip', '5', '--rate-refresh', '1', '--heartbeat-interval-ms', '1000', '--idle-intervals', '2']);
  const gateUrl = `http://127.0.0.1:${String((await node.waitForLog({ msg: 'gate listening' })).port)}`;
  const register = await fetch(`${gateUrl}/api/users`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: 'carol', password: 'carols own password' }) });
  t.equal(register.status, 201, 'carol registered (1 of 5)');

  const intruder = new CliProcess(t, 'chat --register carol, another password', ['chat', '--gate', gateUrl, '--user', 'carol', '--register', '--password', 'not carols password']);
  intruder.child.stdin.end();
  t.equal((await intruder.exit(GATE_REGISTER_MS)).code, 1, '(2 and 3 of 5)');
  t.match(intruder.stderr, /^switchboard chat: SB_ERR_USERNAME_TAKEN the name carol is taken/m);
  t.notMatch(intruder.stdout, /logged in/);

  // The chat is stopped (SIGSTOP) until the worker has closed it as idle (no heartbeat for 2 s);
  // resumed, it reconnects through the gate, which refuses the refresh: this address spent its
  // one refresh of the minute below.
  const carol = new CliProcess(t, 'chat --register carol', ['chat', '--gate', gateUrl, '--user', 'carol', '--register', '--password', 'carols own password']);
  await carol.waitFor('logged in', () => carol.stdout.includes('logged in as carol'), GATE_REGISTER_MS);
  t.match(carol.stdout, '* the name carol is taken: logging in to it with this password');
  carol.child.kill('SIGSTOP');
  await node.waitForLog({ msg: 'closing connection', code: 'SB_ERR_IDLE_TIMEOUT' });
  await fetch(`${gateUrl}/api/refresh`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ refreshToken: 'rt1.spent.here' }) });
  carol.child.kill('SIGCONT');
  await carol.waitFor('the refused reconnect', () => carol.stdout.includes('reconnect failed'));
  t.match(carol.stdout, /^\* connection lost: SB_ERR_IDLE_TIMEOUT .*; reconnecting in /m);
  t.match(carol.stdout, /^\* reconnect failed: SB_ERR_RATE_LIMITED more than 1 refreshes and logouts from this address within 60 s; retry later; reconnecting in \d+ s$/m);
  t.ok(carol.alive, 'still trying, as it should after a 429');
});

t.test('through the gate: a reconnect after the access token expired refreshes it, and the password is never sent again', async (t) => {
  const node = new CliProcess(t, 'start', ['start', '--port', '0', '--gate-port', '0', '--dev', '--secret', SECRET, '--log-level', 'info', '--token-ttl-s', '1', '--heartbeat-interval-ms', '1000', '--idle-intervals', '2']);
  const gateUrl = `http://127.0.0.1:${String((await node.waitForLog({ msg: 'gate listening' })).port)}`;
  await registerThroughGate(gateUrl, 'bob', 'a password long enough');
  const bob = new ImClient({ uid: 'bob', deviceId: 'phone', retryStrategy: false, endpoint: gateEndpoint(gateUrl, { username: 'bob', password: 'a password long enough', deviceId: 'phone' }) });
  const heard: string[] = [];
  bob.on('message', (m) => heard.push(m.content));
  t.teardown(() => bob.close());
  await bob.connect();
  const alice = new CliProcess(t, 'chat --gate alice', ['chat', '--gate', gateUrl, '--user', 'alice', '--register', '--password', 'alices password here']);
  await alice.waitFor('logged in', () => alice.stdout.includes('logged in as alice'), GATE_REGISTER_MS);
  const login = await node.waitForLog({ msg: 'login', uid: 'alice' });
  // Stopped until the worker closed it as idle (2 s: past the 1 s access token), then resumed.
  alice.child.kill('SIGSTOP');
  await node.waitForLog({ msg: 'closing connection', code: 'SB_ERR_IDLE_TIMEOUT' });
  alice.child.kill('SIGCONT');
  await alice.waitFor('logged in again', () => alice.stdout.split('logged in as alice').length === 3);
  t.ok(node.logs((l) => l.msg === 'refresh' && l.uid === 'alice').length >= 1, 'the gate refreshed the login');
  t.equal(node.logs((l) => l.msg === 'login' && l.component === 'gate' && l.uid === 'alice').length, 1, 'and saw one password login only');
  alice.child.stdin.write('@bob after the expiry\n');
  await until('bob got it', () => heard.includes('after the expiry'));
  alice.child.stdin.end();
  t.equal((await alice.exit(EXIT_MS)).code, 0);
  await node.waitForLog({ msg: 'logout', uid: 'alice', deviceId: 'cli' });
  t.ok(login, 'the first login was logged');
});

t.test('groups with a token: "#<id> text" is stored in the group, deliveries and events print with the group\'s name, /groups says it needs --gate', async (t) => {
  const n = await startNode(t, {}, { secret: SECRET });
  const group = await n.node.groups.create('bob', 'team', ['alice']);
  n.node.groupNotifier.publish({ group: group.id, seq: 1, added: ['bob', 'alice'] });
  const bob = new ImClient({ host: '127.0.0.1', port: n.port, uid: 'bob', deviceId: 'bob-phone', token: n.token('bob'), groups: true, retryStrategy: false });
  const heard: string[] = [];
  bob.on('groupMessage', (m) => heard.push(`${m.from}: ${m.content}`));
  t.teardown(() => bob.close());
  await bob.connect();

  const alice = chat(t, n, 'alice');
  // The created event (the sync of a device new to the group) names it.
  await alice.waitFor('the created event', () => alice.stdout.includes('[#team] * bob created the group "team" with alice'));
  alice.child.stdin.write(`#${group.id} hello team\n#team by its name\n`);
  await alice.waitFor('both stored', () => (alice.stdout.match(/^✓ stored \(#team #\d+\)$/gm)?.length ?? 0) === 2);
  t.match(alice.stdout, /^✓ stored \(#team #2\)$/m, "the group's seq");
  await until('bob has both', () => heard.length === 2);
  t.same(heard, ['alice: hello team', 'alice: by its name']);

  await bob.sendToGroup(group.id, 'hi alice');
  await alice.waitFor('the delivery', () => alice.stdout.includes('[#team] bob: hi alice'));
  const added = await n.node.groups.addMembers(group.id, 'bob', ['carol']);
  n.node.groupNotifier.publish({ group: group.id, seq: added.seq!, added: added.uids });
  await alice.waitFor('the event', () => alice.stdout.includes('[#team] * bob added carol'));

  alice.child.stdin.end('/groups\n#nosuch hi\n');
  t.equal((await alice.exit(EXIT_MS)).code, 1, 'refused lines: exit 1');
  t.match(alice.stdout, /^\* \/groups refused: SB_ERR_BAD_REQUEST \/groups needs --gate/m);
  t.match(alice.stdout, /^\* not sent to #nosuch: SB_ERR_BAD_GROUP no group named "nosuch" known: use its id/m);
  t.notMatch(alice.stdout, /alice: hello team/, 'her own messages are not printed back');
});

t.test('groups through the gate: /create, #name, /groups, /members, /add, /remove, /leave as typed, the other member told live', async (t) => {
  const node = new CliProcess(t, 'start', ['start', '--port', '0', '--gate-port', '0', '--dev', '--secret', SECRET, '--log-level', 'info']);
  const gateUrl = `http://127.0.0.1:${String((await node.waitForLog({ msg: 'gate listening' })).port)}`;
  const password = 'a password long enough';
  for (const username of ['bob', 'carol']) await registerThroughGate(gateUrl, username, password);
  const bob = new ImClient({ uid: 'bob', deviceId: 'phone', groups: true, retryStrategy: false, endpoint: gateEndpoint(gateUrl, { username: 'bob', password, deviceId: 'phone' }) });
  const heard: string[] = [];
  bob.on('groupMessage', (m) => heard.push(`${m.from}: ${m.content}`));
  bob.on('groupEvent', (e) => heard.push(`* ${e.actor} ${e.event.type} ${(e.event.uids ?? []).join(',')}`));
  t.teardown(() => bob.close());
  await bob.connect();

  const alice = new CliProcess(t, 'chat --gate alice', ['chat', '--gate', gateUrl, '--user', 'alice', '--register', '--password', password]);
  await alice.waitFor('logged in', () => alice.stdout.includes('logged in as alice'), GATE_REGISTER_MS);
  alice.child.stdin.write('/create team Bob\n#team hello bob\n/groups\n/members team\n');
  await alice.waitFor('the members', () => alice.stdout.includes('* bob  member'));
  t.match(alice.stdout, /^\* created #team \((g[a-z2-7]{12})\) with 2 members$/m);
  const id = /created #team \((g[a-z2-7]{12})\)/.exec(alice.stdout)![1]!;
  t.match(alice.stdout, /^✓ stored \(#team #2\)$/m);
  t.match(alice.stdout, new RegExp(`^\\* ${id}  #team  owner$`, 'm'), '/groups: id, name, role');
  t.match(alice.stdout, /^\* #team: 2 members\n\* alice  owner\n\* bob  member$/m);
  await until('bob heard both', () => heard.length === 2);
  t.same(heard, ['* alice created bob', 'alice: hello bob']);

  alice.child.stdin.write('/add team carol\n/add team nobody\n/remove team carol\n');
  await alice.waitFor('the removal', () => alice.stdout.includes('* #team: removed carol'));
  t.match(alice.stdout, /^\* #team: added carol$/m);
  t.match(alice.stdout, /^\* \/add refused: SB_ERR_UNKNOWN_RECIPIENT /m);
  await until('bob heard the changes', () => heard.length === 4);
  t.same(heard.slice(2), ['* alice added carol', '* alice removed carol']);
  await alice.waitFor('its own events printed', () => alice.stdout.includes('[#team] * alice removed carol'));

  await bob.sendToGroup(id, 'bye');
  await alice.waitFor('the delivery', () => alice.stdout.includes('[#team] bob: bye'));
  alice.child.stdin.end('/leave team\n');
  t.equal((await alice.exit(EXIT_MS)).code, 1, 'a refused line (the unknown user, the owner leaving): exit 1');
  t.match(alice.stdout, /^\* \/leave refused: SB_ERR_GROUP_OWNER_CANNOT_LEAVE /m);
});

t.test('the logic behind the terminal: the password asked twice, the time shown', async (t) => {
  const asked = (answers: string[]) => {
    const prompts: string[] = [];
    return { prompts, ask: async (prompt: string) => (prompts.push(prompt), answers.shift()!) };
  };
  const ok = asked(['first-try-typo', 'first-try', 'the password', 'the password']);
  const said: string[] = [];
  t.equal(await askNewPassword(ok.ask, (l) => said.push(l)), 'the password', 'taken once both agree');
  t.same(ok.prompts, ['password: ', 'password again: ', 'password: ', 'password again: ']);
  t.same(said, ['* the two passwords differ; again']);

  const never = asked(['a', 'b', 'c', 'd', 'e', 'f']);
  const err = await askNewPassword(never.ask, () => {}).catch((e: unknown) => e);
  t.ok(err instanceof SwitchboardError && err.code === 'SB_ERR_BAD_PASSWORD', 'three differing pairs: SB_ERR_BAD_PASSWORD');

  // The seam for the server's stored time: shown when the delivery has one.
  t.equal(shownTime({ storedAt: 1_000 }, 5_000), 1_000, "the server's stored time when the delivery has it");
  t.equal(shownTime({ storedAt: undefined }, 5_000), 5_000, 'else the local receive time');
  const now = new Date(2024, 4, 6, 12, 0, 0).getTime();
  t.equal(formatTime(new Date(2024, 4, 6, 9, 5, 7).getTime(), now), '09:05:07', 'today: the time');
  t.equal(formatTime(new Date(2024, 4, 5, 23, 59, 59).getTime(), now), '2024-05-05 23:59:59', 'another day: with the date');
});
