// gateEndpoint: reconnects try the gate's fallback workers with the same token before logging
// in again, so a dead worker's clients do not all queue for password checks at the gate.

import t from 'tap';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { gateEndpoint } from '../../src/client/gate-login.js';

async function fakeGate(t: { teardown(fn: () => unknown): void }, expiresInMs = 3_600_000) {
  const state = { logins: 0 };
  const server = http.createServer((req, res) => {
    state.logins++;
    res.setHeader('content-type', 'application/json');
    res.end(
      JSON.stringify({
        uid: 'alice',
        token: `token-${state.logins}`,
        expiresAt: Date.now() + expiresInMs,
        worker: { id: 'a', host: '127.0.0.1', port: 1001 },
        workers: [
          { id: 'b', host: '127.0.0.1', port: 1002 },
          { id: 'c', host: '127.0.0.1', port: 1003 },
        ],
      }),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, state };
}

t.test('the fallbacks are tried with the same token, then the gate is asked again', async (t) => {
  const gate = await fakeGate(t);
  const next = gateEndpoint(gate.url, { username: 'alice', password: 'pw', deviceId: 'd' });
  const seen = [];
  for (let i = 0; i < 4; i++) seen.push(await next());
  t.same(
    seen.map((e) => [e.port, e.token]),
    [
      [1001, 'token-1'],
      [1002, 'token-1'],
      [1003, 'token-1'],
      [1001, 'token-2'],
    ],
  );
  t.equal(gate.state.logins, 2, 'one login per round of workers');
});

t.test('a token close to its expiry is not reused', async (t) => {
  const gate = await fakeGate(t, 30_000);
  const next = gateEndpoint(gate.url, { username: 'alice', password: 'pw', deviceId: 'd' });
  await next();
  await next();
  t.equal(gate.state.logins, 2, 'logged in again instead of reusing a token about to expire');
});
