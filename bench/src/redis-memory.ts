// What the Redis a target's stores live in holds: `used_memory` of INFO memory (what Redis
// allocated, by its own account), summed over the one Redis or every master of a Redis Cluster
// the bench started. Its connections are opened before a run and only read at the two instants
// a run's figure is taken between, so they add nothing to the measured path.

import { Redis } from 'ioredis';

export class RedisMemory {
  readonly #clients: Redis[];

  private constructor(clients: Redis[]) {
    this.#clients = clients;
  }

  /** Connects to every server of `urls` (each a master: a plain connection, no cluster client). */
  static async connect(urls: readonly string[]): Promise<RedisMemory> {
    const clients = urls.map((url) => new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1, enableOfflineQueue: false }));
    // Errors are the readings' to report: a connection's event only says it again.
    for (const client of clients) client.on('error', () => {});
    try {
      await Promise.all(clients.map((client) => client.connect()));
    } catch (err) {
      for (const client of clients) client.disconnect();
      throw new Error(`cannot connect to the target's Redis to read its memory: ${(err as Error).message}`, { cause: err });
    }
    return new RedisMemory(clients);
  }

  /** used_memory in bytes, summed over the servers. */
  async usedMemory(): Promise<number> {
    const infos = await Promise.all(this.#clients.map((client) => client.info('memory')));
    return infos.reduce((sum, info) => sum + usedMemoryIn(info), 0);
  }

  close(): void {
    for (const client of this.#clients) client.disconnect();
  }
}

/** The used_memory field of an INFO memory answer. */
export function usedMemoryIn(info: string): number {
  const m = /^used_memory:(\d+)\r?$/m.exec(info);
  if (!m) throw new Error('INFO memory has no used_memory field');
  return Number(m[1]);
}
