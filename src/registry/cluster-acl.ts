// Who may touch switchboard's znodes. Without an identity (development) every znode is open to
// anyone, as ZooKeeper creates it. With one (--zk-auth), every znode at and below the root gets
// the cluster ACL: every permission for the workers' identity, READ for each reader identity
// (--zk-readers: the gates), nothing for anyone else, unauthenticated clients included.
//
// node-zookeeper 7 creates every node with the open ACL (its a_create passes
// ZOO_OPEN_ACL_UNSAFE) and has no multi-op, so a node is open from its create until a setAcl.
// That window is closed as far as the API allows: create, setAcl and a verifying write are
// sent together (ZooKeeper runs one session's requests in order, so another client can only act
// between them on the server, never during a round trip), and whatever another client did in
// between shows as a version conflict, after which the node is deleted and created again.

import { createHash } from 'node:crypto';
import { SwitchboardError } from '../errors.js';
import type { Logger } from '../log.js';
import {
  ZK_MODE,
  ZK_PERM,
  ZK_RC,
  ZooKeeperSession,
  hasRc,
  type ZooKeeperAclEntry,
  type ZooKeeperDigestAuth,
  type ZooKeeperLogLevel,
  type ZooKeeperStat,
} from './zookeeper-client.js';

/** `user:base64(sha1("user:password"))`: the id ZooKeeper's digest scheme gives that identity. */
export function digestId(auth: ZooKeeperDigestAuth): string {
  return `${auth.user}:${createHash('sha1').update(`${auth.user}:${auth.password}`).digest('base64')}`;
}

/** A digest id: a user, a colon and the 28 base64 characters of a SHA-1. */
const DIGEST_ID = /^[^:\s,]+:[A-Za-z0-9+/]{27}=$/;

/** `user:password` (the password may contain colons). Errors never repeat the password. */
export function parseDigestAuth(text: string, flag = '--zk-auth'): ZooKeeperDigestAuth {
  const colon = text.indexOf(':');
  const user = colon > 0 ? text.slice(0, colon) : '';
  const password = colon > 0 ? text.slice(colon + 1) : '';
  if (!user || /[\s,]/.test(user) || !password) {
    throw new SwitchboardError('SB_ERR_CONFIG', `${flag} must be user:password (a user without colons, spaces or commas, and a non-empty password)`);
  }
  return { user, password };
}

/** Comma-separated digest ids. A value that is not one is named by its user part only. */
export function parseDigestIds(text: string, flag = '--zk-readers'): string[] {
  const ids = text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  for (const id of ids) {
    if (!DIGEST_ID.test(id)) {
      const user = id.includes(':') ? id.slice(0, id.indexOf(':')) : '(no user)';
      throw new SwitchboardError(
        'SB_ERR_CONFIG',
        `${flag}: the entry for ${JSON.stringify(user)} is not a digest id (user:base64(sha1("user:password")), 28 characters after the colon; OPERATIONS.md shows how to compute one)`,
      );
    }
  }
  return [...new Set(ids)];
}

export interface ClusterAclOptions {
  /** This process's digest identity; unset: no authentication, every znode open (development). */
  auth?: ZooKeeperDigestAuth;
  /** Digest ids granted READ on every znode this process creates (the gates'). */
  readers?: readonly string[];
}

/** How many times a node changed by someone else while being created is created again. */
const CREATE_ATTEMPTS = 3;

export class ClusterAcl {
  readonly auth: ZooKeeperDigestAuth | undefined;
  /** What every znode at and below the root gets; the open ACL without an identity. */
  readonly entries: readonly ZooKeeperAclEntry[];
  readonly #log: Logger;

  constructor(options: ClusterAclOptions, log: Logger) {
    this.auth = options.auth;
    this.#log = log;
    if (!options.auth) {
      this.entries = Object.freeze([{ scheme: 'world', id: 'anyone', perms: ZK_PERM.ALL }]);
      return;
    }
    const self = digestId(options.auth);
    const readers = (options.readers ?? []).filter((id) => id !== self);
    this.entries = Object.freeze([
      { scheme: 'digest', id: self, perms: ZK_PERM.ALL },
      ...readers.map((id) => ({ scheme: 'digest' as const, id, perms: ZK_PERM.READ })),
    ]);
  }

