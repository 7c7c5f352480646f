// The gate over HTTPS, with a worker that has a TLS port beside its plain one, in one process
// (createSwitchboard): registration and login through https:// with the test CA, the login answer
// naming the TLS port beside the plain one (old clients read host and port as ever), the SDK
// following it to chat over TLS, plain HTTP to the HTTPS port refused, and reloadTls(): a new
// certificate for new connections, a broken file keeping the old one.

import t, { type Test } from 'tap';
import tls from 'node:tls';
import { createSwitchboard, type Switchboard } from '../../src/node.js';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { DEFAULT_HEALTH_SETTINGS } from '../../src/server/store-health.js';
import { DEFAULT_INBOX_LIMITS } from '../../src/inbox/inbox-store.js';
import { DEFAULT_GATE_LIMITS } from '../../src/gate/web-gate.js';
import { loginThroughGate, registerThroughGate, gateFailure } from '../../src/client/gate-login.js';
import { gateEndpoint } from '../../src/client/gate-session.js';
import { ImClient, type Endpoint, type IncomingMessage } from '../../src/client/im-client.js';
import { silentLogger } from '../../src/log.js';
import { until } from '../../testkit/wait.js';
import { testPki, type TestPki } from '../helpers/tls.js';
import { PASSWORD, TEST_SECRET } from '../helpers/node.js';

interface HttpsSwitchboard {
  switchboard: Switchboard;
  url: string;
  gatePort: number;
  pki: TestPki;
  ca: Buffer;
  gateCert: { cert: string; key: string };
  issue(name: string): { cert: string; key: string };
}

async function start(t: Test): Promise<HttpsSwitchboard> {
  const pki = testPki(t);
  const ca = pki.ca('ca');
  const workerCert = ca.issue('worker');
  const gateCert = ca.issue('gate');
  const switchboard = createSwitchboard({
    secret: TEST_SECRET,
    log: silentLogger(),
    worker: {
      host: '127.0.0.1',
      port: 0,
      tls: { port: 0, ...workerCert },
      limits: { ...DEFAULT_LIMITS, closeGraceMs: 200 },
      health: DEFAULT_HEALTH_SETTINGS,
      inboxLimits: DEFAULT_INBOX_LIMITS,
      memoryInboxBytes: 16 * 1024 * 1024,
      checkRecipients: true,
    },
    gate: { host: '127.0.0.1', port: 0, tls: gateCert, limits: DEFAULT_GATE_LIMITS, registration: true, trustProxy: [] },
  });
  t.teardown(() => switchboard.stop());
  const { gate } = await switchboard.start();
  return { switchboard, url: `https://localhost:${gate!.port}`, gatePort: gate!.port, pki, ca: pki.read(ca.ca), gateCert, issue: (name) => ca.issue(name) };
}

/** The serial number of the certificate the gate presents now. */
async function gateSerial(s: HttpsSwitchboard): Promise<string> {
  const socket = tls.connect({ host: '127.0.0.1', port: s.gatePort, ca: s.ca, servername: 'localhost' });
  await new Promise<void>((resolve, reject) => socket.once('secureConnect', resolve).once('error', reject));
  const serial = socket.getPeerCertificate().serialNumber;
  socket.destroy();
  return serial;
}

t.test('register, log in and chat through an HTTPS gate and the TLS port it names', async (t) => {
  const s = await start(t);
  const gate = { url: s.url, ca: s.ca };
  for (const user of ['alice', 'bob']) await registerThroughGate(gate, user, PASSWORD);
  const login = await loginThroughGate(gate, { username: 'alice', password: PASSWORD, deviceId: 'a1' });
  t.ok(login.worker.port > 0, 'the plain port, for clients that know no tlsPort');
  t.ok(login.worker.tlsPort! > 0, 'the TLS port beside it');
  t.not(login.worker.tlsPort, login.worker.port);

  const dialed: Endpoint[] = [];
  const clients = ['alice', 'bob'].map((uid) => {
    const resolve = gateEndpoint(gate, { username: uid, password: PASSWORD, deviceId: `${uid}-d` });
    const endpoint = async () => {
      const where = await resolve();
      dialed.push(where);
      return where;
    };
    const client = new ImClient({ uid, deviceId: `${uid}-d`, endpoint, tls: { ca: s.ca, servername: 'localhost' }, retryStrategy: false });
    t.teardown(() => client.close());
    return client;
  });
  const [alice, bob] = clients as [ImClient, ImClient];
  const got: IncomingMessage[] = [];
  bob.on('message', (m) => got.push(m));
  await alice.connect();
  await bob.connect();
  await alice.send('bob', 'over https and tls');
  await until('bob got it', () => got.length === 1);
  t.equal(got[0]!.content, 'over https and tls');
  t.same(dialed.map((e) => [e.port, e.tls]), [[login.worker.tlsPort, true], [login.worker.tlsPort, true]], 'both dialed the TLS port, over TLS');
});

