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
  /** A sender may recall a 1:1 message for this long after it was stored (PROTOCOL.md §14); 0: never. */
  recallWindowMs: number;
  /** A sender may edit a 1:1 message for this long after it was stored (PROTOCOL.md §14); 0: never. */
  editWindowMs: number;
  /** Messages read from the inbox per batch when replaying. */
  syncBatchSize: number;
  /** How often a worker rewrites its sessions' SessionStore records (their TTL). */
  sessionRefreshMs: number;
  /** Messages per second one connection may send (token bucket refill); 0: no per-connection limit. */
  messageRate: number;
  /** Messages one connection may send at once (the bucket's size; at least 1). */
  messageBurst: number;
  /** Messages per second one user's sessions on this worker may send together; 0: no per-user limit. */
  userMessageRate: number;
  /** Messages one user's sessions on this worker may send at once. */
  userMessageBurst: number;
  /** Rate refusals within floodWindowMs that close the connection with SB_ERR_FLOOD; 0: never closed. */
  floodRefusals: number;
  /** The window floodRefusals are counted in: it starts at a refusal and lasts this long. */
  floodWindowMs: number;
  /** Connections one client address may hold (IPv6: one /64); a further one is refused at accept; 0: no cap. */
  maxConnectionsPerIp: number;
  /** Connections that have not logged in (or proven a peer); a further one is refused at accept; 0: no cap. */
  maxUnauthenticated: number;
  /** Recipients remembered as existing users, when recipients are checked against a UserStore. */
  recipientCacheSize: number;
  /** A device with no saved position in a group gets at most this many of the group's latest entries at login. */
  groupSyncNew: number;
  /** Group deliveries written per turn of the event loop; a larger fan-out continues on the next turn. */
  groupFanoutSlice: number;
  /** Group deliveries waiting to be written at most; beyond, the devices read the entry from the group's log. */
  groupFanoutQueue: number;
  /** Keep a copy of each chat message in its sender's inbox, for the sender's other devices (PROTOCOL.md §14). */
  ownCopies: boolean;
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
  recallWindowMs: 300_000,
  editWindowMs: 900_000,
  syncBatchSize: 100,
  sessionRefreshMs: 30_000,
  // Far above a person typing and above what most bots need (a bot that needs more raises
  // them); the burst covers the SDK's queue of 1000 sends flushed after a reconnect.
  messageRate: 100,
  messageBurst: 1000,
  userMessageRate: 200,
  userMessageBurst: 2000,
  // A client twice over the rate is closed after about 10 s; a flood within milliseconds.
  floodRefusals: 1000,
  floodWindowMs: 10_000,
  // Carrier-grade NAT puts many devices behind one address, and the gate spreads them over the
  // workers: 1000 per worker holds a large NAT's share and stops one host from taking the
  // worker's file descriptors.
  maxConnectionsPerIp: 1000,
  // A login takes milliseconds, so even a reconnect storm after a restart holds a few hundred
  // at once; keep this well below the process's file limit minus the sessions it serves.
  maxUnauthenticated: 5000,
  recipientCacheSize: 100_000,
  groupSyncNew: 100,
  groupFanoutSlice: 512,
  // 10 fan-outs to 10 000 members: a burst of group messages, at 8 bytes of queue per delivery.
  groupFanoutQueue: 100_000,
  ownCopies: true,
});

export function idleTimeoutMs(limits: WorkerLimits): number {
  return limits.heartbeatIntervalMs * limits.idleIntervals;
}
