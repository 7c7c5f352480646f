// A TCP proxy between a ZooKeeper client and a test server that can make the network misbehave
// in ZooKeeper's terms: drop watch notifications (the client misses events while its session
// and connection stay healthy), or partition the client (connections cut, new ones black-holed)
// and heal it again.
//
// Server-to-client framing (after the ConnectResponse, which is passed through):
//
//   +-------------+-----------+------------+-----------+---------+
//   | length (4)  |  xid (4)  |  zxid (8)  |  err (4)  |  body   |
//   +-------------+-----------+------------+-----------+---------+
//
// xid -1 marks a watch notification, -2 a ping reply.

import net from 'node:net';
import type { Test } from 'tap';

const NOTIFICATION_XID = -1;

interface Pair {
  client: net.Socket;
  server: net.Socket | undefined;
}

export class ZooKeeperProxy {
  /** Drop watch notifications from the server while true. */
  dropWatchEvents = false;
  /** Notifications dropped so far. */
  dropped = 0;
  readonly #listener: net.Server;
  readonly #pairs = new Set<Pair>();
  #partitioned = false;

  private constructor(
    listener: net.Server,
    readonly upstreamPort: number,
  ) {
    this.#listener = listener;
  }

  static async start(t: Test, upstreamPort: number): Promise<ZooKeeperProxy> {
    const listener = net.createServer();
    const proxy = new ZooKeeperProxy(listener, upstreamPort);
    listener.on('connection', (client) => proxy.#accept(client));
    await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
    t.teardown(() => proxy.close());
    return proxy;
  }

  get connect(): string {
    return `127.0.0.1:${(this.#listener.address() as net.AddressInfo).port}`;
  }

  /** Cuts every connection; new ones are accepted and then ignored, as behind a dead link. */
  partition(): void {
    this.#partitioned = true;
    for (const pair of this.#pairs) this.#cut(pair);
  }

  heal(): void {
    this.#partitioned = false;
    // Black-holed connections would only time out: cut them so the client retries at once.
    for (const pair of this.#pairs) if (!pair.server) this.#cut(pair);
  }

  async close(): Promise<void> {
    for (const pair of this.#pairs) this.#cut(pair);
    await new Promise<void>((resolve) => this.#listener.close(() => resolve()));
  }

  #cut(pair: Pair): void {
    pair.client.destroy();
    pair.server?.destroy();
    this.#pairs.delete(pair);
  }

  #accept(client: net.Socket): void {
    const pair: Pair = { client, server: undefined };
    this.#pairs.add(pair);
    client.on('error', () => this.#cut(pair));
    client.on('close', () => this.#cut(pair));
    if (this.#partitioned) return; // black hole: read nothing, answer nothing
    const server = net.connect(this.upstreamPort, '127.0.0.1');
    pair.server = server;
    server.on('error', () => this.#cut(pair));
    server.on('close', () => this.#cut(pair));
    client.pipe(server);
    let pending: Buffer = Buffer.alloc(0);
    let first = true;
    server.on('data', (chunk: Buffer) => {
      pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
      while (pending.length >= 4) {
        const length = pending.readInt32BE(0);
        if (pending.length < 4 + length) break;
        const frame = pending.subarray(0, 4 + length);
        pending = pending.subarray(4 + length);
        const notification = !first && length >= 4 && frame.readInt32BE(4) === NOTIFICATION_XID;
        first = false;
        if (notification && this.dropWatchEvents) {
          this.dropped++;
          continue;
        }
        client.write(frame);
      }
    });
  }
}
