// TLS on sockets a plain net.Server accepted: the worker's listeners check their caps on the TCP
// socket first (nothing is spent on a socket refused), then hand it here, to a tls.Server that
// never listens itself. It runs the handshake within `handshakeTimeoutMs`, verifies the other
// side's certificate against the files' CA when asked to (`requestCert`: mutual TLS), and hands
// the TLS socket on with the TCP socket it was accepted as. A failed handshake (plaintext sent
// to a TLS port, a certificate from another CA, a client that never handshakes) destroys the
// socket and is counted by the error's code, for a summary in the log rather than a line each.
// Reloading the files (TlsFiles.reload) changes what later handshakes present.

import type net from 'node:net';
import tls from 'node:tls';
import type { TlsFiles } from './tls-files.js';

export interface TlsAcceptOptions {
  files: TlsFiles;
  /** Ask for the other side's certificate and refuse one not issued by the files' CA. */
  requestCert: boolean;
  /** A socket that has not completed the handshake within this long is destroyed. */
  handshakeTimeoutMs: number;
}

/** Handshake failures since the last report: how many, by error code (bounded: CODE_LIMIT). */
export interface TlsFailures {
  failed: number;
  byCode: Record<string, number>;
}

/** Distinct codes counted per report; more are counted as `other`. OpenSSL's few are far fewer. */
const CODE_LIMIT = 32;

/** What Node's tls.Server keeps of the socket it wrapped: how a TLS socket is matched to its TCP socket. */
type WrappedSocket = tls.TLSSocket & { _parent?: net.Socket };

export class TlsAccept {
  readonly #server: tls.Server;
  readonly #unsubscribe: () => void;
  #failures: TlsFailures = { failed: 0, byCode: {} };
  /** Every handshake that failed since start (a counter for tests and the stats). */
  failedTotal = 0;

  constructor(options: TlsAcceptOptions, onSecure: (socket: tls.TLSSocket, accepted: net.Socket) => void) {
    const { files } = options;
    this.#server = tls.createServer({
      ...files.material,
      requestCert: options.requestCert,
      rejectUnauthorized: options.requestCert,
      handshakeTimeout: options.handshakeTimeoutMs,
    });
    this.#server.on('secureConnection', (socket: WrappedSocket) => {
      const accepted = socket._parent;
      if (!accepted) {
        socket.destroy();
        return;
      }
      onSecure(socket, accepted);
    });
    this.#server.on('tlsClientError', (err: NodeJS.ErrnoException, socket) => {
      this.failedTotal++;
      this.#failures.failed++;
      const codes = this.#failures.byCode;
      const code = err.code ?? 'unknown';
      const key = code in codes || Object.keys(codes).length < CODE_LIMIT ? code : 'other';
      codes[key] = (codes[key] ?? 0) + 1;
      socket.destroy();
    });
    this.#unsubscribe = files.onReload((material) => this.#server.setSecureContext(material));
  }

  /** Starts the handshake on an accepted socket (already admitted by the caller's caps). */
  accept(socket: net.Socket): void {
    this.#server.emit('connection', socket);
  }

  /** The failures since the last call, or undefined when there were none; starts counting anew. */
  takeFailures(): TlsFailures | undefined {
    if (this.#failures.failed === 0) return undefined;
    const failures = this.#failures;
    this.#failures = { failed: 0, byCode: {} };
    return failures;
  }

  /** Stops following the files' reloads. */
  close(): void {
    this.#unsubscribe();
  }
}
