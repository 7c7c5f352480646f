// The processes a bench run starts (workers, the gate, the bare relay, drivers) and their CPU
// and memory, sampled from /proc once a second so the report can show both over time.

import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

/** The repository root: where bin/switchboard.js is, above this file's source or its build in bench/dist. */
export const ROOT = findRoot(fileURLToPath(new URL('.', import.meta.url)));

function findRoot(dir: string): string {
  for (let at = dir; ; at = dirname(at)) {
    if (existsSync(join(at, 'bin/switchboard.js'))) return at;
    if (dirname(at) === at) throw new Error(`no bin/switchboard.js above ${dir}`);
  }
}

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
  child: ChildProcess;
  port: number;
  /** SIGTERM and wait for the exit. */
  stop(): Promise<void>;
  /** SIGKILL and wait for the exit: a crash. */
  kill(): Promise<void>;
}

export interface StartOptions {
  name: string;
  role: Role;
  /** Extra node arguments; BENCH_SERVER_NODE_ARGS (e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof") adds to them. */
  nodeArgs?: string[];
}

/** Spawns node with `args` and resolves once a stdout line yields a port through `portOf`. */
export function startProcess(args: string[], portOf: (line: string) => number | undefined, o: StartOptions): Promise<Started> {
  const nodeArgs = [...(o.nodeArgs ?? []), ...(process.env.BENCH_SERVER_NODE_ARGS?.split(' ').filter(Boolean) ?? [])];
  const child = spawn(process.execPath, [...nodeArgs, ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-2000);
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const end = async (signal: NodeJS.Signals) => {
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    await exited;
  };
  return new Promise((resolve, reject) => {
    const lines = createInterface({ input: child.stdout! });
    const failed = (code: number | null) => reject(new Error(`${o.name} (${args.join(' ')}) exited with ${code} before listening: ${stderr.trim()}`));
    child.once('exit', failed);
    lines.on('line', (line) => {
      const port = portOf(line);
      if (port === undefined) return;
      child.off('exit', failed);
      resolve({ name: o.name, role: o.role, child, port, stop: () => end('SIGTERM'), kill: () => end('SIGKILL') });
    });
  });
}

export function startRelayProcess(name = 'relay'): Promise<Started> {
  return startProcess(
    [...siblingModule('relay-server'), '0'],
    (line) => {
      const m = /^listening (\d+)$/.exec(line);
      return m ? Number(m[1]) : undefined;
    },
    { name, role: 'relay' },
  );
}

/** The port from a switchboard JSON log line with message `msg`. */
function portFromLog(msg: string): (line: string) => number | undefined {
  return (line) => {
    try {
      const entry = JSON.parse(line) as { msg?: string; port?: number };
      return entry.msg === msg ? entry.port : undefined;
    } catch {
      return undefined;
    }
  };
}

/** A switchboard worker from the compiled CLI (`npm run build` first). */
export function startWorkerProcess(name: string, secret: string, extra: string[] = []): Promise<Started> {
  return startProcess(['bin/switchboard.js', 'worker', '--port', '0', '--secret', secret, '--log-level', 'info', ...extra], portFromLog('worker listening'), {
    name,
    role: 'worker',
  });
}

/** A switchboard gate from the compiled CLI; resolves with the gate's HTTP port. */
export function startGateProcess(name: string, secret: string, extra: string[] = []): Promise<Started> {
  return startProcess(['bin/switchboard.js', 'gate', '--port', '0', '--secret', secret, '--log-level', 'info', ...extra], portFromLog('gate listening'), {
    name,
    role: 'gate',
  });
}

/** User + system CPU seconds a process has used so far. */
export function cpuSeconds(pid: number): number {
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
