// Starts a real standalone ZooKeeper server (java) for a test: free port, temp data dir, short
// ticks so that short session timeouts are allowed, stopped and removed on teardown. Needs java
// and the ZooKeeper jar (Debian: `apt-get install zookeeper`; or set ZOOKEEPER_CLASSPATH).

import type { Test } from 'tap';
import { startZooKeeperServer, type ZooKeeperServer, type ZooKeeperServerOptions } from '../../testkit/services.js';

export type TestZooKeeper = ZooKeeperServer;

export async function startZooKeeper(t: Test, options: ZooKeeperServerOptions = {}): Promise<TestZooKeeper> {
  const zk = await startZooKeeperServer(options);
  t.teardown(zk.kill);
  return zk;
}
