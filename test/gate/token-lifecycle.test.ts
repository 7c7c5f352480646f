// The token lifecycle end to end in one process (an embedded switchboard: gate and worker, over
// real HTTP and real client sockets): refresh rotation, reuse detection, logout, password
// change, the operator's revoke, and the attacks on each. Every revocation must reach the
// worker: the revoked device's or user's open sessions are closed with SB_ERR_TOKEN_REVOKED and
// its older access tokens are refused at login.

import t, { type Test } from 'tap';
import { ImClient, type ImClientOptions } from '../../src/client/im-client.js';
import { GateSession, gateEndpoint, type GateTokens } from '../../src/client/gate-session.js';
import { SwitchboardError } from '../../src/errors.js';
import { PASSWORD, startEmbedded } from '../helpers/node.js';
import { until } from '../../testkit/wait.js';

t.setTimeout(120_000);

const ADMIN = 'an-operator-credential-of-32-characters-or-more';

interface Answer {
  status: number;
  body: Record<string, unknown> & { error?: { code: string; message: string } };
  retryAfter: string | null;
}

async function post(url: string, path: string, body: unknown, bearer?: string): Promise<Answer> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (bearer !== undefined) headers.authorization = `Bearer ${bearer}`;
  const response = await fetch(new URL(path, url), { method: 'POST', headers, body: JSON.stringify(body) });
  return { status: response.status, body: (await response.json()) as Answer['body'], retryAfter: response.headers.get('retry-after') };
}

const login = async (url: string, username: string, deviceId: string, password = PASSWORD) => post(url, '/api/login', { username, password, deviceId });

/** The status and code of a GET of the gate's `path` with the access token `bearer`. */
async function gateGet(url: string, path: string, bearer: string): Promise<[number, string | undefined]> {
  const response = await fetch(new URL(path, url), { headers: { authorization: `Bearer ${bearer}` } });
  const body = (await response.json()) as { error?: { code: string } };
  return [response.status, body.error?.code];
}

/** The gate's routes of a logged-in user, one of each kind. */
const USER_ROUTES = ['/api/settings', '/api/conversations', '/api/groups'];

/** A client logged in at the worker with the tokens `tokens`, recording how it ends. */
async function connect(t: Test, worker: { host: string; port: number }, uid: string, deviceId: string, token: string, extra: Partial<ImClientOptions> = {}) {
  const client = new ImClient({ host: worker.host, port: worker.port, token, uid, deviceId, retryStrategy: false, ...extra });
  const ends: string[] = [];
  client.on('disconnect', ({ reason }) => ends.push(reason.code));
  client.on('error', () => {});
  t.teardown(() => client.close());
  await client.connect();
  return { client, ends };
}

/** The code a login with `token` is refused with at the worker (or 'ok'). */
async function workerLogin(t: Test, worker: { host: string; port: number }, uid: string, deviceId: string, token: string): Promise<string> {
  const client = new ImClient({ host: worker.host, port: worker.port, token, uid, deviceId, retryStrategy: false });
  t.teardown(() => client.close());
  return client.connect().then(
    () => (client.close(), 'ok'),
    (err: SwitchboardError) => err.code,
  );
}

t.test('login returns an access token and a refresh token; a refresh rotates both and the old refresh token is spent', async (t) => {
  const { url } = await startEmbedded(t, ['alice']);
  const first = await login(url, 'alice', 'phone');
  t.equal(first.status, 200);
  t.match(first.body, { uid: 'alice', token: /^sb2\./, refreshToken: /^rt1\./, expiresAt: Number, refreshExpiresAt: Number, worker: { port: Number } });
  const second = await post(url, '/api/refresh', { refreshToken: first.body.refreshToken });
  t.equal(second.status, 200);
  t.match(second.body, { uid: 'alice', token: /^sb2\./, refreshToken: /^rt1\./, worker: { port: Number } });
  t.not(second.body.refreshToken, first.body.refreshToken, 'a new refresh token');
  t.equal(second.body.refreshExpiresAt, first.body.refreshExpiresAt, 'the login keeps its absolute end');
  const worker = first.body.worker as { host: string; port: number };
  t.equal(await workerLogin(t, worker, 'alice', 'phone', second.body.token as string), 'ok', 'the refreshed access token logs in');
  const third = await post(url, '/api/refresh', { refreshToken: second.body.refreshToken });
  t.equal(third.status, 200, 'and the new refresh token refreshes again');
});

