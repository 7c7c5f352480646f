// The one file that touches the native `zookeeper` module (node-zookeeper on the ZooKeeper C
// client): one ZooKeeper session behind typed promises whose failures carry the ZooKeeper return
// code, so callers decide on `rc` (connection loss, no node, bad version), never on a message.
// A session can carry a digest identity, sent before anything else on every connection.
// The native module is an optional dependency (it compiles C during `npm install`), loaded on
// the first session, so the embedded node installs and runs without a compiler.

import { createRequire } from 'node:module';
import { SwitchboardError } from '../errors.js';

/** ZooKeeper return codes (zookeeper.h) the registry decides on. */
export const ZK_RC = {
  CONNECTION_LOSS: -4,
  OPERATION_TIMEOUT: -7,
  INVALID_STATE: -9,
  NO_NODE: -101,
  NO_AUTH: -102,
  BAD_VERSION: -103,
  NODE_EXISTS: -110,
  SESSION_EXPIRED: -112,
  INVALID_ACL: -114,
  AUTH_FAILED: -115,
  CLOSING: -116,
} as const;

/** Create modes. */
export const ZK_MODE = { PERSISTENT: 0, EPHEMERAL: 1, EPHEMERAL_SEQUENTIAL: 3 } as const;

/** Native log levels of the C client (its `zoo_set_debug_level`, process-wide); 'off' is 0. */
export type ZooKeeperLogLevel = 'off' | 'error' | 'warn' | 'info' | 'debug';
const LOG_LEVELS: Record<ZooKeeperLogLevel, number> = { off: 0, error: 1, warn: 2, info: 3, debug: 4 };

/** Permission bits of an ACL entry (zookeeper.h ZOO_PERM_*). */
export const ZK_PERM = { READ: 1, WRITE: 2, CREATE: 4, DELETE: 8, ADMIN: 16, ALL: 31 } as const;

/** One ACL entry: `digest` + `user:base64(sha1(user:password))`, or `world` + `anyone`. */
export interface ZooKeeperAclEntry {
  scheme: 'digest' | 'world';
  id: string;
  perms: number;
}

/** A digest identity: what `addauth digest user:password` sends. */
export interface ZooKeeperDigestAuth {
  user: string;
  password: string;
}

/**
 * The parts of a znode's stat the registry reads. `ephemeralOwner` is the session id in hex;
 * `aversion` counts the changes of the node's ACL (0: never set since its create), `cversion`
 * those of its children (the next sequential child's suffix).
 */
export interface ZooKeeperStat {
  version: number;
  aversion: number;
  cversion: number;
  mzxid: number;
  ephemeralOwner: string;
}

/** A failed ZooKeeper call: code SB_ERR_REGISTRY_UNAVAILABLE, plus the ZooKeeper return code. */
export class ZooKeeperCallError extends SwitchboardError {
  readonly rc: number;

  constructor(readonly op: string, readonly path: string, rc: number, text: string) {
    super('SB_ERR_REGISTRY_UNAVAILABLE', `zookeeper ${op} ${path} failed: ${text} (${rc})`);
    this.name = 'ZooKeeperCallError';
    this.rc = rc;
  }
}

export function hasRc(err: unknown, ...codes: number[]): boolean {
  return err instanceof ZooKeeperCallError && codes.includes(err.rc);
}

/** The connection dropped (or an answer did not come): the session may well still be alive. */
export function isConnectionError(err: unknown): boolean {
  return hasRc(err, ZK_RC.CONNECTION_LOSS, ZK_RC.OPERATION_TIMEOUT);
}

/** This client is done for (expired, closing, closed): only a new session helps. */
export function isSessionGone(err: unknown): boolean {
  return hasRc(err, ZK_RC.SESSION_EXPIRED, ZK_RC.CLOSING, ZK_RC.INVALID_STATE);
}

