// Worker settings and their defaults. Every limit here is documented in OPERATIONS.md; the CLI
// maps each one to a flag and a SWITCHBOARD_* environment variable.

import { DEFAULT_MAX_FRAME_LENGTH } from './protocol/frame.js';

export interface WorkerLimits {
  /** Largest accepted frame body (bytes); a larger header closes the connection. */
  maxFrameLength: number;
  /** A connection that has not logged in within this time is closed. */
  loginTimeoutMs: number;
  /** Expected client heartbeat interval. */
  heartbeatIntervalMs: number;
  /** A connection silent for this many heartbeat intervals is closed. */
  idleIntervals: number;
  /** Sessions one user may hold at once (distinct devices). */
  maxDevicesPerUser: number;
  /** Unsent output above which a connection is closed as a slow consumer (bytes). */
  maxOutboundBytes: number;
  /** A connection whose output stays undrained this long is closed as a slow consumer. */
  drainTimeoutMs: number;
  /** Frames accepted while a login is still being processed; one more closes the connection. */
  preLoginQueueLimit: number;
  /** Frames queued behind an unfinished asynchronous handler before reading pauses. */
  inboundQueueLimit: number;
  /** How long a closing connection may take to flush its last frame before it is destroyed. */
  closeGraceMs: number;
  /** Deliveries an ack-capable device has not acknowledged after this long are sent again. */
  ackTimeoutMs: number;
  /** Messages read from the inbox per batch when replaying. */
  syncBatchSize: number;
  /** How often a worker rewrites its sessions' SessionStore records (their TTL). */
  sessionRefreshMs: number;
}

export const DEFAULT_LIMITS: Readonly<WorkerLimits> = Object.freeze({
  maxFrameLength: DEFAULT_MAX_FRAME_LENGTH,
  loginTimeoutMs: 10_000,
  heartbeatIntervalMs: 50_000,
  idleIntervals: 3,
  maxDevicesPerUser: 5,
  maxOutboundBytes: 1024 * 1024,
  drainTimeoutMs: 10_000,
  preLoginQueueLimit: 8,
  inboundQueueLimit: 256,
  closeGraceMs: 2_000,
  ackTimeoutMs: 10_000,
  syncBatchSize: 100,
  sessionRefreshMs: 30_000,
});

export function idleTimeoutMs(limits: WorkerLimits): number {
  return limits.heartbeatIntervalMs * limits.idleIntervals;
}
