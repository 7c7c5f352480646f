// The coordinator's side of the driver processes: forks N drivers, gives each its share of a
// task, starts them together once all are ready, forwards their progress and collects their
// results. Driver processes keep the load generator off the coordinator (which samples and
// reports) and let one run hold more connections than one process's file limit.

import { fork, type ChildProcess } from 'node:child_process';
import { siblingModule, type ProcessSampler } from './processes.js';
import type { DriverTask, TaskOptions, TaskResult } from './driver-tasks.js';

type FromDriver = { kind: 'ready' } | { kind: 'tick'; tick: unknown } | { kind: 'result'; result: unknown } | { kind: 'error'; message: string; code?: string };

export interface DriverRun<T extends DriverTask> {
  task: T;
  drivers: number;
  /** The options for driver `index` (its share of the connections and rate). */
  options: (index: number) => TaskOptions<T>;
  onTick?: (index: number, tick: unknown) => void;
  /** Driver processes are sampled as 'driver-N'. */
  sampler?: ProcessSampler;
  /** Called once every driver is ready, before they are told to go. */
  onReady?: () => void;
}

/** Sockets per source address: bind() slows as an address fills (15k connections: 24 s on one address, 5 s on four). */
export const SOCKETS_PER_ADDRESS = 4_000;

/**
 * `count` source addresses for driver `index` to bind its sockets to, on loopback only (none
 * when the target is elsewhere): 127.0.k.x for k = 0, 1, ..., with x = 2 + index, so no two
 * drivers share an address and each address has its own ephemeral ports.
 */
export function driverAddresses(index: number, host: string, count: number): string[] {
  if (!host.startsWith('127.')) return [];
  const x = 2 + (index % 250);
  return Array.from({ length: Math.max(1, Math.min(count, 256)) }, (_, k) => `127.0.${k}.${x}`);
}

export async function runDrivers<T extends DriverTask>(run: DriverRun<T>): Promise<TaskResult<T>[]> {
  const loader = siblingModule('driver-process');
  const script = loader.pop()!;
  const children: ChildProcess[] = [];
  const results: Promise<TaskResult<T>>[] = [];
  const readies: Promise<void>[] = [];
  for (let index = 0; index < run.drivers; index++) {
    // BENCH_DRIVER_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof" profiles the drivers.
    const extra = process.env.BENCH_DRIVER_NODE_ARGS?.split(' ').filter(Boolean) ?? [];
    const child = fork(script, [], { execArgv: [...loader, '--max-old-space-size=4096', ...extra], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    children.push(child);
    run.sampler?.add(`driver-${index}`, 'driver', child.pid);
    let readyResolve!: () => void;
    readies.push(new Promise<void>((resolve) => (readyResolve = resolve)));
    results.push(
      new Promise<TaskResult<T>>((resolve, reject) => {
        child.on('message', (message: FromDriver) => {
          if (message.kind === 'ready') readyResolve();
          else if (message.kind === 'tick') run.onTick?.(index, message.tick);
          else if (message.kind === 'result') resolve(message.result as TaskResult<T>);
          else reject(Object.assign(new Error(`driver ${index}: ${message.message}`), { code: message.code }));
        });
        child.once('exit', (code, signal) => reject(new Error(`driver ${index} exited (${signal ?? code}) without a result`)));
      }),
    );
    child.send({ kind: 'run', task: run.task, options: run.options(index), index });
  }
  try {
    // A driver that fails while connecting rejects its result: stop waiting for the barrier then.
    await Promise.race([Promise.all(readies), Promise.all(results)]);
    run.onReady?.();
    for (const child of children) child.send({ kind: 'go' });
    return await Promise.all(results);
  } finally {
    // A driver exits by itself once it has sent its result (writing a --cpu-prof profile on the way).
    await Promise.all(children.map((child) => exitWithin(child, 5_000)));
  }
}

/** Splits `total` into `parts` near-equal integers. */
export function share(total: number, parts: number, index: number): number {
  return Math.floor(total / parts) + (index < total % parts ? 1 : 0);
}

async function exitWithin(child: ChildProcess, ms: number): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const timer = setTimeout(() => child.kill('SIGKILL'), ms);
  await exited;
  clearTimeout(timer);
}
