// What every scenario is told: where to measure, for how long, with how many drivers, and
// where progress goes. Each scenario's options extend these with its own.

import type { ProgressSink } from '../progress.js';
import type { TargetKind } from '../targets.js';

export interface ScenarioOptions {
  target: TargetKind;
  /** cluster: worker processes. */
  workers: number;
  /** Persistence of a Redis the bench starts. */
  fsync: 'none' | 'everysec' | 'always';
  /** The target's token signing secret. */
  secret: string;
  /** external target: host:port of each worker. */
  workerEndpoints?: string[];
  /** Connections (or clients, or login loops) in total, over all drivers. */
  connections: number;
  durationS: number;
  warmupS: number;
  drivers: number;
  progress?: ProgressSink;
  /** The command line, for the report. */
  command: string;
}
