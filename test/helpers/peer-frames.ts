// Counting what workers send each other (PROTOCOL.md §10), for tests of "one frame per
// destination worker". Two ways, both on the real peer protocol:
//   - FakePeer: the test plays a worker. It registers in the cluster's ZooKeeper root with a
//     peerPort where it listens, so every real worker dials it; it answers the handshake as an
//     acceptor with the cluster's peer secret, echoes heartbeats and records every frame after it.
//   - PeerTap: a transparent TCP relay in front of a real worker's peer port (the worker is
//     started with --announce-host 127.0.0.2 and the relay listens there, on the worker's peer
//     port), so the links of the other workers to it pass through the relay, which decodes a copy
//     of what the dialers send without changing a byte.

import net from 'node:net';
import type { Test } from 'tap';
import { newNonce, peerProof, verifyPeerProof, type Transcript } from '../../src/cluster/peer-auth.js';
import { silentLogger } from '../../src/log.js';
import { decodeMessage, encodeMessageFrame } from '../../src/protocol/codec.js';
import { FrameDecoder } from '../../src/protocol/frame.js';
import { HeadType, type ImMessage } from '../../src/protocol/types.js';
import { digestId } from '../../src/registry/cluster-acl.js';
import { ZooKeeperRegistry } from '../../src/registry/zk-registry.js';
import { freePort } from '../../testkit/services.js';
import { readFrames } from '../../testkit/raw-client.js';
import { CLUSTER_PEER_SECRET, CLUSTER_ZK_GATE, CLUSTER_ZK_WORKER, ZK_SESSION_TIMEOUT_MS, type TestCluster } from './cluster.js';

/** A frame a dialer sent, and which worker it was (the id its HELLO claimed). */
export interface PeerFrame {
  from: string;
  message: ImMessage;
}

/** Frames of `type` about `group` (PEER_GROUP), by sender. */
export function groupFramesBy(frames: readonly PeerFrame[], group: string): Map<string, number> {
  const counts = new Map<string, number>();
  for (const f of frames) {
    if (f.message.type === HeadType.PEER_GROUP && f.message.peerGroup?.group === group) counts.set(f.from, (counts.get(f.from) ?? 0) + 1);
  }
  return counts;
}

async function listen(t: Test, server: net.Server, host: string, port: number): Promise<void> {
  const sockets = new Set<net.Socket>();
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  );
}

export class FakePeer {
  /** Every frame received after a completed handshake, in arrival order. */
  readonly frames: PeerFrame[] = [];
  /** Dialers whose handshake completed (their ids), in order; a reconnect adds one more. */
  readonly authenticated: string[] = [];
  /** Handshakes refused (a wrong proof): none is expected. */
  readonly refused: string[] = [];
  id = '';

  private constructor(readonly peerPort: number) {}

  /** Listens, then registers in `cluster`'s root as a worker with the workers' identity; gone on teardown. */
  static async start(t: Test, cluster: TestCluster): Promise<FakePeer> {
    const server = net.createServer();
    let registered!: (id: string) => void;
    const idKnown = new Promise<string>((resolve) => (registered = resolve));
    await listen(t, server, '127.0.0.1', 0);
    const peer = new FakePeer((server.address() as net.AddressInfo).port);
    server.on('connection', (socket) => peer.#accept(socket, idKnown));
    const registry = new ZooKeeperRegistry({
      connect: cluster.zk.connect,
      root: cluster.root,
      sessionTimeoutMs: ZK_SESSION_TIMEOUT_MS,
      auth: CLUSTER_ZK_WORKER,
      readers: [digestId(CLUSTER_ZK_GATE)],
      nativeLogLevel: 'off',
      log: silentLogger(),
    });
    t.teardown(() => registry.close());
    const info = await registry.register({ host: '127.0.0.1', port: await freePort(), peerPort: peer.peerPort, balance: 0, startedAt: Date.now(), version: 'fake-peer', ready: true });
    peer.id = info.id;
    registered(info.id);
    return peer;
  }

  /** The acceptor's side of the handshake (§10), then a recorder. */
  #accept(socket: net.Socket, idKnown: Promise<string>): void {
    socket.setNoDelay(true);
    socket.on('error', () => {});
    let transcript: Transcript | undefined;
    let ready = false;
    // HELLO can come before our registration resolved: frames are handled in order, after it.
    let chain = Promise.resolve();
    readFrames(socket, {
      onFrame: (body) => {
        const message = decodeMessage(Buffer.from(body));
        chain = chain.then(async () => {
          const self = await idKnown;
          if (ready) {
            if (message.type === HeadType.HEART_BEAT) socket.write(encodeMessageFrame(message));
            this.frames.push({ from: transcript!.dialer, message });
          } else if (message.type === HeadType.PEER_HELLO && !transcript) {
            transcript = { dialer: message.peerHello!.nodeId!, acceptor: self, dialerNonce: Buffer.from(message.peerHello!.nonce!), acceptorNonce: newNonce() };
            const mac = peerProof(CLUSTER_PEER_SECRET, 'challenge', transcript);
            socket.write(encodeMessageFrame({ type: HeadType.PEER_CHALLENGE, peerChallenge: { nodeId: self, nonce: transcript.acceptorNonce, mac } }));
          } else if (message.type === HeadType.PEER_AUTH && transcript && verifyPeerProof(CLUSTER_PEER_SECRET, 'auth', transcript, message.peerAuth?.mac)) {
            ready = true;
            this.authenticated.push(transcript.dialer);
          } else {
            this.refused.push(transcript?.dialer ?? '?');
            socket.destroy();
          }
        });
      },
    });
  }
}

export class PeerTap {
  /** What the dialers sent through the relay, decoded, in arrival order per connection. */
  readonly frames: PeerFrame[] = [];
  /** The dialers' bytes as they passed (what a tap on the wire reads), and how many. */
  readonly bytes: Buffer[] = [];
  byteCount = 0;
  /** Connections whose bytes were no frame stream (TLS): nothing of them was decoded. */
  undecodable = 0;

  private constructor() {}

  /**
   * Relays `host:port` to 127.0.0.1:`port`, where the tapped worker's peer listener is (start
   * it with --peer-port `port` --announce-host `host`). Listening first is fine: a dialer that
   * finds nothing behind the relay yet retries (peer-reconnect-ms).
   */
  static async start(t: Test, host: string, port: number): Promise<PeerTap> {
    const tap = new PeerTap();
    const server = net.createServer((inbound) => {
      const outbound = net.connect({ host: '127.0.0.1', port });
      for (const s of [inbound, outbound]) {
        s.setNoDelay(true);
        s.on('error', () => {});
      }
      inbound.on('close', () => outbound.destroy());
      outbound.on('close', () => inbound.destroy());
      inbound.pipe(outbound);
      outbound.pipe(inbound);
      let from = '?';
      // A copy is decoded: the stream itself goes through untouched.
      const decoder = new FrameDecoder((body) => {
        const message = decodeMessage(Buffer.from(body));
        if (message.type === HeadType.PEER_HELLO) from = message.peerHello?.nodeId ?? '?';
        tap.frames.push({ from, message });
      });
      let decodable = true;
      inbound.on('data', (chunk: Buffer) => {
        // Bounded: a tap keeps the first MiB it saw, enough to look for a message in.
        if (tap.byteCount < 1024 * 1024) tap.bytes.push(Buffer.from(chunk));
        tap.byteCount += chunk.length;
        if (!decodable) return;
        try {
          decoder.push(chunk);
        } catch {
          decodable = false;
          tap.undecodable++;
        }
      });
    });
    await listen(t, server, host, port);
    return tap;
  }
}
