// Starts a real standalone ZooKeeper server (java) for a test: free port, temp data dir, short
// ticks so that short session timeouts are allowed, stopped and removed on teardown; or a real
// three-server ensemble (testkit/zookeeper-ensemble.ts) the same way. Needs java and the
// ZooKeeper jar (Debian: `apt-get install zookeeper`; or set ZOOKEEPER_CLASSPATH).

import type { Test } from 'tap';
import { startZooKeeperServer, type ZooKeeperServer, type ZooKeeperServerOptions } from '../../testkit/services.js';
import { startZooKeeperEnsemble, type ZooKeeperEnsemble, type ZooKeeperEnsembleOptions } from '../../testkit/zookeeper-ensemble.js';

export type TestZooKeeper = ZooKeeperServer;

export async function startZooKeeper(t: Test, options: ZooKeeperServerOptions = {}): Promise<TestZooKeeper> {
  const zk = await startZooKeeperServer(options);
  t.teardown(zk.kill);
  return zk;
}

/** Three servers, one leader and two followers serving; every one still running is killed on teardown. */
export async function startEnsemble(t: Test, options: ZooKeeperEnsembleOptions = {}): Promise<ZooKeeperEnsemble> {
  const ensemble = await startZooKeeperEnsemble(options);
  t.teardown(ensemble.kill);
  return ensemble;
}
