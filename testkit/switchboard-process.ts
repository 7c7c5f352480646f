// A switchboard process (bin/switchboard.js, so the compiled dist/: `npm run build` first), or a
// node script that logs as it does: its JSON log lines parsed so that a caller waits for what it
// says ('worker listening' with its port, 'peer link status', ...) instead of sleeping, and its
// output kept for failure messages. The tests' CLI, worker and gate processes and the bench's
// node, workers, gate and relay are all this.

import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DEFAULT_WAIT_MS, until } from './wait.js';

/** The repository root: where bin/switchboard.js is, above this file's source or its build in bench/dist. */
export const ROOT = findRoot(dirname(fileURLToPath(import.meta.url)));
const BIN = join(ROOT, 'bin/switchboard.js');

function findRoot(dir: string): string {
  for (let at = dir; ; at = dirname(at)) {
    if (existsSync(join(at, 'bin/switchboard.js'))) return at;
    if (dirname(at) === at) throw new Error(`no bin/switchboard.js above ${dir}`);
  }
}

/** Throws unless the compiled server is there for bin/switchboard.js to run. */
export function assertBuilt(): void {
  if (!existsSync(join(ROOT, 'dist/cli/main.js'))) throw new Error('dist/ is missing: run `npm run build` (npm test does) first');
}

/** One line of a pino log. */
export interface LogLine {
  level: number;
  time: number;
  msg: string;
  [field: string]: unknown;
}

/** Fields a line must have (compared with ===), or a predicate. */
export type LogMatch = Readonly<Record<string, unknown>> | ((line: LogLine) => boolean);

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface SpawnOptions {
  /** Node arguments before the script, e.g. ['--cpu-prof']. */
  nodeArgs?: string[];
  /** The script node runs (default bin/switchboard.js); the process's arguments follow it. */
  script?: string;
  /** The working directory (default the repository root). */
  cwd?: string;
  /** 'clean' (the default): the machine's environment without its SWITCHBOARD_* variables; 'inherit': all of it. */
  env?: 'clean' | 'inherit';
  /** Variables added to that environment. */
  extraEnv?: Record<string, string>;
  /** Pipe stdin (for `chat`); by default it is closed. */
  stdin?: boolean;
  /**
   * Keep every log line and all the output (the default, for tests that read them). False:
   * lines are only matched against waiting waitForLog() calls and only the output's end is
   * kept, for a long run whose server logs every login (the bench).
   */
  record?: boolean;
}

interface LogWaiter {
  test: (line: LogLine) => boolean;
  resolve: (line: LogLine) => void;
}

const TAIL_CHARS = 20_000;

function matcher(match: LogMatch): (line: LogLine) => boolean {
  if (typeof match === 'function') return match;
  const entries = Object.entries(match);
  return (line) => entries.every(([key, value]) => line[key] === value);
}

function describeMatch(match: LogMatch): string {
  return typeof match === 'function' ? 'a matching line' : JSON.stringify(match);
}

export class SwitchboardProcess {
  readonly child: ChildProcess;
  /** Every JSON log line of stdout, in order (none when not recording). */
  readonly lines: LogLine[] = [];
  /** Resolves once the process has exited and its output is read, however it ended. */
  readonly exited: Promise<Exit>;
  readonly #record: boolean;
  readonly #waiters = new Set<LogWaiter>();
  #stdout = '';
  #stderr = '';
  /** Both streams as they came, the last TAIL_CHARS characters. */
  #tail = '';
  #partial = '';