t.test('attack: a rotated refresh token used again revokes the login on every holder, and the device is logged out', async (t) => {
  const { url } = await startEmbedded(t, ['alice']);
  const first = await login(url, 'alice', 'phone');
  const worker = first.body.worker as { host: string; port: number };
  // The legitimate app refreshes; a thief kept a copy of the first refresh token.
  const legit = await post(url, '/api/refresh', { refreshToken: first.body.refreshToken });
  const open = await connect(t, worker, 'alice', 'phone', legit.body.token as string);
  const stolen = await post(url, '/api/refresh', { refreshToken: first.body.refreshToken });
  t.equal(stolen.status, 401);
  t.equal(stolen.body.error?.code, 'SB_ERR_REFRESH_REUSED', 'the reuse is named');
  t.equal(stolen.body.token, undefined, 'and nothing is issued');
  const after = await post(url, '/api/refresh', { refreshToken: legit.body.refreshToken });
  t.equal(after.body.error?.code, 'SB_ERR_REFRESH_INVALID', "the legitimate holder's current token is refused too: the whole family is revoked");
  await until('the open session closed', () => open.ends.includes('SB_ERR_TOKEN_REVOKED'));
  t.equal(await workerLogin(t, worker, 'alice', 'phone', legit.body.token as string), 'SB_ERR_TOKEN_REVOKED', 'an access token of the family issued before is refused at login');
  const again = await login(url, 'alice', 'phone');
  t.equal(await workerLogin(t, worker, 'alice', 'phone', again.body.token as string), 'ok', 'a new password login works');
});

t.test('attack: forged and modified refresh tokens are refused and change nothing', async (t) => {
  const { url } = await startEmbedded(t, ['alice', 'mallory']);
  const alice = await login(url, 'alice', 'phone');
  const real = alice.body.refreshToken as string;
  const [prefix, payload, secret] = real.split('.') as [string, string, string];
  const flip = (s: string) => s.slice(0, -2) + (s.at(-2) === 'A' ? 'B' : 'A') + s.at(-1);
  const claims = JSON.parse(Buffer.from(payload, 'base64url').toString()) as { u: string; f: string; g: number };
  const encode = (c: object) => Buffer.from(JSON.stringify(c)).toString('base64url');
  const forgeries: Record<string, unknown> = {
    'the random part changed': `${prefix}.${payload}.${flip(secret)}`,
    'a random part of another length': `${prefix}.${payload}.${secret}A`,
    'the payload names the next generation': `${prefix}.${encode({ ...claims, g: claims.g + 1 })}.${secret}`,
    'the payload names another user': `${prefix}.${encode({ ...claims, u: 'mallory' })}.${secret}`,
    'an access token': alice.body.token,
    garbage: 'rt1.e30.x',
    'not a string': 42,
  };
  for (const [name, refreshToken] of Object.entries(forgeries)) {
    const answer = await post(url, '/api/refresh', { refreshToken });
    t.equal(answer.status, typeof refreshToken === 'string' ? 401 : 400, `${name}: refused`);
    if (typeof refreshToken === 'string') t.equal(answer.body.error?.code, 'SB_ERR_REFRESH_INVALID', `${name}: SB_ERR_REFRESH_INVALID`);
  }
  const still = await post(url, '/api/refresh', { refreshToken: real });
  t.equal(still.status, 200, 'the real token still refreshes: no forgery revoked the family');
});

t.test('logout ends the device: its refresh token, its older access tokens and its open session; others stay', async (t) => {
  const { url } = await startEmbedded(t, ['alice', 'mallory']);
  const phone = await login(url, 'alice', 'phone');
  const laptop = await login(url, 'alice', 'laptop');
  const mallory = await login(url, 'mallory', 'evil');
  const worker = phone.body.worker as { host: string; port: number };
  const phoneSession = await connect(t, worker, 'alice', 'phone', phone.body.token as string);
  const laptopSession = await connect(t, worker, 'alice', 'laptop', laptop.body.token as string);

  // Attack: mallory, logged in herself, sends alice's refresh token with her own access token.
  const crossed = await post(url, '/api/logout', { refreshToken: phone.body.refreshToken }, mallory.body.token as string);
  t.equal(crossed.status, 403);
  t.equal(crossed.body.error?.code, 'SB_ERR_TOKEN_MISMATCH', "another user's refresh token on logout: refused");
  t.equal((await post(url, '/api/logout', { refreshToken: 'rt1.forged.token' })).body.error?.code, 'SB_ERR_REFRESH_INVALID', 'a forged one: refused');
  t.same(phoneSession.ends, [], 'nothing was revoked by either');

  const out = await post(url, '/api/logout', { refreshToken: phone.body.refreshToken }, phone.body.token as string);
  t.equal(out.status, 200);
  t.match(out.body, { uid: 'alice', deviceId: 'phone', loggedOut: true });
  await until('the phone session closed', () => phoneSession.ends.includes('SB_ERR_TOKEN_REVOKED'));
  t.equal((await post(url, '/api/refresh', { refreshToken: phone.body.refreshToken })).body.error?.code, 'SB_ERR_REFRESH_INVALID', 'its refresh token is spent');
  t.equal(await workerLogin(t, worker, 'alice', 'phone', phone.body.token as string), 'SB_ERR_TOKEN_REVOKED', 'its access token is refused at login');
  t.equal(laptopSession.client.status, 'ready', 'the laptop stays logged in');
  t.equal((await post(url, '/api/refresh', { refreshToken: laptop.body.refreshToken })).status, 200, "and its login refreshes");
});

