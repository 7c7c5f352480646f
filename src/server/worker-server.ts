// The worker's TCP server: accepts client sockets, wraps each in a Connection, dispatches their
// messages, cleans up after them, registers the worker in the Registry and keeps its balance
// current; its sessions' records are SessionDistributed's (published, refreshed, withdrawn). It
// registers only once its stores answer (StoreHealth), and publishes its readiness as they stop
// and start answering. One periodic sweep enforces the login, idle and drain timeouts of all
// connections and drives Delivery's resends and position saves. The connection caps are
// checked at accept, before a socket becomes a Connection.
//
// Beside the plain client port, a TLS client port (`tls`), or only that one (`plain: false`).
// Its sockets count under the same caps from the TCP accept on; the handshake (TlsAccept) must
// complete within the login timeout, and the login within the same timeout counted from the
// accept, so a socket that never handshakes holds its slot no longer than one that never logs in.

import net from 'node:net';
import type tls from 'node:tls';
import { once } from 'node:events';
import { idleTimeoutMs, type WorkerLimits } from '../config.js';
import { SwitchboardError } from '../errors.js';
import type { Logger } from '../log.js';
import type { TokenSigner } from '../auth/token.js';
import type { Registry } from '../registry/registry.js';
import type { ImNode } from '../registry/im-node.js';
import type { LocalSessionMap } from '../session/local-session-map.js';
import type { SessionDistributed } from '../session/session-distributed.js';
import type { InboxStore } from '../inbox/inbox-store.js';
import { Delivery } from './delivery.js';
import { Receipts } from './receipts.js';
import { receiptFrame } from '../protocol/receipts.js';
import { GroupDelivery, type GroupDeliveryOptions } from './group-delivery.js';
import type { GroupStore } from '../groups/group-store.js';
import type { GroupNotifier } from '../groups/group-notifier.js';
import { LocalRouter, type LocalPort, type WorkerCluster } from './cluster-seam.js';
import { Connection, SESSION, type ConnectionHandler } from './connection.js';
import type { ServerContext } from './context.js';
import { dispatch } from './dispatch.js';
import { MessageRate } from './message-rate.js';
import { ResendNudges } from './resend-nudges.js';
import { RecipientCheck } from './recipients.js';
import { ConnectionCaps } from './connection-caps.js';
import type { UserStore } from '../users/user-store.js';
import type { StoreHealth } from './store-health.js';
import type { TlsFiles } from '../net/tls-files.js';
import { TlsAccept } from '../net/tls-accept.js';
import { RevocationCheck } from './revocation-check.js';
import type { RevocationNotifier } from '../users/revocation-notifier.js';

export interface WorkerServerOptions {
  host: string;
  /** 0 picks a free port. */
  port: number;
  /** False: no plaintext client port (`port` is not listened on; the worker registers port 0). Default true. */
  plain?: boolean;
  /** A TLS client port beside (or instead of) the plain one, with the certificate and key of `files`. */
  tls?: { port: number; files: TlsFiles };
  /**
   * The TLS port to announce when a load balancer in front of this worker terminates TLS there
   * (forwarding to `port`); default the port of `tls`, if any.
   */
  announceTlsPort?: number;
  /** Host other nodes and the gate should use to reach this worker; defaults to `host`. */
  announceHost?: string;
  limits: WorkerLimits;
  signer: TokenSigner;
  /** This worker's logged-in sessions. */
  sessions: LocalSessionMap;
  /** The session directory: where the cluster learns which worker holds each session. */
  directory: SessionDistributed;
  inbox: InboxStore;
  registry: Registry;
  /** Where the accounts are: recipients must exist there. Unset: any id is a recipient. */
  users?: UserStore;
  /** Checked before listening and registering, then periodically. */
  health: StoreHealth;
  log: Logger;
  version: string;
  /**
   * Group chat: the groups' store, how the gate's membership changes reach this worker, and the
   * fan-out's limits. Unset: logins with `groups` get no group deliveries and group messages are refused.
   */
  groups?: { store: GroupStore; notifier: GroupNotifier; options: GroupDeliveryOptions };
  /** How stale a session's receipts setting may get (default 30 s; tests shorten it). */
  receiptSettingTtlMs?: number;
  /**
   * Token revocations (the gate's logouts, password changes, operator revokes): where they are
   * recorded, how they are announced, and the periodic check's period. Unset: none are known.
   */
  revocations?: { users: Pick<UserStore, 'revocations'>; notifier: RevocationNotifier; checkMs: number };
  /** Cluster mode: builds the router and the cluster's own listeners around this worker's LocalPort. */
  cluster?: (local: LocalPort) => WorkerCluster;
}

