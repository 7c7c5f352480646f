// GateGroups against a recording HTTP gate: each call's method, path, body and bearer token as
// PROTOCOL.md §0 gives them, the answers as typed results (`seq` undefined when nothing changed),
// and refusals as GateErrors of the gate's code and status.

import t, { type Test } from 'tap';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { GateGroups } from '../../src/client/gate-groups.js';
import { freePort } from '../../testkit/services.js';

interface Seen {
  method: string;
  url: string;
  authorization: string | undefined;
  body: unknown;
}

/** A gate answering each request with `answer(seen)`: [status, json]. */
async function recordingGate(t: Test, answer: (seen: Seen) => [number, unknown]): Promise<{ url: string; seen: Seen[] }> {
  const seen: Seen[] = [];
  const server = http.createServer((req, res) => {
    let raw = '';
    req.on('data', (chunk: Buffer) => (raw += chunk.toString('utf8')));
    req.on('end', () => {
      const s: Seen = { method: req.method!, url: req.url!, authorization: req.headers.authorization, body: raw === '' ? undefined : JSON.parse(raw) };
      seen.push(s);
      const [status, json] = answer(s);
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(json));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}

const GROUP = { id: 'gaaaaaaaaaaaa', name: 'team', meta: {}, owner: 'alice', createdAt: 1, memberCount: 2, head: 1, dissolved: false };

t.test('each call: its method, path and body, with the bearer token, and its typed answer', async (t) => {
  const gate = await recordingGate(t, (s) => {
    if (s.method === 'POST' && s.url === '/api/groups') return [201, { group: GROUP }];
    if (s.method === 'GET' && s.url.startsWith('/api/groups?')) return [200, { groups: [{ id: GROUP.id, role: 'owner' }], next: null }];
    if (s.method === 'GET' && s.url === `/api/groups/${GROUP.id}`) return [200, { group: { ...GROUP, role: 'owner', joined: 1, left: null } }];
    if (s.url.startsWith(`/api/groups/${GROUP.id}/members?`)) return [200, { members: [{ uid: 'alice', role: 'owner', joined: 1 }], next: 'alice' }];
    if (s.url.endsWith('/members') || s.url.endsWith('/members/remove')) return [200, { seq: 2, uids: ['bob'] }];
    if (s.url.endsWith('/leave')) return [200, { seq: null }];
    return [200, { seq: 5 }];
  });
  let calls = 0;
  const groups = new GateGroups(gate.url, () => `token-${++calls}`);

  t.same(await groups.createGroup('team', ['bob'], { topic: 'x' }), GROUP);
  t.match((await groups.listGroups({ after: 'g0', limit: 10 })).groups, [{ id: GROUP.id, role: 'owner' }]);
  t.equal((await groups.listGroups()).next, undefined, 'null next: the last page');
  t.match(await groups.getGroup(GROUP.id), { id: GROUP.id, role: 'owner' });
  t.match(await groups.members(GROUP.id, { limit: 1 }), { members: [{ uid: 'alice' }], next: 'alice' });
  t.same(await groups.addMembers(GROUP.id, ['bob']), { seq: 2, uids: ['bob'] });
  t.same(await groups.removeMembers(GROUP.id, ['bob']), { seq: 2, uids: ['bob'] });
  t.same(await groups.leave(GROUP.id), { seq: undefined }, 'null seq: nothing changed');
  t.same(await groups.setRole(GROUP.id, 'bob/x', 'admin'), { seq: 5 });
  t.same(await groups.transfer(GROUP.id, 'bob'), { seq: 5 });
  t.same(await groups.update(GROUP.id, { name: 'new' }), { seq: 5 });
  t.same(await groups.dissolve(GROUP.id), { seq: 5 });

  t.same(
    gate.seen.map((s) => [s.method, s.url, s.body]),
    [
      ['POST', '/api/groups', { name: 'team', members: ['bob'], meta: { topic: 'x' } }],
      ['GET', '/api/groups?after=g0&limit=10', undefined],
      ['GET', '/api/groups', undefined],
      ['GET', `/api/groups/${GROUP.id}`, undefined],
      ['GET', `/api/groups/${GROUP.id}/members?limit=1`, undefined],
      ['POST', `/api/groups/${GROUP.id}/members`, { uids: ['bob'] }],
      ['POST', `/api/groups/${GROUP.id}/members/remove`, { uids: ['bob'] }],
      ['POST', `/api/groups/${GROUP.id}/leave`, undefined],
      ['PUT', `/api/groups/${GROUP.id}/members/bob%2Fx/role`, { role: 'admin' }],
      ['POST', `/api/groups/${GROUP.id}/transfer`, { uid: 'bob' }],
      ['PATCH', `/api/groups/${GROUP.id}`, { name: 'new' }],
      ['DELETE', `/api/groups/${GROUP.id}`, undefined],
    ],
  );
  t.same(gate.seen.map((s) => s.authorization), gate.seen.map((_, i) => `Bearer token-${i + 1}`), 'the token asked for before every call');
});

t.test('allGroups follows the pages', async (t) => {
  const gate = await recordingGate(t, (s) => (s.url.includes('after=g2') ? [200, { groups: [{ id: 'g3', role: 'member' }] }] : [200, { groups: [{ id: 'g1', role: 'owner' }, { id: 'g2', role: 'admin' }], next: 'g2' }]));
  const groups = new GateGroups(gate.url, 'tok');
  t.same((await groups.allGroups()).map((g) => g.id), ['g1', 'g2', 'g3']);
  t.equal(gate.seen[0]!.authorization, 'Bearer tok');
});

t.test("a refusal is a GateError of the gate's code and status; an unknown code is SB_ERR_INTERNAL; no gate is SB_ERR_CLIENT_CONNECT_FAILED", async (t) => {
  const answers: [number, unknown][] = [
    [403, { error: { code: 'SB_ERR_GROUP_FORBIDDEN', message: 'admins only' } }],
    [401, { error: { code: 'SB_ERR_TOKEN_EXPIRED', message: 'expired' } }],
    [404, { error: { code: 'SB_ERR_GROUP_NOT_FOUND', message: 'no such group' } }],
    [418, { error: { code: 'SB_ERR_TEAPOT', message: '?' } }],
  ];
  const gate = await recordingGate(t, () => answers.shift()!);
  const groups = new GateGroups(gate.url, 'tok');
  await t.rejects(groups.addMembers('gaaaaaaaaaaaa', ['bob']), { code: 'SB_ERR_GROUP_FORBIDDEN', status: 403, message: 'admins only' });
  await t.rejects(groups.listGroups(), { code: 'SB_ERR_TOKEN_EXPIRED', status: 401 });
  await t.rejects(groups.getGroup('gaaaaaaaaaaaa'), { code: 'SB_ERR_GROUP_NOT_FOUND', status: 404 });
  await t.rejects(groups.leave('gaaaaaaaaaaaa'), { code: 'SB_ERR_INTERNAL', status: 418 });

  const port = await freePort();
  await t.rejects(new GateGroups(`http://127.0.0.1:${port}`, 'tok').listGroups(), { code: 'SB_ERR_CLIENT_CONNECT_FAILED', message: new RegExp(`ECONNREFUSED 127\\.0\\.0\\.1:${port}`) });
});
