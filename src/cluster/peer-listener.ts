// The peer port: the cluster's own TCP listener, apart from the client port, so that peer
// traffic can be firewalled to the other workers. Its connections are the server's Connection
// (framing, ordered handling, bounded output, one way to close with a code); what they may say
// is PeerAcceptor's. Its own bounds: at most `maxPending` connections that have not completed
// the handshake (one more is refused at accept), each closed unless it completes within
// `handshakeTimeoutMs`; authenticated links are one per registered worker (PeerAcceptor) and
// are closed when idle or slow like client connections. One periodic sweep enforces it all.
//
// With `tls` the port speaks TLS only (TlsAccept): a socket still in its TLS handshake counts as
// pending, and the handshake timeout covers the TLS handshake and the peer handshake together.
// `mutual`: the dialer must present a certificate of the cluster CA; else only this worker shows
// one, and the dialer is proven by the peer handshake alone (as it always is, in both modes).

import net from 'node:net';
import type tls from 'node:tls';
import { once } from 'node:events';
import { idleTimeoutMs, type WorkerLimits } from '../config.js';
import type { Logger } from '../log.js';
import { Connection, type ConnectionHandler } from '../server/connection.js';
import type { PeerAcceptor } from './peer-acceptor.js';
import type { TlsFiles } from '../net/tls-files.js';
import { TlsAccept } from '../net/tls-accept.js';

export interface PeerListenerOptions {
  host: string;
  /** 0 picks a free port. */
  port: number;
  /** Frame length, output bounds, heartbeat and idle intervals, close grace: as for clients. */
  limits: WorkerLimits;
  /** A connection that has not completed the handshake within this long is closed. */
  handshakeTimeoutMs: number;
  /** Connections that have not completed the handshake, at once; more are refused at accept. */
  maxPending: number;
  acceptor: PeerAcceptor;
  /** TLS on the peer port: this worker's certificate and the cluster CA (`files`); `mutual`: dialers must show one too. */
  tls?: { files: TlsFiles; mutual: boolean };
  log: Logger;
}

export class PeerListener {
  readonly #o: PeerListenerOptions;
  readonly #server: net.Server;
  readonly #connections = new Set<Connection>();
  readonly #handler: ConnectionHandler;
  readonly #tls: TlsAccept | undefined;
  /** Sockets still in the TLS handshake, with their accept time. */
  readonly #handshaking = new Map<net.Socket, number>();
  #sweep: NodeJS.Timeout | undefined;
  #nextConnId = 1;
  /** Connections refused at accept since the last sweep: logged once per sweep, not per socket. */
  #refused = 0;
  #onAllClosed: (() => void) | undefined;

