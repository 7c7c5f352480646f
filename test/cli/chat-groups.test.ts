// The group side of `switchboard chat` as logic: what each line asks for, how deliveries and
// events read, group names resolved among the user's groups (unique, or refused with the ids),
// and the commands against a recording gate (the gate's group API as PROTOCOL.md §0 gives it).

import t, { type Test } from 'tap';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { GateGroups } from '../../src/client/gate-groups.js';
import { GroupCommands, GroupDirectory, formatGroupEvent, formatGroupMessage, parseChatLine } from '../../src/cli/commands/chat-groups.js';
import type { GroupEvent } from '../../src/groups/group-store.js';

const TEAM = 'gaaaaaaaaaaaa';
const OPS = 'gbbbbbbbbbbbb';

t.test('parseChatLine: every kind of line', async (t) => {
  const cases: [string, unknown][] = [
    ['', { kind: 'empty' }],
    ['   ', { kind: 'empty' }],
    ['/quit', { kind: 'quit' }],
    ['/help', { kind: 'help' }],
    ['@bob hello there', { kind: 'direct', to: 'bob', text: 'hello there' }],
    [`#${TEAM} hi all`, { kind: 'group', group: TEAM, text: 'hi all' }],
    ['#team  hi', { kind: 'group', group: 'team', text: 'hi' }],
    ['/groups', { kind: 'command', name: 'groups', args: [] }],
    ['/create team bob carol', { kind: 'command', name: 'create', args: ['team', 'bob', 'carol'] }],
    ['/create team', { kind: 'command', name: 'create', args: ['team'] }],
    ['/add team bob', { kind: 'command', name: 'add', args: ['team', 'bob'] }],
    ['/remove team bob carol', { kind: 'command', name: 'remove', args: ['team', 'bob', 'carol'] }],
    ['/members team', { kind: 'command', name: 'members', args: ['team'] }],
    ['/leave team', { kind: 'command', name: 'leave', args: ['team'] }],
  ];
  for (const [line, expected] of cases) t.same(parseChatLine(line), expected, JSON.stringify(line));
  const bad: [string, RegExp][] = [
    ['hello', /"@user message" or "#group message"/],
    ['@bob', /"@user message"/],
    ['#team', /"#group message"/],
    ['/add team', /usage: \/add GROUP user\.\.\./],
    ['/members', /usage: \/members GROUP/],
    ['/members a b', /usage: \/members GROUP/],
    ['/groups extra', /usage: \/groups/],
    ['/frobnicate', /unknown command \/frobnicate/],
    ['/constructor x', /unknown command/],
  ];
  for (const [line, reason] of bad) {
    const parsed = parseChatLine(line);
    t.equal(parsed.kind, 'bad', line);
    if (parsed.kind === 'bad') t.match(parsed.reason, reason, line);
  }
});

t.test('deliveries and events read as lines, with the name when known', async (t) => {
  t.equal(formatGroupMessage({ group: TEAM, from: 'bob', content: 'hi' }, 'team'), '[#team] bob: hi');
  t.equal(formatGroupMessage({ group: TEAM, from: 'bob', content: 'hi' }, undefined), `[#${TEAM}] bob: hi`, 'the id while the name is unknown');
  const events: [GroupEvent, string][] = [
    [{ type: 'created', actor: 'alice', uids: ['bob', 'carol'], name: 'team' }, '* alice created the group "team" with bob, carol'],
    [{ type: 'created', actor: 'alice', uids: [], name: 'solo' }, '* alice created the group "solo"'],
    [{ type: 'added', actor: 'alice', uids: ['bob'] }, '* alice added bob'],
    [{ type: 'removed', actor: 'alice', uids: ['bob', 'carol'] }, '* alice removed bob, carol'],
    [{ type: 'left', actor: 'bob' }, '* bob left'],
    [{ type: 'role', actor: 'alice', uids: ['bob'], role: 'admin' }, '* alice made bob an admin'],
    [{ type: 'role', actor: 'alice', uids: ['bob'], role: 'member' }, '* alice made bob a member'],
    [{ type: 'transferred', actor: 'alice', uids: ['bob'] }, '* alice handed the group over to bob'],
    [{ type: 'updated', actor: 'alice', name: 'new name' }, '* alice renamed the group "new name"'],
    [{ type: 'updated', actor: 'alice', meta: { topic: 'x' } }, "* alice changed the group's details"],
    [{ type: 'dissolved', actor: 'alice' }, '* alice dissolved the group'],
    [{ type: 'from-a-newer-server' as never, actor: 'alice' }, '* alice from-a-newer-server'],
  ];
  for (const [event, line] of events) t.equal(formatGroupEvent({ group: TEAM, actor: event.actor, event }, 'team'), `[#team] ${line}`, event.type);
});

t.test('GroupDirectory: ids as they are, names when unique (exactly, else ignoring case), learned from events', async (t) => {
  const d = new GroupDirectory();
  t.equal(d.resolve(TEAM), TEAM, 'an id needs no name');
  t.equal(d.resolve('team'), undefined);
  d.heard({ group: TEAM, event: { type: 'created', actor: 'alice', name: 'Team' } });
  t.equal(d.name(TEAM), 'Team');
  t.equal(d.resolve('team'), TEAM, 'ignoring case when no exact match');
  d.learn(OPS, 'team');
  t.equal(d.resolve('team'), OPS, 'the exact name first');
  t.throws(() => d.resolve('TEAM'), { code: 'SB_ERR_BAD_GROUP', message: new RegExp(`2 of your groups are named "TEAM": use the id \\(${TEAM}, ${OPS}\\)`) }, 'two by that name: the ids say which');
  d.heard({ group: OPS, event: { type: 'updated', actor: 'alice', name: 'ops' } });
  t.equal(d.resolve('team'), TEAM, 'a rename is heard');
  d.heard({ group: OPS, event: { type: 'added', actor: 'alice', uids: ['x'] } });
  t.equal(d.name(OPS), 'ops', 'other events name nothing');
});

