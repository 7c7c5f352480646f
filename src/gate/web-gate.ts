// WebGate: the gate (the seed's name), the short-connection side. A client registers and logs
// in over HTTP, gets an access token the workers verify, a refresh token (TokenIssuer: rotated by
// /api/refresh, ended by /api/logout, /api/password and the operator's admin-routes.ts) and the
// least-loaded live worker (ImLoadBalance), then opens its long TCP connection there. Nothing here changes the cluster; the worker list
// comes from the registry's cached view, never a ZooKeeper read per request.
// With `tls` it serves HTTPS, the certificate following the files' reloads.

import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { AddressInfo } from 'node:net';
import type { Logger } from '../log.js';
import type { TokenSigner } from '../auth/token.js';
import { SwitchboardError, httpStatusOf, isSwitchboardError } from '../errors.js';
import type { Registry } from '../registry/registry.js';
import type { ImNode } from '../registry/im-node.js';
import type { UserStore } from '../users/user-store.js';
import { checkPassword, checkUsername, type PasswordHasher } from '../auth/password.js';
import { chooseWorker } from './im-load-balance.js';
import { LoginLimiter, type LoginLimits, type LoginOutcome } from './login-limiter.js';
import type { RateLimit, RateLimitStore } from './rate-limit-store.js';
import { MemoryRateLimitStore } from './memory-rate-limit-store.js';
import type { WorkerProbe } from './worker-probe.js';
import type { GroupLimits, GroupStore } from '../groups/group-store.js';
import { groupRoutes } from './group-routes.js';
import { conversationRoutes } from './conversation-routes.js';
import { settingsRoutes } from './settings-routes.js';
import type { InboxStore } from '../inbox/inbox-store.js';
import type { GroupNotifier } from '../groups/group-notifier.js';
import type { TlsFiles } from '../net/tls-files.js';
import type tls from 'node:tls';
import { MemoryRevocationNotifier, type RevocationNotifier } from '../users/revocation-notifier.js';
import { TokenIssuer, type TokenLimits } from './token-issuer.js';
import { adminRoutes } from './admin-routes.js';
import { addressKey } from './client-address.js';
import { signedClaims, takeUserRate, tokenUser } from './user-requests.js';

export interface GateLimits extends LoginLimits, TokenLimits {
  /** /api/refresh and /api/logout requests per client address (IPv6: per /64). */
  refreshRequests: RateLimit;
  /** Largest accepted request body, bytes. */
  bodyLimit: number;
  /**
   * Whole-request deadline (slowloris): headers and body within this long of the first byte,
   * and no socket idle longer. Enforced by a check every tenth of it (at most every second).
   */
  requestTimeoutMs: number;
  /** Password hashes computed at once (each takes ~0.4 s and 128 MiB at OWASP parameters). */
  maxConcurrentHashes: number;
  /** Group changes per user (group-routes.ts): every one is an event every member's worker reads. */
  groupChanges: RateLimit;
  /** Group reads per user. */
  groupReads: RateLimit;
  /** Conversation reads (chat list, history pages) per user. */
  conversationReads: RateLimit;
  /** /api/settings requests per user. */
  settingsRequests: RateLimit;
}

export const DEFAULT_GATE_LIMITS: Readonly<GateLimits> = Object.freeze({
  tokenTtlMs: 15 * 60_000,
  refreshTtlMs: 30 * 86_400_000,
  refreshIdleMs: 0,
  maxFamiliesPerUser: 20,
  refreshRequests: Object.freeze({ max: 60, windowMs: 60_000 }),
  perIp: Object.freeze({ max: 120, windowMs: 60_000 }),
  perUserIp: Object.freeze({ max: 10, windowMs: 15 * 60_000 }),
  perUser: Object.freeze({ max: 100, windowMs: 3600_000 }),
  knownAddressMs: 30 * 86_400_000,
  bodyLimit: 4096,
  requestTimeoutMs: 10_000,
  maxConcurrentHashes: 4,
  groupChanges: Object.freeze({ max: 60, windowMs: 60_000 }),
  groupReads: Object.freeze({ max: 600, windowMs: 60_000 }),
  conversationReads: Object.freeze({ max: 600, windowMs: 60_000 }),
  settingsRequests: Object.freeze({ max: 60, windowMs: 60_000 }),
});

/**
 * How often the HTTP server looks for requests past their deadline: Node checks
 * requestTimeout only on this sweep (30 s by default), so a deadline holds to within it.
 */
