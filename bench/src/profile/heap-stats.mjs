// Preloaded into a measured server (node --import ./bench/src/profile/heap-stats.mjs): on SIGUSR2 it
// writes V8's heap statistics, per space, and process.memoryUsage() as JSON into
// $SB_DIAG_DIR, without forcing a garbage collection. Use: BENCH_SERVER_NODE_ARGS="--import
// ./bench/src/profile/heap-stats.mjs" switchboard bench idle ..., then kill -USR2 the worker.

import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import v8 from 'node:v8';

const dir = process.env.SB_DIAG_DIR ?? '.';
process.on('SIGUSR2', () => {
  const stats = {
    memoryUsage: process.memoryUsage(),
    heap: v8.getHeapStatistics(),
    spaces: v8.getHeapSpaceStatistics(),
    activeResources: process.getActiveResourcesInfo().length,
  };
  writeFileSync(join(dir, `heap-${process.pid}-${Date.now()}.json`), JSON.stringify(stats, null, 2));
});