interface Seen {
  method: string;
  url: string;
  body: unknown;
}

/** A gate whose answers come from `answer`, recording each request. */
async function gate(t: Test, answer: (s: Seen) => [number, unknown]): Promise<{ api: GateGroups; seen: Seen[] }> {
  const seen: Seen[] = [];
  const server = http.createServer((req, res) => {
    let raw = '';
    req.on('data', (c: Buffer) => (raw += c.toString()));
    req.on('end', () => {
      const s = { method: req.method!, url: req.url!, body: raw ? JSON.parse(raw) : undefined };
      seen.push(s);
      const [status, json] = answer(s);
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(json));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { api: new GateGroups(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, 'tok'), seen };
}

const view = (id: string, name: string) => ({ group: { id, name, meta: {}, owner: 'alice', createdAt: 1, memberCount: 2, head: 1, dissolved: false, role: 'owner', joined: 1 } });

function fakeGate(s: Seen): [number, unknown] {
  if (s.method === 'GET' && s.url === '/api/groups') return [200, { groups: [{ id: TEAM, role: 'owner' }, { id: OPS, role: 'member' }] }];
  if (s.method === 'GET' && s.url === `/api/groups/${TEAM}`) return [200, view(TEAM, 'team')];
  if (s.method === 'GET' && s.url === `/api/groups/${OPS}`) return [200, view(OPS, 'ops')];
  if (s.method === 'POST' && s.url === '/api/groups') return [201, { group: { ...view('gcccccccccccc', (s.body as { name: string }).name).group, memberCount: 3 } }];
  if (s.method === 'POST' && s.url === `/api/groups/${TEAM}/members`) return [200, { seq: 4, uids: (s.body as { uids: string[] }).uids }];
  if (s.url === `/api/groups/${TEAM}/members/remove`) return [200, { seq: null, uids: [] }];
  if (s.url.startsWith(`/api/groups/${TEAM}/members`)) {
    return s.url.includes('after=') ? [200, { members: [{ uid: 'carol', role: 'member', joined: 3 }] }] : [200, { members: [{ uid: 'alice', role: 'owner', joined: 1 }, { uid: 'bob', role: 'admin', joined: 1 }], next: 'bob' }];
  }
  if (s.url === `/api/groups/${OPS}/leave`) return [403, { error: { code: 'SB_ERR_GROUP_OWNER_CANNOT_LEAVE', message: 'transfer first' } }];
  return [404, { error: { code: 'SB_ERR_NOT_FOUND', message: 'no such route' } }];
}

t.test('the commands through the gate: /groups, /create, /add, /remove, /members (every page), /leave refused', async (t) => {
  const { api, seen } = await gate(t, fakeGate);
  const directory = new GroupDirectory();
  const commands = new GroupCommands(api, directory, (name) => name.toLowerCase());

  t.same(await commands.run('groups', []), [`* ${TEAM}  #team  owner`, `* ${OPS}  #ops  member`]);
  t.equal(directory.resolve('ops'), OPS, '/groups teaches the names');

  t.same(await commands.run('create', ['night-shift', 'Bob', 'carol']), ['* created #night-shift (gcccccccccccc) with 3 members']);
  t.same(seen.at(-1)!.body, { name: 'night-shift', members: ['bob', 'carol'] }, 'user names as the gate knows them');
  t.equal(directory.resolve('night-shift'), 'gcccccccccccc');

  t.same(await commands.run('add', ['team', 'dave']), ['* #team: added dave']);
  t.same(seen.at(-1), { method: 'POST', url: `/api/groups/${TEAM}/members`, body: { uids: ['dave'] } });
  t.same(await commands.run('remove', ['team', 'zed']), ['* #team: nothing changed (not members)']);
  t.same(await commands.run('members', ['team']), ['* #team: 3 members', '* alice  owner', '* bob  admin', '* carol  member']);
  await t.rejects(commands.run('leave', ['ops']), { code: 'SB_ERR_GROUP_OWNER_CANNOT_LEAVE', message: 'transfer first' });
  await t.rejects(commands.run('members', ['nosuch']), { code: 'SB_ERR_BAD_GROUP', message: /none of your groups is named "nosuch"/ });
});

t.test('a name not known yet is looked up at the gate once, then known', async (t) => {
  const { api, seen } = await gate(t, fakeGate);
  const commands = new GroupCommands(api, new GroupDirectory(), (n) => n);
  t.equal(await commands.resolve('team'), TEAM);
  const asked = seen.length;
  t.equal(await commands.resolve('team'), TEAM);
  t.equal(seen.length, asked, 'no second lookup');
  t.equal(await commands.resolve(OPS), OPS, 'an id is not looked up');
});

t.test('without --gate: group sends by id (or a name heard in an event) only, and the commands say they need it', async (t) => {
  const directory = new GroupDirectory();
  const commands = new GroupCommands(undefined, directory, (n) => n);
  t.equal(await commands.resolve(TEAM), TEAM);
  await t.rejects(commands.resolve('team'), { code: 'SB_ERR_BAD_GROUP', message: /use its id \(names need --gate\)/ });
  directory.heard({ group: TEAM, event: { type: 'created', actor: 'alice', name: 'team' } });
  t.equal(await commands.resolve('team'), TEAM);
  await t.rejects(commands.run('groups', []), { code: 'SB_ERR_BAD_REQUEST', message: '/groups needs --gate: groups are managed through the gate' });
});
