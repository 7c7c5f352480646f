// Starts a real switchboard node (or a whole embedded switchboard, gate included) on free loopback
// ports for a test, and stops it after.

import type { Test } from 'tap';
import { createNode, createSwitchboard, type NodeOptions, type SwitchboardNode } from '../../src/node.js';
import { DEFAULT_LIMITS, type WorkerLimits } from '../../src/config.js';
import { DEFAULT_HEALTH_SETTINGS } from '../../src/server/store-health.js';
import { DEFAULT_INBOX_LIMITS } from '../../src/inbox/inbox-store.js';
import { DEFAULT_GATE_LIMITS, type GateLimits } from '../../src/gate/web-gate.js';
import type { TokenKeys } from '../../src/auth/token.js';
import { registerThroughGate } from '../../src/client/gate-login.js';
import { silentLogger } from '../../src/log.js';
import type { ImNode } from '../../src/registry/im-node.js';

export const TEST_SECRET = 'test-secret';

export interface TestNode {
  node: SwitchboardNode;
  info: ImNode;
  port: number;
  /** A token for `uid`, valid for any device unless `deviceId` is given. */
  token(uid: string, deviceId?: string, ttlMs?: number): string;
}

export async function startNode(t: Test, limits: Partial<WorkerLimits> = {}, options: Partial<NodeOptions> = {}): Promise<TestNode> {
  const node = createNode({ host: '127.0.0.1', port: 0, secret: TEST_SECRET, limits: { closeGraceMs: 200, ...limits }, ...options });
  const info = await node.start();
  t.teardown(() => node.stop());
  return {
    node,
    info,
    port: info.port,
    token: (uid, deviceId, ttlMs = 60_000) => node.signer.mint({ uid, deviceId, ttlMs }),
  };
}

/**
 * An embedded switchboard (gate and worker in this process, stores in memory, accounts checked)
 * with `users` registered (password PASSWORD); resolves the gate's URL.
 */
export async function startSwitchboard(t: Test, users: readonly string[] = []): Promise<string> {
  return (await startEmbedded(t, users)).url;
}

export interface EmbeddedOptions {
  gateLimits?: Partial<GateLimits>;
  adminToken?: string;
  revocationCheckMs?: number;
  secret?: string | TokenKeys;
}

/** startSwitchboard, with the gate's limits, admin credential and token keys as given; resolves the switchboard too. */
export async function startEmbedded(t: Test, users: readonly string[] = [], options: EmbeddedOptions = {}) {
  const switchboard = createSwitchboard({
    secret: options.secret ?? TEST_SECRET,
    log: silentLogger(),
    worker: {
      host: '127.0.0.1',
      port: 0,
      limits: { ...DEFAULT_LIMITS, closeGraceMs: 200 },
      health: DEFAULT_HEALTH_SETTINGS,
      inboxLimits: DEFAULT_INBOX_LIMITS,
      memoryInboxBytes: 16 * 1024 * 1024,
      checkRecipients: true,
      revocationCheckMs: options.revocationCheckMs,
    },
    gate: { host: '127.0.0.1', port: 0, limits: { ...DEFAULT_GATE_LIMITS, ...options.gateLimits }, registration: true, trustProxy: [], adminToken: options.adminToken },
  });
  t.teardown(() => switchboard.stop());
  const { gate } = await switchboard.start();
  const url = `http://127.0.0.1:${gate!.port}`;
  for (const user of users) await registerThroughGate(url, user, PASSWORD);
  return { url, switchboard };
}

/** The password of startSwitchboard's users. */
export const PASSWORD = 'a password long enough';