t.test('the gate over HTTPS refuses plain HTTP and a client without its CA', async (t) => {
  const s = await start(t);
  const plain = await fetch(`http://127.0.0.1:${s.gatePort}/healthz`).then(
    () => 'answered',
    () => 'refused',
  );
  t.equal(plain, 'refused', 'plain HTTP to the HTTPS port gets no answer');
  const err = await registerThroughGate(s.url, 'carol', PASSWORD).then(
    () => undefined,
    (e: unknown) => gateFailure(s.url, e),
  );
  t.equal(err?.code, 'SB_ERR_CLIENT_CONNECT_FAILED');
  t.match(err?.message, /certificate/);
});

t.test('reloadTls: new connections get the new certificate; a broken file keeps the old one', async (t) => {
  const s = await start(t);
  const first = await gateSerial(s);
  const renewed = s.issue('gate-renewed');
  s.pki.copy(renewed.cert, s.gateCert.cert);
  s.pki.copy(renewed.key, s.gateCert.key);
  t.same(s.switchboard.reloadTls(), [], 'every set reloaded');
  const second = await gateSerial(s);
  t.not(second, first, 'the renewed certificate is presented');

  s.pki.write('gate.crt', 'not a certificate');
  const failed = s.switchboard.reloadTls();
  t.same(failed.map((e) => e.code), ['SB_ERR_TLS_FILES'], 'the broken set is reported');
  t.equal(await gateSerial(s), second, 'the previous certificate stays in use');
  const health = await fetch(`${s.url}/healthz`).catch(() => undefined);
  t.equal(health, undefined, 'fetch without the CA still refuses (sanity)');
  const ok = await registerThroughGate({ url: s.url, ca: s.ca }, 'dave', PASSWORD);
  t.equal(ok.uid, 'dave', 'the gate serves on');
});

t.test('a socket that never starts its TLS handshake at the gate is closed by the request deadline', async (t) => {
  const pki = testPki(t);
  const gateCert = pki.ca('ca').issue('gate');
  const switchboard = createSwitchboard({
    secret: TEST_SECRET,
    log: silentLogger(),
    worker: { host: '127.0.0.1', port: 0, limits: { ...DEFAULT_LIMITS, closeGraceMs: 200 }, health: DEFAULT_HEALTH_SETTINGS, inboxLimits: DEFAULT_INBOX_LIMITS, memoryInboxBytes: 16 * 1024 * 1024, checkRecipients: true },
    gate: { host: '127.0.0.1', port: 0, tls: gateCert, limits: { ...DEFAULT_GATE_LIMITS, requestTimeoutMs: 300 }, registration: true, trustProxy: [] },
  });
  t.teardown(() => switchboard.stop());
  const { gate } = await switchboard.start();
  const { default: net } = await import('node:net');
  const socket = net.connect(gate!.port, '127.0.0.1');
  socket.on('error', () => {});
  socket.resume();
  const closed = await Promise.race([new Promise((resolve) => socket.once('close', () => resolve('closed'))), new Promise((resolve) => setTimeout(() => resolve('still open'), 5_000))]);
  socket.destroy();
  t.equal(closed, 'closed');

  // The request deadline holds over HTTPS too: headers trickled after the handshake.
  const slow = tls.connect({ host: '127.0.0.1', port: gate!.port, ca: pki.read(pki.dir + '/ca.crt'), servername: 'localhost' });
  slow.on('error', () => {});
  slow.resume();
  await new Promise((resolve) => slow.once('secureConnect', resolve));
  slow.write('POST /api/login HTTP/1.1\r\nhost: localhost\r\n');
  const timer = setInterval(() => slow.write('x-slow: 1\r\n'), 100);
  const slowClosed = await Promise.race([new Promise((resolve) => slow.once('close', () => resolve('closed'))), new Promise((resolve) => setTimeout(() => resolve('still open'), 5_000))]);
  clearInterval(timer);
  slow.destroy();
  t.equal(slowClosed, 'closed', 'a request trickled over HTTPS is cut at the deadline');
});
