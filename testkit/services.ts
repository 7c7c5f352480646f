// Real ZooKeeper and Redis servers started on free loopback ports in temp dirs: what the bench
// starts for `--target cluster` and what the test harness starts for every Redis or ZooKeeper
// test; and free ports, for servers that cannot take port 0. Needs `redis-server`, and java with
// the ZooKeeper jar (Debian: apt-get install redis-server zookeeper default-jre-headless, or
// ZOOKEEPER_CLASSPATH).

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import net from 'node:net';
import { until } from './wait.js';

export interface ServiceProcess {
  port: number;
  process: ChildProcess;
  /** Stops the server (SIGTERM, SIGKILL after 5 s) and removes its temp dir. */
  stop(): Promise<void>;
  /** SIGKILL: the server vanishes as in a crash (its temp dir is removed too). */
  kill(): Promise<void>;
}

export interface RedisServer extends ServiceProcess {
  /** redis://127.0.0.1:PORT, with `default:<password>@` when started with a password. */
  url: string;
}

export interface ZooKeeperServer extends ServiceProcess {
  /** The connect string for clients: '127.0.0.1:PORT'. */
  connect: string;
}

/** A TCP port nobody listens on right now (for servers that cannot take port 0). */
export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** How the child ends: SIGTERM waits up to 5 s before SIGKILL; either way the temp dir goes. */
export function lifecycle(child: ChildProcess, dir: string): Pick<ServiceProcess, 'stop' | 'kill'> & { alive(): boolean; spawnError(): Error | undefined } {
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let spawnError: Error | undefined;
  child.once('error', (err) => {
    spawnError = err;
  });
  const alive = () => child.exitCode === null && child.signalCode === null && !spawnError;
  const end = async (signal: NodeJS.Signals) => {
    if (alive()) child.kill(signal);
    const timer = signal === 'SIGTERM' ? setTimeout(() => alive() && child.kill('SIGKILL'), 5_000) : undefined;
    if (!spawnError) await exited;
    clearTimeout(timer);
    rmSync(dir, { recursive: true, force: true });
  };
  return { stop: () => end('SIGTERM'), kill: () => end('SIGKILL'), alive, spawnError: () => spawnError };
}

export interface RedisServerOptions {
  /** none (the default): no persistence; everysec or always: AOF with that fsync policy. */
  fsync?: 'none' | 'everysec' | 'always';
  /** requirepass: the default user needs this password. */
  password?: string;
  extraArgs?: string[];
}

export async function startRedisServer(options: RedisServerOptions = {}): Promise<RedisServer> {
  const dir = mkdtempSync(join(tmpdir(), 'sb-redis-'));
  const port = await freePort();
  const fsync = options.fsync ?? 'none';
  const persistence = fsync === 'none' ? ['--appendonly', 'no'] : ['--appendonly', 'yes', '--appendfsync', fsync];
  const auth = options.password === undefined ? [] : ['--requirepass', options.password];
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--dir', dir, ...persistence, ...auth, ...(options.extraArgs ?? [])], {
    stdio: 'ignore',
  });
  const life = lifecycle(child, dir);
  try {
    await waitForPong(port, life.alive, options.password);
  } catch (err) {
    await life.kill();
    const spawnError = life.spawnError();
    throw new Error(spawnError ? `cannot start redis-server (is it installed?): ${spawnError.message}` : (err as Error).message);
  }
  const credentials = options.password === undefined ? '' : `default:${encodeURIComponent(options.password)}@`;
  return { url: `redis://${credentials}127.0.0.1:${port}`, port, process: child, stop: life.stop, kill: life.kill };
}

async function waitForPong(port: number, alive: () => boolean, password?: string): Promise<void> {
  // AUTH as a RESP array, so that any password goes through unharmed.
  const auth = password === undefined ? '' : `*2\r\n$4\r\nAUTH\r\n$${Buffer.byteLength(password)}\r\n${password}\r\n`;
  const pong = () =>
    new Promise<boolean>((resolve) => {
      const socket = net.connect(port, '127.0.0.1');
      let answer = '';
      socket.once('connect', () => socket.write(`${auth}PING\r\n`));
      socket.on('data', (data) => {
        answer += data.toString();
        if (!answer.includes('\r\n', auth ? answer.indexOf('\r\n') + 2 : 0)) return;
        socket.destroy();
        resolve(answer.includes('+PONG'));
      });
      socket.once('error', () => resolve(false));
      socket.once('close', () => resolve(false));
    });
  await until(`redis-server on port ${port} answers PING`, async () => {
    if (!alive()) throw new Error(`redis-server on port ${port} exited before it answered PING`);
    return pong();
  }, 5_000, 25);
}

