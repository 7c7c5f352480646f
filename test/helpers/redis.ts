// Starts a real redis-server for a test (free port, temp dir, no persistence unless asked)
// and stops it afterwards. `redis-server` must be installed (.ci/run installs it).

import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import net from 'node:net';
import type { Test } from 'tap';
import { freePort } from './free-port.js';

export interface TestRedis {
  url: string;
  port: number;
  process: ChildProcess;
  stop(): Promise<void>;
}

export async function startRedis(t: Test, extraArgs: string[] = []): Promise<TestRedis> {
  const dir = mkdtempSync(join(tmpdir(), 'sb-redis-'));
  const port = await freePort();
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, ...extraArgs], {
    stdio: 'ignore',
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.once('error', (err) => {
    throw new Error(`cannot start redis-server (is it installed?): ${err.message}`);
  });
  await waitForPong(port);
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
    rmSync(dir, { recursive: true, force: true });
  };
  t.teardown(stop);
  return { url: `redis://127.0.0.1:${port}`, port, process: child, stop };
}

async function waitForPong(port: number): Promise<void> {
  for (let attempt = 0; attempt < 200; attempt++) {
    const ok = await new Promise<boolean>((resolve) => {
      const socket = net.connect(port, '127.0.0.1');
      socket.once('connect', () => socket.write('PING\r\n'));
      socket.once('data', (data) => {
        socket.destroy();
        resolve(data.toString().startsWith('+PONG'));
      });
      socket.once('error', () => resolve(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`redis-server on port ${port} did not answer PING`);
}
