// The file-descriptor attack: connections that never log in, from one host or from many, held
// until the worker can accept nothing else and fresh logins fail. With the caps, a connection
// over the per-address cap is refused at accept with a CLOSING naming the cap and closed; at the
// cap on connections not logged in, the one that has waited longest is shed instead, so a fresh
// login gets in while the attacker's sockets are still held; logged-in users are not touched.

import t, { type Test } from 'tap';
import { once } from 'node:events';
import { pino } from 'pino';
import { startNode, type TestNode } from '../helpers/node.js';
import { RawClient, isType, DEFAULT_TIMEOUT_MS } from '../../testkit/raw-client.js';
import { until } from '../../testkit/wait.js';
import { connect, connectLoggedIn } from '../helpers/raw-client.js';
import { HeadType } from '../../src/protocol/types.js';
import { addressKey } from '../../src/server/connection-caps.js';

async function chattingPair(t: Test, tn: TestNode, localAddress?: string) {
  const alice = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'), 'dev-1', { localAddress });
  const bob = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'dev-1', { localAddress });
  let n = 0;
  return async function exchange(what: string): Promise<void> {
    const i = n++;
    t.equal((await alice.chatAndWait('bob', `ping ${i}`)).messageResponse?.result, true, `${what}: alice -> bob`);
    t.equal((await bob.next(isType(HeadType.MESSAGE_REQUEST))).messageRequest?.content, `ping ${i}`, `${what}: bob got it`);
  };
}

/** Connects and expects to be refused at once with `code`: a CLOSING and nothing else, then the close. */
async function refused(t: Test, tn: TestNode, code: string, localAddress?: string): Promise<void> {
  const client = await RawClient.connect(tn.port, { localAddress });
  t.teardown(() => client.destroy());
  const closing = await client.nextClosing();
  await client.waitClosed();
  t.equal(closing.code, code, `refused at accept: ${code}`);
  t.equal(client.received.length, 1, 'the CLOSING is all it got');
}

async function loginWorks(t: Test, tn: TestNode, uid: string, localAddress?: string): Promise<RawClient> {
  const client = await connect(t, tn.port, { localAddress });
  const response = await client.login(uid, tn.token(uid), 'dev-1');
  t.equal(response.loginResponse?.result, true, `a fresh login of ${uid}${localAddress ? ` from ${localAddress}` : ''} succeeds`);
  return client;
}

function captureLog() {
  const lines: Record<string, unknown>[] = [];
  return { log: pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) }), lines };
}

t.test('connections per address: one host cannot take the worker', async (t) => {
  const { log, lines } = captureLog();
  const tn = await startNode(t, { maxConnectionsPerIp: 4, maxUnauthenticated: 0 }, { log });
  const caps = tn.node.server.caps;
  const exchange = await chattingPair(t, tn);
  const idle = [await connect(t, tn.port), await connect(t, tn.port)];
  await until('four counted', () => caps.connectionsOf('127.0.0.1') === 4, DEFAULT_TIMEOUT_MS);

  // The attack: an attacker's host keeps opening connections.
  for (let i = 0; i < 20; i++) await refused(t, tn, 'SB_ERR_TOO_MANY_CONNECTIONS');
  t.equal(caps.connectionsOf('127.0.0.1'), 4, 'refused sockets are not counted');
  t.equal(tn.node.server.connectionCount, 4, 'and never became connections');
  await exchange('the logged-in users of that address');
  const other = await loginWorks(t, tn, 'carol', '127.0.0.2');
  t.equal(caps.connectionsOf('127.0.0.2'), 1, 'another address counts on its own');

  idle[0]!.destroy();
  await until('one fewer', () => caps.connectionsOf('127.0.0.1') === 3, DEFAULT_TIMEOUT_MS);
  await loginWorks(t, tn, 'dave');
  await refused(t, tn, 'SB_ERR_TOO_MANY_CONNECTIONS');
  await exchange('still');
  t.equal(other.isClosed, false);

  // The sweep (once a second) summarises them; the next summary comes a minute later at most.
  const summaries = () => lines.filter((l) => l.msg === 'connections refused at accept');
  await until('the refusals summarised in the log', () => summaries().length > 0, DEFAULT_TIMEOUT_MS);
  t.same(summaries().length, 1, 'one warning, not one line per socket');
  t.match(summaries()[0], { level: 40, unauthenticated: 0, lastAddress: '127.0.0.1' });
  // 20, or 21 when no sweep ran before the last refusal.
  t.ok([20, 21].includes(summaries()[0]!.perIp as number), `counting the refused sockets (${summaries()[0]!.perIp})`);
});

