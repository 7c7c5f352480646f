// `switchboard chat` over TLS, a real process against an embedded switchboard whose gate serves
// HTTPS and whose worker has a TLS port: with --ca it registers through https://, follows the
// gate to the TLS port and chats; without the CA it fails saying why; --tls with --port dials a
// TLS port directly, and a wrong --servername is refused. Also the flag checks of `worker`.

import t, { type Test } from 'tap';
import { ImClient, type IncomingMessage } from '../../src/client/im-client.js';
import { TlsFiles } from '../../src/net/tls-files.js';
import { createSwitchboard } from '../../src/node.js';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { DEFAULT_HEALTH_SETTINGS } from '../../src/server/store-health.js';
import { DEFAULT_INBOX_LIMITS } from '../../src/inbox/inbox-store.js';
import { DEFAULT_GATE_LIMITS } from '../../src/gate/web-gate.js';
import { registerThroughGate } from '../../src/client/gate-login.js';
import { gateEndpoint } from '../../src/client/gate-session.js';
import { silentLogger } from '../../src/log.js';
import { CliProcess } from '../helpers/cli-process.js';
import { PASSWORD, startNode } from '../helpers/node.js';
import { testPki } from '../helpers/tls.js';
import { until } from '../../testkit/wait.js';

const SECRET = 'chat-tls-test-secret-of-at-least-32-characters';
const EXIT_MS = 20_000;

async function httpsSwitchboard(t: Test) {
  const pki = testPki(t);
  const ca = pki.ca('ca');
  const switchboard = createSwitchboard({
    secret: SECRET,
    log: silentLogger(),
    worker: { host: '127.0.0.1', port: 0, tls: { port: 0, ...ca.issue('worker') }, limits: { ...DEFAULT_LIMITS, closeGraceMs: 200 }, health: DEFAULT_HEALTH_SETTINGS, inboxLimits: DEFAULT_INBOX_LIMITS, memoryInboxBytes: 16 * 1024 * 1024, checkRecipients: true },
    gate: { host: '127.0.0.1', port: 0, tls: ca.issue('gate'), limits: DEFAULT_GATE_LIMITS, registration: true, trustProxy: [] },
  });
  t.teardown(() => switchboard.stop());
  const { gate } = await switchboard.start();
  return { url: `https://localhost:${gate!.port}`, ca: ca.ca, caPem: pki.read(ca.ca), switchboard };
}

t.test('chat --gate https:// --ca: registers, goes to the TLS port, sends', async (t) => {
  const s = await httpsSwitchboard(t);
  const gate = { url: s.url, ca: s.caPem };
  await registerThroughGate(gate, 'bob', PASSWORD);
  const bob = new ImClient({ uid: 'bob', deviceId: 'bob-phone', endpoint: gateEndpoint(gate, { username: 'bob', password: PASSWORD, deviceId: 'bob-phone' }), tls: { ca: s.caPem }, retryStrategy: false });
  t.teardown(() => bob.close());
  const got: IncomingMessage[] = [];
  bob.on('message', (m) => got.push(m));
  await bob.connect();
  const alice = new CliProcess(t, 'chat alice', ['chat', '--user', 'alice', '--gate', s.url, '--ca', s.ca, '--register', '--password', PASSWORD]);
  alice.child.stdin.end('@bob hello through https and tls\n');
  t.same(await alice.exit(EXIT_MS), { code: 0, signal: null });
  await until('bob got it', () => got.length === 1);
  t.equal(got[0]!.content, 'hello through https and tls');
  t.equal(s.switchboard.node!.server.sessions.byUser('alice').length, 0, 'alice logged out');
});

t.test('chat --gate https:// without --ca: refused, saying why', async (t) => {
  const s = await httpsSwitchboard(t);
  const alice = new CliProcess(t, 'chat alice', ['chat', '--user', 'alice', '--gate', s.url, '--register', '--password', PASSWORD]);
  alice.child.stdin.end();
  t.equal((await alice.exit(EXIT_MS)).code, 1);
  t.match(alice.stderr, /SB_ERR_CLIENT_CONNECT_FAILED.*certificate/);
});

t.test('chat --tls --port: a TLS port directly; a wrong --servername is refused', async (t) => {
  const pki = testPki(t);
  const ca = pki.ca('ca');
  const n = await startNode(t, {}, { secret: SECRET, tls: { port: 0, files: new TlsFiles(ca.issue('worker')) } });
  const tlsPort = String(n.info.tlsPort);
  const ok = new CliProcess(t, 'chat carol', ['chat', '--user', 'carol', '--port', tlsPort, '--tls', '--ca', ca.ca, '--secret', SECRET]);
  ok.child.stdin.end('@dave hi\n');
  t.same(await ok.exit(EXIT_MS), { code: 0, signal: null });
  t.match(ok.stdout, /logged in as carol/);
  const wrong = new CliProcess(t, 'chat carol', ['chat', '--user', 'carol', '--port', tlsPort, '--tls', '--ca', ca.ca, '--servername', 'chat.example.com', '--secret', SECRET]);
  wrong.child.stdin.end();
  t.equal((await wrong.exit(EXIT_MS)).code, 1);
  t.match(wrong.stderr, /SB_ERR_TLS_HANDSHAKE/);
});

t.test('worker: the TLS flags are checked before anything starts', async (t) => {
  const cases: [string[], RegExp][] = [
    [['--tls-port', '0'], /--tls-port needs --tls-cert and --tls-key/],
    [['--tls-cert', 'x.crt'], /--tls-cert and --tls-key go together/],
    [['--no-plain-port'], /--no-plain-port needs --tls-port/],
    [['--tls-port', '0', '--tls-cert', '/nonexistent.crt', '--tls-key', '/nonexistent.key'], /SB_ERR_TLS_FILES cannot read the certificate file \/nonexistent\.crt/],
  ];
  for (const [args, expected] of cases) {
    const worker = new CliProcess(t, 'worker', ['worker', '--port', '0', ...args]);
    t.equal((await worker.exit(EXIT_MS)).code, 1, args.join(' '));
    t.match(worker.stderr, expected);
  }
});
