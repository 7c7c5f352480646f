// A `switchboard <command>` process for a test (bin/switchboard.js, so the compiled dist/: run
// `npm run build` first): its output kept, its JSON log lines parsed so a test can wait for what
// it says, stdin piped for `chat`, killed on teardown if still running.

import fs from 'node:fs';
import path from 'node:path';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { Test } from 'tap';
import { DEFAULT_WAIT_MS, until, type LogLine } from './cluster.js';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const BIN = path.join(ROOT, 'bin/switchboard.js');

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export class CliProcess {
  readonly child: ChildProcessWithoutNullStreams;
  /** JSON lines of stdout (pino logs), in order. */
  readonly lines: LogLine[] = [];
  readonly exited: Promise<Exit>;
  #stdout = '';
  #stderr = '';
  #partial = '';

  constructor(
    t: Test,
    readonly name: string,
    args: string[],
    /** Variables added to the environment, which has none of the machine's SWITCHBOARD_* ones. */
    extraEnv: Record<string, string> = {},
  ) {
    if (!fs.existsSync(path.join(ROOT, 'dist/cli/main.js'))) throw new Error('dist/ is missing: run `npm run build` (npm test does) first');
    const env = { ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('SWITCHBOARD_'))), ...extraEnv };
    this.child = spawn(process.execPath, [BIN, ...args], { cwd: ROOT, env, stdio: 'pipe' });
    this.child.stdout.setEncoding('utf8').on('data', (chunk: string) => this.#onStdout(chunk));
    this.child.stderr.setEncoding('utf8').on('data', (chunk: string) => (this.#stderr += chunk));
    this.exited = new Promise((resolve) => this.child.on('close', (code, signal) => resolve({ code, signal })));
    t.teardown(async () => {
      if (this.alive) {
        this.child.kill('SIGKILL');
        await this.exited;
      }
    });
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

  /** What a failure message should show. */
  describe(): string {
    return `${this.name}\n--- stdout ---\n${this.#stdout.slice(-3_000)}\n--- stderr ---\n${this.#stderr.slice(-3_000)}`;
  }

  /** Waits up to `withinMs` for `probe`; fails with this process's output. */
  waitFor(what: string, probe: () => boolean | Promise<boolean>, withinMs = DEFAULT_WAIT_MS): Promise<void> {
    return until(() => `${what}\n${this.describe()}`, async () => {
      if (await probe()) return true;
      if (!this.alive) throw new Error(`${this.name} exited (${this.child.exitCode ?? this.child.signalCode}) before: ${what}\n${this.describe()}`);
      return false;
    }, withinMs);
  }

  /** The first log line with these fields, waiting for it if needed. */
  async waitForLog(fields: Record<string, unknown>, withinMs = DEFAULT_WAIT_MS): Promise<LogLine> {
    const test = (l: LogLine) => Object.entries(fields).every(([k, v]) => l[k] === v);
    await this.waitFor(`a log line ${JSON.stringify(fields)}`, () => this.lines.some(test), withinMs);
    return this.lines.find(test)!;
  }

  write(text: string): void {
    this.child.stdin.write(text);
  }

  /** SIGTERM, then the exit (SIGKILL after `timeoutMs`). */
  async stop(timeoutMs = 10_000): Promise<Exit> {
    if (this.alive) this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.alive && this.child.kill('SIGKILL'), timeoutMs);
    const exit = await this.exited;
    clearTimeout(timer);
    return exit;
  }

  /** The exit, or an error after `withinMs` (the process is then killed on teardown). */
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

  #onStdout(chunk: string): void {
    this.#stdout += chunk;
    const parts = (this.#partial + chunk).split('\n');
    this.#partial = parts.pop()!;
    for (const text of parts) {
      if (!text.startsWith('{')) continue;
      try {
        this.lines.push(JSON.parse(text) as LogLine);
      } catch {
        // Not a log line.
      }
    }
  }
}