  /** Whether this process authenticates (and so protects what it creates). */
  get secured(): boolean {
    return this.auth !== undefined;
  }

  /**
   * Whether a node's stat shows the ACL was set after its create (aversion ≥ 1) and its data
   * written after that (version ≥ 1), which is how every switchboard node looks once created. A
   * node still open, or made by a process without an identity, does not.
   */
  protects(stat: ZooKeeperStat): boolean {
    return !this.secured || (stat.aversion >= 1 && stat.version >= 1);
  }

  /**
   * Creates `path` (EPHEMERAL or PERSISTENT) holding `data`, with the cluster ACL; resolves its
   * data version. Only for a path this process owns (its own id): if the node exists already
   * (NODE_EXISTS is thrown), the ACL and the write sent with the create met that node, and fail
   * unless it is at version 0, as only a node of ours that lost its answer can be.
   */
  async create(session: ZooKeeperSession, path: string, data: Buffer, mode: number): Promise<number> {
    if (!this.secured) {
      await session.create(path, data, mode);
      return 0;
    }
    for (let attempt = 1; attempt <= CREATE_ATTEMPTS; attempt++) {
      const created = session.create(path, data, mode);
      const acl = session.setAcl(path, 0, this.entries);
      const verified = session.set(path, data, 0);
      const [c, a, v] = await Promise.allSettled([created, acl, verified]);
      if (c.status === 'rejected') throw this.explain(c.reason, path, 'create');
      // Someone set the ACL first (BAD_VERSION; NO_AUTH once it locked us out), or wrote first.
      const tampered =
        (a.status === 'rejected' && hasRc(a.reason, ZK_RC.BAD_VERSION, ZK_RC.NO_AUTH)) ||
        (v.status === 'rejected' && hasRc(v.reason, ZK_RC.BAD_VERSION, ZK_RC.NO_AUTH));
      if (!tampered) {
        if (a.status === 'rejected') throw a.reason;
        if (v.status === 'rejected') throw v.reason;
        return v.value.version;
      }
      this.#log.warn({ path, attempt }, 'zookeeper node changed by another client while being created; creating it again');
      await session.delete(path, -1).catch((err: unknown) => {
        if (!hasRc(err, ZK_RC.NO_NODE)) throw err;
      });
    }
    throw new SwitchboardError(
      'SB_ERR_REGISTRY_ACL',
      `zookeeper node ${path} was changed by another client while being created, ${CREATE_ATTEMPTS} times in a row: someone without the workers' identity can write under ${parentOf(path)}`,
    );
  }

  /**
   * Makes `root` and each of `nodes` (persistent, below it) exist with the cluster ACL: created
   * if missing, their ACL set again if present (repairing whatever it was). Missing ancestors of
   * the root are created as ZooKeeper creates them and otherwise left alone: they are not
   * switchboard's. A node whose ACL this identity may not set belongs to someone else:
   * SB_ERR_REGISTRY_ACL, which a worker does not start with.
   */
  async ensureTree(session: ZooKeeperSession, root: string, nodes: readonly string[]): Promise<void> {
    await mkdirp(session, parentOf(root)).catch((err: unknown) => {
      throw this.explain(err, parentOf(root), 'create');
    });
    // ZooKeeper's own root is nobody's to re-ACL.
    for (const path of root === '/' ? nodes : [root, ...nodes]) {
      if (!this.secured) {
        await createIfMissing(session, path).catch((err: unknown) => {
          throw this.explain(err, path, 'create');
        });
        continue;
      }
      const before = await session.exists(path);
      // Sent together: a node created here is open only between the two, on the server.
      const created = before ? Promise.resolve() : createPersistent(session, path);
      const acl = session.setAcl(path, -1, this.entries);
      const [c, a] = await Promise.allSettled([created, acl]);
      if (c.status === 'rejected') throw this.explain(c.reason, path, 'create');
      if (a.status === 'rejected') throw this.explain(a.reason, path, 'set the ACL of');
      if (before && before.aversion === 0) this.#log.warn({ path }, 'zookeeper node was open to anyone; cluster acl set');
    }
    this.#log.info({ root, user: this.auth?.user, readers: this.entries.length - 1 }, 'zookeeper acl in place');
  }

