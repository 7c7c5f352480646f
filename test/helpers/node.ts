// Starts a real switchboard node on a free loopback port for a test, and stops it after.

import type { Test } from 'tap';
import { createNode, type NodeOptions, type SwitchboardNode } from '../../src/node.js';
import type { WorkerLimits } from '../../src/config.js';
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