  constructor(
    readonly name: string,
    args: string[],
    o: SpawnOptions = {},
  ) {
    this.#record = o.record ?? true;
    const base = o.env === 'inherit' ? process.env : Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('SWITCHBOARD_')));
    this.child = spawn(process.execPath, [...(o.nodeArgs ?? []), o.script ?? BIN, ...args], {
      cwd: o.cwd ?? ROOT,
      env: { ...base, ...o.extraEnv },
      stdio: [o.stdin ? 'pipe' : 'ignore', 'pipe', 'pipe'],
    });
    this.child.stdout!.setEncoding('utf8').on('data', (chunk: string) => this.#onStdout(chunk));
    // The native ZooKeeper client and Node itself write plain text on stderr: kept for failures.
    this.child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
      if (this.#record) this.#stderr += chunk;
      this.#keep(chunk);
    });
    this.exited = new Promise((resolve) => this.child.once('close', (code, signal) => resolve({ code, signal })));
  }

  get alive(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  get stdout(): string {
    return this.#stdout;
  }

  get stderr(): string {
    return this.#stderr;
  }

  /** The end of the raw output, both streams, for failure messages. */
  tail(chars = 3_000): string {
    return this.#tail.slice(-chars);
  }

  /** What a failure message should show. */
  describe(): string {
    return this.#record
      ? `${this.name}\n--- stdout ---\n${this.#stdout.slice(-3_000)}\n--- stderr ---\n${this.#stderr.slice(-3_000)}`
      : `${this.name}\n--- output ---\n${this.tail()}`;
  }

  /** The number of lines so far: pass it as `from` to look only at what comes later. */
  mark(): number {
    return this.lines.length;
  }

  /** Lines from index `from` on that match. */
  logs(match: LogMatch, from = 0): LogLine[] {
    return this.lines.slice(from).filter(matcher(match));
  }

  /**
   * The first line from index `from` on that matches, waiting for it if needed; fails after
   * `timeoutMs` (Infinity: never) or once the process has exited without logging it.
   */
  async waitForLog(match: LogMatch, { from = 0, timeoutMs = DEFAULT_WAIT_MS }: { from?: number; timeoutMs?: number } = {}): Promise<LogLine> {
    const test = matcher(match);
    const found = this.lines.slice(from).find(test);
    if (found) return found;
    let waiter!: LogWaiter;
    let timer: NodeJS.Timeout | undefined;
    const seen = new Promise<LogLine>((resolve) => (waiter = { test, resolve }));
    const failed = new Promise<never>((_, reject) => {
      if (Number.isFinite(timeoutMs)) {
        timer = setTimeout(() => reject(new Error(`${this.name} logged no ${describeMatch(match)} within ${timeoutMs} ms\n${this.describe()}`)), timeoutMs);
      }
      // Whatever the process wrote before exiting has been parsed by then.
      void this.exited.then((exit) => reject(new Error(`${this.name} exited (${exit.code ?? exit.signal}) before logging ${describeMatch(match)}\n${this.describe()}`)));
    });
    this.#waiters.add(waiter);
    try {
      return await Promise.race([seen, failed]);
    } finally {
      clearTimeout(timer);
      this.#waiters.delete(waiter);
    }
  }

  /** Waits up to `withinMs` for `probe`; fails with this process's output, or as soon as it has exited. */
  waitFor(what: string, probe: () => boolean | Promise<boolean>, withinMs = DEFAULT_WAIT_MS): Promise<void> {
    return until(
      () => `${what}\n${this.describe()}`,
      async () => {
        if (await probe()) return true;
        if (!this.alive) throw new Error(`${this.name} exited (${this.child.exitCode ?? this.child.signalCode}) before: ${what}\n${this.describe()}`);
        return false;
      },
      withinMs,
    );
  }

  /** Writes to stdin (spawned with `stdin: true`). */
  write(text: string): void {
    this.child.stdin!.write(text);
  }

  /** SIGTERM (a graceful stop), then the exit; SIGKILL after `timeoutMs` (Infinity: never). */
  async stop(timeoutMs = 10_000): Promise<Exit> {
    if (this.alive) this.child.kill('SIGTERM');
    const timer = Number.isFinite(timeoutMs) ? setTimeout(() => this.alive && this.child.kill('SIGKILL'), timeoutMs) : undefined;
    const exit = await this.exited;
    clearTimeout(timer);
    return exit;
  }

  /** SIGKILL: the process vanishes as in a crash. */
  async kill(): Promise<Exit> {
    if (this.alive) this.child.kill('SIGKILL');
    return this.exited;
  }

  /** The exit, or an error after `withinMs` (the process keeps running). */
  async exit(withinMs = DEFAULT_WAIT_MS): Promise<Exit> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${this.name} still running after ${withinMs} ms\n${this.describe()}`)), withinMs);
    });
    try {
      return await Promise.race([this.exited, late]);
    } finally {
      clearTimeout(timer);
    }
  }

  #keep(text: string): void {
    this.#tail = (this.#tail + text).slice(-TAIL_CHARS);
  }

  #onStdout(chunk: string): void {
    if (this.#record) this.#stdout += chunk;
    this.#keep(chunk);
    // Not recording and nobody waiting: the lines need not be parsed at all.
    if (!this.#record && this.#waiters.size === 0) {
      this.#partial = '';
      return;
    }
    const parts = (this.#partial + chunk).split('\n');
    this.#partial = parts.pop()!;
    for (const text of parts) {
      if (!text.startsWith('{')) continue;
      let line: LogLine;
      try {
        line = JSON.parse(text) as LogLine;
      } catch {
        continue;
      }
      if (this.#record) this.lines.push(line);
      for (const waiter of this.#waiters) {
        if (waiter.test(line)) {
          this.#waiters.delete(waiter);
          waiter.resolve(line);
        }
      }
    }
  }
}