export function connectionsCheckIntervalMs(requestTimeoutMs: number): number {
  // 0 is no timeout: nothing to check for, Node's default period will do.
  if (requestTimeoutMs <= 0) return 30_000;
  return Math.min(1_000, Math.max(10, Math.ceil(requestTimeoutMs / 10)));
}

export interface WebGateOptions {
  host: string;
  port: number;
  /** Serve HTTPS with these files' certificate and key (reloads apply to new connections). Unset: HTTP. */
  tls?: TlsFiles;
  registry: Registry;
  users: UserStore;
  signer: TokenSigner;
  hasher: PasswordHasher;
  /** Cluster-wide online counts (OnlineCounter); default: sessions summed from the registry. */
  online?: () => Promise<{ users: number; sessions: number }>;
  registration: boolean;
  limits: GateLimits;
  /** Where the rate-limit counts (logins and groups) live; default in memory (this gate alone). Closed by the caller. */
  rateLimits?: RateLimitStore;
  /**
   * Proxies whose X-Forwarded-For names the client: addresses, CIDRs, or `loopback`,
   * `linklocal`, `uniquelocal`. Empty (the default): the client is the socket's peer.
   */
  trustProxy?: readonly string[];
  /** Which workers answered the gate's last probe; default: every registered worker. */
  probe?: Pick<WorkerProbe, 'reachable'>;
  /**
   * The groups and how their changes reach the workers: the group routes (group-routes.ts).
   * Unset: the gate has no group routes. Closed by the caller.
   */
  groups?: { store: GroupStore; notifier: GroupNotifier; limits?: Partial<GroupLimits>; checkMembers?: boolean };
  /**
   * The inboxes, for the conversation routes (conversation-routes.ts); `normalizePeers`: peers are
   * account names (default). Unset: no conversation routes. Closed by the caller.
   */
  conversations?: { inbox: InboxStore; normalizePeers?: boolean };
  /** Where revocations are published for the workers; default one in memory (no worker hears it). Closed by the caller. */
  revocations?: RevocationNotifier;
  /** The operator's credential for /api/admin/...; unset: there are no admin routes. */
  adminToken?: string;
  log: Logger;
}

const credentials = {
  type: 'object',
  required: ['username', 'password'],
  additionalProperties: false,
  properties: {
    username: { type: 'string', minLength: 1, maxLength: 64 },
    password: { type: 'string', minLength: 1, maxLength: 1024 },
  },
} as const;

const loginBody = {
  ...credentials,
  required: ['username', 'password', 'deviceId'],
  properties: {
    ...credentials.properties,
    deviceId: { type: 'string', minLength: 1, maxLength: 128 },
    platform: { type: 'integer', minimum: 0, maximum: 0xffff_ffff },
  },
} as const;

const refreshBody = {
  type: 'object',
  required: ['refreshToken'],
  additionalProperties: false,
  properties: { refreshToken: { type: 'string', minLength: 1, maxLength: 512 } },
} as const;

const passwordBody = {
  type: 'object',
  required: ['oldPassword', 'newPassword'],
  additionalProperties: false,
  properties: { oldPassword: credentials.properties.password, newPassword: credentials.properties.password },
} as const;

interface Credentials {
  username: string;
  password: string;
}

interface LoginBody extends Credentials {
  deviceId: string;
  platform?: number;
}

/** A worker as clients are told: `tlsPort` only when it has one, so older clients see what they always saw. */
function publicWorker(w: ImNode) {
  return w.tlsPort === undefined ? { id: w.id, host: w.host, port: w.port } : { id: w.id, host: w.host, port: w.port, tlsPort: w.tlsPort };
}

export class WebGate {
  readonly app: FastifyInstance;
  readonly #o: WebGateOptions;
  readonly #rateLimits: RateLimitStore;
  readonly #limiter: LoginLimiter;
  readonly #issuer: TokenIssuer;
  /** Verified against for unknown users, so a wrong username costs as long as a wrong password. */
  #decoy: Promise<string> | undefined;
  #hashing = 0;
  #unsubscribeTls: (() => void) | undefined;