t.test('a password change needs the old password and ends every login of the user', async (t) => {
  const { url } = await startEmbedded(t, ['alice', 'bob']);
  const phone = await login(url, 'alice', 'phone');
  const laptop = await login(url, 'alice', 'laptop');
  const bob = await login(url, 'bob', 'phone');
  const worker = phone.body.worker as { host: string; port: number };
  const sessions = [await connect(t, worker, 'alice', 'phone', phone.body.token as string), await connect(t, worker, 'alice', 'laptop', laptop.body.token as string)];
  const bobSession = await connect(t, worker, 'bob', 'phone', bob.body.token as string);
  const NEW = 'another password long enough';

  const wrong = await post(url, '/api/password', { oldPassword: 'not the password', newPassword: NEW }, phone.body.token as string);
  t.equal(wrong.status, 401);
  t.equal(wrong.body.error?.code, 'SB_ERR_LOGIN_FAILED', 'a wrong old password: refused');
  t.equal((await post(url, '/api/password', { oldPassword: PASSWORD, newPassword: NEW })).body.error?.code, 'SB_ERR_NO_TOKEN', 'no access token: refused');
  t.equal((await post(url, '/api/password', { oldPassword: PASSWORD, newPassword: 'short' }, phone.body.token as string)).body.error?.code, 'SB_ERR_BAD_PASSWORD', 'a new password that breaks the rule');

  const changed = await post(url, '/api/password', { oldPassword: PASSWORD, newPassword: NEW }, phone.body.token as string);
  t.equal(changed.status, 200);
  t.match(changed.body, { uid: 'alice', changed: true, revokedLogins: 2 });
  await until('both sessions of alice closed', () => sessions.every((s) => s.ends.includes('SB_ERR_TOKEN_REVOKED')));
  for (const old of [phone, laptop]) t.equal((await post(url, '/api/refresh', { refreshToken: old.body.refreshToken })).body.error?.code, 'SB_ERR_REFRESH_INVALID', 'every refresh token of the user is spent');
  t.equal(await workerLogin(t, worker, 'alice', 'laptop', laptop.body.token as string), 'SB_ERR_TOKEN_REVOKED', 'and every older access token refused');
  for (const path of USER_ROUTES) t.same(await gateGet(url, path, phone.body.token as string), [401, 'SB_ERR_TOKEN_REVOKED'], `the gate's ${path} refuses an older access token too`);
  t.equal((await post(url, '/api/password', { oldPassword: NEW, newPassword: PASSWORD }, laptop.body.token as string)).body.error?.code, 'SB_ERR_TOKEN_REVOKED', 'and so does a second password change with one');
  t.equal((await login(url, 'alice', 'phone')).status, 401, 'the old password no longer logs in');
  const again = await login(url, 'alice', 'phone', NEW);
  t.equal(again.status, 200, 'the new one does');
  for (const path of USER_ROUTES) t.equal((await gateGet(url, path, again.body.token as string))[0], 200, `the new login's token serves ${path}`);
  t.equal(bobSession.client.status, 'ready', 'another user is untouched');
});