  constructor(options: PeerListenerOptions) {
    this.#o = options;
    this.#handler = {
      onMessage: (conn, message) => options.acceptor.handle(conn, message),
      onClosing: (conn) => options.acceptor.closing(conn),
      onClose: (conn) => this.#onClose(conn),
    };
    if (options.tls) {
      const { files, mutual } = options.tls;
      this.#tls = new TlsAccept({ files, requestCert: mutual, handshakeTimeoutMs: options.handshakeTimeoutMs }, (socket, raw) => this.#secured(socket, raw));
    }
    this.#server = net.createServer((socket) => this.#accept(socket));
    this.#server.on('error', (err) => options.log.error({ err }, 'peer listener error'));
  }

  get connectionCount(): number {
    return this.#connections.size;
  }

  /** TLS handshakes on the peer port that failed since start. */
  get tlsHandshakeFailures(): number {
    return this.#tls?.failedTotal ?? 0;
  }

  /** Listens; resolves the bound address. */
  async start(): Promise<net.AddressInfo> {
    const { host, port } = this.#o;
    this.#server.listen(port, host);
    await once(this.#server, 'listening');
    this.#o.acceptor.start();
    this.#sweep = setInterval(() => this.#sweepConnections(), this.#sweepIntervalMs());
    this.#sweep.unref();
    const address = this.#server.address() as net.AddressInfo;
    this.#o.log.info({ host, port: address.port, tls: this.#o.tls ? (this.#o.tls.mutual ? 'mutual' : 'ca') : 'off', maxPending: this.#o.maxPending, handshakeTimeoutMs: this.#o.handshakeTimeoutMs }, 'peer listener listening');
    return address;
  }

  /** Stops accepting, closes every connection (destroyed after the close grace) and waits for them. */
  async stop(): Promise<void> {
    clearInterval(this.#sweep);
    this.#o.acceptor.stop();
    const closed = new Promise<void>((resolve) => this.#server.close(() => resolve()));
    this.#tls?.close();
    for (const socket of this.#handshaking.keys()) socket.destroy();
    for (const conn of this.#connections) conn.close({ code: 'SB_ERR_SERVER_SHUTDOWN', reason: 'worker is shutting down' });
    const grace = setTimeout(() => {
      for (const conn of this.#connections) conn.socket.destroy();
    }, this.#o.limits.closeGraceMs);
    await closed;
    if (this.#connections.size > 0) await new Promise<void>((resolve) => (this.#onAllClosed = resolve));
    clearTimeout(grace);
  }

  #accept(socket: net.Socket): void {
    if (this.#pending() >= this.#o.maxPending) {
      this.#refused++;
      socket.destroy();
      return;
    }
    if (!this.#tls) {
      this.#open(socket, Date.now());
      return;
    }
    this.#handshaking.set(socket, Date.now());
    socket.once('close', () => this.#handshaking.delete(socket));
    this.#tls.accept(socket);
  }

  #secured(socket: tls.TLSSocket, raw: net.Socket): void {
    const acceptedAt = this.#handshaking.get(raw);
    if (acceptedAt === undefined) {
      socket.destroy();
      return;
    }
    this.#handshaking.delete(raw);
    this.#open(socket, acceptedAt);
  }

  #open(socket: net.Socket, acceptedAt: number): void {
    const conn = new Connection(this.#nextConnId++, socket, this.#o.limits, this.#handler, this.#o.log, acceptedAt);
    this.#connections.add(conn);
    if (this.#o.log.isLevelEnabled('debug')) {
      this.#o.log.debug({ ...conn.logFields, remote: `${socket.remoteAddress}:${socket.remotePort}` }, 'peer connection accepted');
    }
  }

  /** Connections (closing ones too: they hold a socket) that have not completed the handshake. */
  #pending(): number {
    let n = this.#handshaking.size;
    for (const conn of this.#connections) if (!conn.authenticated) n++;
    return n;
  }

  #onClose(conn: Connection): void {
    this.#connections.delete(conn);
    if (this.#o.log.isLevelEnabled('debug')) this.#o.log.debug({ ...conn.logFields, code: conn.closeReason?.code }, 'peer connection closed');
    if (this.#connections.size === 0) this.#onAllClosed?.();
  }

  #sweepConnections(): void {
    const now = Date.now();
    const { drainTimeoutMs } = this.#o.limits;
    const { handshakeTimeoutMs } = this.#o;
    const idleMs = idleTimeoutMs(this.#o.limits);
    for (const conn of this.#connections) {
      if (conn.state !== 'open') continue;
      if (conn.drainingSince !== 0 && now - conn.drainingSince > drainTimeoutMs) {
        conn.destroy({ code: 'SB_ERR_SLOW_CONSUMER', reason: `output not drained within ${drainTimeoutMs} ms` });
      } else if (!conn.authenticated && now - conn.createdAt > handshakeTimeoutMs) {
        conn.close({ code: 'SB_ERR_PEER_HANDSHAKE_TIMEOUT', reason: `no peer handshake within ${handshakeTimeoutMs} ms` });
      } else if (now - conn.lastInboundAt > idleMs) {
        conn.close({ code: 'SB_ERR_IDLE_TIMEOUT', reason: `no frame within ${idleMs} ms` });
      }
    }
    if (this.#refused > 0) {
      this.#o.log.warn({ refused: this.#refused, maxPending: this.#o.maxPending }, 'peer connections refused');
      this.#refused = 0;
    }
    // Once per sweep at most: a certificate from another CA, plaintext, a handshake never completed.
    const failed = this.#tls?.takeFailures();
    if (failed) this.#o.log.warn({ ...failed }, 'peer tls handshakes failed');
  }

  /** Every timeout fires within a quarter of itself; at most once a second. */
  #sweepIntervalMs(): number {
    const shortest = Math.min(this.#o.handshakeTimeoutMs, idleTimeoutMs(this.#o.limits), this.#o.limits.drainTimeoutMs);
    return Math.max(10, Math.min(1000, Math.floor(shortest / 4)));
  }
}
