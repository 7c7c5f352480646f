// A real three-server ZooKeeper ensemble on free loopback ports, each server a java process with
// a temp data dir of its own: what a test needs to stop the leader (or a follower) under load and
// watch a quorum elect another one. Reuses the standalone server's process handling and
// four-letter words (services.ts); `srvr` tells a server's mode and the epoch it serves in.
//
//   server.1=127.0.0.1:<peer>:<election>   clientPort=<client1>  dataDir=<tmp1>/data (myid 1)
//   server.2=127.0.0.1:<peer>:<election>   clientPort=<client2>  dataDir=<tmp2>/data (myid 2)
//   server.3=127.0.0.1:<peer>:<election>   clientPort=<client3>  dataDir=<tmp3>/data (myid 3)

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { classpath, fourLetterWord, freePort, lifecycle } from './services.js';
import { until } from './wait.js';

/** What `srvr` says: 'down' when the process is gone, 'not serving' while it looks for a leader. */
export type ZooKeeperMode = 'leader' | 'follower' | 'standalone' | 'not serving' | 'down';

export interface ZooKeeperServerState {
  mode: ZooKeeperMode;
  /**
   * The high 32 bits of its last zxid: a leader's is its epoch from the moment it leads; a
   * follower's stays the epoch of the last transaction it applied. 0 when not serving.
   */
  epoch: number;
  /** The last zxid it has seen, as `srvr` prints it (0x...). */
  zxid: string;
}

export interface EnsembleServer {
  /** Its myid, 1..3. */
  readonly id: number;
  /** Its client port. */
  readonly port: number;
  /** '127.0.0.1:PORT': a connect string of this server alone. */
  readonly connect: string;
  readonly process: ChildProcess;
  /** The java process has not exited. */
  alive(): boolean;
  /** Asks `srvr`. */
  state(): Promise<ZooKeeperServerState>;
  /** `cons`: the ids of the sessions connected to it now, in hex without 0x (as a znode's ephemeralOwner). */
  sessions(): Promise<string[]>;
  /** SIGTERM (SIGKILL after 5 s); its temp dir is removed. */
  stop(): Promise<void>;
  /** SIGKILL, as in a crash; its temp dir is removed. */
  kill(): Promise<void>;
  /** The tail of its output (ZooKeeper logs to the console), for a failure message. */
  tail(): string;
}

export interface ZooKeeperEnsemble {
  /** The client connect string of all three: '127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3'. */
  readonly connect: string;
  readonly servers: readonly EnsembleServer[];
  /** The live server that says it leads, or undefined (during an election). */
  leader(): Promise<EnsembleServer | undefined>;
  /**
   * Waits until the live servers (two at least) have exactly one leader and every other live
   * server follows; resolves the leader and its epoch (a new leader's is higher).
   */
  waitForQuorum(withinMs?: number): Promise<{ leader: EnsembleServer; epoch: number }>;
  /** Kills every server still running. */
  kill(): Promise<void>;
}

export interface ZooKeeperEnsembleOptions {
  /** ZooKeeper's tick; sessions expire within about one tick of their timeout. Default 200. */
  tickTimeMs?: number;
  /** The shortest session timeout the servers grant. Default 2 ticks. */
  minSessionTimeoutMs?: number;
  /** The longest. Default 30000. */
  maxSessionTimeoutMs?: number;
  /** How long the first quorum may take to form. Default 30 s (three JVMs on two cores). */
  startWithinMs?: number;
}

const SIZE = 3;

/**
 * Starts three servers and resolves once they serve as one leader and two followers. A port can
 * be taken between freePort() and java binding it: the whole ensemble is tried again, up to
 * three times.
 */
export async function startZooKeeperEnsemble(options: ZooKeeperEnsembleOptions = {}): Promise<ZooKeeperEnsemble> {
  const probe = spawnSync('java', ['-version'], { stdio: 'ignore' });
  if (probe.error) throw new Error(`ZooKeeper needs java on the PATH (apt-get install default-jre-headless): ${probe.error.message}`);
  const cp = classpath();
  let lastError: Error | undefined;
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      return await startEnsembleOnce(cp, options);
    } catch (err) {
      lastError = err as Error;
    }
  }
  throw lastError!;
}

