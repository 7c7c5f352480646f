// ImLoadBalance: which worker a logging-in client should use. The least loaded live worker,
// from the registry's cached view (no ZooKeeper read per login); among the workers within a
// small margin of the least balance one is picked at random, so a burst of logins between two
// balance updates (≤ 1 s apart) spreads instead of piling onto one worker.

import type { WorkerInfo } from '../registry/registry.js';

export interface Choice {
  worker: WorkerInfo;
  /** The others, least loaded first: where to go if `worker` cannot be reached. */
  fallbacks: WorkerInfo[];
}

/** Workers whose balance is within this fraction of the least (or 1 session) count as equal. */
const MARGIN = 0.1;

export function chooseWorker(workers: readonly WorkerInfo[], random: () => number = Math.random): Choice | undefined {
  if (workers.length === 0) return undefined;
  const sorted = [...workers].sort((a, b) => a.balance - b.balance || a.id.localeCompare(b.id));
  const least = sorted[0]!.balance;
  const limit = least + Math.max(1, Math.floor(least * MARGIN));
  const near = sorted.filter((w) => w.balance < limit);
  const worker = near[Math.floor(random() * near.length)]!;
  return { worker, fallbacks: sorted.filter((w) => w !== worker) };
}
