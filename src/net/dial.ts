// Dialing a switchboard port: a TCP connection (Nagle off) whose bytes go through a frame
// decoder. The two reconnecting clients, the SDK's transport and WorkerReSender, dial so. Each
// attempt belongs to its owner's epoch: once the owner has moved on (a new attempt, a close),
// `current()` is false and the old socket's late events and frames are dropped here.
// With `tls` the connection is TLS: the server's certificate is verified against the context's
// CA (or Node's list) and its name against `servername`; 'connect' means the handshake is done.

import net from 'node:net';
import tls from 'node:tls';
import { FrameDecoder } from '../protocol/frame.js';

export interface DialTarget {
  host: string;
  port: number;
  /** Dial TLS: the context (CA, and a certificate for mutual TLS) and the name to verify (default `host`). */
  tls?: DialTls;
}

export interface DialTls {
  /** Unset: Node's own CA list, no certificate of ours. */
  context?: tls.SecureContext;
  /** The name the server's certificate must carry (SNI too); default the host dialed. */
  servername?: string;
}

/** What the owner hears of a current attempt; nothing once `current()` is false. */
export interface FramedSocketHandlers {
  connect(): void;
  /** One frame body, a slice valid until the handler returns. */
  frame(body: Buffer): void;
  /**
   * The decoder's push() threw: a malformed frame (a SwitchboardError, and the decoder stays
   * failed) or whatever `frame` threw. The socket is left open: the handler decides.
   */
  pushFailed(err: unknown): void;
  error(err: Error): void;
  close(): void;
}

export function dialFramed(target: DialTarget, maxFrameLength: number, current: () => boolean, on: FramedSocketHandlers): net.Socket {
  const socket = target.tls
    ? tls.connect({ host: target.host, port: target.port, secureContext: target.tls.context, ...serverName(target.tls.servername ?? target.host) }).setNoDelay(true)
    : net.connect({ host: target.host, port: target.port, noDelay: true });
  const decoder = new FrameDecoder(
    (body) => {
      if (current()) on.frame(body);
    },
    { maxFrameLength },
  );
  socket.on(target.tls ? 'secureConnect' : 'connect', () => {
    if (current()) on.connect();
  });
  socket.on('data', (chunk: Buffer) => {
    if (!current()) return;
    try {
      decoder.push(chunk);
    } catch (err) {
      on.pushFailed(err);
    }
  });
  // Always listened to, current or not: an 'error' without a listener would throw.
  socket.on('error', (err) => {
    if (current()) on.error(err);
  });
  socket.on('close', () => {
    if (current()) on.close();
  });
  return socket;
}

/**
 * How a TLS dial checks `name`: a host name is the SNI and the name checked; an IP address may
 * not be sent as SNI (RFC 6066), so it is only checked against the certificate's IP entries.
 */
function serverName(name: string): Pick<tls.ConnectionOptions, 'servername' | 'checkServerIdentity'> {
  if (net.isIP(name) === 0) return { servername: name };
  return { checkServerIdentity: (_host, cert) => tls.checkServerIdentity(name, cert) };
}
