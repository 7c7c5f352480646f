// A frame-aware TCP proxy between an SDK client and a real node, for tests that need to lose a
// frame or the connection at an exact point of the protocol (a response, a delivery, an ack)
// rather than at whatever moment a timer happens to fire. Every frame in either direction is
// decoded, recorded, and passed to a hook that may drop it or cut the connection.

import net from 'node:net';
import type { Test } from 'tap';
import { encodeFrame } from '../../src/protocol/frame.js';
import { CLIENT_MAX_FRAME_LENGTH, dialFrames, readFrames, type FrameReader } from '../../testkit/raw-client.js';
import { decodeMessage } from '../../src/protocol/codec.js';
import type { ImMessage } from '../../src/protocol/types.js';

export type Direction = 'toServer' | 'toClient';

/**
 * What to do with a frame: forward it; drop it; drop it and cut the connection; or forward it,
 * then end the client's side (the bytes are delivered before the FIN) and cut.
 */
export type Verdict = 'forward' | 'drop' | 'drop-and-cut' | 'forward-and-cut';

export interface ProxiedFrame {
  /** Which proxied connection (0, 1, ...): a reconnect is a new one. */
  connection: number;
  direction: Direction;
  message: ImMessage;
  verdict: Verdict;
}

export type FrameHook = (message: ImMessage, direction: Direction, connection: number) => Verdict | void;

interface Pair {
  client: net.Socket;
  server: net.Socket;
  dead: boolean;
}

export class FrameProxy {
  /** Every frame seen, in the order the proxy saw them, with what was done with it. */
  readonly frames: ProxiedFrame[] = [];
  hook: FrameHook | undefined;
  readonly #listener: net.Server;
  readonly #pairs = new Set<Pair>();
  /** Every socket ever opened, destroyed on close() (a gracefully ended one may linger). */
  readonly #sockets = new Set<net.Socket>();
  #connections = 0;

  private constructor(listener: net.Server) {
    this.#listener = listener;
  }

  /** Listens on a free loopback port and forwards to `upstreamPort`; closed on teardown. */
  static async start(t: Test, upstreamPort: number, hook?: FrameHook): Promise<FrameProxy> {
    const listener = net.createServer();
    const proxy = new FrameProxy(listener);
    proxy.hook = hook;
    listener.on('connection', (client) => proxy.#accept(client, upstreamPort));
    await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
    t.teardown(() => proxy.close());
    return proxy;
  }

  get port(): number {
    return (this.#listener.address() as net.AddressInfo).port;
  }

  /** Connections accepted so far. */
  get connections(): number {
    return this.#connections;
  }

  /** Frames of one direction (and optionally one connection) matching `type`. */
  seen(direction: Direction, type: number, connection?: number): ImMessage[] {
    return this.frames
      .filter((f) => f.direction === direction && f.message.type === type && (connection === undefined || f.connection === connection))
      .map((f) => f.message);
  }

  /** Destroys every current connection, both sides. */
  cut(): void {
    for (const pair of this.#pairs) this.#kill(pair);
  }

  async close(): Promise<void> {
    this.cut();
    for (const socket of this.#sockets) socket.destroy();
    await new Promise<void>((resolve) => this.#listener.close(() => resolve()));
  }

  #accept(client: net.Socket, upstreamPort: number): void {
    const connection = this.#connections++;
    const relay = (to: () => net.Socket, direction: Direction): FrameReader => ({
      maxFrameLength: CLIENT_MAX_FRAME_LENGTH,
      onFrame: (body) => {
        if (pair.dead) return;
        const message = decodeMessage(body);
        const verdict = this.hook?.(message, direction, connection) ?? 'forward';
        this.frames.push({ connection, direction, message, verdict });
        if (verdict === 'forward' || verdict === 'forward-and-cut') to().write(encodeFrame(body));
        if (verdict === 'forward-and-cut') {
          // The client's side gets the bytes, then a FIN (a destroy could reset the connection
          // before the client has read them); the server's side is dropped at once.
          pair.dead = true;
          this.#pairs.delete(pair);
          pair.client.end();
          pair.server.destroy();
        } else if (verdict === 'drop-and-cut') {
          this.#kill(pair);
        }
      },
    });
    const server = dialFrames({ port: upstreamPort }, relay(() => client, 'toClient'));
    client.setNoDelay(true);
    readFrames(client, relay(() => server, 'toServer'));
    const pair: Pair = { client, server, dead: false };
    this.#sockets.add(client).add(server);
    this.#pairs.add(pair);
    for (const socket of [client, server]) {
      socket.on('error', () => this.#kill(pair));
      socket.on('close', () => this.#kill(pair));
    }
  }

  #kill(pair: Pair): void {
    if (pair.dead) return;
    pair.dead = true;
    this.#pairs.delete(pair);
    pair.client.destroy();
    pair.server.destroy();
  }
}