const DEBIAN_JAR = '/usr/share/java/zookeeper.jar';
const DEBIAN_CONF = '/etc/zookeeper/conf';

export interface ZooKeeperServerOptions {
  /** ZooKeeper's tick; sessions expire within about one tick of their timeout. Default 200. */
  tickTimeMs?: number;
  /** The shortest session timeout the server grants. Default 2 ticks. */
  minSessionTimeoutMs?: number;
  /** The longest. Default 30000. */
  maxSessionTimeoutMs?: number;
}

/** The classpath to run ZooKeeper with, or an error saying what is missing. */
export function classpath(): string {
  const fromEnv = process.env.ZOOKEEPER_CLASSPATH;
  if (fromEnv) return fromEnv;
  if (!existsSync(DEBIAN_JAR)) {
    throw new Error(`ZooKeeper needs its server jar: ${DEBIAN_JAR} is missing (apt-get install zookeeper, or set ZOOKEEPER_CLASSPATH)`);
  }
  return existsSync(DEBIAN_CONF) ? `${DEBIAN_JAR}:${DEBIAN_CONF}` : DEBIAN_JAR;
}

export async function startZooKeeperServer(options: ZooKeeperServerOptions = {}): Promise<ZooKeeperServer> {
  const probe = spawnSync('java', ['-version'], { stdio: 'ignore' });
  if (probe.error) throw new Error(`ZooKeeper needs java on the PATH (apt-get install default-jre-headless): ${probe.error.message}`);
  const cp = classpath();
  // A port can be taken between freePort() and java binding it: try a few.
  let lastError: Error | undefined;
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      return await startZooKeeperOnce(cp, options);
    } catch (err) {
      lastError = err as Error;
    }
  }
  throw lastError!;
}

async function startZooKeeperOnce(cp: string, options: ZooKeeperServerOptions): Promise<ZooKeeperServer> {
  const tick = options.tickTimeMs ?? 200;
  const dir = mkdtempSync(join(tmpdir(), 'sb-zk-'));
  const port = await freePort();
  const config = join(dir, 'zoo.cfg');
  writeFileSync(
    config,
    [
      `tickTime=${tick}`,
      `dataDir=${join(dir, 'data')}`,
      `clientPort=${port}`,
      'clientPortAddress=127.0.0.1',
      `minSessionTimeout=${options.minSessionTimeoutMs ?? 2 * tick}`,
      `maxSessionTimeout=${options.maxSessionTimeoutMs ?? 30_000}`,
      'admin.enableServer=false',
      '4lw.commands.whitelist=ruok,srvr,cons,dump',
      'maxClientCnxns=0',
      // Bench and test data need not survive a power cut; skip fsync and the 64 MB preallocation.
      'forceSync=no',
      'preAllocSize=1024',
      '',
    ].join('\n'),
  );
  const child = spawn(
    'java',
    ['-Xmx256m', '-XX:+UseSerialGC', '-XX:TieredStopAtLevel=1', '-cp', cp, 'org.apache.zookeeper.server.quorum.QuorumPeerMain', config],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-4_000);
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const life = lifecycle(child, dir);
  try {
    await waitUntilReady(port, life.alive, 20_000);
  } catch (err) {
    await life.kill();
    const spawnError = life.spawnError();
    const why = spawnError ? `cannot run java: ${spawnError.message}` : (err as Error).message;
    throw new Error(`ZooKeeper did not start on port ${port}: ${why}\n${output}`);
  }
  return { connect: `127.0.0.1:${port}`, port, process: child, stop: life.stop, kill: life.kill };
}

/**
 * Polls the four-letter word `srvr` until the server reports its mode: `ruok` answers `imok` as
 * soon as the port is open, while sessions are still refused for a moment.
 */
async function waitUntilReady(port: number, alive: () => boolean, withinMs: number): Promise<void> {
  await until('serving', async () => {
    if (!alive()) throw new Error('the java process exited');
    return (await fourLetterWord(port, 'srvr')).includes('Mode: standalone');
  }, withinMs, 50);
}

/** Sends a four-letter word (ruok, srvr, cons, dump) and resolves the answer ('' on error). */
export function fourLetterWord(port: number, word: string): Promise<string> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    let answer = '';
    socket.setTimeout(2_000, () => socket.destroy());
    socket.once('connect', () => socket.write(word));
    socket.on('data', (data) => {
      answer += data.toString();
    });
    socket.once('close', () => resolve(answer.trim()));
    socket.once('error', () => resolve(''));
  });
}