t.test('connections not logged in: idle sockets from many hosts cannot keep fresh logins out', async (t) => {
  const { log, lines } = captureLog();
  const tn = await startNode(t, { maxConnectionsPerIp: 0, maxUnauthenticated: 5, loginTimeoutMs: 60_000 }, { log });
  const caps = tn.node.server.caps;
  const exchange = await chattingPair(t, tn);
  t.equal(caps.unauthenticated, 0, 'logged-in connections do not count');

  // The attack: connections from many addresses that never log in, the cap's worth of them.
  const idle: RawClient[] = [];
  for (let i = 0; i < 5; i++) idle.push(await connect(t, tn.port, { localAddress: `127.0.1.${i + 1}` }));
  await until('five waiting to log in', () => caps.unauthenticated === 5, DEFAULT_TIMEOUT_MS);

  // A fresh login while the cap is full: its connection sheds the one that has waited longest.
  const carol = await loginWorks(t, tn, 'carol', '127.0.3.1');
  t.equal((await idle[0]!.nextClosing()).code, 'SB_ERR_SERVER_BUSY', 'the oldest idle socket was shed, with a CLOSING saying why');
  await idle[0]!.waitClosed();
  t.equal(caps.unauthenticated, 4, 'carol logged in: she no longer counts, and the shed one neither');

  // More of the attack: every new socket sheds the oldest waiting one, so the attacker's own go
  // first, and the count never passes the cap.
  const more: RawClient[] = [];
  for (let i = 0; i < 10; i++) {
    more.push(await connect(t, tn.port, { localAddress: `127.0.2.${i + 1}` }));
    t.ok(caps.unauthenticated <= 5, `never more than the cap waiting (${caps.unauthenticated})`);
  }
  for (const client of [...idle.slice(1), ...more.slice(0, 5)]) t.equal((await client.nextClosing()).code, 'SB_ERR_SERVER_BUSY');
  await until('five waiting: the newest', () => caps.unauthenticated === 5, DEFAULT_TIMEOUT_MS);
  await loginWorks(t, tn, 'dave', '127.0.3.2');
  await exchange('logged-in users are unaffected');
  t.equal(carol.isClosed, false, 'carol stays');

  const summaries = () => lines.filter((l) => l.msg === 'connections refused at accept');
  await until('the shed sockets summarised in the log', () => summaries().length > 0, DEFAULT_TIMEOUT_MS);
  t.ok((summaries()[0]!.shed as number) >= 10, `one warning counting them (${summaries()[0]!.shed})`);
});

t.test('address keys: IPv4 as is, IPv4-mapped as IPv4, IPv6 per /64', async (t) => {
  const cases: [string | undefined, string | undefined][] = [
    ['203.0.113.7', '203.0.113.7'],
    ['::ffff:203.0.113.7', '203.0.113.7'],
    ['::FFFF:203.0.113.7', '203.0.113.7'],
    ['2001:db8:1:2:3:4:5:6', '2001:db8:1:2::/64'],
    ['2001:db8:1:2::9', '2001:db8:1:2::/64'],
    ['2001:0DB8:0001:0002:ffff::1', '2001:db8:1:2::/64'],
    ['2001:db8::1', '2001:db8:0:0::/64'],
    ['::1', '0:0:0:0::/64'],
    ['fe80::1%eth0', 'fe80:0:0:0::/64'],
    ['2001:db8:1::', '2001:db8:1:0::/64'],
    [undefined, undefined],
    ['', undefined],
  ];
  for (const [address, key] of cases) t.equal(addressKey(address), key, `${address} → ${key}`);
  t.equal(addressKey('2001:db8:1:2:aaaa::1'), addressKey('2001:db8:1:2:bbbb::2'), 'one /64, one key');
  t.not(addressKey('2001:db8:1:2::1'), addressKey('2001:db8:1:3::1'), 'another /64, another key');
});

t.test('caps of 0 are off', async (t) => {
  const tn = await startNode(t, { maxConnectionsPerIp: 0, maxUnauthenticated: 0 });
  const clients: RawClient[] = [];
  for (let i = 0; i < 50; i++) clients.push(await connect(t, tn.port));
  await until('all fifty', () => tn.node.server.connectionCount === 50, DEFAULT_TIMEOUT_MS);
  t.equal(tn.node.server.caps.connectionsOf('127.0.0.1'), 0, 'addresses are not even read');
  await loginWorks(t, tn, 'alice');
});

t.test('a shed connection that does not read is closed all the same: it cannot keep its socket', async (t) => {
  // Output must stay queued in the worker, not fit in the kernel's buffers (4 MiB send, the
  // client's unread receive window): heartbeats are echoed before login, so a client that never
  // reads builds it up. The output bound and the drain timeout are set far beyond the test.
  const tn = await startNode(t, { maxConnectionsPerIp: 0, maxUnauthenticated: 1, loginTimeoutMs: 60_000, drainTimeoutMs: 60_000, maxOutboundBytes: 256 * 1024 * 1024 });
  const stuck = await connect(t, tn.port);
  stuck.socket.pause();
  const padding = 'x'.repeat(60_000);
  for (let i = 0; i < 400; i++) stuck.send({ type: HeadType.HEART_BEAT, sequence: i + 1, sessionId: '-1', heartBeat: { seq: i + 1, uid: 'raw', json: padding } });
  // All of it taken by the kernel on the client's side: the worker has read all but a few MiB
  // of the 24 MB and queued their echoes, far more than the kernel can hold for a socket nobody reads.
  if (stuck.socket.writableLength > 0) await once(stuck.socket, 'drain');
  await until('the stuck one counted', () => tn.node.server.caps.unauthenticated === 1, DEFAULT_TIMEOUT_MS);

  // A new connection sheds it; the CLOSING cannot be written behind its unread output.
  const fresh = await connect(t, tn.port);
  await until('its socket closed by the worker, not kept for as long as the client holds it', () => tn.node.server.connectionCount === 1, 10_000);
  t.equal(fresh.isClosed, false, 'the new connection stays');
  await loginWorks(t, tn, 'alice');
});