export interface ZooKeeperSessionOptions {
  /** host:port[,host:port...] */
  connect: string;
  /** Requested session timeout; the server clamps it to [minSessionTimeout, maxSessionTimeout]. */
  sessionTimeoutMs: number;
  logLevel?: ZooKeeperLogLevel;
  /** Attach to an existing session (its id and password) instead of opening a new one. */
  credentials?: { id: string; password: string };
  /**
   * Authenticate as this digest identity. The C client sends it ahead of every other request on
   * each connection (and again after a reconnect); onConnected waits for the first answer.
   */
  auth?: ZooKeeperDigestAuth;
  /** Connected, first or again (after a disconnection the session survived). */
  onConnected?: () => void;
  /** Disconnected; the client is reconnecting and the session may still be alive. */
  onDisconnected?: () => void;
  /** The client is finished: rc 0 after close(), otherwise why (-112: the session expired). */
  onClosed?: (rc: number) => void;
  /**
   * A watch fired. Watches are set with the client's default watcher (`watch: true`), which
   * ZooKeeper deduplicates per path, so a path has at most one pending watch however often it
   * is read. (node-zookeeper's `aw_*` calls with a watcher function keep every watcher
   * function alive forever, a leak for a watch re-armed on every balance change.)
   */
  onWatch?: (event: 'created' | 'deleted' | 'changed' | 'child', path: string) => void;
}

/** What every native completion is called with: rc, its text, then up to two results. */
type Callback = (rc: number, text: string, a?: unknown, b?: unknown) => void;

/** The callback API of node-zookeeper 7 as it behaves (its typings get `error`'s type wrong). */
interface NativeClient {
  init(config: object): void;
  close(): void;
  on(event: string, listener: (...args: never[]) => void): void;
  readonly client_id: string;
  readonly client_password: string;
  readonly state: number;
  a_create(path: string, data: Buffer, flags: number, cb: (rc: number, text: string, path: string) => void): number;
  a_get(path: string, watch: boolean, cb: (rc: number, text: string, stat: ZooKeeperStat | null, data: Buffer | null) => void): number;
  a_exists(path: string, watch: boolean, cb: (rc: number, text: string, stat: ZooKeeperStat | null) => void): number;
  a_get_children(path: string, watch: boolean, cb: (rc: number, text: string, children: string[] | null) => void): number;
  a_set(path: string, data: Buffer, version: number, cb: (rc: number, text: string, stat: ZooKeeperStat | null) => void): number;
  a_delete_(path: string, version: number, cb: (rc: number, text: string) => void): number;
  /** node-zookeeper reads `perm`, not `perms`, from each entry. */
  a_set_acl(path: string, version: number, acl: { scheme: string; auth: string; perm: number }[], cb: (rc: number, text: string) => void): number;
  add_auth(scheme: string, auth: string, cb: (rc: number, text: string) => void): number;
  // a_get_acl is left out on purpose: node-zookeeper 7.3 dereferences the missing ACL vector
  // of any failed answer (NO_AUTH, NO_NODE, CONNECTION_LOSS) and the process dies of SIGSEGV.
}

type NativeConstructor = new (config: object) => NativeClient;
let nativeZooKeeper: NativeConstructor | undefined;

/**
 * The native client's constructor, loaded on first use. Missing (an install without a C/C++
 * toolchain leaves the optional `zookeeper` package out) or unloadable (built for another Node):
 * SB_ERR_ZOOKEEPER_CLIENT_MISSING, naming what to install.
 */
