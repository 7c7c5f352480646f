// The accepting side of peer links, plugged into the worker's server as its ServerExtension.
// A connection becomes a peer only by completing the handshake (HELLO → CHALLENGE → AUTH); any
// peer frame before that closes it with SB_ERR_PEER_NOT_AUTHENTICATED, a wrong proof with
// SB_ERR_PEER_AUTH_FAILED. A client session can never turn into a peer, and a peer's frames
// never reach the client handlers.

import { SwitchboardError } from '../errors.js';
import { NotificationType, HeadType, type ImMessage } from '../protocol/types.js';
import { AttributeKey } from '../server/attributes.js';
import type { Connection } from '../server/connection.js';
import type { LocalPort, ServerExtension } from '../server/router.js';
import type { Logger } from '../log.js';
import { newNonce, peerMac, verifyPeerMac } from './peer-auth.js';

interface PeerState {
  peerId: string;
  /** Our nonce, which the peer's PEER_AUTH must answer. */
  nonce: Buffer;
  authenticated: boolean;
}

const PEER = new AttributeKey<PeerState>('peer');

export interface PeerAcceptorOptions {
  secret: string;
  local: LocalPort;
  selfId: () => string;
  /** A peer announced a login or logout of `uid` (SESSION_ON / SESSION_OFF). */
  onSessionEvent: (uid: string) => void;
  log: Logger;
}

export class PeerAcceptor implements ServerExtension {
  readonly #options: PeerAcceptorOptions;

  constructor(options: PeerAcceptorOptions) {
    this.#options = options;
  }

  owns(conn: Connection): boolean {
    return conn.attrs.get(PEER)?.authenticated === true;
  }

  handle(conn: Connection, message: ImMessage): boolean {
    const state = conn.attrs.get(PEER);
    if (state?.authenticated) return this.#handlePeer(conn, state, message);
    switch (message.type) {
      case HeadType.PEER_HELLO:
        this.#hello(conn, state, message);
        return true;
      case HeadType.PEER_AUTH:
        this.#auth(conn, state, message);
        return true;
      case HeadType.PEER_CHALLENGE:
      case HeadType.PEER_DELIVER:
      case HeadType.PEER_NUDGE:
        throw new SwitchboardError('SB_ERR_PEER_NOT_AUTHENTICATED', `peer frame of type ${message.type} before the peer handshake`);
      default:
        return false;
    }
  }

  #hello(conn: Connection, state: PeerState | undefined, message: ImMessage): void {
    const peerId = message.peerHello?.nodeId ?? '';
    const theirNonce = message.peerHello?.nonce;
    if (state || conn.session || !peerId || !theirNonce) {
      throw new SwitchboardError('SB_ERR_PEER_AUTH_FAILED', 'PEER_HELLO needs node_id and nonce, once, on a connection that is not a client session');
    }
    const nonce = newNonce();
    conn.attrs.set(PEER, { peerId, nonce, authenticated: false });
    // Peers find this worker in the registry a moment before its registration has told it its
    // own id: answering with an empty id then would fail their handshake, and they would retry
    // only after peer-reconnect-ms. So the challenge waits for the id (send() skips a closed conn).
    void this.#options.local.nodeId.then((selfId) => {
      conn.send({
        type: HeadType.PEER_CHALLENGE,
        peerChallenge: { nodeId: selfId, nonce, mac: peerMac(this.#options.secret, selfId, peerId, theirNonce) },
      });
    });
  }

  #auth(conn: Connection, state: PeerState | undefined, message: ImMessage): void {
    if (!state) throw new SwitchboardError('SB_ERR_PEER_NOT_AUTHENTICATED', 'PEER_AUTH before PEER_HELLO');
    if (!verifyPeerMac(this.#options.secret, state.peerId, this.#options.selfId(), state.nonce, message.peerAuth?.mac)) {
      throw new SwitchboardError('SB_ERR_PEER_AUTH_FAILED', `peer ${state.peerId} did not prove the cluster secret`);
    }
    state.authenticated = true;
    conn.authenticated = true;
    conn.bindLog({ peer: state.peerId });
    conn.log.info('peer authenticated');
  }

  #handlePeer(conn: Connection, state: PeerState, message: ImMessage): boolean {
    switch (message.type) {
      case HeadType.PEER_DELIVER: {
        const d = message.peerDeliver;
        // Without an epoch (0: a worker of an older version) no session takes it as is: they read their inbox.
        if (d?.uid && d.body) this.#options.local.deliver(d.uid, Number(d.seq ?? 0), d.body, Number(d.epoch ?? 0));
        return true;
      }
      case HeadType.PEER_NUDGE: {
        const n = message.peerNudge;
        this.#options.local.nudge(n?.all ? undefined : (n?.uids ?? []));
        return true;
      }
      case HeadType.MESSAGE_NOTIFICATION: {
        const uid = sessionEventUid(message);
        if (uid !== undefined) this.#options.onSessionEvent(uid);
        return true;
      }
      case HeadType.HEART_BEAT:
        conn.send(message);
        return true;
      default:
        this.#options.log.debug({ peer: state.peerId, type: message.type }, 'ignoring peer frame');
        return false;
    }
  }
}

/** The uid of a SESSION_ON / SESSION_OFF notification, else undefined. */
function sessionEventUid(message: ImMessage): string | undefined {
  try {
    const { type, data } = JSON.parse(message.notification?.json ?? '') as { type?: number; data?: { uid?: unknown } };
    if ((type === NotificationType.SESSION_ON || type === NotificationType.SESSION_OFF) && typeof data?.uid === 'string') return data.uid;
  } catch {
    // not JSON: not a session event
  }
  return undefined;
}