t.test('the admin route: absent without a credential, refused with a wrong one, revokes a user with the right one', async (t) => {
  const closed = await startEmbedded(t, ['alice']);
  const none = await post(closed.url, '/api/admin/users/alice/revoke', {}, ADMIN);
  t.equal(none.status, 404, 'no admin credential configured: there is no admin route');
  t.equal(none.body.error?.code, 'SB_ERR_NOT_FOUND');

  const { url } = await startEmbedded(t, ['alice', 'bob'], { adminToken: ADMIN });
  const alice = await login(url, 'alice', 'phone');
  const bob = await login(url, 'bob', 'phone');
  const worker = alice.body.worker as { host: string; port: number };
  const aliceSession = await connect(t, worker, 'alice', 'phone', alice.body.token as string);
  const bobSession = await connect(t, worker, 'bob', 'phone', bob.body.token as string);
  for (const [name, credential] of [['no credential', undefined], ['a wrong one', `${ADMIN}x`], ['a prefix of it', ADMIN.slice(0, 10)], ["a user's access token", alice.body.token as string]] as const) {
    const answer = await post(url, '/api/admin/users/alice/revoke', {}, credential);
    t.equal(answer.status, 401, `${name}: 401`);
    t.equal(answer.body.error?.code, 'SB_ERR_ADMIN_AUTH_FAILED', `${name}: SB_ERR_ADMIN_AUTH_FAILED`);
  }
  t.same(aliceSession.ends, [], 'nothing was revoked');
  t.equal((await post(url, '/api/admin/users/nobody/revoke', {}, ADMIN)).body.error?.code, 'SB_ERR_UNKNOWN_RECIPIENT', 'an unknown user');

  const revoked = await post(url, '/api/admin/users/alice/revoke', {}, ADMIN);
  t.equal(revoked.status, 200);
  t.match(revoked.body, { uid: 'alice', revokedLogins: 1, revokedBefore: Number });
  await until('alice closed', () => aliceSession.ends.includes('SB_ERR_TOKEN_REVOKED'));
  t.equal(await workerLogin(t, worker, 'alice', 'phone', alice.body.token as string), 'SB_ERR_TOKEN_REVOKED', 'attack: an access token issued before the revocation is refused');
  t.equal((await post(url, '/api/refresh', { refreshToken: alice.body.refreshToken })).body.error?.code, 'SB_ERR_REFRESH_INVALID');
  t.equal(bobSession.client.status, 'ready', 'bob is untouched');
  const back = await login(url, 'alice', 'phone');
  t.equal(await workerLogin(t, worker, 'alice', 'phone', back.body.token as string), 'ok', 'a login after the revocation works');
});

t.test('attack: flooding /api/refresh from one address is rate limited', async (t) => {
  const { url } = await startEmbedded(t, ['alice'], { gateLimits: { refreshRequests: { max: 5, windowMs: 60_000 } } });
  const statuses: number[] = [];
  let last: Answer | undefined;
  for (let i = 0; i < 8; i++) {
    last = await post(url, '/api/refresh', { refreshToken: `rt1.guess${i}.x` });
    statuses.push(last.status);
  }
  t.same(statuses, [401, 401, 401, 401, 401, 429, 429, 429], 'five guesses, then 429');
  t.equal(last!.body.error?.code, 'SB_ERR_RATE_LIMITED');
  t.ok(Number(last!.retryAfter) >= 1, 'with retry-after');
  const real = await login(url, 'alice', 'phone');
  t.equal((await post(url, '/api/refresh', { refreshToken: real.body.refreshToken })).status, 429, 'a real token from that address waits too');
  t.equal((await post(url, '/api/logout', { refreshToken: real.body.refreshToken })).status, 429, 'and so does a logout');
});

t.test('logins are capped per user: the oldest is evicted', async (t) => {
  const { url } = await startEmbedded(t, ['alice'], { gateLimits: { maxFamiliesPerUser: 2 } });
  const logins = [await login(url, 'alice', 'a'), await login(url, 'alice', 'b'), await login(url, 'alice', 'c')];
  const answers = await Promise.all(logins.map((l) => post(url, '/api/refresh', { refreshToken: l.body.refreshToken })));
  t.same(answers.map((a) => a.status), [401, 200, 200], 'the first login was evicted by the third');
});

