// WorkerReSender: this worker's link to one peer, a TCP client to the peer's peer port (its
// registered host and peerPort). It authenticates (HELLO → CHALLENGE → AUTH, both sides proving
// the cluster secret over the whole handshake, PROTOCOL.md §10), then
// carries PEER_DELIVER frames and SESSION_ON/OFF notifications, written once per tick. While it
// is down, frames wait in a bounded queue; what overflows is not lost (it is in an inbox) but
// its users are remembered, and after the reconnect the peer is told to re-read their inboxes
// (PEER_NUDGE). A reconnect after a working link nudges everyone, since frames in flight when
// the socket died are gone too. Status changes go through setStatus(); an epoch counter makes
// callbacks of an old socket harmless (it dials as the SDK client does, net/dial.ts).
// With `tls` each attempt dials TLS with the current context of the peer files (a reload applies
// from the next attempt), verifying the peer's certificate against the cluster CA and its
// registered host; the peer handshake follows as always.

import type net from 'node:net';
import type { Logger } from '../log.js';
import { dialFramed } from '../net/dial.js';
import type { TlsFiles } from '../net/tls-files.js';
import { writePerTick } from '../net/write-per-tick.js';
import { SwitchboardError } from '../errors.js';
import { isTlsError } from '../net/tls-errors.js';
import { decodeMessage, encodeMessageFrame } from '../protocol/codec.js';
import { HeadType } from '../protocol/types.js';
import type { ImNode } from '../registry/im-node.js';
import { NONCE_BYTES, newNonce, peerProof, verifyPeerProof, type Transcript } from './peer-auth.js';

export type LinkStatus = 'connecting' | 'handshaking' | 'ready' | 'waiting' | 'closed';

export interface WorkerReSenderOptions {
  selfId: string;
  peer: ImNode;
  secret: string;
  /** Delay between connection attempts while the peer stays registered. */
  reconnectMs: number;
  /** Frames kept while the link is down; beyond it frames are dropped and their users nudged later. */
  queueLimit: number;
  /** Users remembered for a nudge; beyond it the whole peer is nudged. */
  missedLimit: number;
  heartbeatMs: number;
  maxFrameLength: number;
  /** Dial the peer port over TLS: this worker's certificate (shown if asked) and the cluster CA. */
  tls?: TlsFiles;
  log: Logger;
}

export class WorkerReSender {
  readonly peerId: string;
  #status: LinkStatus = 'connecting';
  #peer: ImNode;
  readonly #options: WorkerReSenderOptions;
  readonly #log: Logger;
  readonly #queue: Buffer[] = [];
  readonly #missed = new Set<string>();
  #missedAll = false;
  #socket: net.Socket | undefined;
  #epoch = 0;
  #wasReady = false;
  #lastInboundAt = 0;
  #timer: NodeJS.Timeout | undefined;
  #heartbeat: NodeJS.Timeout | undefined;
  /** Frames dropped because the queue was full (for logs and tests). */
  dropped = 0;

  constructor(options: WorkerReSenderOptions) {
    this.#options = options;
    this.#peer = options.peer;
    this.peerId = options.peer.id;
    this.#log = options.log.child({ peer: options.peer.id });
    this.#connect();
  }

  get status(): LinkStatus {
    return this.#status;
  }

  get queued(): number {
    return this.#queue.length;
  }

