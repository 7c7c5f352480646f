// What a connection on the peer port may say (PROTOCOL.md §10). First the handshake, HELLO →
// CHALLENGE → AUTH: the dialer must claim the id of another worker in the registry (the view may
// lag a fresh registration by a moment, so an unknown id is waited for, boundedly) and prove the
// cluster secret over the whole transcript. Only then peer frames: PEER_DELIVER, PEER_GROUP, PEER_RECEIPT, PEER_NUDGE,
// SESSION_ON / SESSION_OFF and heartbeats. Anything else closes the connection with a code.
// One link per peer: a newer authenticated link from the same worker replaces the older.

import { uint64Number } from '../protocol/codec.js';
import { SwitchboardError } from '../errors.js';
import { HeadType, NotificationType, type ImMessage } from '../protocol/types.js';
import type { Registry } from '../registry/registry.js';
import { AttributeKey } from '../server/attributes.js';
import type { Connection } from '../server/connection.js';
import type { LocalPort } from '../server/cluster-seam.js';
import type { Logger } from '../log.js';
import { isGroupId } from '../groups/group-store.js';
import { NONCE_BYTES, isValidNodeId, newNonce, peerProof, verifyPeerProof, type Transcript } from './peer-auth.js';

type Stage = 'hello' | 'challenged' | 'ready';

interface PeerState {
  stage: Stage;
  /** `dialer` is the id the HELLO claimed; `acceptor`, ours, is set when the CHALLENGE goes out. */
  transcript: Transcript;
}

const PEER = new AttributeKey<PeerState>('peer');

type Admission = 'ok' | 'self' | 'unknown' | 'no-self-id';

export interface PeerAcceptorOptions {
  secret: string;
  local: LocalPort;
  registry: Pick<Registry, 'workers' | 'onChange'>;
  /** How long a HELLO from an id not (yet) in the registry's view waits for it to appear. */
  registryWaitMs: number;
  /** A peer announced a login or logout of `uid` (SESSION_ON / SESSION_OFF). */
  onSessionEvent: (uid: string) => void;
  log: Logger;
}

export class PeerAcceptor {
  readonly #options: PeerAcceptorOptions;
  /** Authenticated links by peer id: at most one each, so at most one per registered worker. */
  readonly #links = new Map<string, Connection>();
  /** HELLOs waiting for the registry view (or our own id): one per pending connection at most. */
  readonly #waiting = new Set<{ wake(): void; finish(): void }>();
  #selfId = '';
  #unsubscribe: (() => void) | undefined;

  constructor(options: PeerAcceptorOptions) {
    this.#options = options;
    // Dialers find this worker in the registry a moment before its registration has told it
    // its own id: their HELLOs wait for it rather than fail.
    void options.local.nodeId.then((id) => {
      this.#selfId = id;
      this.#recheck();
    });
  }

  start(): void {
    this.#unsubscribe = this.#options.registry.onChange(() => this.#recheck());
  }

