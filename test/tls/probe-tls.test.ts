// The gate's probe of a worker without a plain client port (registered port 0): it goes to the
// TLS port, over TLS, and is answered; the worker counts no failed handshake. Probing port 0, or
// plaintext to the TLS port, would make the worker unreachable at the first probe.

import t from 'tap';
import { WorkerProbe } from '../../src/gate/worker-probe.js';
import { TlsFiles } from '../../src/net/tls-files.js';
import { silentLogger } from '../../src/log.js';
import { sleep } from '../../testkit/wait.js';
import { freePort } from '../../testkit/services.js';
import type { ImNode } from '../../src/registry/im-node.js';
import type { Registry } from '../../src/registry/registry.js';
import { startNode } from '../helpers/node.js';
import { testPki } from '../helpers/tls.js';

t.test('a TLS-only worker is probed on its TLS port and stays reachable', async (t) => {
  const pki = testPki(t);
  const n = await startNode(t, {}, { plain: false, tls: { port: 0, files: new TlsFiles(pki.ca('ca').issue('worker')) } });
  t.equal(n.info.port, 0);
  const probe = new WorkerProbe({ registry: n.node.registry, intervalMs: 50, timeoutMs: 1_000, log: silentLogger() });
  probe.start();
  t.teardown(() => probe.close());
  await sleep(600);
  t.ok(probe.reachable(n.info), 'reachable after a dozen probes');
  t.equal(n.node.server.tlsHandshakeFailures, 0, 'every probe completed its TLS handshake');
});

t.test('control: the same probe of a TLS-only entry whose TLS port nobody listens on fails', async (t) => {
  const port = await freePort();
  const entry: ImNode = { id: 'w', host: '127.0.0.1', port: 0, tlsPort: port, balance: 0, startedAt: 0, version: 'test', ready: true };
  const registry = { workers: () => [entry], onChange: () => () => {} } as unknown as Registry;
  const probe = new WorkerProbe({ registry, intervalMs: 50, timeoutMs: 1_000, log: silentLogger() });
  probe.start();
  t.teardown(() => probe.close());
  await sleep(300);
  t.notOk(probe.reachable(entry), 'unreachable: the probes are real');
});