export function loadNativeZooKeeper(): NativeConstructor {
  if (nativeZooKeeper) return nativeZooKeeper;
  try {
    nativeZooKeeper = createRequire(import.meta.url)('zookeeper') as NativeConstructor;
  } catch (err) {
    const absent = (err as NodeJS.ErrnoException).code === 'MODULE_NOT_FOUND';
    const fix = absent
      ? 'which `npm install` compiles and left out: install a C/C++ toolchain (Debian: apt-get update && apt-get install -y python3 make g++) and run `npm install` again'
      : 'which is installed but does not load (built for another Node.js?): run `npm rebuild zookeeper`';
    throw new SwitchboardError(
      'SB_ERR_ZOOKEEPER_CLIENT_MISSING',
      `cluster mode (--zk) needs the native ZooKeeper client, the optional npm package \`zookeeper\`, ${fix} (${(err as Error).message.split('\n')[0]})`,
      { cause: err },
    );
  }
  return nativeZooKeeper;
}

/** zoo_state() of a connected handle. */
const CONNECTED_STATE = 3;

/** One ZooKeeper session (one native client). Never reused after it closed: make a new one. */
export class ZooKeeperSession {
  readonly #client: NativeClient;
  readonly #onDisconnected: (() => void) | undefined;
  readonly #onConnected: (() => void) | undefined;
  #connected = false;
  #closed = false;
  /** pending: the first answer to add_auth is awaited before 'connected' is reported. */
  #auth: 'none' | 'pending' | 'answered' = 'none';
  /** The native client connected while the auth answer was pending. */
  #connectPending = false;

