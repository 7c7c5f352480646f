// StaticRegistry against the shared Registry conformance suite, and the worker's balance in the
// registry following real logins and logouts.

import t from 'tap';
import { StaticRegistry } from '../../src/registry/static-registry.js';
import { ImClient } from '../../src/client/im-client.js';
import { registryConformance } from './registry.conformance.js';
import { startNode } from '../helpers/node.js';
import { until } from '../../testkit/wait.js';

registryConformance(t, async () => new StaticRegistry());

t.test('StaticRegistry refuses a second register', async (t) => {
  const registry = new StaticRegistry('n7');
  const info = await registry.register({ host: 'h', port: 1, balance: 0, startedAt: 0, version: 'v', ready: true });
  t.equal(info.id, 'n7', 'the id is the node id');
  await t.rejects(registry.register({ host: 'h', port: 2, balance: 0, startedAt: 0, version: 'v', ready: true }), { code: 'SB_ERR_CONFIG' });
  await registry.close();
});

t.test('the registered balance follows logins and logouts on a real node', async (t) => {
  const n = await startNode(t);
  const registry = n.node.registry;
  const balance = () => registry.workers().find((w) => w.id === n.info.id)?.balance;
  const client = (uid: string, deviceId: string): ImClient => {
    const c = new ImClient({ host: '127.0.0.1', port: n.port, uid, deviceId, token: n.token(uid), retryStrategy: false });
    t.teardown(() => c.close());
    return c;
  };
  const views: number[] = [];
  registry.onChange((view) => views.push(view.find((w) => w.id === n.info.id)?.balance ?? -1));

  t.equal(balance(), 0, 'no sessions yet');

  const alicePhone = client('alice', 'phone');
  const aliceLaptop = client('alice', 'laptop');
  const bob = client('bob', 'phone');
  await Promise.all([alicePhone.connect(), aliceLaptop.connect(), bob.connect()]);
  await until('balance 3', () => balance() === 3, 5_000);
  t.equal(balance(), 3, 'one per session, devices of one user counted apiece');
  t.ok(views.includes(3), 'listeners were told');

  await alicePhone.logout();
  await until('balance 2 after a logout', () => balance() === 2, 5_000);
  t.equal(balance(), 2);

  bob.close();
  await until('balance 1 after a dropped connection', () => balance() === 1, 5_000);
  t.equal(balance(), 1);

  // The same device logging in again replaces its session: still one.
  const laptopAgain = client('alice', 'laptop');
  const closed = new Promise<void>((resolve) => aliceLaptop.on('status', (s) => s === 'closed' && resolve()));
  await laptopAgain.connect();
  await closed;
  await until('server settled', () => n.node.server.connectionCount === 1, 5_000);
  t.equal(balance(), 1, 'a replaced session is not counted twice');
  t.equal(n.node.server.sessions.size, 1);

  await laptopAgain.logout();
  await until('balance 0', () => balance() === 0, 5_000);
  t.equal(balance(), 0);
});