  /** The peer's registry entry changed (its address may have). */
  update(peer: ImNode): void {
    const moved = peer.host !== this.#peer.host || peer.peerPort !== this.#peer.peerPort;
    this.#peer = peer;
    if (moved && this.#status !== 'closed') this.#socket?.destroy();
  }

  /**
   * Sends a frame concerning `uid` (for the nudge if it has to be dropped); `nudgeAll`: one whose
   * loss concerns every session there (a group entry).
   */
  send(frame: Buffer, uid?: string, nudgeAll = false): void {
    if (this.#status === 'closed') return;
    if (this.#status === 'ready') {
      this.#write(frame);
      return;
    }
    if (this.#queue.length < this.#options.queueLimit) {
      this.#queue.push(frame);
      return;
    }
    this.dropped++;
    if (nudgeAll) this.#missedAll = true;
    if (uid === undefined) return;
    if (this.#missed.size < this.#options.missedLimit) this.#missed.add(uid);
    else this.#missedAll = true;
  }

  close(): void {
    if (this.#status === 'closed') return;
    this.#setStatus('closed');
    this.#epoch++;
    clearTimeout(this.#timer);
    clearInterval(this.#heartbeat);
    this.#socket?.destroy();
    this.#queue.length = 0;
    this.#missed.clear();
  }

  #setStatus(status: LinkStatus): void {
    if (this.#status === status) return;
    this.#log.debug({ from: this.#status, to: status }, 'peer link status');
    if (status === 'ready' || this.#status === 'ready') this.#log.info({ from: this.#status, to: status }, 'peer link status');
    this.#status = status;
  }

  #connect(): void {
    const epoch = ++this.#epoch;
    this.#setStatus('connecting');
    const nonce = newNonce();
    const tls = this.#options.tls && { context: this.#options.tls.context };
    const socket = dialFramed({ host: this.#peer.host, port: this.#peer.peerPort!, tls }, this.#options.maxFrameLength, () => epoch === this.#epoch, {
      connect: () => {
        this.#setStatus('handshaking');
        this.#lastInboundAt = Date.now();
        this.#write(encodeMessageFrame({ type: HeadType.PEER_HELLO, peerHello: { nodeId: this.#options.selfId, nonce } }));
      },
      frame: (body) => this.#onFrame(body, nonce),
      pushFailed: (err) => {
        this.#log.warn({ err }, 'bad frame from peer');
        socket.destroy();
      },
      // A refused certificate is a configuration error, not a peer that is down: said at warn.
      error: (err) => (tls && isTlsError(err) ? this.#log.warn({ err }, 'peer tls handshake failed') : this.#log.debug({ err }, 'peer socket error')),
      close: () => this.#onDisconnect(),
    });
    this.#socket = socket;
  }

  #onFrame(body: Buffer, nonce: Buffer): void {
    this.#lastInboundAt = Date.now();
    const message = decodeMessage(body);
    if (message.type === HeadType.PEER_CHALLENGE && this.#status === 'handshaking') {
      const challenge = message.peerChallenge;
      const theirNonce = challenge?.nonce;
      // The acceptor must be the worker we dialed: a proof for any other id is refused too.
      const transcript: Transcript = { dialer: this.#options.selfId, acceptor: this.peerId, dialerNonce: nonce, acceptorNonce: theirNonce ?? Buffer.alloc(0) };
      if (challenge?.nodeId !== this.peerId || theirNonce?.length !== NONCE_BYTES || !verifyPeerProof(this.#options.secret, 'challenge', transcript, challenge.mac)) {
        const err = new SwitchboardError('SB_ERR_PEER_AUTH_FAILED', `worker at ${this.#peer.host}:${this.#peer.peerPort} did not prove the cluster secret as ${this.peerId}`);
        this.#log.error({ err }, 'peer handshake failed');
        this.#socket?.destroy();
        return;
      }
      this.#write(encodeMessageFrame({ type: HeadType.PEER_AUTH, peerAuth: { mac: peerProof(this.#options.secret, 'auth', transcript) } }));
      this.#onReady();
      return;
    }
    if (message.type === HeadType.MESSAGE_NOTIFICATION) {
      // The peer closes this link and says why (e.g. our proof was refused).
      this.#log.warn({ notification: message.notification?.json }, 'peer notification');
    }
  }

  #onReady(): void {
    this.#setStatus('ready');
    const nudgeAll = this.#missedAll || this.#wasReady;
    this.#wasReady = true;
    for (const frame of this.#queue) this.#write(frame);
    this.#queue.length = 0;
    if (nudgeAll || this.#missed.size > 0) {
      this.#write(encodeMessageFrame({ type: HeadType.PEER_NUDGE, peerNudge: nudgeAll ? { all: true } : { uids: [...this.#missed] } }));
    }
    this.#missed.clear();
    this.#missedAll = false;
    this.#heartbeat = setInterval(() => this.#beat(), this.#options.heartbeatMs);
    this.#heartbeat.unref();
  }

  /** Keeps the peer's idle timeout away, and notices a peer that stopped answering. */
  #beat(): void {
    if (Date.now() - this.#lastInboundAt > 3 * this.#options.heartbeatMs) {
      this.#log.warn('peer silent for 3 heartbeat intervals, reconnecting');
      this.#socket?.destroy();
      return;
    }
    this.#write(encodeMessageFrame({ type: HeadType.HEART_BEAT, heartBeat: { uid: this.#options.selfId } }));
  }

  #write(frame: Buffer): void {
    if (this.#socket) writePerTick(this.#socket, frame);
  }

  #onDisconnect(): void {
    clearInterval(this.#heartbeat);
    this.#socket = undefined;
    if (this.#status === 'closed') return;
    this.#setStatus('waiting');
    this.#timer = setTimeout(() => this.#connect(), this.#options.reconnectMs);
    this.#timer.unref();
  }
}
