// Starts a real standalone ZooKeeper server (java) for a test: free port, temp data dir, short
// ticks so that short session timeouts are allowed, stopped and removed on teardown. Needs java
// and the ZooKeeper jar (Debian: `apt-get install zookeeper`; or set ZOOKEEPER_CLASSPATH).

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import net from 'node:net';
import type { Test } from 'tap';
import { freePort } from './free-port.js';

const DEBIAN_JAR = '/usr/share/java/zookeeper.jar';
const DEBIAN_CONF = '/etc/zookeeper/conf';

export interface ZooKeeperServerOptions {
  /** ZooKeeper's tick; sessions expire within about one tick of their timeout. Default 200. */
  tickTimeMs?: number;
  /** The shortest session timeout the server grants. Default 2 ticks (400 ms). */
  minSessionTimeoutMs?: number;
  /** The longest. Default 30000. */
  maxSessionTimeoutMs?: number;
}

export interface TestZooKeeper {
  /** The connect string for clients: '127.0.0.1:PORT'. */
  connect: string;
  port: number;
  process: ChildProcess;
  /** SIGTERM, then SIGKILL if it has not exited within 5 s. */
  stop(): Promise<void>;
  /** SIGKILL: the server vanishes as in a crash. */
  kill(): Promise<void>;
}

/** The classpath to run ZooKeeper with, or a message saying what is missing. */
function classpath(): string {
  const fromEnv = process.env.ZOOKEEPER_CLASSPATH;
  if (fromEnv) return fromEnv;
  if (!existsSync(DEBIAN_JAR)) {
    throw new Error(`ZooKeeper tests need the ZooKeeper server jar: ${DEBIAN_JAR} is missing (apt-get install zookeeper, or set ZOOKEEPER_CLASSPATH)`);
  }
  return existsSync(DEBIAN_CONF) ? `${DEBIAN_JAR}:${DEBIAN_CONF}` : DEBIAN_JAR;
}

function checkJava(): void {
  const probe = spawnSync('java', ['-version'], { stdio: 'ignore' });
  if (probe.error) throw new Error(`ZooKeeper tests need java on the PATH (apt-get install default-jre-headless): ${probe.error.message}`);
}

export async function startZooKeeper(t: Test, options: ZooKeeperServerOptions = {}): Promise<TestZooKeeper> {
  checkJava();
  const cp = classpath();
  const tick = options.tickTimeMs ?? 200;
  // A port can be taken between freePort() and java binding it: try a few.
  let lastError: Error | undefined;
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      return await startOnce(t, cp, tick, options);
    } catch (err) {
      lastError = err as Error;
    }
  }
  throw lastError!;
}

async function startOnce(t: Test, cp: string, tick: number, options: ZooKeeperServerOptions): Promise<TestZooKeeper> {
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
      // Test data need not survive a power cut; skip fsync and the 64 MB log preallocation.
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
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let spawnError: Error | undefined;
  child.once('error', (err) => {
    spawnError = err;
  });
  const alive = () => child.exitCode === null && child.signalCode === null && !spawnError;
  const end = async (signal: NodeJS.Signals) => {
    if (alive()) child.kill(signal);
    if (signal === 'SIGTERM') {
      const timer = setTimeout(() => alive() && child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
    } else {
      await exited;
    }
  };
  const cleanup = async () => {
    await end('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await waitUntilReady(port, alive, 20_000);
  } catch (err) {
    await cleanup();
    const why = spawnError ? `cannot run java: ${spawnError.message}` : (err as Error).message;
    throw new Error(`ZooKeeper did not start on port ${port}: ${why}\n${output}`);
  }
  t.teardown(cleanup);
  return {
    connect: `127.0.0.1:${port}`,
    port,
    process: child,
    stop: () => end('SIGTERM'),
    kill: () => end('SIGKILL'),
  };
}

/**
 * Polls the four-letter word `srvr` until the server reports its mode: `ruok` answers `imok` as
 * soon as the port is open, while sessions are still refused for a moment.
 */
async function waitUntilReady(port: number, alive: () => boolean, withinMs: number): Promise<void> {
  const deadline = Date.now() + withinMs;
  while (Date.now() < deadline) {
    if (!alive()) throw new Error('the java process exited');
    if ((await fourLetterWord(port, 'srvr')).includes('Mode: standalone')) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`no 'imok' within ${withinMs} ms`);
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
