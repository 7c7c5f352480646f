// The processes a bench run starts (workers, the gate, the bare relay, drivers) and their CPU
// and memory, sampled from /proc once a second so the report can show both over time.

import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { SwitchboardProcess, type LogLine } from '../../testkit/switchboard-process.js';
import { SERVER_ENV, SERVER_NODE_FLAGS } from '../../src/cli/node-flags.js';

/**
 * Node arguments that run a sibling module of this folder: the compiled .js, or the .ts source
 * through tsx when the bench itself runs from source (the test suite).
 */
export function siblingModule(name: string): string[] {
  const fromSource = import.meta.url.endsWith('.ts');
  const path = fileURLToPath(new URL(`./${name}.${fromSource ? 'ts' : 'js'}`, import.meta.url));
  return fromSource ? ['--import', 'tsx', path] : [path];
}

export type Role = 'worker' | 'gate' | 'node' | 'relay' | 'driver' | 'redis' | 'zookeeper';

export interface Started {
  name: string;
  role: Role;
  process: SwitchboardProcess;
  child: SwitchboardProcess['child'];
  port: number;
  /** A worker's TLS client port, from its 'worker listening' line (started with --tls-port). */
  tlsPort?: number;
  /** SIGTERM and wait for the exit. */
  stop(): Promise<void>;
  /** SIGKILL and wait for the exit: a crash. */
  kill(): Promise<void>;
}

export interface ServerOptions {
  name: string;
  role: Role;
  /** The process's arguments (after bin/switchboard.js, or after `script`). */
  args: string[];
  /** The script node runs instead of bin/switchboard.js. */
  script?: string;
  /** Extra node arguments, after SERVER_NODE_FLAGS; BENCH_SERVER_NODE_ARGS (e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof") adds to them (a flag given twice: the last counts). */
  nodeArgs?: string[];
}

/**
 * Spawns a server of the run: the machine's environment as it is (the bench's servers are
 * configured by their flags, which come first), its output not recorded (a worker under a login
 * storm logs every login), only matched against the log lines waited for.
 */
export function spawnServer(o: ServerOptions): SwitchboardProcess {
  // Servers run with the node flags OPERATIONS.md asks for (src/cli/node-flags.ts), whatever the script.
  const nodeArgs = [...SERVER_NODE_FLAGS, ...(o.nodeArgs ?? []), ...(process.env.BENCH_SERVER_NODE_ARGS?.split(' ').filter(Boolean) ?? [])];
  // And with their environment, before any tunables of the bench's own (which win); GLIBC_TUNABLES= (empty) runs them without, to compare.
  const tunables = process.env.GLIBC_TUNABLES;
  const extraEnv: Record<string, string> = tunables === '' ? {} : { GLIBC_TUNABLES: tunables === undefined ? SERVER_ENV.GLIBC_TUNABLES : `${SERVER_ENV.GLIBC_TUNABLES}:${tunables}` };
  return new SwitchboardProcess(o.name, o.args, { nodeArgs, ...(o.script ? { script: o.script } : {}), env: 'inherit', extraEnv, record: false });
}

/** Waits (however long it takes, unless the process exits) for the log line `msg` and its port. */
export async function listeningPort(server: SwitchboardProcess, msg: string): Promise<number> {
  return Number((await listeningLine(server, msg)).port);
}

/** The line a server logs once it listens (the output is not recorded: waited for). */
export function listeningLine(server: SwitchboardProcess, msg: string): Promise<LogLine> {
  return server.waitForLog({ msg }, { timeoutMs: Number.POSITIVE_INFINITY });
}

/** The TLS port in a 'worker listening' line, as Started's. */
export function tlsPortIn(line: LogLine): { tlsPort?: number } {
  return line.tlsPort === undefined ? {} : { tlsPort: Number(line.tlsPort) };
}

/** `server` as a Started process, listening on `port`. */
export function started(o: ServerOptions, server: SwitchboardProcess, port: number): Started {
  return {
    name: o.name,
    role: o.role,
    process: server,
    child: server.child,
    port,
    stop: async () => void (await server.stop(Number.POSITIVE_INFINITY)),
    kill: async () => void (await server.kill()),
  };
}

/** Spawns a server and resolves once it logged `listening` with its port. */
async function startServer(o: ServerOptions, listening: string): Promise<Started> {
  const server = spawnServer(o);
  const line = await listeningLine(server, listening);
  return { ...started(o, server, Number(line.port)), ...tlsPortIn(line) };
}

/** The bare relay (relay-server.ts), which logs `relay listening` as switchboard logs its listeners. */
export function startRelayProcess(name = 'relay'): Promise<Started> {
  const loader = siblingModule('relay-server');
  const script = loader.pop()!;
  return startServer({ name, role: 'relay', script, nodeArgs: loader, args: ['0'] }, 'relay listening');
}

/** A switchboard worker from the compiled CLI (`npm run build` first). */
export function startWorkerProcess(name: string, secret: string, extra: string[] = []): Promise<Started> {
  return startServer({ name, role: 'worker', args: ['worker', '--port', '0', '--secret', secret, '--log-level', 'info', ...extra] }, 'worker listening');
}

/** A switchboard gate from the compiled CLI; resolves with the gate's HTTP port. */
export function startGateProcess(name: string, secret: string, extra: string[] = []): Promise<Started> {
  return startServer({ name, role: 'gate', args: ['gate', '--port', '0', '--secret', secret, '--log-level', 'info', ...extra] }, 'gate listening');
}

/** User + system CPU seconds a process has used so far. */
function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // utime and stime are fields 14 and 15 of /proc/PID/stat; the slice starts at field 3.
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** Resident set size, bytes. */
export function rssBytes(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const m = /^VmRSS:\s+(\d+) kB/m.exec(status);
  return m ? Number(m[1]) * 1024 : 0;
}

/** One process's samples: CPU as a fraction of one core over the last second, RSS in bytes. */
export interface ProcessSeries {
  name: string;
  role: Role;
  pid: number;
  samples: { t: number; cpu: number; rss: number }[];
}

/**
 * Samples CPU and RSS of registered processes once a second. `t` is seconds since the sampler
 * started; a process that exited keeps the samples it had.
 */
export class ProcessSampler {
  readonly series: ProcessSeries[] = [];
  #last = new Map<ProcessSeries, { cpu: number; at: number }>();
  #timer: NodeJS.Timeout | undefined;
  readonly #t0 = performance.now();

  add(name: string, role: Role, pid: number | undefined): void {
    if (pid === undefined) return;
    const series: ProcessSeries = { name, role, pid, samples: [] };
    this.series.push(series);
    try {
      this.#last.set(series, { cpu: cpuSeconds(pid), at: performance.now() });
    } catch {
      // Already gone: it keeps no samples.
    }
  }

  start(): void {
    this.#timer ??= setInterval(() => this.sample(), 1000);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  sample(): void {
    const now = performance.now();
    for (const [series, last] of this.#last) {
      try {
        const cpu = cpuSeconds(series.pid);
        const rss = rssBytes(series.pid);
        series.samples.push({ t: Math.round((now - this.#t0) / 100) / 10, cpu: (cpu - last.cpu) / ((now - last.at) / 1000), rss });
        this.#last.set(series, { cpu, at: now });
      } catch {
        this.#last.delete(series);
      }
    }
  }

  /** Seconds since the sampler started (the timeline's clock). */
  now(): number {
    return (performance.now() - this.#t0) / 1000;
  }
}