  constructor(options: WebGateOptions) {
    this.#o = options;
    this.#rateLimits = options.rateLimits ?? new MemoryRateLimitStore();
    this.#limiter = new LoginLimiter(this.#rateLimits, options.limits);
    this.#issuer = new TokenIssuer({ users: options.users, signer: options.signer, notifier: options.revocations ?? new MemoryRevocationNotifier(), limits: options.limits, log: options.log });
    const timeoutMs = options.limits.requestTimeoutMs;
    const serverTimeouts = { requestTimeout: timeoutMs, headersTimeout: timeoutMs, connectionsCheckingInterval: connectionsCheckIntervalMs(timeoutMs) };
    this.app = Fastify({
      // Fastify hands `https` alone to https.createServer (and `http` only to http's): the
      // request deadlines must be in it too.
      // A TLS handshake never completed holds a socket too: it gets the same deadline.
      ...(options.tls ? { https: { ...options.tls.material, ...serverTimeouts, handshakeTimeout: timeoutMs } } : {}),
      loggerInstance: options.log as unknown as FastifyBaseLogger,
      bodyLimit: options.limits.bodyLimit,
      // Given to the server's constructor: Node checks requestTimeout only every
      // connectionsCheckingInterval (30 s by default), and when headersTimeout (60 s by default)
      // is the longer of the two it swaps them, so a 10 s request timeout set on its own let a
      // body trickled a byte at a time keep its connection for up to 90 s.
      http: serverTimeouts,
      requestTimeout: timeoutMs,
      connectionTimeout: timeoutMs,
      keepAliveTimeout: 5_000,
      trustProxy: options.trustProxy?.length ? [...options.trustProxy] : false,
      return503OnClosing: true,
      // Reject what does not match the schema instead of converting it (12345 is not a name)
      // or quietly dropping unknown fields.
      ajv: { customOptions: { coerceTypes: false, removeAdditional: false } },
      // What the router refuses before any route (a malformed URL, a path parameter past
      // maxParamLength: a forged group id) answers in the gate's error format too.
      frameworkErrors: (err, _request, reply: FastifyReply) => {
        void reply.code(err.statusCode ?? 400).send({ error: { code: 'SB_ERR_BAD_REQUEST', message: err.message } });
      },
    });
    this.app.setErrorHandler((err, request, reply) => this.#fail(err as Error & { statusCode?: number; validation?: unknown }, request, reply));
    this.app.setNotFoundHandler((request, reply) => {
      reply.code(httpStatusOf('SB_ERR_NOT_FOUND')).send({ error: { code: 'SB_ERR_NOT_FOUND', message: `no route ${request.method} ${request.url}` } });
    });
    this.#routes();
    if (options.tls) {
      const server = this.app.server as unknown as tls.Server;
      this.#unsubscribeTls = options.tls.onReload((material) => server.setSecureContext(material));
    }
  }

  async listen(): Promise<AddressInfo> {
    await this.app.listen({ host: this.#o.host, port: this.#o.port });
    const address = this.app.server.address() as AddressInfo;
    this.#o.log.info({ host: address.address, port: address.port, https: this.#o.tls !== undefined }, 'gate listening');
    return address;
  }

  close(): Promise<void> {
    this.#unsubscribeTls?.();
    return this.app.close();
  }

  #routes(): void {
    const app = this.app;
    if (this.#o.groups) {
      const { groupChanges: changes, groupReads: reads } = this.#o.limits;
      const { checkMembers = true, ...groups } = this.#o.groups;
      groupRoutes(app, { ...groups, signer: this.#o.signer, users: checkMembers ? this.#o.users : undefined, revocations: this.#o.users, rates: { store: this.#rateLimits, changes, reads } });
    }
    if (this.#o.conversations) {
      const { inbox, normalizePeers = true } = this.#o.conversations;
      conversationRoutes(app, { inbox, signer: this.#o.signer, normalizePeers, rates: { store: this.#rateLimits, reads: this.#o.limits.conversationReads }, groups: this.#o.groups?.store, users: this.#o.users, revocations: this.#o.users });
    }
    settingsRoutes(app, { users: this.#o.users, signer: this.#o.signer, rates: { store: this.#rateLimits, requests: this.#o.limits.settingsRequests }, groups: this.#o.groups?.store });
    app.get('/healthz', async () => ({ ok: true, workers: this.#o.registry.workers().length }));

    app.get('/api/workers', async () => ({
      workers: [...this.#o.registry.workers()].sort((a, b) => a.balance - b.balance).map((w) => ({ ...publicWorker(w), balance: w.balance })),
    }));

    app.get('/api/stats', async () => {
      const workers = this.#o.registry.workers();
      const online = this.#o.online ? await this.#o.online() : { users: undefined, sessions: workers.reduce((n, w) => n + w.balance, 0) };
      return { online, workers: workers.map((w) => ({ id: w.id, balance: w.balance })) };
    });

    app.post<{ Body: Credentials }>('/api/users', { schema: { body: credentials } }, async (request, reply) => {
      this.#refuseAfter(await this.#limiter.request(request.ip), reply);
      if (!this.#o.registration) throw new SwitchboardError('SB_ERR_REGISTRATION_CLOSED', 'registration is switched off on this gate');
      const username = checkUsername(request.body.username);
      checkPassword(request.body.password);
      const passwordHash = await this.#hash(reply, () => this.#o.hasher.hash(request.body.password));
      if (!(await this.#o.users.create({ username, passwordHash, createdAt: Date.now() }))) {
        throw new SwitchboardError('SB_ERR_USERNAME_TAKEN', `${username} is taken`);
      }
      request.log.info({ uid: username }, 'user registered');
      reply.code(201);
      return { uid: username, username };
    });

    app.post<{ Body: LoginBody }>('/api/login', { schema: { body: loginBody } }, async (request, reply) => {
      this.#refuseAfter(await this.#limiter.request(request.ip), reply);
      const { password, deviceId } = request.body;
      let username: string;
      try {
        username = checkUsername(request.body.username);
      } catch {
        throw this.#loginFailed();
      }
      const admission = await this.#limiter.begin(username, request.ip);
      if (!admission.admitted) {
        request.log.info({ username, ip: request.ip }, 'login rate limited');
        throw this.#rateLimited(admission.retryMs, reply);
      }
      let outcome: LoginOutcome = 'abandoned';
      let user: Awaited<ReturnType<UserStore['get']>>;
      try {
        user = await this.#o.users.get(username);
        const ok = await this.#hash(reply, async () =>
          user ? this.#o.hasher.verify(password, user.passwordHash) : (await this.#o.hasher.verify(password, await this.#decoyHash()), false),
        );
        outcome = user && ok ? 'succeeded' : 'failed';
      } finally {
        await admission.settle(outcome).catch((err: unknown) => request.log.warn({ err }, 'rate limit settlement failed'));
      }
      if (outcome !== 'succeeded' || !user) {
        request.log.info({ username }, 'login refused');
        throw this.#loginFailed();
      }
      const probe = this.#o.probe;
      const choice = chooseWorker(this.#o.registry.workers(), Math.random, probe && ((w) => probe.reachable(w)));
      if (!choice) throw new SwitchboardError('SB_ERR_NO_WORKER', 'no worker is available; try again shortly');
      const tokens = await this.#issuer.issue(user.uid, deviceId);
      request.log.info({ uid: user.uid, deviceId, worker: choice.worker.id }, 'login');
      return {
        uid: user.uid,
        ...tokens,
        worker: publicWorker(choice.worker),
        workers: choice.fallbacks.map(publicWorker),
      };
    });

    // A login without the password: the refresh token of an earlier one, which this replaces.
    app.post<{ Body: { refreshToken: string } }>('/api/refresh', { schema: { body: refreshBody } }, async (request, reply) => {
      await this.#refreshRate(request, reply);
      const probe = this.#o.probe;
      // Chosen before the rotation: the rotation cannot be undone, so it comes last.
      const choice = chooseWorker(this.#o.registry.workers(), Math.random, probe && ((w) => probe.reachable(w)));
      let refreshed: Awaited<ReturnType<TokenIssuer['refresh']>>;
      try {
        refreshed = await this.#issuer.refresh(request.body.refreshToken);
      } catch (err) {
        reply.header('www-authenticate', 'Bearer');
        throw err;
      }
      const { uid, deviceId, ...tokens } = refreshed;
      request.log.info({ uid, deviceId, worker: choice?.worker.id }, 'refresh');
      // No worker now: the tokens all the same (the client asks again for a worker later).
      return { uid, ...tokens, ...(choice ? { worker: publicWorker(choice.worker), workers: choice.fallbacks.map(publicWorker) } : {}) };
    });

    app.post<{ Body: { refreshToken: string } }>('/api/logout', { schema: { body: refreshBody } }, async (request, reply) => {
      await this.#refreshRate(request, reply);
      const header = request.headers.authorization;
      // A revoked access token may still name who logs out: logging out is what it was revoked for.
      const bearerUid = header === undefined ? undefined : signedClaims(this.#o.signer, request, reply).uid;
      const { uid, deviceId } = await this.#issuer.logout(request.body.refreshToken, bearerUid);
      return { uid, deviceId, loggedOut: true };
    });

    // A password change: the access token says who, the old password proves it (counted as a
    // login attempt), and every login of the user ends, this one too.
    app.post<{ Body: { oldPassword: string; newPassword: string } }>('/api/password', { schema: { body: passwordBody } }, async (request, reply) => {
      this.#refuseAfter(await this.#limiter.request(request.ip), reply);
      const uid = await tokenUser(this.#o.signer, request, reply, this.#o.users);
      const { oldPassword, newPassword } = request.body;
      checkPassword(newPassword);
      const admission = await this.#limiter.begin(uid, request.ip);
      if (!admission.admitted) throw this.#rateLimited(admission.retryMs, reply);
      let outcome: LoginOutcome = 'abandoned';
      try {
        const user = await this.#o.users.get(uid);
        const ok = user ? await this.#hash(reply, () => this.#o.hasher.verify(oldPassword, user.passwordHash)) : false;
        outcome = ok ? 'succeeded' : 'failed';
      } finally {
        await admission.settle(outcome).catch((err: unknown) => request.log.warn({ err }, 'rate limit settlement failed'));
      }
      if (outcome !== 'succeeded') throw this.#loginFailed();
      const passwordHash = await this.#hash(reply, () => this.#o.hasher.hash(newPassword));
      if (!(await this.#o.users.setPasswordHash(uid, passwordHash))) throw this.#loginFailed();
      const { families } = await this.#issuer.revokeUser(uid, 'password changed: every login revoked');
      return { uid, changed: true, revokedLogins: families };
    });

    if (this.#o.adminToken !== undefined) {
      adminRoutes(app, { adminToken: this.#o.adminToken, users: this.#o.users, issuer: this.#issuer, limitAddress: (ip) => this.#limiter.request(ip) });
    }
  }

  /** Counts a refresh or logout of the client's address: past the limit, SB_ERR_RATE_LIMITED. */
  #refreshRate(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const ip = addressKey(request.ip);
    return takeUserRate(this.#rateLimits, `refresh:${ip}`, this.#o.limits.refreshRequests, request, reply, 'refreshes and logouts from this address', 'refresh rate limited', { ip });
  }

  /** Refuses with 429 unless `retryMs` (what a limit answered) is 0. */
  #refuseAfter(retryMs: number, reply: FastifyReply): void {
    if (retryMs > 0) throw this.#rateLimited(retryMs, reply);
  }

  /** A 429 whose retry-after is whole seconds, at least 1. */
  #rateLimited(retryMs: number, reply: FastifyReply): SwitchboardError {
    reply.header('retry-after', Math.max(1, Math.ceil(retryMs / 1000)));
    return new SwitchboardError('SB_ERR_RATE_LIMITED', 'too many requests; retry later');
  }

  /** Runs a password hash within the concurrency bound; beyond it the client is told to retry. */
  async #hash<T>(reply: FastifyReply, work: () => Promise<T>): Promise<T> {
    if (this.#hashing >= this.#o.limits.maxConcurrentHashes) {
      reply.header('retry-after', 1);
      throw new SwitchboardError('SB_ERR_RATE_LIMITED', 'the gate is busy; retry in a second');
    }
    this.#hashing++;
    try {
      return await work();
    } finally {
      this.#hashing--;
    }
  }

  #loginFailed(): SwitchboardError {
    return new SwitchboardError('SB_ERR_LOGIN_FAILED', 'wrong username or password');
  }

  #decoyHash(): Promise<string> {
    return (this.#decoy ??= this.#o.hasher.hash('decoy password, never valid'));
  }

  #fail(err: Error & { statusCode?: number; validation?: unknown }, request: FastifyRequest, reply: FastifyReply): void {
    if (isSwitchboardError(err) && err.code === 'SB_ERR_STORE_UNAVAILABLE') {
      // The cause names hosts and ports: for the log, not for the client.
      request.log.error({ err }, 'gate request failed');
      reply.header('retry-after', 1);
      reply.code(httpStatusOf(err.code)).send({ error: { code: err.code, message: 'the gate cannot reach its account or rate-limit store; try again shortly' } });
      return;
    }
    if (isSwitchboardError(err)) {
      reply.code(httpStatusOf(err.code)).send({ error: { code: err.code, message: err.message } });
      return;
    }
    if (err.validation || (err.statusCode && err.statusCode >= 400 && err.statusCode < 500)) {
      // Schema violations, bad JSON, oversized bodies: the client's fault, said plainly.
      reply.code(err.statusCode ?? 400).send({ error: { code: 'SB_ERR_BAD_REQUEST', message: err.message } });
      return;
    }
    request.log.error({ err }, 'gate request failed');
    reply.code(500).send({ error: { code: 'SB_ERR_INTERNAL', message: 'internal error' } });
  }
}