t.test('SDK: a client keeps chatting across access-token expiries without its password, and learns its login ended', async (t) => {
  const { url, switchboard } = await startEmbedded(t, ['alice', 'bob'], { gateLimits: { tokenTtlMs: 1_000 } });
  const saved: (GateTokens | undefined)[] = [];
  let session: GateSession | undefined;
  const alice = new ImClient({ uid: 'alice', deviceId: 'phone', retryStrategy: () => 20, endpoint: gateEndpoint(url, { username: 'alice', password: PASSWORD, deviceId: 'phone' }, (s) => (session = s), { onTokens: (tokens) => saved.push(tokens) }) });
  const errors: SwitchboardError[] = [];
  alice.on('error', (err) => errors.push(err as SwitchboardError));
  t.teardown(() => alice.close());
  const bobLogin = await GateSession.login(url, { username: 'bob', password: PASSWORD, deviceId: 'phone' });
  const received: string[] = [];
  const bob = new ImClient({ uid: 'bob', deviceId: 'phone', endpoint: gateEndpoint(url, bobLogin) });
  bob.on('message', (m) => received.push(m.content));
  t.teardown(() => bob.close());
  await Promise.all([alice.connect(), bob.connect()]);
  await alice.send('bob', 'one');
  const firstRefresh = session!.tokens!.refreshToken;

  for (const round of ['two', 'three']) {
    // Past the access token's lifetime, the connection drops: the reconnect needs a new token.
    await until('the access token expired', () => Date.now() > session!.tokens!.expiresAt);
    const local = switchboard.node!.server.sessions.byUser('alice')[0]!;
    local.outbound.close({ code: 'SB_ERR_IDLE_TIMEOUT', reason: 'test: drop the connection' });
    await until('alice reconnected', () => alice.status === 'ready' && switchboard.node!.server.sessions.byUser('alice')[0] !== local);
    await alice.send('bob', round);
  }
  await until('bob got all three', () => received.length === 3);
  t.same(received, ['one', 'two', 'three']);
  t.not(session!.tokens!.refreshToken, firstRefresh, 'the refresh token rotated');
  t.ok(saved.length >= 3 && saved.every((s) => s !== undefined), 'onTokens was told every new pair (what an app persists)');

  // A thief refreshes with alice's current refresh token first: her next refresh is a reuse.
  const thief = await post(url, '/api/refresh', { refreshToken: session!.tokens!.refreshToken });
  t.equal(thief.status, 200, "the thief's first use looks like a rotation");
  await until('the access token expired', () => Date.now() > session!.tokens!.expiresAt);
  switchboard.node!.server.sessions.byUser('alice')[0]!.outbound.close({ code: 'SB_ERR_IDLE_TIMEOUT', reason: 'test: drop the connection' });
  await until('alice gave up', () => alice.status === 'closed');
  t.equal(errors[0]?.code, 'SB_ERR_REFRESH_REUSED', 'the client ends with a clear error: log in with the password');
  t.equal(saved.at(-1), undefined, 'and onTokens is told to forget the tokens');
  t.equal((await post(url, '/api/refresh', { refreshToken: thief.body.refreshToken })).body.error?.code, 'SB_ERR_REFRESH_INVALID', "the thief's token is dead too");
});

t.test('SDK: a login refused as SB_ERR_TOKEN_EXPIRED is retried with a token the endpoint refreshes', async (t) => {
  const { url, switchboard } = await startEmbedded(t, ['alice']);
  const signer = switchboard.node!.signer;
  const hints: (string | undefined)[] = [];
  const worker = switchboard.node!.server.info!;
  const alice = new ImClient({
    uid: 'alice',
    deviceId: 'phone',
    retryStrategy: () => 20,
    endpoint: async (hint) => {
      hints.push(hint?.reason);
      // Skewed clocks: the first token is already expired by the worker's.
      const now = hint?.reason === 'SB_ERR_TOKEN_EXPIRED' ? Date.now() : Date.now() - 120_000;
      return { host: worker.host, port: worker.port, token: signer.mint({ uid: 'alice', deviceId: 'phone', ttlMs: 60_000, now }) };
    },
  });
  t.teardown(() => alice.close());
  await alice.connect();
  t.same(hints, [undefined, 'SB_ERR_TOKEN_EXPIRED'], 'the refusal was passed to the endpoint, which then gave a fresh token');
  void url;

  // An endpoint that cannot do better: the second refusal in a row ends the client.
  let asked = 0;
  const stuck = new ImClient({
    uid: 'alice',
    deviceId: 'tablet',
    retryStrategy: () => 20,
    endpoint: async () => (asked++, { host: worker.host, port: worker.port, token: signer.mint({ uid: 'alice', deviceId: 'tablet', ttlMs: 1_000, now: Date.now() - 60_000 }) }),
  });
  t.teardown(() => stuck.close());
  t.match(await stuck.connect().catch((err: SwitchboardError) => err), { code: 'SB_ERR_TOKEN_EXPIRED' }, 'it gives up with the refusal');
  t.equal(asked, 2, 'after one retry');
});