async function startEnsembleOnce(cp: string, options: ZooKeeperEnsembleOptions): Promise<ZooKeeperEnsemble> {
  const tick = options.tickTimeMs ?? 200;
  const ports: { client: number; peer: number; election: number }[] = [];
  const taken = new Set<number>();
  const distinct = async () => {
    for (;;) {
      const port = await freePort();
      if (!taken.has(port)) {
        taken.add(port);
        return port;
      }
    }
  };
  for (let i = 0; i < SIZE; i++) ports.push({ client: await distinct(), peer: await distinct(), election: await distinct() });
  const quorum = ports.map((p, i) => `server.${i + 1}=127.0.0.1:${p.peer}:${p.election}`);

  const servers = ports.map((p, i): EnsembleServer => {
    const id = i + 1;
    const dir = mkdtempSync(join(tmpdir(), `sb-zk${id}-`));
    const data = join(dir, 'data');
    mkdirSync(data);
    writeFileSync(join(data, 'myid'), `${id}\n`);
    const config = join(dir, 'zoo.cfg');
    writeFileSync(
      config,
      [
        `tickTime=${tick}`,
        // A follower has 20 ticks to sync with a new leader, and is dropped after 10 ticks
        // without a word from it: loose enough for a loaded two-core machine, where a JVM can
        // stall for a second. A killed leader's sockets close at once, so the followers notice
        // it at once whatever syncLimit is.
        'initLimit=20',
        'syncLimit=10',
        `dataDir=${data}`,
        `clientPort=${p.client}`,
        'clientPortAddress=127.0.0.1',
        `minSessionTimeout=${options.minSessionTimeoutMs ?? 2 * tick}`,
        `maxSessionTimeout=${options.maxSessionTimeoutMs ?? 30_000}`,
        'admin.enableServer=false',
        '4lw.commands.whitelist=ruok,srvr,cons,dump',
        'maxClientCnxns=0',
        // Test data need not survive a power cut; skip fsync and the 64 MB preallocation.
        'forceSync=no',
        'preAllocSize=1024',
        ...quorum,
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
    return {
      id,
      port: p.client,
      connect: `127.0.0.1:${p.client}`,
      process: child,
      alive: life.alive,
      state: async () => (life.alive() ? parseSrvr(await fourLetterWord(p.client, 'srvr')) : { mode: 'down', epoch: 0, zxid: '0x0' }),
      sessions: async () => (life.alive() ? parseCons(await fourLetterWord(p.client, 'cons')) : []),
      stop: life.stop,
      kill: life.kill,
      tail: () => output,
    };
  });

  const ensemble: ZooKeeperEnsemble = {
    connect: servers.map((s) => s.connect).join(','),
    servers,
    leader: async () => {
      for (const server of servers) if ((await server.state()).mode === 'leader') return server;
      return undefined;
    },
    waitForQuorum: (withinMs = 20_000) => waitForQuorum(servers, withinMs),
    kill: async () => {
      await Promise.all(servers.map((s) => s.kill()));
    },
  };
  try {
    await waitForQuorum(servers, options.startWithinMs ?? 30_000, true);
  } catch (err) {
    await ensemble.kill();
    const why = servers.find((s) => !s.alive()) ?? servers[0]!;
    throw new Error(`a ZooKeeper ensemble on ${ensemble.connect} did not form: ${(err as Error).message}\nserver ${why.id}:\n${why.tail()}`);
  }
  return ensemble;
}

async function waitForQuorum(servers: readonly EnsembleServer[], withinMs: number, allAlive = false): Promise<{ leader: EnsembleServer; epoch: number }> {
  let seen: ZooKeeperServerState[] = [];
  let found: { leader: EnsembleServer; epoch: number } | undefined;
  await until(
    () => `one leader, the others following it (seen: ${seen.map((s, i) => `${servers[i]!.id}=${s.mode}@${s.epoch}`).join(' ')})`,
    async () => {
      if (allAlive && servers.some((s) => !s.alive())) throw new Error('a server exited while the ensemble started');
      seen = await Promise.all(servers.map((s) => s.state()));
      const live = seen.filter((s) => s.mode !== 'down');
      const leaders = seen.flatMap((s, i) => (s.mode === 'leader' ? [servers[i]!] : []));
      // A server follows only a leader a quorum chose: with one leader among them, every
      // follower follows it.
      const ok = leaders.length === 1 && live.every((s) => s.mode === 'leader' || s.mode === 'follower');
      // A quorum of three needs two: with fewer live servers nobody serves.
      if (ok && live.length >= 2) found = { leader: leaders[0]!, epoch: seen[servers.indexOf(leaders[0]!)]!.epoch };
      return found !== undefined;
    },
    withinMs,
    50,
  );
  return found!;
}

/** `srvr` answers 'Zxid: 0x200000003' and 'Mode: follower'; a server in an election, something else. */
function parseSrvr(answer: string): ZooKeeperServerState {
  const mode = /^Mode: (leader|follower|standalone)$/m.exec(answer)?.[1] as ZooKeeperMode | undefined;
  const zxid = /^Zxid: (0x[0-9a-f]+)$/m.exec(answer)?.[1];
  if (!mode || !zxid) return { mode: 'not serving', epoch: 0, zxid: '0x0' };
  return { mode, epoch: Number(BigInt(zxid) >> 32n), zxid };
}

/** `cons` lists a line per connection, '... sid=0x100000a1b2c0000 ...' once it has a session. */
function parseCons(answer: string): string[] {
  return [...answer.matchAll(/sid=0x([0-9a-f]+)/g)].map((m) => m[1]!).filter((sid) => sid !== '0');
}
