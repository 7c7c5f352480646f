// ImLoadBalance: which worker a logging-in client should use. The least loaded live worker,
// from the registry's cached view (no ZooKeeper read per login); among the workers within a
// small margin of the least balance one is picked at random, so a burst of logins between two
// balance updates (≤ 1 s apart) spreads instead of piling onto one worker. Only workers that
// can serve are chosen: ready (their stores answer) and reachable (the gate's last probe of
// them was answered). A worker that is not ready is left out, since it refuses logins; one the
// gate could not reach comes last among the fallbacks, since it may be back by the time the
// client gets there.

import type { ImNode } from '../registry/im-node.js';

export interface Choice {
  worker: ImNode;
  /** The others, least loaded first: where to go if `worker` cannot be reached. */
  fallbacks: ImNode[];
}

/** Workers whose balance is within this fraction of the least (or 1 session) count as equal. */
const MARGIN = 0.1;

/** Undefined when no worker is both ready and reachable. */
export function chooseWorker(
  workers: readonly ImNode[],
  random: () => number = Math.random,
  reachable: (worker: ImNode) => boolean = () => true,
): Choice | undefined {
  const byLoad = (a: ImNode, b: ImNode) => a.balance - b.balance || a.id.localeCompare(b.id);
  const usable: ImNode[] = [];
  const unreachable: ImNode[] = [];
  for (const w of workers) if (w.ready) (reachable(w) ? usable : unreachable).push(w);
  if (usable.length === 0) return undefined;
  const sorted = usable.sort(byLoad);
  const least = sorted[0]!.balance;
  const limit = least + Math.max(1, Math.floor(least * MARGIN));
  const near = sorted.filter((w) => w.balance < limit);
  const worker = near[Math.floor(random() * near.length)]!;
  return { worker, fallbacks: [...sorted.filter((w) => w !== worker), ...unreachable.sort(byLoad)] };
}
