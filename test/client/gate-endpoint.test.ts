// gateEndpoint: reconnects try the gate's fallback workers with the same token before asking the
// gate again, so a dead worker's clients do not all queue at the gate; asking again is a
// refresh, never the password a second time.

import t from 'tap';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { gateEndpoint } from '../../src/client/gate-session.js';

async function fakeGate(t: { teardown(fn: () => unknown): void }, expiresInMs = 3_600_000) {
  const state = { logins: 0, paths: [] as string[], bodies: [] as unknown[] };
  const server = http.createServer((req, res) => {
    state.logins++;
    state.paths.push(req.url ?? '');
    let body = '';
    req.on('data', (chunk) => (body += chunk));
    req.on('end', () => {
      state.bodies.push(JSON.parse(body));
      res.setHeader('content-type', 'application/json');
      res.end(
        JSON.stringify({
          uid: 'alice',
          token: `token-${state.logins}`,
          expiresAt: Date.now() + expiresInMs,
          refreshToken: `refresh-${state.logins}`,
          refreshExpiresAt: Date.now() + 86_400_000,
          worker: { id: 'a', host: '127.0.0.1', port: 1001 },
          workers: [
            { id: 'b', host: '127.0.0.1', port: 1002 },
            { id: 'c', host: '127.0.0.1', port: 1003 },
          ],
        }),
      );
    });
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
  t.equal(gate.state.logins, 2, 'one request to the gate per round of workers');
  t.same(gate.state.paths, ['/api/login', '/api/refresh'], 'the second is a refresh');
  t.same(gate.state.bodies[1], { refreshToken: 'refresh-1' }, 'with the refresh token, and no password');
});

t.test('a worker refusing the token as expired makes the next attempt refresh it', async (t) => {
  const gate = await fakeGate(t);
  const next = gateEndpoint(gate.url, { username: 'alice', password: 'pw', deviceId: 'd' });
  t.equal((await next()).token, 'token-1');
  t.equal((await next({ reason: 'SB_ERR_CLIENT_CONNECTION_LOST' })).token, 'token-1', 'a lost connection: the same token');
  t.equal((await next({ reason: 'SB_ERR_TOKEN_EXPIRED' })).token, 'token-2', 'refused as expired: refreshed');
  t.same(gate.state.paths, ['/api/login', '/api/refresh']);
});

t.test('a token close to its expiry is not reused', async (t) => {
  const gate = await fakeGate(t, 50);
  const next = gateEndpoint(gate.url, { username: 'alice', password: 'pw', deviceId: 'd' });
  await next();
  await new Promise((resolve) => setTimeout(resolve, 60));
  await next();
  t.equal(gate.state.logins, 2, 'refreshed instead of reusing a token about to expire');
  t.same(gate.state.paths, ['/api/login', '/api/refresh']);
});
