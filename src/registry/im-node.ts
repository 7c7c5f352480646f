// ImNode: the record of one worker, as the registry lists it (the seed's ImNode): where it
// listens, how loaded it is, whether it takes logins. Also where and how a ZooKeeper znode
// holds one (JSON), and the digest of a view the periodic reconcile compares.

import { createHash } from 'node:crypto';

export interface ImNode {
  id: string;
  host: string;
  /** Plaintext client port; 0: the worker has none (`--no-plain-port`), only `tlsPort`. */
  port: number;
  /** TLS client port (on `host`), when the worker has one; absent on older workers. */
  tlsPort?: number;
  /** Cluster mode: the port other workers link to (on `host`); absent on a single node. */
  peerPort?: number;
  /** Open client sessions on the worker: what the gate balances on. */
  balance: number;
  startedAt: number;
  version: string;
  /**
   * False while the worker's stores do not answer its health check: it stays registered (its
   * sessions stay routable) but the gate sends no new logins there. A znode without the field
   * (an older worker) counts as ready.
   */
  ready: boolean;
}

/** What a worker announces when it registers: its ImNode without the id the registry assigns. */
export type WorkerAnnouncement = Omit<ImNode, 'id'>;

/** A worker's znode is `<root>/workers/w-<id>`. */
export const WORKERS = 'workers';
export const WORKER_PREFIX = 'w-';

/** The znode data of a worker. */
export function encodeNode(info: WorkerAnnouncement | ImNode): Buffer {
  const { host, port, tlsPort, peerPort, balance, startedAt, version, ready } = info;
  const id = 'id' in info ? info.id : undefined;
  return Buffer.from(JSON.stringify({ id, host, port, tlsPort, peerPort, balance, startedAt, version, ready }));
}

/** The worker a znode describes, or undefined if its data is not a worker's. */
export function parseNode(id: string, data: Buffer): ImNode | undefined {
  let value: unknown;
  try {
    value = JSON.parse(data.toString('utf8'));
  } catch {
    return undefined;
  }
  if (typeof value !== 'object' || value === null) return undefined;
  const v = value as Record<string, unknown>;
  if (typeof v.host !== 'string' || typeof v.version !== 'string') return undefined;
  if (!Number.isInteger(v.port) || !Number.isFinite(v.balance) || !Number.isFinite(v.startedAt)) return undefined;
  if (v.peerPort !== undefined && !Number.isInteger(v.peerPort)) return undefined;
  if (v.tlsPort !== undefined && !Number.isInteger(v.tlsPort)) return undefined;
  // Absent: written by a worker that predates the health check, which registers only when ready.
  if (v.ready !== undefined && typeof v.ready !== 'boolean') return undefined;
  const ready = v.ready !== false;
  const info: ImNode = { id, host: v.host, port: v.port as number, balance: v.balance as number, startedAt: v.startedAt as number, version: v.version, ready };
  if (v.tlsPort !== undefined) info.tlsPort = v.tlsPort as number;
  if (v.peerPort !== undefined) info.peerPort = v.peerPort as number;
  return info;
}

export function sameNode(a: ImNode | undefined, b: ImNode): boolean {
  return (
    a !== undefined &&
    a.id === b.id &&
    a.host === b.host &&
    a.port === b.port &&
    a.tlsPort === b.tlsPort &&
    a.peerPort === b.peerPort &&
    a.balance === b.balance &&
    a.startedAt === b.startedAt &&
    a.version === b.version &&
    a.ready === b.ready
  );
}

/** A digest of a view, independent of order: what the periodic reconcile compares. */
export function viewHash(workers: Iterable<ImNode>): string {
  const rows = [...workers]
    .map((w) => [w.id, w.host, w.port, w.tlsPort ?? null, w.peerPort ?? null, w.balance, w.startedAt, w.version, w.ready] as const)
    .sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  return createHash('sha1').update(JSON.stringify(rows)).digest('hex');
}
