// The HTTP gate in process, over real HTTP and real worker sockets: registration and its rules,
// login (a token the worker accepts, and the least-loaded worker), the one generic refusal for
// a wrong password and an unknown user, rate limits and the hashing bound, request hygiene
// (body limit, bad JSON, schema), stats and health, and the SDK's gateEndpoint, which follows
// the registry's view from a stopped worker to a newly started one.

import t, { type Test } from 'tap';
import net, { type AddressInfo } from 'node:net';
import { WebGate, DEFAULT_GATE_LIMITS, type GateLimits, type WebGateOptions } from '../../src/gate/web-gate.js';
import { MemoryUserStore } from '../../src/users/memory-user-store.js';
import type { NewUser, UserRecord } from '../../src/users/user-store.js';
import { PasswordHasher } from '../../src/auth/password.js';
import { TokenSigner } from '../../src/auth/token.js';
import { StaticRegistry } from '../../src/registry/static-registry.js';
import type { Registry } from '../../src/registry/registry.js';
import type { ImNode, WorkerAnnouncement } from '../../src/registry/im-node.js';
import { MemoryInboxStore } from '../../src/inbox/memory-inbox-store.js';
import { createNode, type NodeOptions, type SwitchboardNode } from '../../src/node.js';
import { ImClient, type ImClientOptions, type IncomingMessage } from '../../src/client/im-client.js';
import { loginThroughGate, registerThroughGate, type GateLogin } from '../../src/client/gate-login.js';
import { gateEndpoint } from '../../src/client/gate-session.js';
import { SwitchboardError } from '../../src/errors.js';
import { silentLogger } from '../../src/log.js';
import { TEST_SECRET } from '../helpers/node.js';
import { sleep, until } from '../../testkit/wait.js';
import { startRedis } from '../helpers/redis.js';
import { RedisUserStore } from '../../src/users/redis-user-store.js';
import { RedisRateLimitStore } from '../../src/gate/redis-rate-limit-store.js';
import { readFileSync } from 'node:fs';

const CHEAP = { N: 2 ** 14, r: 8, p: 1 };
const PASSWORD = 'correct horse battery staple';
const WAIT_MS = 10_000;

// ---------------------------------------------------------------------------------------------
// Workers and registries.

/**
 * An in-process registry service: what any member registers, every member and observer sees,
 * as with ZooKeeper. Lets two nodes and a gate share one changing view.
 */
class SharedRegistry {
  readonly #workers = new Map<string, ImNode>();
  readonly #listeners = new Set<(workers: readonly ImNode[]) => void>();
  #ids = 0;

  get view(): readonly ImNode[] {
    return Object.freeze([...this.#workers.values()].map((w) => ({ ...w })));
  }

  /** A worker's registry. */
  member(): Registry {
    let self: ImNode | undefined;
    const registered = new Set<(self: ImNode) => void>();
    const subscriptions = new Set<() => void>();
    return {
      register: async (worker: WorkerAnnouncement) => {
        if (self) throw new SwitchboardError('SB_ERR_CONFIG', 'worker is already registered');
        self = { ...worker, id: `w${++this.#ids}` };
        this.#put(self);
        for (const listener of registered) listener({ ...self });
        return { ...self };
      },
      setBalance: (balance: number) => {
        if (!self || self.balance === balance) return;
        self = { ...self, balance };
        this.#put(self);
      },
      setReady: (ready: boolean) => {
        if (!self || self.ready === ready) return;
        self = { ...self, ready };
        this.#put(self);
      },
      registered: () => self !== undefined,
      workers: () => this.view,
      onChange: (listener) => {
        const off = this.#subscribe(listener);
        subscriptions.add(off);
        return off;
      },
      onRegistered: (listener) => {
        registered.add(listener);
        return () => registered.delete(listener);
      },
      close: async () => {
        for (const off of subscriptions) off();
        registered.clear();
        if (self) this.#delete(self.id);
        self = undefined;
      },
    };
  }

  /** What a gate holds: the view, registering nothing. */
  observer(): Registry {
    return {
      register: async () => {
        throw new SwitchboardError('SB_ERR_CONFIG', 'an observer does not register');
      },
      setBalance: () => {},
      setReady: () => {},
      registered: () => false,
      workers: () => this.view,
      onChange: (listener) => this.#subscribe(listener),
      onRegistered: () => () => {},
      close: async () => {},
    };
  }

  #subscribe(listener: (workers: readonly ImNode[]) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  #put(worker: ImNode): void {
    this.#workers.set(worker.id, { ...worker });
    this.#publish();
  }

  #delete(id: string): void {
    if (this.#workers.delete(id)) this.#publish();
  }

  #publish(): void {
    const view = this.view;
    for (const listener of this.#listeners) listener(view);
  }
}

/** An inbox several nodes share and that survives the node that closes it. */
class SharedInbox extends MemoryInboxStore {
  override async close(): Promise<void> {}
}

interface Worker {
  node: SwitchboardNode;
  info: ImNode;
  /** Stops once, however often called (also on teardown). */
  stop(): Promise<void>;
}

async function startWorker(t: Test, options: Partial<NodeOptions> = {}): Promise<Worker> {
  const node = createNode({ host: '127.0.0.1', port: 0, secret: TEST_SECRET, limits: { closeGraceMs: 200 }, ...options });
  const info = await node.start();
  let stopped: Promise<void> | undefined;
  const stop = () => (stopped ??= node.stop());
  t.teardown(stop);
  return { node, info, stop };
}

// ---------------------------------------------------------------------------------------------
// The gate and HTTP.

interface Reply<T = unknown> {
  status: number;
  headers: Headers;
  body: T;
}

interface ErrorBody {
  error: { code: string; message: string };
}

class TestGate {
  constructor(
    readonly gate: WebGate,
    readonly url: string,
    readonly users: MemoryUserStore,
    readonly hasher: PasswordHasher,
  ) {}