export class WorkerServer {
  readonly sessions: LocalSessionMap;
  /** What this worker offers its router and the cluster's peer acceptor (and tests, which play a peer through it). */
  readonly local: LocalPort;
  readonly #options: WorkerServerOptions;
  readonly #log: Logger;
  readonly #connections = new Set<Connection>();
  readonly #server: net.Server | undefined;
  readonly #tlsServer: net.Server | undefined;
  readonly #tls: TlsAccept | undefined;
  /** TLS port sockets still in the handshake, oldest first, with their address key and accept time. */
  readonly #handshaking = new Map<net.Socket, { key: string | undefined; acceptedAt: number }>();
  readonly #ctx: ServerContext;
  readonly #handler: ConnectionHandler;
  readonly #cluster: WorkerCluster | undefined;
  readonly #caps: ConnectionCaps;
  /** Connections not logged in yet, oldest first: the one shed when their cap is full. */
  readonly #waiting = new Set<Connection>();
  #lastRefusalLog = 0;
  #resolveNodeId!: (id: string) => void;
  #sweep: NodeJS.Timeout | undefined;
  #nextConnId = 1;
  #info: ImNode | undefined;
  #onAllClosed: (() => void) | undefined;
  #unsubscribeGroups: (() => void) | undefined;

  constructor(options: WorkerServerOptions) {
    this.#options = options;
    this.#log = options.log;
    this.sessions = options.sessions;
    const nodeId = new Promise<string>((resolve) => (this.#resolveNodeId = resolve));
    const receipts = new Receipts(options.users, () => this.#ctx.router, options.log.child({ component: 'receipts' }), options.receiptSettingTtlMs);
    const delivery = new Delivery(options.inbox, options.limits, options.log, { nudgeIntervalMs: sweepIntervalMs(options.limits), receipts });
    const groups = options.groups && { store: options.groups.store, delivery: new GroupDelivery(options.groups.store, options.groups.options, options.log) };
    const local: LocalPort = {
      nodeId,
      deliver: (uid, seq, body, epoch, id) => delivery.deliverLive(this.sessions.byUser(uid), seq, body, epoch, id),
      deliverGroup: (group, seq, body, sender) => groups?.delivery.deliver(group, seq, body, sender),
      receipt: (uid, receipt) => {
        let frame: Buffer | undefined;
        for (const session of this.sessions.byUser(uid)) {
          if (session.ready && receipts.wants(session)) session.outbound.sendFrame((frame ??= receiptFrame(receipt)));
        }
      },
      nudge: (uids, withGroups = false) => {
        if (uids !== undefined) {
          for (const uid of uids) {
            for (const session of this.sessions.byUser(uid)) {
              delivery.nudge(session);
              if (withGroups) groups?.delivery.nudge(session);
            }
          }
          return;
        }
        // Group entries are broadcast, so only a nudge of everyone can be about them.
        for (const session of this.sessions) {
          delivery.nudge(session);
          groups?.delivery.nudge(session);
        }
      },
    };
    if (groups) {
      this.#unsubscribeGroups = options.groups!.notifier.subscribe({
        change: (change) => groups.delivery.changed(change, (uid) => this.sessions.byUser(uid)),
        missed: () => void groups.delivery.resync(this.sessions),
      });
    }
    this.local = local;
    const revocations = options.revocations && new RevocationCheck({ ...options.revocations, sessions: this.sessions, log: options.log.child({ component: 'revocations' }) });
    const cluster = (this.#cluster = options.cluster?.(local));
    this.#ctx = {
      limits: options.limits,
      sessions: this.sessions,
      directory: options.directory,
      inbox: options.inbox,
      delivery,
      receipts,
      groups,
      router: cluster?.router ?? new LocalRouter(local),
      rate: new MessageRate(options.limits),
      resendNudges: new ResendNudges(() => this.#ctx.router, sweepIntervalMs(options.limits)),
      recipients: options.users && new RecipientCheck(options.users, options.limits.recipientCacheSize),
      signer: options.signer,
      revocations,
      health: options.health,
      log: options.log,
      nodeId,
      sessionsChanged: () => options.registry.setBalance(this.sessions.size),
    };
    this.#handler = {
      onMessage: (conn, message) => dispatch(this.#ctx, conn, message),
      onClosing: (conn) => this.#release(conn),
      onClose: (conn) => this.#onClose(conn),
      onAuthenticated: (conn) => {
        this.#waiting.delete(conn);
        this.#caps.authenticated();
      },
    };
    this.#caps = new ConnectionCaps(options.limits);
    if (options.plain !== false) {
      this.#server = net.createServer((socket) => this.#accept(socket));
      this.#server.on('error', (err) => this.#log.error({ err }, 'server error'));
    }
    if (options.tls) {
      this.#tls = new TlsAccept({ files: options.tls.files, requestCert: false, handshakeTimeoutMs: options.limits.loginTimeoutMs }, (socket, raw) => this.#secured(socket, raw));
      this.#tlsServer = net.createServer((socket) => this.#acceptTls(socket));
      this.#tlsServer.on('error', (err) => this.#log.error({ err }, 'tls server error'));
    }
    if (!this.#server && !this.#tlsServer) throw new SwitchboardError('SB_ERR_CONFIG', 'a worker needs a plain or a TLS client port');
  }

  /** This worker as registered; undefined before start(). */
  get info(): ImNode | undefined {
    return this.#info;
  }

  get connectionCount(): number {
    return this.#connections.size;
  }

  /** TLS handshakes on the client port that failed since start (plaintext, timeouts, bad clients). */
  get tlsHandshakeFailures(): number {
    return this.#tls?.failedTotal ?? 0;
  }

  /**
   * Checks the stores, listens (the cluster too), then registers; resolves the registered worker
   * info. Rejects with SB_ERR_STORE_UNAVAILABLE before listening when a store does not answer: a
   * registered worker is one the gate hands out.
   */
  async start(): Promise<ImNode> {
    const { host, port, registry, version, health } = this.#options;
    await health.check();
    const address = this.#server && (await listen(this.#server, port, host));
    const tlsAddress = this.#tlsServer && (await listen(this.#tlsServer, this.#options.tls!.port, host));
    // Whatever the cluster announces must be listening before other nodes can find this worker.
    const announced = (await this.#cluster?.start()) ?? {};
    this.#info = await registry.register({
      ...announced,
      host: this.#options.announceHost ?? (host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host),
      port: address?.port ?? 0,
      ...(this.#options.announceTlsPort !== undefined ? { tlsPort: this.#options.announceTlsPort } : tlsAddress ? { tlsPort: tlsAddress.port } : {}),
      balance: this.sessions.size,
      startedAt: Date.now(),
      version,
      ready: health.ready,
    });
    this.#resolveNodeId(this.#info.id);
    this.#options.directory.start(this.#info.id);
    this.#sweep = setInterval(() => this.#sweepConnections(), sweepIntervalMs(this.#options.limits));
    this.#sweep.unref();
    this.#ctx.revocations?.start();
    health.start((ready) => registry.setReady(ready));
    this.#log.info({ nodeId: this.#info.id, host, port: address?.port, tlsPort: tlsAddress?.port }, 'worker listening');
    return this.#info;
  }

  /**
   * Stops accepting, tells every client the server is shutting down, waits up to
   * `closeGraceMs` for the sockets to close, then destroys the rest.
   */
  async stop(): Promise<void> {
    this.#options.health.stop();
    this.#unsubscribeGroups?.();
    this.#ctx.revocations?.stop();
    clearInterval(this.#sweep);
    this.#options.directory.stop();
    const closed = Promise.all([this.#server, this.#tlsServer].map((server) => server && new Promise<void>((resolve) => server.close(() => resolve()))));
    this.#tls?.close();
    for (const socket of this.#handshaking.keys()) socket.destroy();
    for (const conn of this.#connections) conn.close({ code: 'SB_ERR_SERVER_SHUTDOWN', reason: 'server is shutting down' });
    const grace = setTimeout(() => {
      for (const conn of this.#connections) conn.socket.destroy();
    }, this.#options.limits.closeGraceMs);
    await closed;
    // The server's 'close' comes before its sockets' 'close' events: wait for their cleanup too.
    if (this.#connections.size > 0) await new Promise<void>((resolve) => (this.#onAllClosed = resolve));
    clearTimeout(grace);
    await this.#ctx.router.close();
    await this.#cluster?.stop();
    this.#log.info('worker stopped');
  }

  /** The revocation check (tests run it at once instead of waiting for its period). */
  get revocations(): RevocationCheck | undefined {
    return this.#ctx.revocations;
  }

  /** The connection caps' counts (for tests). */
  get caps(): ConnectionCaps {
    return this.#caps;
  }

  #accept(socket: net.Socket): void {
    const addressKey = this.#caps.admit(socket, () => this.#shedOldest());
    if (addressKey === null) return;
    this.#open(socket, addressKey, Date.now());
  }

  /** A TLS port socket: counted under the caps at once (refused without a word: it expects TLS), then the handshake. */
  #acceptTls(socket: net.Socket): void {
    const key = this.#caps.admit(socket, () => this.#shedOldest(), { plaintext: false });
    if (key === null) return;
    this.#handshaking.set(socket, { key, acceptedAt: Date.now() });
    socket.once('close', () => {
      // Still here: the handshake failed or timed out (a shed one was removed when shed).
      const state = this.#handshaking.get(socket);
      if (!state) return;
      this.#handshaking.delete(socket);
      this.#caps.closed(state.key, false);
    });
    this.#tls!.accept(socket);
  }

  #secured(socket: tls.TLSSocket, raw: net.Socket): void {
    const state = this.#handshaking.get(raw);
    if (!state) {
      socket.destroy();
      return;
    }
    this.#handshaking.delete(raw);
    this.#open(socket, state.key, state.acceptedAt);
  }

  #open(socket: net.Socket, addressKey: string | undefined, acceptedAt: number): void {
    const conn = new Connection(this.#nextConnId++, socket, this.#options.limits, this.#handler, this.#log, acceptedAt);
    conn.addressKey = addressKey;
    this.#connections.add(conn);
    this.#waiting.add(conn);
    // Guarded: reading remoteAddress makes the socket keep its peer address object (about 130
    // bytes; the per-address cap pays them when it is on).
    if (this.#log.isLevelEnabled('debug')) {
      this.#log.debug({ ...conn.logFields, remote: `${socket.remoteAddress}:${socket.remotePort}` }, 'connection accepted');
    }
  }

  /** Closes the connection that has waited longest to log in; false when none is waiting. */
  #shedOldest(): boolean {
    // A socket still in its TLS handshake has done the least: it goes first.
    for (const [socket, state] of this.#handshaking) {
      this.#handshaking.delete(socket);
      this.#caps.shed();
      this.#caps.closed(state.key, true);
      socket.destroy();
      return true;
    }
    for (const conn of this.#waiting) {
      this.#waiting.delete(conn);
      // Closing ones are still counted until their socket closes: not ours to shed again.
      if (conn.state !== 'open') continue;
      const { failure, frame } = this.#caps.shed();
      conn.shed(failure, frame);
      return true;
    }
    return false;
  }

  #onClose(conn: Connection): void {
    this.#connections.delete(conn);
    this.#waiting.delete(conn);
    // A shed connection stopped counting as waiting when it was shed.
    this.#caps.closed(conn.addressKey, conn.authenticated || conn.wasShed);
    if (this.#log.isLevelEnabled('debug')) this.#log.debug({ ...conn.logFields, code: conn.closeReason?.code }, 'connection closed');
    this.#release(conn);
    if (this.#connections.size === 0) this.#onAllClosed?.();
  }

  /**
   * A closing connection's session is removed locally and from the directory at once, not when
   * the socket finally closes: a message routed to it meanwhile would be acknowledged and dropped.
   */
  #release(conn: Connection): void {
    const session = conn.session;
    if (!session) return;
    conn.attrs.delete(SESSION);
    this.#ctx.delivery.release(session);
    this.#ctx.groups?.delivery.release(session);
    this.#ctx.resendNudges.released(session);
    this.#ctx.router.sessionClosed(session);
    if (this.sessions.remove(session)) this.#ctx.sessionsChanged();
    this.#options.directory.withdraw(session, conn.log);
  }

  #sweepConnections(): void {
    const now = Date.now();
    const { loginTimeoutMs, drainTimeoutMs } = this.#options.limits;
    const idleMs = idleTimeoutMs(this.#options.limits);
    for (const conn of this.#connections) {
      if (conn.state !== 'open') continue;
      if (conn.drainingSince !== 0 && now - conn.drainingSince > drainTimeoutMs) {
        conn.destroy({ code: 'SB_ERR_SLOW_CONSUMER', reason: `output not drained within ${drainTimeoutMs} ms` });
      } else if (!conn.authenticated && now - conn.createdAt > loginTimeoutMs) {
        conn.close({ code: 'SB_ERR_LOGIN_TIMEOUT', reason: `no login within ${loginTimeoutMs} ms` });
      } else if (now - conn.lastInboundAt > idleMs) {
        conn.close({ code: 'SB_ERR_IDLE_TIMEOUT', reason: `no frame within ${idleMs} ms` });
      }
    }
    this.#ctx.delivery.sweep(this.sessions, now);
    this.#ctx.groups?.delivery.sweep(now);
    this.#ctx.rate.sweep(now, this.sessions);
    this.#ctx.resendNudges.sweep(this.sessions, now);
    // Refused sockets are counted, not logged one by one: an attack would flood the log.
    if (now - this.#lastRefusalLog >= REFUSAL_LOG_MS) {
      const refused = this.#caps.takeRefusals();
      if (refused) {
        this.#lastRefusalLog = now;
        this.#log.warn({ ...refused, unauthenticatedOpen: this.#caps.unauthenticated }, 'connections refused at accept');
      }
      const failed = this.#tls?.takeFailures();
      if (failed) {
        this.#lastRefusalLog = now;
        this.#log.warn({ ...failed, handshaking: this.#handshaking.size }, 'tls handshakes failed');
      }
    }
  }
}

async function listen(server: net.Server, port: number, host: string): Promise<net.AddressInfo> {
  server.listen(port, host);
  await once(server, 'listening');
  return server.address() as net.AddressInfo;
}

/** At most one summary of refused connections per minute. */
const REFUSAL_LOG_MS = 60_000;

/** Often enough that every timeout fires within a quarter of itself, at most once a second. */
function sweepIntervalMs(limits: WorkerLimits): number {
  const shortest = Math.min(limits.loginTimeoutMs, idleTimeoutMs(limits), limits.drainTimeoutMs, limits.ackTimeoutMs);
  return Math.max(10, Math.min(1000, Math.floor(shortest / 4)));
}