  /** A NO_AUTH answer as SB_ERR_REGISTRY_ACL saying what to do; any other error as it is. */
  explain(err: unknown, path: string, what: string): unknown {
    if (!hasRc(err, ZK_RC.NO_AUTH)) return err;
    const why = this.auth
      ? `ZooKeeper user ${JSON.stringify(this.auth.user)} may not ${what} ${path}: it belongs to another identity (or was made before switchboard used --zk-auth); ` +
        'give this user every permission on it, or delete it (OPERATIONS.md, ZooKeeper authentication)'
      : `ZooKeeper refused to let a client without an identity ${what} ${path}: the cluster's znodes are protected; start with --zk-auth (the workers' identity)`;
    return new SwitchboardError('SB_ERR_REGISTRY_ACL', why, { cause: err });
  }
}

function parentOf(path: string): string {
  const slash = path.lastIndexOf('/');
  return slash <= 0 ? '/' : path.slice(0, slash);
}

/** An empty persistent node; one that exists already is fine. Sent at once (no exists first). */
function createPersistent(session: ZooKeeperSession, path: string): Promise<void> {
  return session.create(path, Buffer.alloc(0), ZK_MODE.PERSISTENT).then(
    () => undefined,
    (err: unknown) => {
      if (!hasRc(err, ZK_RC.NODE_EXISTS)) throw err;
    },
  );
}

/**
 * Asks first: ZooKeeper checks CREATE on the parent before it looks whether the node exists, so
 * creating an existing node under a parent closed to us fails with NO_AUTH, not NODE_EXISTS.
 */
async function createIfMissing(session: ZooKeeperSession, path: string): Promise<void> {
  if (await session.exists(path)) return;
  await createPersistent(session, path);
}

async function mkdirp(session: ZooKeeperSession, path: string): Promise<void> {
  let prefix = '';
  for (const part of path.split('/').filter(Boolean)) {
    prefix += `/${part}`;
    await createIfMissing(session, prefix);
  }
}

export type ClosedCheck = 'closed' | 'open' | 'absent';

/**
 * Whether a client without any identity is kept out of `path`: it may neither list its
 * children nor create one. 'absent': the node does not exist (yet). What the gate, which cannot
 * read ACLs (see zookeeper-client.ts), checks before it trusts a registry: only the workers,
 * who know the gate's digest id, can have given the gate READ without giving it to everyone.
 */
export async function checkClosed(options: { connect: string; path: string; timeoutMs: number; logLevel?: ZooKeeperLogLevel }): Promise<ClosedCheck> {
  let session: ZooKeeperSession | undefined;
  let timer: NodeJS.Timeout | undefined;
  try {
    await new Promise<void>((resolve, reject) => {
      timer = setTimeout(() => reject(new SwitchboardError('SB_ERR_REGISTRY_UNAVAILABLE', `no ZooKeeper session within ${options.timeoutMs} ms`)), options.timeoutMs);
      session = new ZooKeeperSession({ connect: options.connect, sessionTimeoutMs: options.timeoutMs, logLevel: options.logLevel, onConnected: resolve });
    });
    const probe = session!;
    try {
      await probe.getChildren(options.path);
      return 'open';
    } catch (err) {
      if (hasRc(err, ZK_RC.NO_NODE)) return 'absent';
      if (!hasRc(err, ZK_RC.NO_AUTH)) throw err;
    }
    try {
      // Ephemeral, and not a worker's name: it would vanish with this session and no view lists it.
      await probe.create(`${options.path}/probe-`, Buffer.alloc(0), ZK_MODE.EPHEMERAL_SEQUENTIAL);
      return 'open';
    } catch (err) {
      if (hasRc(err, ZK_RC.NO_AUTH)) return 'closed';
      if (hasRc(err, ZK_RC.NO_NODE)) return 'absent';
      throw err;
    }
  } finally {
    clearTimeout(timer);
    session?.close();
  }
}
