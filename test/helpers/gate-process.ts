// A `switchboard gate` process following a TestCluster's workers (test/helpers/cluster.ts): its
// HTTP API, waits on what /api/workers and /api/stats show, and its JSON log lines (CliProcess).
// bin/switchboard.js runs the compiled dist/: `npm run build` first.

import type { Test } from 'tap';
import { CliProcess } from './cli-process.js';
import { CLUSTER_TOKEN_SECRET, CLUSTER_ZK_GATE_AUTH, type TestCluster, type WorkerProcess } from './cluster.js';

const WAIT_MS = 20_000;

export interface PublicWorker {
  id: string;
  host: string;
  port: number;
  balance: number;
}

export interface Stats {
  online: { users: number; sessions: number };
  workers: { id: string; balance: number }[];
}

export class GateProcess extends CliProcess {
  url = '';

  async started(): Promise<this> {
    const listening = await this.waitForLog({ msg: 'gate listening' }, { timeoutMs: WAIT_MS });
    this.url = `http://127.0.0.1:${String(listening.port)}`;
    return this;
  }

  async get<T>(path: string): Promise<T> {
    const response = await fetch(new URL(path, this.url));
    if (!response.ok) throw new Error(`GET ${path}: ${response.status} ${await response.text()}`);
    return (await response.json()) as T;
  }

  async post<T>(path: string, body: unknown): Promise<{ status: number; body: T }> {
    const response = await fetch(new URL(path, this.url), { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    return { status: response.status, body: (await response.json()) as T };
  }

  async workers(): Promise<PublicWorker[]> {
    return (await this.get<{ workers: PublicWorker[] }>('/api/workers')).workers;
  }

  /** Waits until /api/workers lists exactly these workers with these balances. */
  async waitForBalances(expected: Map<WorkerProcess, number>, when: string): Promise<PublicWorker[]> {
    const want = [...expected].map(([w, balance]) => `${w.nodeId}=${balance}`).sort();
    let seen: string[] = [];
    await this.waitFor(
      `${when}: /api/workers shows ${want.join(' ')} (last seen ${seen.join(' ')})`,
      async () => {
        seen = (await this.workers()).map((w) => `${w.id}=${w.balance}`).sort();
        return JSON.stringify(seen) === JSON.stringify(want);
      },
      WAIT_MS,
    );
    return this.workers();
  }

  /** Waits until /api/stats counts this many sessions (and as many users: every uid here has one device). */
  async waitForOnline(sessions: number, when: string): Promise<Stats> {
    let last: Stats | undefined;
    await this.waitFor(
      `${when}: /api/stats shows ${sessions} sessions (last ${JSON.stringify(last?.online)})`,
      async () => {
        last = await this.get<Stats>('/api/stats');
        return last.online.sessions === sessions && last.online.users === sessions;
      },
      WAIT_MS,
    );
    return last!;
  }
}

export interface StartGateOptions {
  name?: string;
  /** Where the gate keeps users; default the cluster's Redis. */
  redisUrl?: string;
  /** More flags, e.g. ['--probe-interval-ms', '200']. */
  flags?: string[];
}

/** A gate on a free port following `cluster`, resolved once it listens. */
export async function startGate(t: Test, cluster: TestCluster, options: StartGateOptions | string = {}): Promise<GateProcess> {
  const { name = 'gate', redisUrl = cluster.redis.url, flags = [] } = typeof options === 'string' ? { name: options } : options;
  const args = ['gate', '--zk', cluster.zk.connect, '--zk-root', cluster.root, '--zk-auth', CLUSTER_ZK_GATE_AUTH, '--redis', redisUrl, '--port', '0', '--log-level', 'info', '--secret', CLUSTER_TOKEN_SECRET, ...flags];
  return new GateProcess(t, name, args).started();
}