  async request<T>(method: string, path: string, init: { body?: string; contentType?: string } = {}): Promise<Reply<T>> {
    const response = await fetch(new URL(path, this.url), {
      method,
      headers: init.contentType ? { 'content-type': init.contentType } : {},
      body: init.body,
    });
    const text = await response.text();
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {
      // Not JSON: the test sees the text.
    }
    return { status: response.status, headers: response.headers, body: body as T };
  }

  post<T = unknown>(path: string, body: unknown): Promise<Reply<T>> {
    return this.request<T>('POST', path, { body: JSON.stringify(body), contentType: 'application/json' });
  }

  get<T = unknown>(path: string): Promise<Reply<T>> {
    return this.request<T>('GET', path);
  }

  register(username: string, password = PASSWORD): Promise<Reply<{ uid: string; username: string } & Partial<ErrorBody>>> {
    return this.post('/api/users', { username, password });
  }

  login(username: string, password = PASSWORD, deviceId = 'phone'): Promise<Reply<GateLogin & Partial<ErrorBody>>> {
    return this.post('/api/login', { username, password, deviceId });
  }

  /** Creates an account straight in the store (no request, no rate limit). */
  async addUser(username: string, password = PASSWORD): Promise<void> {
    await this.users.create({ username, passwordHash: await this.hasher.hash(password), createdAt: Date.now() });
  }
}

interface GateSetup extends Partial<Omit<WebGateOptions, 'limits'>> {
  limits?: Partial<GateLimits>;
}

/** Generous rate limits unless a test sets its own: only the rate-limit tests hit them. */
const TEST_LIMITS: GateLimits = {
  ...DEFAULT_GATE_LIMITS,
  perIp: { max: 10_000, windowMs: 60_000 },
  perUserIp: { max: 10_000, windowMs: 60_000 },
  perUser: { max: 10_000, windowMs: 60_000 },
};

async function startGate(t: Test, registry: Registry, setup: GateSetup = {}): Promise<TestGate> {
  const { limits, ...options } = setup;
  const users = (options.users as MemoryUserStore | undefined) ?? new MemoryUserStore();
  const hasher = options.hasher ?? new PasswordHasher(CHEAP);
  const gate = new WebGate({
    host: '127.0.0.1',
    port: 0,
    registry,
    users,
    signer: new TokenSigner(TEST_SECRET),
    hasher,
    registration: true,
    log: silentLogger(),
    ...options,
    limits: { ...TEST_LIMITS, ...limits },
  });
  const address: AddressInfo = await gate.listen();
  t.teardown(() => gate.close());
  return new TestGate(gate, `http://127.0.0.1:${address.port}`, users, hasher);
}

// ---------------------------------------------------------------------------------------------
// Clients.

class Inbox {
  readonly messages: IncomingMessage[] = [];
  constructor(readonly client: ImClient) {
    client.on('message', (m) => this.messages.push(m));
  }
  async atLeast(count: number): Promise<IncomingMessage[]> {
    await until(() => `${this.client.uid} got ${count} messages (has ${this.messages.length})`, () => this.messages.length >= count, WAIT_MS);
    return this.messages;
  }
}

function client(t: Test, options: ImClientOptions): { client: ImClient; inbox: Inbox } {
  const c = new ImClient({ retryStrategy: false, requestTimeoutMs: WAIT_MS, ...options });
  t.teardown(() => c.close());
  return { client: c, inbox: new Inbox(c) };
}

/** An SDK client logged in with what the gate answered. */
async function clientFrom(t: Test, login: GateLogin, deviceId = 'phone'): Promise<{ client: ImClient; inbox: Inbox }> {
  const c = client(t, { host: login.worker.host, port: login.worker.port, token: login.token, uid: login.uid, deviceId });
  await c.client.connect();
  return c;
}

async function rejectionCode(promise: Promise<unknown>): Promise<string | undefined> {
  try {
    await promise;
  } catch (err) {
    return (err as { code?: string }).code;
  }
  return undefined;
}

// ---------------------------------------------------------------------------------------------

t.test('registration: 201 with the normalised name; a duplicate (any case) is 409 SB_ERR_USERNAME_TAKEN', async (t) => {
  const w = await startWorker(t);
  const g = await startGate(t, w.node.registry);

  const created = await g.register('Alice_01');
  t.equal(created.status, 201);
  t.same(created.body, { uid: 'alice_01', username: 'alice_01' }, 'the user name is folded to lower case: that is the uid');
  const record = await g.users.get('alice_01');
  t.ok(record, 'the account is in the store');
  t.match(record?.passwordHash, /^scrypt\$16384\$8\$1\$/, 'with a scrypt hash made by the gate\'s hasher');
  t.notMatch(record?.passwordHash, PASSWORD, 'never the password');

  for (const name of ['Alice_01', 'alice_01', 'ALICE_01']) {
    const again = await g.register(name, 'another password entirely');
    t.equal(again.status, 409, `${name}: 409`);
    t.equal(again.body.error?.code, 'SB_ERR_USERNAME_TAKEN');
  }
  t.equal(await g.users.count(), 1, 'still one account');
  const login = await g.login('alice_01');
  t.equal(login.status, 200, 'the first password is still the one that works');
});

t.test('registration: bad user names and passwords are 400 with their codes, nothing is stored', async (t) => {
  const w = await startWorker(t);
  const g = await startGate(t, w.node.registry);
  for (const name of ['ab', 'x'.repeat(33), 'has space', 'semi;colon', 'ünïcode', '\u212Aelvin', 'a/b', '']) {
    const r = await g.register(name);
    const code = name === '' ? 'SB_ERR_BAD_REQUEST' : 'SB_ERR_BAD_USERNAME'; // '' fails the schema's minLength first
    t.equal(r.status, 400, `${JSON.stringify(name)}: 400`);
    t.equal(r.body.error?.code, code, `${JSON.stringify(name)}: ${code}`);
  }
  for (const [password, why] of [
    ['short', 'under 8 bytes'],
    ['1234567', '7 bytes'],
    ['\ud800 lone surrogate', 'not well-formed Unicode'],
    ['€'.repeat(342), '1026 bytes in UTF-8 (342 characters)'],
  ] as const) {
    const r = await g.register('bob', password);
    t.equal(r.status, 400, `${why}: 400`);
    t.equal(r.body.error?.code, 'SB_ERR_BAD_PASSWORD', `${why}: SB_ERR_BAD_PASSWORD`);
  }
  t.equal(await g.users.count(), 0, 'no account was created');
  t.equal((await g.register('bob', '12345678')).status, 201, 'exactly 8 bytes is enough');
  t.equal((await g.register('carol', '€'.repeat(341))).status, 201, '1023 bytes is within the maximum');
});

t.test('__proto__, constructor and other Object.prototype names are ordinary user names', async (t) => {
  const w = await startWorker(t);
  const g = await startGate(t, w.node.registry);
  for (const name of ['__proto__', 'constructor', 'toString', 'hasOwnProperty', '__defineGetter__', 'valueOf']) {
    const unknown = await g.login(name);
    t.equal(unknown.status, 401, `${name}: unknown before registration`);
    t.equal(unknown.body.error?.code, 'SB_ERR_LOGIN_FAILED');
    const created = await g.register(name);
    t.equal(created.status, 201, `${name}: registered`);
    t.same(created.body, { uid: name.toLowerCase(), username: name.toLowerCase() });
    t.equal((await g.register(name)).status, 409, `${name}: taken afterwards`);
    const login = await g.login(name);
    t.equal(login.status, 200, `${name}: logs in`);
    t.equal(login.body.uid, name.toLowerCase());
  }
  t.equal(await g.users.count(), 6);
  t.equal(({} as Record<string, unknown>).x, undefined, 'Object.prototype is untouched');

  // A JSON body with a __proto__ key is refused outright, not merged into anything.
  const poisoned = await g.request<ErrorBody>('POST', '/api/users', {
    body: '{"__proto__":{"admin":true},"username":"mallory","password":"correct horse battery staple"}',
    contentType: 'application/json',
  });
  t.equal(poisoned.status, 400);
  t.equal(poisoned.body.error.code, 'SB_ERR_BAD_REQUEST');
  t.equal(await g.users.get('mallory'), undefined);
});

t.test('login: a token and the worker; the worker accepts the token and the two users chat', async (t) => {
  const w = await startWorker(t);
  const g = await startGate(t, w.node.registry);
  await g.register('alice');
  await g.register('Bob');

  const before = Date.now();
  const a = await g.login('ALICE', PASSWORD, 'alice-phone');
  t.equal(a.status, 200);
  t.equal(a.body.uid, 'alice', 'the uid is the normalised name');
  t.match(a.body.token, /^sb2\.[\w-]+\.[\w-]+$/);
  t.match(a.body.refreshToken, /^rt1\.[\w-]+\.[\w-]{43}$/, 'and a refresh token');
  t.ok(a.body.refreshExpiresAt >= before + DEFAULT_GATE_LIMITS.refreshTtlMs, 'whose login lasts the refresh lifetime');
  t.same(a.body.worker, { id: w.info.id, host: '127.0.0.1', port: w.info.port }, 'the one worker, with no more than id, host and port');
  t.same(a.body.workers, [], 'no fallbacks with one worker');
  t.ok(a.body.expiresAt >= before + DEFAULT_GATE_LIMITS.tokenTtlMs, 'expires after the configured TTL');
  const claims = new TokenSigner(TEST_SECRET).verify(a.body.token);
  t.same(claims, { uid: 'alice', deviceId: 'alice-phone', expiresAt: a.body.expiresAt, issuedAt: a.body.expiresAt - DEFAULT_GATE_LIMITS.tokenTtlMs, keyId: 'default' }, 'the token is bound to the user and the device');

  const b = await g.login('bob', PASSWORD, 'bob-laptop');
  t.equal(b.status, 200);
  const alice = await clientFrom(t, a.body, 'alice-phone');
  const bob = await clientFrom(t, b.body, 'bob-laptop');
  t.equal(alice.client.status, 'ready', 'alice logged in to the worker with the gate\'s token');
  t.equal(w.node.server.sessions.size, 2);

  const sent = await alice.client.send('bob', 'hello bob');
  t.match(await bob.inbox.atLeast(1), [{ from: 'alice', to: 'bob', content: 'hello bob', seq: sent.seq }]);
  await bob.client.send('alice', 'hi alice');
  t.match(await alice.inbox.atLeast(1), [{ from: 'bob', content: 'hi alice' }]);

  // The token names a device: another device of alice cannot use it.
  const other = client(t, { host: a.body.worker.host, port: a.body.worker.port, token: a.body.token, uid: 'alice', deviceId: 'alice-tablet' });
  t.equal(await rejectionCode(other.client.connect()), 'SB_ERR_TOKEN_MISMATCH', 'another device: SB_ERR_TOKEN_MISMATCH');
  const bobAsAlice = client(t, { host: a.body.worker.host, port: a.body.worker.port, token: a.body.token, uid: 'bob', deviceId: 'alice-phone' });
  t.equal(await rejectionCode(bobAsAlice.client.connect()), 'SB_ERR_TOKEN_MISMATCH', 'another user: SB_ERR_TOKEN_MISMATCH');
});

t.test('a wrong password, an unknown user and a malformed name get the same 401', async (t) => {
  const w = await startWorker(t);
  const g = await startGate(t, w.node.registry);
  await g.register('alice');
  const replies = {
    'wrong password': await g.login('alice', 'not the password'),
    'unknown user': await g.login('nobody', PASSWORD),
    'unknown user, wrong password': await g.login('nobody2', 'not the password'),
    'malformed name': await g.login('no such name!', PASSWORD),
    'another case of a wrong password': await g.login('ALICE', 'Correct horse battery staple'),
  };
  const bodies = Object.entries(replies).map(([why, r]) => {
    t.equal(r.status, 401, `${why}: 401`);
    return r.body;
  });
  t.same(bodies[0], { error: { code: 'SB_ERR_LOGIN_FAILED', message: 'wrong username or password' } });
  for (const body of bodies.slice(1)) t.same(body, bodies[0], 'byte for byte the same answer');
  t.notOk('token' in (bodies[0] as object));
});

t.test('an expired token from the gate is refused by the worker with SB_ERR_TOKEN_EXPIRED', async (t) => {
  const w = await startWorker(t);
  const g = await startGate(t, w.node.registry, { limits: { tokenTtlMs: -1_000 } });
  await g.register('alice');
  const login = await g.login('alice');
  t.equal(login.status, 200);
  t.ok(login.body.expiresAt < Date.now(), 'the token expired before it was handed out');
  const c = client(t, { host: login.body.worker.host, port: login.body.worker.port, token: login.body.token, uid: 'alice', deviceId: 'phone' });
  t.equal(await rejectionCode(c.client.connect()), 'SB_ERR_TOKEN_EXPIRED');
  t.equal(c.client.status, 'closed');
  t.equal(w.node.server.sessions.size, 0, 'no session was opened');
});

t.test('failed logins per name and address: 429 with retry-after, for that name in any case only; successes do not count', async (t) => {
  const w = await startWorker(t);
  const g = await startGate(t, w.node.registry, { limits: { perUserIp: { max: 3, windowMs: 60_000 } } });
  await g.register('alice');
  await g.register('bob');
  t.equal((await g.login('alice', 'wrong password')).status, 401);
  for (let i = 0; i < 5; i++) t.equal((await g.login('alice')).status, 200, `success ${i + 1} is not counted`);
  t.equal((await g.login('Alice', 'wrong password')).status, 401, 'the second failure, under another spelling');
  t.equal((await g.login('alice', 'wrong password')).status, 401, 'the third');
  const limited = await g.login('alice');
  t.equal(limited.status, 429, 'then even the right password is refused from this address');
  t.equal(limited.body.error?.code, 'SB_ERR_RATE_LIMITED');
  const retryAfter = Number(limited.headers.get('retry-after'));
  t.ok(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 60, `retry-after is whole seconds within the window (${retryAfter})`);
  t.equal((await g.login('ALICE')).status, 429, 'the limit is on the normalised name');
  t.equal((await g.login('bob')).status, 200, 'another user is not affected');

  const unknown = await Promise.all([1, 2, 3, 4].map(() => g.login('ghost')));
  t.same(
    unknown.map((r) => r.status).sort(),
    [401, 401, 401, 429],
    'unknown names are limited too, also when guessed at once: guessing costs the same as for a real user',
  );
});

t.test('rate limit per IP: registrations and logins share it, 429 with retry-after; health is not limited', async (t) => {
  const w = await startWorker(t);
  const g = await startGate(t, w.node.registry, { limits: { perIp: { max: 4, windowMs: 30_000 } } });
  t.equal((await g.register('alice')).status, 201);
  t.equal((await g.register('bob')).status, 201);
  t.equal((await g.login('alice')).status, 200);
  t.equal((await g.login('nobody')).status, 401);
  for (const [what, reply] of [
    ['a login', await g.login('bob')],
    ['a registration', await g.register('carol')],
  ] as const) {
    t.equal(reply.status, 429, `then ${what} is refused`);
    t.equal(reply.body.error?.code, 'SB_ERR_RATE_LIMITED');
    const retryAfter = Number(reply.headers.get('retry-after'));
    t.ok(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 30, `retry-after ${retryAfter} s is within the window`);
  }
  t.equal(await g.users.get('carol'), undefined, 'the refused registration created nothing');
  for (let i = 0; i < 10; i++) t.equal((await g.get('/healthz')).status, 200);
  t.equal((await g.get('/api/stats')).status, 200);
  t.equal((await g.get('/api/workers')).status, 200);
});

t.test('password hashes beyond maxConcurrentHashes are refused with 429 and retry-after 1', async (t) => {
  const w = await startWorker(t);
  /** A hasher whose verify waits for the test to let it go. */
  class HeldHasher extends PasswordHasher {
    held = 0;
    #release: () => void = () => {};
    readonly released = new Promise<void>((resolve) => (this.#release = resolve));
    override async verify(password: string, encoded: string): Promise<boolean> {
      this.held++;
      await this.released;
      return super.verify(password, encoded);
    }
    release(): void {
      this.#release();
    }
  }
  const hasher = new HeldHasher(CHEAP);
  const g = await startGate(t, w.node.registry, { hasher, limits: { maxConcurrentHashes: 1 } });
  await g.addUser('alice');
  await g.addUser('bob');
  const first = g.login('alice');
  await until('the first login is hashing', () => hasher.held === 1, WAIT_MS);
  const second = await g.login('bob');
  t.equal(second.status, 429, 'a second hash at once is refused');
  t.equal(second.body.error?.code, 'SB_ERR_RATE_LIMITED');
  t.equal(second.headers.get('retry-after'), '1');
  const register = await g.register('carol');
  t.equal(register.status, 429, 'registrations share the bound');
  hasher.release();
  t.equal((await first).status, 200, 'the first completes');
  t.equal((await g.login('bob')).status, 200, 'and the slot is free again');
  t.equal((await g.register('carol')).status, 201);
});

t.test('registration switched off: 403 SB_ERR_REGISTRATION_CLOSED; existing accounts still log in', async (t) => {
  const w = await startWorker(t);
  const g = await startGate(t, w.node.registry, { registration: false });
  await g.addUser('alice');
  const r = await g.register('bob');
  t.equal(r.status, 403);
  t.equal(r.body.error?.code, 'SB_ERR_REGISTRATION_CLOSED');
  t.equal(await g.users.get('bob'), undefined);
  t.equal((await g.register('alice')).status, 403, 'whether or not the name is taken');
  const login = await g.login('alice');
  t.equal(login.status, 200);
  await clientFrom(t, login.body);
  t.pass('and the token works');
});

t.test('request hygiene: body limit, bad JSON, schema violations, content type: 4xx with SB_ERR_BAD_REQUEST', async (t) => {
  const w = await startWorker(t);
  const g = await startGate(t, w.node.registry, { limits: { bodyLimit: 512 } });
  await g.addUser('alice');
  const json = (body: string) => ({ body, contentType: 'application/json' });
  const cases: [string, string, { body?: string; contentType?: string }, number][] = [
    ['a body over the limit (register)', '/api/users', json(JSON.stringify({ username: 'bob', password: 'x'.repeat(600) })), 413],
    ['a body over the limit (login)', '/api/login', json(JSON.stringify({ username: 'alice', password: PASSWORD, deviceId: 'd'.repeat(600) })), 413],
    ['invalid JSON', '/api/login', json('{"username": "alice", "password": '), 400],
    ['an empty JSON body', '/api/login', json(''), 400],
    ['JSON null', '/api/users', json('null'), 400],
    ['a JSON array', '/api/users', json('[1,2]'), 400],
    ['no password', '/api/users', json('{"username":"bob"}'), 400],
    ['no deviceId', '/api/login', json(JSON.stringify({ username: 'alice', password: PASSWORD })), 400],
    ['an empty deviceId', '/api/login', json(JSON.stringify({ username: 'alice', password: PASSWORD, deviceId: '' })), 400],
    ['an object for a user name', '/api/users', json(JSON.stringify({ username: { $ne: 1 }, password: PASSWORD })), 400],
    ['a user name over 64 characters', '/api/login', json(JSON.stringify({ username: 'a'.repeat(65), password: PASSWORD, deviceId: 'd' })), 400],
    ['a negative platform', '/api/login', json(JSON.stringify({ username: 'alice', password: PASSWORD, deviceId: 'd', platform: -1 })), 400],
    ['a fractional platform', '/api/login', json(JSON.stringify({ username: 'alice', password: PASSWORD, deviceId: 'd', platform: 1.5 })), 400],
    ['a platform above uint32', '/api/login', json(JSON.stringify({ username: 'alice', password: PASSWORD, deviceId: 'd', platform: 2 ** 32 })), 400],
    ['a form body', '/api/login', { body: 'username=alice&password=x', contentType: 'application/x-www-form-urlencoded' }, 415],
  ];
  for (const [what, path, init, status] of cases) {
    const r = await g.request<ErrorBody>('POST', path, init);
    t.equal(r.status, status, `${what}: ${status}`);
    t.equal(r.body.error?.code, 'SB_ERR_BAD_REQUEST', `${what}: SB_ERR_BAD_REQUEST`);
    t.type(r.body.error?.message, 'string');
  }
  t.equal(await g.users.count(), 1, 'nothing was registered');
  const ok = await g.post('/api/login', { username: 'alice', password: PASSWORD, deviceId: 'd', platform: 2 });
  t.equal(ok.status, 200, 'a valid login with a platform passes');
});

/**
 * Sends `head` and then `bodyBytes` body bytes, one every `everyMs` (the header itself one byte
 * at a time too when `slowHead`). Resolves once the server closed the connection or everything
 * was sent and answered, with what was sent by then and what came back.
 */
function trickle(port: number, { head, bodyBytes, everyMs, slowHead = false }: { head: string; bodyBytes: number; everyMs: number; slowHead?: boolean }) {
  return new Promise<{ closedByServer: boolean; sent: number; total: number; response: string }>((resolve) => {
    const bytes = Buffer.concat([Buffer.from(head), Buffer.alloc(bodyBytes, 0x20)]);
    let sent = slowHead ? 0 : Buffer.byteLength(head);
    let response = '';
    const socket = net.connect(port, '127.0.0.1');
    const done = (closedByServer: boolean) => {
      clearInterval(timer);
      socket.destroy();
      resolve({ closedByServer, sent, total: bytes.length, response });
    };
    if (!slowHead) socket.write(head);
    const timer = setInterval(() => {
      if (sent < bytes.length) socket.write(bytes.subarray(sent, ++sent));
    }, everyMs);
    socket.setEncoding('utf8').on('data', (chunk: string) => {
      response += chunk;
      // A complete answer after the whole body: the request got through, the server kept the connection.
      if (sent === bytes.length) done(false);
    });
    socket.on('end', () => done(true));
    socket.on('close', () => done(true));
    socket.on('error', () => done(true));
  });
}

t.test('a body or a header trickled in slower than the request timeout: the server cuts the connection first', async (t) => {
  const w = await startWorker(t);
  // 1 s to send a request; trickling takes 200 × 50 ms = 10 s.
  const g = await startGate(t, w.node.registry, { limits: { requestTimeoutMs: 1_000 } });
  const port = Number(new URL(g.url).port);
  const head = 'POST /api/login HTTP/1.1\r\nhost: gate\r\ncontent-type: application/json\r\ncontent-length: 200\r\n\r\n';
  const body = await trickle(port, { head, bodyBytes: 200, everyMs: 50 });
  t.ok(body.closedByServer, 'the server closed the connection of the slow body');
  t.ok(body.sent < body.total, `before the client had sent it all (${body.sent} of ${body.total} bytes)`);
  t.match(body.response, /^HTTP\/1\.1 408 /, 'answering 408 Request Timeout');

  const slowHead = `GET /healthz HTTP/1.1\r\nhost: gate\r\nx-padding: ${'p'.repeat(150)}\r\n\r\n`;
  const header = await trickle(port, { head: slowHead, bodyBytes: 0, everyMs: 50, slowHead: true });
  t.ok(header.closedByServer, 'the server closed the connection of the slow header');
  t.ok(header.sent < header.total, `before the client had sent it all (${header.sent} of ${header.total} bytes)`);

  t.equal((await g.get('/healthz')).status, 200, 'a request sent at once is served');
});

t.test('unknown routes and methods: 404 SB_ERR_NOT_FOUND', async (t) => {
  const w = await startWorker(t);
  const g = await startGate(t, w.node.registry);
  for (const [method, path] of [
    ['GET', '/'],
    ['GET', '/api/login'],
    ['GET', '/api/users'],
    ['POST', '/api/nothing'],
    ['DELETE', '/api/users'],
    ['GET', '/api/workers/extra'],
  ] as const) {
    const r = await g.request<ErrorBody>(method, path);
    t.equal(r.status, 404, `${method} ${path}: 404`);
    t.equal(r.body.error?.code, 'SB_ERR_NOT_FOUND');
  }
});

t.test('a failing user store is a 500 SB_ERR_INTERNAL that says nothing of the cause', async (t) => {
  const w = await startWorker(t);
  class BrokenStore extends MemoryUserStore {
    override async get(): Promise<UserRecord | undefined> {
      throw new Error('redis: connection refused to 10.0.0.7:6379');
    }
    override async create(_user: NewUser): Promise<boolean> {
      throw new Error('redis: connection refused to 10.0.0.7:6379');
    }
  }
  const g = await startGate(t, w.node.registry, { users: new BrokenStore() });
  for (const r of [await g.login('alice'), await g.register('alice')]) {
    t.equal(r.status, 500);
    t.same(r.body, { error: { code: 'SB_ERR_INTERNAL', message: 'internal error' } });
  }
});

t.test('a frozen Redis user store: 503 SB_ERR_STORE_UNAVAILABLE with retry-after, within the Redis timeout, naming no host', async (t) => {
  const redis = await startRedis(t);
  const w = await startWorker(t);
  const users = new RedisUserStore({ url: redis.url, timeoutMs: 300 });
  t.teardown(() => users.close());
  const g = await startGate(t, w.node.registry, { users: users as unknown as MemoryUserStore });
  t.equal((await g.register('alice')).status, 201, 'registered while Redis answers');
  redis.freeze();
  t.teardown(() => redis.thaw());
  for (const r of [await g.login('alice'), await g.register('bob')]) {
    t.equal(r.status, 503);
    t.same(r.body, { error: { code: 'SB_ERR_STORE_UNAVAILABLE', message: 'the gate cannot reach its account or rate-limit store; try again shortly' } });
    t.equal(r.headers.get('retry-after'), '1');
  }
  redis.thaw();
  await until('the store answers again', () => users.ping().then(() => true, () => false), WAIT_MS);
  t.equal((await g.login('alice')).status, 200, 'logins work again');
});

t.test('a frozen Redis rate-limit store: 503 SB_ERR_STORE_UNAVAILABLE with retry-after, as OPERATIONS.md says, never unlimited', async (t) => {
  const redis = await startRedis(t);
  const w = await startWorker(t);
  const rateLimits = new RedisRateLimitStore({ url: redis.url, timeoutMs: 300 });
  t.teardown(() => rateLimits.close());
  const g = await startGate(t, w.node.registry, { rateLimits });
  t.equal((await g.register('alice')).status, 201, 'registered while Redis answers');
  redis.freeze();
  t.teardown(() => redis.thaw());
  for (const r of [await g.login('alice'), await g.register('bob')]) {
    t.equal(r.status, 503);
    t.equal(r.body.error?.code, 'SB_ERR_STORE_UNAVAILABLE');
    t.equal(r.headers.get('retry-after'), '1');
  }
  const operations = readFileSync(new URL('../../OPERATIONS.md', import.meta.url), 'utf8').replace(/\s+/g, ' ');
  t.notMatch(operations, /If Redis cannot be reached, logins and registrations fail with 500/, 'OPERATIONS.md does not promise another answer');
});

t.test('no live worker: login is 503 SB_ERR_NO_WORKER, health says 0 workers', async (t) => {
  const g = await startGate(t, new StaticRegistry());
  await g.register('alice');
  const login = await g.login('alice');
  t.equal(login.status, 503);
  t.equal(login.body.error?.code, 'SB_ERR_NO_WORKER');
  t.same((await g.get('/healthz')).body, { ok: true, workers: 0 });
  t.same((await g.get('/api/workers')).body, { workers: [] });
});

t.test('/healthz and /api/workers show the registry view', async (t) => {
  const hub = new SharedRegistry();
  const a = await startWorker(t, { registry: hub.member() });
  const b = await startWorker(t, { registry: hub.member() });
  const g = await startGate(t, hub.observer());
  t.same((await g.get('/healthz')).body, { ok: true, workers: 2 });
  const token = a.node.signer.mint({ uid: 'alice', ttlMs: 60_000 });
  await client(t, { host: '127.0.0.1', port: a.info.port, token, uid: 'alice', deviceId: 'd1' }).client.connect();
  await client(t, { host: '127.0.0.1', port: a.info.port, token, uid: 'alice', deviceId: 'd2' }).client.connect();
  await until('a has balance 2 in the view', () => hub.view.find((w) => w.id === a.info.id)?.balance === 2, WAIT_MS);
  t.same((await g.get('/api/workers')).body, {
    workers: [
      { id: b.info.id, host: '127.0.0.1', port: b.info.port, balance: 0 },
      { id: a.info.id, host: '127.0.0.1', port: a.info.port, balance: 2 },
    ],
  }, 'least loaded first, id, address and balance only');
});

t.test('login names the least-loaded worker and the others as fallbacks', async (t) => {
  const hub = new SharedRegistry();
  const a = await startWorker(t, { registry: hub.member() });
  const b = await startWorker(t, { registry: hub.member() });
  const g = await startGate(t, hub.observer());
  await g.register('alice');
  const token = (uid: string) => a.node.signer.mint({ uid, ttlMs: 60_000 });
  // a: 2 sessions, b: 0.
  for (const uid of ['x1', 'x2']) await client(t, { host: '127.0.0.1', port: a.info.port, token: token(uid), uid, deviceId: 'd' }).client.connect();
  await until('the view has a at 2', () => hub.view.find((w) => w.id === a.info.id)?.balance === 2, WAIT_MS);
  for (let i = 0; i < 5; i++) {
    const login = await g.login('alice', PASSWORD, `d${i}`);
    t.equal(login.body.worker?.id, b.info.id, `login ${i}: the idle worker`);
    t.same(login.body.workers, [{ id: a.info.id, host: '127.0.0.1', port: a.info.port }], 'the busier one as the fallback');
  }
  // b: 3 sessions; now a (2) is the least loaded.
  for (const uid of ['y1', 'y2', 'y3']) await client(t, { host: '127.0.0.1', port: b.info.port, token: token(uid), uid, deviceId: 'd' }).client.connect();
  await until('the view has b at 3', () => hub.view.find((w) => w.id === b.info.id)?.balance === 3, WAIT_MS);
  const login = await g.login('alice', PASSWORD, 'dz');
  t.equal(login.body.worker?.id, a.info.id, 'the balance moved: so did the choice');
});

t.test('/api/stats follows logins and logouts (registry balances, and an injected online counter)', async (t) => {
  const w = await startWorker(t);
  const byRegistry = await startGate(t, w.node.registry);
  const server = w.node.server;
  const byCounter = await startGate(t, w.node.registry, {
    users: byRegistry.users,
    online: async () => ({ users: server.sessions.users, sessions: server.sessions.size }),
  });
  interface Stats {
    online: { users?: number; sessions: number };
    workers: { id: string; balance: number }[];
  }
  const expect = async (sessions: number, users: number, when: string) => {
    await until(
      `${when}: stats show ${sessions} sessions`,
      async () => (await byRegistry.get<Stats>('/api/stats')).body.online.sessions === sessions && (await byCounter.get<Stats>('/api/stats')).body.online.sessions === sessions,
      WAIT_MS,
    );
    t.same((await byRegistry.get<Stats>('/api/stats')).body, { online: { sessions }, workers: [{ id: w.info.id, balance: sessions }] }, `${when}: the registry's sum`);
    t.same((await byCounter.get<Stats>('/api/stats')).body, { online: { users, sessions }, workers: [{ id: w.info.id, balance: sessions }] }, `${when}: the counter's users and sessions`);
  };

  await expect(0, 0, 'at first');
  await byRegistry.register('alice');
  await byRegistry.register('bob');
  const alicePhone = await clientFrom(t, (await byRegistry.login('alice', PASSWORD, 'phone')).body, 'phone');
  await expect(1, 1, 'alice logged in');
  const aliceLaptop = await clientFrom(t, (await byCounter.login('alice', PASSWORD, 'laptop')).body, 'laptop');
  const bob = await clientFrom(t, (await byCounter.login('bob', PASSWORD, 'phone')).body, 'phone');
  await expect(3, 2, 'alice on two devices, bob on one');
  await alicePhone.client.logout();
  await expect(2, 2, 'alice logged out of one device');
  await bob.client.logout();
  await expect(1, 1, 'bob logged out');
  aliceLaptop.client.close();
  await expect(0, 0, 'alice\'s last connection closed without a logout');
});

t.test('SDK: registerThroughGate and loginThroughGate return the body or throw its code', async (t) => {
  const w = await startWorker(t);
  const g = await startGate(t, w.node.registry);
  t.same(await registerThroughGate(g.url, 'Alice', PASSWORD), { uid: 'alice', username: 'alice' });
  const taken = await rejectionCode(registerThroughGate(g.url, 'alice', PASSWORD));
  t.equal(taken, 'SB_ERR_USERNAME_TAKEN');
  t.equal(await rejectionCode(registerThroughGate(g.url, 'x', PASSWORD)), 'SB_ERR_BAD_USERNAME');
  const login = await loginThroughGate(g.url, { username: 'alice', password: PASSWORD, deviceId: 'phone' });
  t.equal(login.worker.port, w.info.port);
  t.equal(await rejectionCode(loginThroughGate(g.url, { username: 'alice', password: 'wrong password', deviceId: 'phone' })), 'SB_ERR_LOGIN_FAILED');
  let thrown: unknown;
  try {
    await loginThroughGate(g.url, { username: 'alice', password: 'wrong password', deviceId: 'phone' });
  } catch (err) {
    thrown = err;
  }
  t.ok(thrown instanceof SwitchboardError, 'a SwitchboardError');
  t.equal((thrown as Error).message, 'wrong username or password', 'with the gate\'s message');
});

t.test('SDK gateEndpoint: connects by name and password; a wrong password rejects connect() once', async (t) => {
  const w = await startWorker(t);
  let lookups = 0;
  class CountingStore extends MemoryUserStore {
    override get(username: string): Promise<UserRecord | undefined> {
      lookups++;
      return super.get(username);
    }
  }
  const g = await startGate(t, w.node.registry, { users: new CountingStore() });
  await g.register('alice');
  await g.register('bob');
  const alice = client(t, { uid: 'alice', deviceId: 'phone', endpoint: gateEndpoint(g.url, { username: 'Alice', password: PASSWORD, deviceId: 'phone' }) });
  const bob = client(t, { uid: 'bob', deviceId: 'phone', endpoint: gateEndpoint(g.url, { username: 'bob', password: PASSWORD, deviceId: 'phone' }) });
  await alice.client.connect();
  await bob.client.connect();
  t.equal(w.node.server.sessions.size, 2, 'both logged in to the worker');
  await alice.client.send('bob', 'through the gate');
  t.match(await bob.inbox.atLeast(1), [{ from: 'alice', content: 'through the gate' }]);

  const before = lookups;
  const wrong = new ImClient({
    uid: 'carol',
    deviceId: 'phone',
    retryStrategy: () => 10,
    endpoint: gateEndpoint(g.url, { username: 'alice', password: 'not the password', deviceId: 'phone' }),
  });
  t.teardown(() => wrong.close());
  t.equal(await rejectionCode(wrong.connect()), 'SB_ERR_LOGIN_FAILED');
  t.equal(wrong.status, 'closed', 'the client gives up: a refused password does not get better');
  await sleep(100);
  t.equal(lookups - before, 1, 'the gate was asked once, not again and again');
});

t.test('SDK gateEndpoint: a client whose worker stops moves to the newly registered one and syncs what it missed', async (t) => {
  const hub = new SharedRegistry();
  const inbox = new SharedInbox();
  const a = await startWorker(t, { registry: hub.member(), inbox });
  // A worker the gate does not hand out (not in the gate's registry), on the same inbox: the
  // sender stays connected while the recipient has no worker.
  const side = await startWorker(t, { registry: new StaticRegistry('side'), inbox });
  const g = await startGate(t, hub.observer());
  await g.register('alice');

  const statuses: string[] = [];
  const alice = client(t, {
    uid: 'alice',
    deviceId: 'phone',
    retryStrategy: () => 50,
    endpoint: gateEndpoint(g.url, { username: 'alice', password: PASSWORD, deviceId: 'phone' }),
  });
  alice.client.on('status', (s) => statuses.push(s));
  await alice.client.connect();
  t.equal(a.node.server.sessions.size, 1, 'alice is on worker a');

  // Live on a, before it stops.
  const carol = client(t, { host: '127.0.0.1', port: a.info.port, token: a.node.signer.mint({ uid: 'carol', ttlMs: 60_000 }), uid: 'carol', deviceId: 'd' });
  await carol.client.connect();
  const first = await carol.client.send('alice', 'before the move');
  t.match(await alice.inbox.atLeast(1), [{ content: 'before the move', seq: first.seq }]);
  carol.client.close();

  const closing = new Promise<{ code: string }>((resolve) => alice.client.once('closing', resolve));
  await a.stop();
  t.equal((await closing).code, 'SB_ERR_SERVER_SHUTDOWN', 'alice was told her worker shut down');
  t.same(hub.view, [], 'the registry has no worker left');
  t.not(alice.client.status, 'ready', 'alice is offline');

  // Sent while alice has nowhere to go: it waits in her inbox.
  const bob = client(t, { host: '127.0.0.1', port: side.info.port, token: side.node.signer.mint({ uid: 'bob', ttlMs: 60_000 }), uid: 'bob', deviceId: 'd' });
  await bob.client.connect();
  const meanwhile = await bob.client.send('alice', 'while you were moving');
  t.equal(alice.client.status, 'reconnecting', 'alice keeps trying, the gate having no worker for her');
  t.equal(alice.inbox.messages.length, 1);

  const b = await startWorker(t, { registry: hub.member(), inbox });
  t.not(b.info.id, a.info.id, 'a new worker, under a new id');
  await alice.inbox.atLeast(2);
  t.equal(alice.client.status, 'ready');
  t.equal(b.node.server.sessions.size, 1, 'alice is on the new worker');
  t.match(alice.inbox.messages, [
    { content: 'before the move', seq: first.seq },
    { from: 'bob', content: 'while you were moving', seq: meanwhile.seq },
  ], 'what was sent meanwhile arrived once, after what she had');
  t.ok(statuses.includes('reconnecting'));
  await sleep(200);
  t.equal(alice.inbox.messages.length, 2, 'nothing is shown twice');

  // And live again, on the new worker.
  const dave = client(t, { host: '127.0.0.1', port: b.info.port, token: b.node.signer.mint({ uid: 'dave', ttlMs: 60_000 }), uid: 'dave', deviceId: 'd' });
  await dave.client.connect();
  await dave.client.send('alice', 'welcome to b');
  t.match((await alice.inbox.atLeast(3))[2], { from: 'dave', content: 'welcome to b' });
});

t.test('request bodies are checked as written: no type coercion, no unknown fields', async (t) => {
  const w = await startWorker(t);
  const g = await startGate(t, w.node.registry);
  for (const [body, why] of [
    [{ username: 12345, password: 12345678 }, 'numbers are not strings'],
    [{ username: ['bobby'], password: PASSWORD }, 'an array is not a string'],
    [{ username: 'bobby', password: PASSWORD, admin: true }, 'an unknown field'],
  ] as const) {
    const r = await g.post<Partial<ErrorBody>>('/api/users', body);
    t.equal(r.status, 400, `${why}: 400`);
    t.equal(r.body.error?.code, 'SB_ERR_BAD_REQUEST', `${why}: SB_ERR_BAD_REQUEST`);
  }
  t.equal(await g.users.count(), 0, 'nothing was stored');
});
