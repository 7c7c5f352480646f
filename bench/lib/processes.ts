// Starting the processes a bench measures, and reading their CPU time from /proc.

import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));

export interface Started {
  child: ChildProcess;
  port: number;
  stop(): Promise<void>;
}

/** Spawns `args` and resolves once a stdout line yields a port through `portOf`. */
export function startProcess(args: string[], portOf: (line: string) => number | undefined): Promise<Started> {
  // BENCH_SERVER_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof" profiles the measured server.
  const nodeArgs = process.env.BENCH_SERVER_NODE_ARGS?.split(' ').filter(Boolean) ?? [];
  const child = spawn(process.execPath, [...nodeArgs, ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'ignore'] });
  return new Promise((resolve, reject) => {
    const lines = createInterface({ input: child.stdout! });
    const failed = (code: number | null) => reject(new Error(`${args.join(' ')} exited with ${code} before listening`));
    child.once('exit', failed);
    lines.on('line', (line) => {
      const port = portOf(line);
      if (port === undefined) return;
      child.off('exit', failed);
      resolve({
        child,
        port,
        stop: () =>
          new Promise<void>((done) => {
            if (child.exitCode !== null) return done();
            child.once('exit', () => done());
            child.kill('SIGTERM');
          }),
      });
    });
  });
}

export function startRelayProcess(): Promise<Started> {
  return startProcess(['--import', 'tsx', 'bench/lib/relay-server.ts', '0'], (line) => {
    const m = /^listening (\d+)$/.exec(line);
    return m ? Number(m[1]) : undefined;
  });
}

/** A switchboard worker from the compiled CLI (run `npm run build` first). */
export function startWorkerProcess(secret: string, extra: string[] = []): Promise<Started> {
  return startProcess(['bin/switchboard.js', 'worker', '--port', '0', '--secret', secret, '--log-level', 'info', ...extra], (line) => {
    try {
      const entry = JSON.parse(line) as { msg?: string; port?: number };
      return entry.msg === 'worker listening' ? entry.port : undefined;
    } catch {
      return undefined;
    }
  });
}

/** User + system CPU seconds a process has used so far. */
export function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // utime and stime are fields 14 and 15 of /proc/PID/stat; the slice starts at field 3.
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

export { freePort } from '../../test/helpers/free-port.js';