  /** Starts connecting at once; the C client reconnects by itself until the session is gone. */
  constructor(options: ZooKeeperSessionOptions) {
    const config: Record<string, unknown> = {
      connect: options.connect,
      timeout: options.sessionTimeoutMs,
      debug_level: LOG_LEVELS[options.logLevel ?? 'error'],
      host_order_deterministic: false,
    };
    if (options.credentials) {
      config.client_id = options.credentials.id;
      config.client_password = options.credentials.password;
    }
    this.#client = new (loadNativeZooKeeper())(config);
    this.#onDisconnected = options.onDisconnected;
    this.#onConnected = options.onConnected;
    // Native events arrive as (client, pathOrCode).
    this.#client.on('connect', () => {
      if (this.#auth === 'pending') {
        this.#connectPending = true;
        return;
      }
      this.#markConnected();
    });
    this.#client.on('connecting', () => {
      this.#connectPending = false;
      this.#disconnected();
    });
    this.#client.on('close', (_client: never, rc: never) => {
      this.#closed = true;
      this.#connected = false;
      options.onClosed?.(rc as number);
    });
    for (const event of ['created', 'deleted', 'changed', 'child'] as const) {
      this.#client.on(event, (_client: never, path: never) => options.onWatch?.(event, path as string));
    }
    this.#client.init({});
    if (options.auth) this.#authenticate(options.auth);
  }

  /**
   * Queued before the first connection exists: the C client keeps the identity and puts it at
   * the front of the send queue on every (re)connection, so no request of this session ever
   * reaches the server unauthenticated. Digest authentication never fails (a wrong password is
   * just another identity); an answer lost with its connection is sent again with the next one.
   */
  #authenticate(auth: ZooKeeperDigestAuth): void {
    this.#auth = 'pending';
    const queued = this.#client.add_auth('digest', `${auth.user}:${auth.password}`, (rc) => {
      // rc != 0 other than a lost connection: the C client closes the session (AUTH_FAILED) and
      // onClosed reports it.
      if (rc !== 0 && rc !== ZK_RC.CONNECTION_LOSS && rc !== ZK_RC.OPERATION_TIMEOUT) return;
      this.#auth = 'answered';
      if (this.#connectPending && this.#client.state === CONNECTED_STATE) {
        this.#connectPending = false;
        this.#markConnected();
      }
    });
    if (typeof queued === 'number' && queued < 0) throw new ZooKeeperCallError('addAuth', '', queued, 'not queued');
  }

  #markConnected(): void {
    this.#connected = true;
    this.#onConnected?.();
  }

  /** The session id (hex, as in a znode's `ephemeralOwner`) and password (hex). */
  get credentials(): { id: string; password: string } {
    return { id: this.#client.client_id, password: this.#client.client_password };
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Connected, as far as the C client knows. */
  get connected(): boolean {
    return this.#connected;
  }

  #disconnected(): void {
    if (!this.#connected) return;
    this.#connected = false;
    this.#onDisconnected?.();
  }

  /**
   * The C client can drop its connection without a CONNECTING session event: when sending a
   * request fails at once (the peer reset the connection), it closes the socket and reconnects
   * silently (nonblocking_send in zookeeper.c). So after every call, and on every connection
   * error, ask it for its state instead of waiting for an event that does not come.
   */
  #checkState(): void {
    if (this.#connected && !this.#closed && this.#client.state !== CONNECTED_STATE) {
      queueMicrotask(() => this.#disconnected());
    }
  }

  create(path: string, data: Buffer, mode: number): Promise<string> {
    return this.#call('create', path, (cb) => this.#client.a_create(path, data, mode, cb), (created) => created as string);
  }

  get(path: string, watch = false): Promise<{ stat: ZooKeeperStat; data: Buffer }> {
    return this.#call('get', path, (cb) => this.#client.a_get(path, watch, cb), (stat, data) => ({
      stat: stat as ZooKeeperStat,
      data: (data as Buffer | null) ?? Buffer.alloc(0),
    }));
  }

  /** The node's stat, or undefined when there is no such node (a watch is then set on its creation). */
  async exists(path: string, watch = false): Promise<ZooKeeperStat | undefined> {
    try {
      return await this.#call('exists', path, (cb) => this.#client.a_exists(path, watch, cb), (stat) => stat as ZooKeeperStat);
    } catch (err) {
      if (hasRc(err, ZK_RC.NO_NODE)) return undefined;
      throw err;
    }
  }

  getChildren(path: string, watch = false): Promise<string[]> {
    return this.#call('getChildren', path, (cb) => this.#client.a_get_children(path, watch, cb), (children) => (children as string[] | null) ?? []);
  }

  /** Writes if the node is at `version`; -1 writes whatever the version (undefined would mean 0). */
  set(path: string, data: Buffer, version: number): Promise<ZooKeeperStat> {
    return this.#call('set', path, (cb) => this.#client.a_set(path, data, version, cb), (stat) => stat as ZooKeeperStat);
  }

  delete(path: string, version: number): Promise<void> {
    return this.#call('delete', path, (cb) => this.#client.a_delete_(path, version, cb), () => undefined);
  }

  /** Replaces the node's ACL if its ACL version is `aversion` (-1: whatever it is). */
  setAcl(path: string, aversion: number, acl: readonly ZooKeeperAclEntry[]): Promise<void> {
    const native = acl.map((e) => ({ scheme: e.scheme, auth: e.id, perm: e.perms }));
    return this.#call('setAcl', path, (cb) => this.#client.a_set_acl(path, aversion, native, cb), () => undefined);
  }

  /** Ends the session (the server deletes its ephemeral nodes at once). Idempotent. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#client.close();
  }

  #call<T>(op: string, path: string, start: (cb: Callback) => number, result: (a: unknown, b: unknown) => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      if (this.#closed) {
        reject(new ZooKeeperCallError(op, path, ZK_RC.CLOSING, 'session closed'));
        return;
      }
      const cb: Callback = (rc, text, a, b) => {
        if (rc === 0) {
          resolve(result(a, b));
          return;
        }
        if (rc === ZK_RC.CONNECTION_LOSS || rc === ZK_RC.OPERATION_TIMEOUT) this.#checkState();
        reject(new ZooKeeperCallError(op, path, rc, text));
      };
      // A negative return means the call was not even queued (e.g. the handle has expired).
      const queued = start(cb);
      if (typeof queued === 'number' && queued < 0) reject(new ZooKeeperCallError(op, path, queued, 'not queued'));
      this.#checkState();
    });
  }
}