  stop(): void {
    this.#unsubscribe?.();
    for (const waiter of [...this.#waiting]) waiter.finish();
    this.#links.clear();
  }

  /** Handles one frame of a peer-port connection; throws a SwitchboardError to close it. */
  handle(conn: Connection, message: ImMessage): void | Promise<void> {
    const state = conn.attrs.get(PEER);
    if (state?.stage === 'ready') return this.#handlePeer(conn, state, message);
    switch (message.type) {
      case HeadType.PEER_HELLO:
        return this.#hello(conn, state, message);
      case HeadType.PEER_AUTH:
        return this.#auth(conn, state, message);
      default:
        throw new SwitchboardError('SB_ERR_PEER_NOT_AUTHENTICATED', `message type ${message.type} before the peer handshake completed`);
    }
  }

  /** The connection stopped accepting output: it is no longer the peer's link. */
  closing(conn: Connection): void {
    const state = conn.attrs.get(PEER);
    if (state?.stage === 'ready' && this.#links.get(state.transcript.dialer) === conn) this.#links.delete(state.transcript.dialer);
  }

  async #hello(conn: Connection, state: PeerState | undefined, message: ImMessage): Promise<void> {
    const peerId = message.peerHello?.nodeId ?? '';
    const nonce = message.peerHello?.nonce;
    if (state || !isValidNodeId(peerId) || nonce?.length !== NONCE_BYTES) {
      throw new SwitchboardError('SB_ERR_PEER_BAD_HELLO', 'PEER_HELLO needs a node_id of 1 to 64 of A-Z a-z 0-9 . _ - and a 16-byte nonce, once');
    }
    const transcript: Transcript = { dialer: peerId, acceptor: '', dialerNonce: Buffer.from(nonce), acceptorNonce: newNonce() };
    const hello: PeerState = { stage: 'hello', transcript };
    conn.attrs.set(PEER, hello);
    const admission = await this.#admit(peerId);
    if (conn.state !== 'open') return;
    if (admission !== 'ok') {
      const why = admission === 'self' ? 'is this worker’s own' : admission === 'unknown' ? 'is not in the registry' : 'cannot be checked: this worker is not registered yet';
      throw new SwitchboardError('SB_ERR_PEER_UNKNOWN_NODE', `node id ${peerId} ${why}`);
    }
    transcript.acceptor = this.#selfId;
    hello.stage = 'challenged';
    conn.send({
      type: HeadType.PEER_CHALLENGE,
      peerChallenge: { nodeId: transcript.acceptor, nonce: transcript.acceptorNonce, mac: peerProof(this.#options.secret, 'challenge', transcript) },
    });
  }

  #auth(conn: Connection, state: PeerState | undefined, message: ImMessage): void {
    if (state?.stage !== 'challenged') throw new SwitchboardError('SB_ERR_PEER_NOT_AUTHENTICATED', 'PEER_AUTH before PEER_CHALLENGE');
    const peerId = state.transcript.dialer;
    if (!verifyPeerProof(this.#options.secret, 'auth', state.transcript, message.peerAuth?.mac)) {
      throw new SwitchboardError('SB_ERR_PEER_AUTH_FAILED', `peer ${peerId} did not prove the cluster secret`);
    }
    state.stage = 'ready';
    conn.authenticated = true;
    conn.bindLog({ peer: peerId });
    const previous = this.#links.get(peerId);
    this.#links.set(peerId, conn);
    previous?.close({ code: 'SB_ERR_PEER_REPLACED', reason: `a newer link from ${peerId} replaced this one` });
    conn.log.info({ replaced: previous !== undefined }, 'peer authenticated');
  }

  #check(peerId: string): Admission {
    const self = this.#selfId;
    if (!self) return 'no-self-id';
    if (peerId === self) return 'self';
    return this.#options.registry.workers().some((w) => w.id === peerId) ? 'ok' : 'unknown';
  }

  /** Whether `peerId` may link to us, waiting up to registryWaitMs for the view (or our id). */
  #admit(peerId: string): Admission | Promise<Admission> {
    const now = this.#check(peerId);
    if (now === 'ok' || now === 'self') return now;
    return new Promise((resolve) => {
      const waiter = {
        finish: () => {
          clearTimeout(timer);
          this.#waiting.delete(waiter);
          resolve(this.#check(peerId));
        },
        wake: () => {
          const result = this.#check(peerId);
          if (result === 'ok' || result === 'self') waiter.finish();
        },
      };
      const timer = setTimeout(waiter.finish, this.#options.registryWaitMs);
      this.#waiting.add(waiter);
    });
  }

  #recheck(): void {
    for (const waiter of [...this.#waiting]) waiter.wake();
  }

  #handlePeer(conn: Connection, state: PeerState, message: ImMessage): void {
    switch (message.type) {
      case HeadType.PEER_DELIVER: {
        const d = message.peerDeliver;
        // Without an epoch (0: a worker of an older version) no session takes it as is: they read their inbox.
        if (d?.uid && d.body) this.#options.local.deliver(d.uid, uint64Number(d.seq), d.body, uint64Number(d.epoch));
        return;
      }
      case HeadType.PEER_GROUP: {
        const g = message.peerGroup;
        // Without a body: the entry exists, its sessions read it from the log.
        if (g?.group && isGroupId(g.group)) this.#options.local.deliverGroup(g.group, uint64Number(g.seq), g.body?.length ? g.body : undefined);
        return;
      }
      case HeadType.PEER_RECEIPT: {
        const r = message.peerReceipt;
        if (r?.uid && r.receipt) this.#options.local.receipt(r.uid, r.receipt);
        return;
      }
      case HeadType.PEER_NUDGE: {
        const n = message.peerNudge;
        this.#options.local.nudge(n?.all ? undefined : (n?.uids ?? []));
        return;
      }
      case HeadType.MESSAGE_NOTIFICATION: {
        const uid = sessionEventUid(message);
        if (uid !== undefined) this.#options.onSessionEvent(uid);
        return;
      }
      case HeadType.HEART_BEAT:
        conn.send(message);
        return;
      default:
        throw new SwitchboardError('SB_ERR_UNKNOWN_TYPE', `message type ${message.type} is not accepted from peer ${state.transcript.dialer}`);
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
