// Documentation is part of the product: every error code is documented, and every CLI flag
// appears in OPERATIONS.md with its environment variable.

import t from 'tap';
import { readFileSync } from 'node:fs';
import { ERROR_CODES } from '../../src/errors.js';
import { CLUSTER_OPTIONS, DEV_OPTION, GATE_OPTIONS, HEALTH_OPTIONS, INBOX_OPTIONS, LIMIT_OPTIONS, LOG_OPTION, PROBE_OPTIONS, RECIPIENT_OPTIONS, REDIS_TIMEOUT_OPTION, SECRET_OPTION } from '../../src/cli/common.js';
import { decodeMessage, decodeStoredRequest, encodeMessage, encodeMessageFrame, encodeMessageRequest, ownCopyBody, storedRequestBody } from '../../src/protocol/codec.js';
import { loginResponse } from '../../src/protocol/messages.js';
import { ConversationOp, HeadType, MsgType, Platform, ReceiptKind, type ImMessage } from '../../src/protocol/types.js';
import { receiptFrame } from '../../src/protocol/receipts.js';
import { editedBody, inboxEventBody, isInboxEvent, tombstoneBody } from '../../src/protocol/recall.js';
import { readEventBody } from '../../src/server/handlers/conversations.js';
import { listEntry } from '../../src/server/handlers/conversation-pages.js';
import { groupEntry, groupReadEventBody } from '../../src/server/handlers/group-conversations.js';
import { deliveryFits, deliveryFrame, storedResponseFrame } from '../../src/protocol/chat-frames.js';
import { encodeFrame } from '../../src/protocol/frame.js';
import { WebGate, DEFAULT_GATE_LIMITS } from '../../src/gate/web-gate.js';
import { MemoryUserStore } from '../../src/users/memory-user-store.js';
import { PasswordHasher } from '../../src/auth/password.js';
import { TokenSigner } from '../../src/auth/token.js';
import { StaticRegistry } from '../../src/registry/static-registry.js';
import { silentLogger } from '../../src/log.js';
import { startNode } from '../helpers/node.js';
import { isType } from '../../testkit/raw-client.js';
import { connect } from '../helpers/raw-session.js';
import { envName } from '../../src/cli/options.js';
import { BENCH_OPTIONS, SCENARIOS } from '../../src/cli/commands/bench.js';
import { peerProof, proofInput, type Transcript } from '../../src/cluster/peer-auth.js';
import { SWITCHBOARD_ACL } from '../helpers/redis.js';
import { parseRefreshToken } from '../../src/gate/refresh-tokens.js';

const read = (file: string) => readFileSync(new URL(`../../${file}`, import.meta.url), 'utf8');
const protocol = read('PROTOCOL.md');
const operations = read('OPERATIONS.md');
const readme = read('README.md');

t.test('every error code is documented in PROTOCOL.md or OPERATIONS.md', async (t) => {
  for (const code of Object.keys(ERROR_CODES)) {
    t.ok(protocol.includes(code) || operations.includes(code), `${code} is documented`);
  }
});

t.test('every worker flag is in OPERATIONS.md with its environment variable', async (t) => {
  const groups = { ...LIMIT_OPTIONS, ...LOG_OPTION, ...SECRET_OPTION, ...DEV_OPTION, ...INBOX_OPTIONS, ...RECIPIENT_OPTIONS, ...REDIS_TIMEOUT_OPTION, ...HEALTH_OPTIONS, ...CLUSTER_OPTIONS, ...GATE_OPTIONS, ...PROBE_OPTIONS };
  for (const flag of Object.keys(groups)) {
    t.ok(operations.includes(`\`--${flag}\``), `--${flag} is documented`);
    t.ok(operations.includes(envName(flag)), `${envName(flag)} is documented`);
  }
});

t.test('every bench scenario and flag is in bench/README.md', async (t) => {
  const benchReadme = read('bench/README.md');
  for (const name of Object.keys(SCENARIOS)) t.ok(benchReadme.includes(`switchboard bench ${name}`), `bench ${name} is documented`);
  for (const flag of Object.keys(BENCH_OPTIONS)) t.ok(benchReadme.includes(`\`--${flag}`), `--${flag} is documented`);
});

t.test('OPERATIONS.md gives the Redis ACL that test/cluster/redis-acl.test.ts runs a cluster on', async (t) => {
  const line = `ACL SETUSER switchboard ${SWITCHBOARD_ACL('sb:', 'PASSWORD').join(' ')}`;
  t.ok(operations.includes(line), line);
});

t.test('README quick start is the two commands', async (t) => {
  t.match(readme, /npm install && npm start/);
  t.match(readme, /npm test/);
});

t.test('the worked frame examples in PROTOCOL.md are what the codec produces', async (t) => {
  const hex = (b: Buffer) => b.toString('hex').replace(/(..)/g, '$1 ').trim();
  const heartbeat = hex(encodeMessageFrame({ type: HeadType.HEART_BEAT, sequence: 7 }));
  t.equal(heartbeat, '00 86 00 01 00 00 00 04 08 04 10 07');
  t.ok(protocol.includes(heartbeat), 'heartbeat frame as documented');
  const login = hex(encodeMessageFrame({ type: HeadType.LOGIN_REQUEST, sequence: 1, sessionId: '-1', loginRequest: { uid: 'a', token: 't' } }));
  t.equal(login, '00 86 00 01 00 00 00 0e 10 01 1a 02 2d 31 22 06 0a 01 61 1a 01 74');
  t.ok(protocol.includes('10 01 1a 02 2d 31 22 06 0a 01 61 1a 01 74') && protocol.includes('00 86 00 01 00 00 00 0e'), 'login frame as documented');
});

t.test('the worked peer handshake in PROTOCOL.md §10 is what the workers compute', async (t) => {
  const hex = (b: Buffer) => b.toString('hex').replace(/(..)/g, '$1 ').trim();
  const transcript: Transcript = {
    dialer: '0000000001',
    acceptor: '0000000002',
    dialerNonce: Buffer.from(Array.from({ length: 16 }, (_, i) => i)),
    acceptorNonce: Buffer.from(Array.from({ length: 16 }, (_, i) => 16 + i)),
  };
  t.ok(protocol.includes('Cluster secret `example-cluster-secret`, dialer `0000000001`, acceptor\n`0000000002`'), 'the inputs as documented');
  for (const [role, mac] of [
    ['challenge', '2b7cbc17fc4e018e57f99deaf2d504e8887b76c912b6fbe38d02b72be9de66e9'],
    ['auth', 'c24f45720556e1a03cd504043f60cb353da0106e930578cf4e51dda70964fb37'],
  ] as const) {
    t.ok(protocol.includes(hex(proofInput(role, transcript))), `the ${role} proof's input bytes as documented`);
    t.equal(peerProof('example-cluster-secret', role, transcript).toString('hex'), mac, `the ${role} proof`);
    t.ok(protocol.includes(mac), `the ${role} proof as documented`);
  }
});

t.test('the worked reset example in PROTOCOL.md is what the codec produces', async (t) => {
  const hex = (b: Uint8Array) => Buffer.from(b).toString('hex').replace(/(..)/g, '$1 ').trim();
  const request = hex(encodeMessage({ type: HeadType.LOGIN_REQUEST, sequence: 1, sessionId: '-1', loginRequest: { uid: 'bob', token: 't', acks: true, lastSeq: 812, inboxEpoch: 4403219023 } }));
  t.ok(protocol.includes(request), `login request body as documented: ${request}`);
  const response = hex(encodeMessage({ type: HeadType.LOGIN_RESPONSE, loginResponse: loginResponse(1, 's', { inboxHead: 3, syncFrom: 0, gap: false, epoch: 7730951121, reset: true }).loginResponse }).subarray(4));
  t.ok(protocol.includes(response), `loginResponse as documented: ${response}`);
});

t.test('every document the sources and tests cite is in the repository', async (t) => {
  const { readdirSync, existsSync } = await import('node:fs');
  const root = new URL('../../', import.meta.url);
  /** Each cited document, resolved: a path starting with `.` from the citing file, else from the root. */
  const cited = new Map<string, URL>();
  const walk = (dir: string): void => {
    for (const entry of readdirSync(new URL(dir, root), { withFileTypes: true })) {
      const path = `${dir}/${entry.name}`;
      if (entry.isDirectory()) walk(path);
      else if (/\.(ts|py|js|sh)$/.test(entry.name)) {
        const from = new URL(path, root);
        for (const m of readFileSync(from, 'utf8').matchAll(/[\w./-]+\.md\b/g)) cited.set(m[0], new URL(m[0], m[0].startsWith('.') ? from : root));
      }
    }
  };
  for (const dir of ['src', 'test', 'bin', 'scripts', 'bench', 'testkit']) if (existsSync(new URL(dir, root))) walk(dir);
  t.ok(cited.has('PROTOCOL.md'), 'the scan finds citations');
  for (const [file, url] of cited) t.ok(existsSync(url), `${file} exists`);
});

/** The text of PROTOCOL.md section `n` (from its heading to the next one of the same level). */
function section(n: number): string {
  const start = protocol.indexOf(`\n## ${n}. `);
  const end = protocol.indexOf('\n## ', start + 1);
  return protocol.slice(start, end < 0 ? undefined : end);
}
/** The text of subsection `### title` of PROTOCOL.md section `n` (to the next heading of its level or above). */
function subsection(n: number, title: string): string {
  const text = section(n);
  const start = text.indexOf(`\n### ${title}\n`);
  const end = text.indexOf('\n### ', start + 1);
  return start < 0 ? '' : text.slice(start, end < 0 ? undefined : end);
}
const hexOf = (b: Uint8Array) => Buffer.from(b).toString('hex').replace(/(..)/g, '$1 ').trim();

t.test('the worked stored_at and heartbeat_interval_ms examples in PROTOCOL.md are what the worker writes', async (t) => {
  const stored = encodeMessageRequest({ msgId: 42, from: 'alice', to: 'bob', content: 'hi', storedAt: 1_767_225_600_000 });
  t.ok(protocol.includes(hexOf(stored)), `stored body as documented: ${hexOf(stored)}`);
  t.ok(protocol.includes(hexOf(deliveryFrame(stored, 3))), 'delivery frame as documented');
  const login = encodeMessage({ type: HeadType.LOGIN_RESPONSE, loginResponse: loginResponse(1, 's', { inboxHead: 0, syncFrom: 0, gap: false, epoch: 0, reset: false }, 50_000).loginResponse });
  t.ok(protocol.includes(hexOf(login.subarray(4))), `loginResponse as documented: ${hexOf(login.subarray(4))}`);
});

t.test('the heartbeat echo of PROTOCOL.md §5 is what a worker sends back', async (t) => {
  const tn = await startNode(t);
  const client = await connect(t, tn.port);
  const sent = '08 04 10 07 4a 05 08 01 f0 01 01';
  const echoed = '08 04 10 07 4a 02 08 01';
  t.ok(section(5).includes(`\`${sent}\``) && section(5).includes(`\`${echoed}\``), 'both bodies are documented');
  client.sendRaw(encodeFrame(Buffer.from(sent.replace(/ /g, ''), 'hex')));
  const echo = await client.next(isType(HeadType.HEART_BEAT));
  t.equal(hexOf(encodeMessage(echo)), echoed, 'the echo, without the unknown field');
  t.notOk(protocol.includes('echo is byte for byte'), 'no longer said to be byte for byte');
});

t.test('PROTOCOL.md §4 defines every platform and msg_type value the code names', async (t) => {
  const s4 = section(4);
  const names: Record<string, string> = { UNKNOWN: 'unknown', IOS: 'iOS', ANDROID: 'Android', WEB: 'web', DESKTOP: 'desktop', BOT: 'a bot', CLI: 'command line' };
  for (const [name, value] of Object.entries(Platform)) t.ok(s4.includes(`${value} ${names[name]}`), `platform ${value} ${names[name]}`);
  const kinds: Record<string, string> = { TEXT: 'text', IMAGE: 'image', AUDIO: 'audio', VIDEO: 'video', FILE: 'file', LOCATION: 'location' };
  for (const [name, value] of Object.entries(MsgType)) t.ok(s4.includes(`${value} ${kinds[name]}`), `msg_type ${value} ${kinds[name]}`);
});

t.test('PROTOCOL.md §5 states the message size limit deliveryFits applies', async (t) => {
  const s5 = section(5);
  t.ok(s5.includes('**65 505 − len(to)**') && s5.includes('M − 31 − len(to)'), 'the stored-request limit');
  for (const to of [1, 3, 127]) {
    t.ok(deliveryFits(65_505 - to, to, 65_536) && !deliveryFits(65_506 - to, to, 65_536), `65 505 - ${to} fits, one more does not`);
    t.ok(deliveryFits(20_000 - 31 - to, to, 20_000) && !deliveryFits(20_000 - 30 - to, to, 20_000), `M - 31 - ${to}`);
  }
  // The worked example: alice to bob, msg_id 1, content only; stored_at as today's times take.
  const stored = (n: number) => encodeMessageRequest({ msgId: 1, from: 'alice', to: 'bob', content: 'x'.repeat(n), storedAt: Date.UTC(2026, 0, 1) }).length;
  t.ok(s5.includes('**65 476**') && s5.includes('65 489 − 2 × len(to) − len(from)'), 'the example and the formula');
  t.equal(65_489 - 2 * 3 - 5 - 2, 65_476, 'the formula gives the example');
  t.ok(deliveryFits(stored(65_476), 3, 65_536) && !deliveryFits(stored(65_477), 3, 65_536), 'and deliveryFits agrees');
  // With own copies: the copy (origin_device first) forwarded under the sender's uid must fit too.
  t.ok(s5.includes('**65 505 − max(len(to), len(from) + 3 + len(device_id))**') && s5.includes('**65 466**'), 'the own-copy limit and its example');
  const fitsWithCopy = (n: number) => {
    const body = encodeMessageRequest({ msgId: 1, from: 'alice', to: 'bob', content: 'x'.repeat(n), storedAt: Date.UTC(2026, 0, 1) });
    return deliveryFits(body.length, 3, 65_536) && deliveryFits(ownCopyBody(body, 'dev-1').length, 5, 65_536);
  };
  t.ok(fitsWithCopy(65_466) && !fitsWithCopy(65_467), 'the example is what deliveryFits gives the own copy');
  // msg_id 2, from 2 + 5, to 2 + 3, content's tag and 3-byte length 4, stored_at 8.
  t.equal(65_505 - Math.max(3, 5 + 3 + 5) - (2 + 7 + 5 + 4 + 8), 65_466, 'and what the formula gives');
});

t.test("PROTOCOL.md §5's size examples hold on a running node for a client that sends its session_id (§3)", async (t) => {
  // "from `alice` to `X` with `msg_id` 1 ... **N** bytes ...; N+1 <outcome> `CODE`"
  const examples = [...section(5).replace(/\s+/g, ' ').matchAll(/from `alice` to `([a-z.]+)` with `msg_id` 1[^*]*\*\*(\d\d) (\d{3})\*\* bytes(?: \(UTF-8\))?; \d\d \d{3} (?:is refused with|closes the connection with) `(SB_ERR_\w+)`/g)];
  t.equal(examples.length, 2, 'both examples are there');
  const tn = await startNode(t, { ownCopies: false });
  // One connection per attempt, so that msg_id 1 and a sequence below 128 hold as in the example.
  const attempt = async (to: string, length: number) => {
    const alice = await connect(t, tn.port);
    await alice.login('alice', tn.token('alice'), 'doc');
    alice.send({ type: HeadType.MESSAGE_REQUEST, sequence: 2, sessionId: alice.sessionId, messageRequest: { msgId: 1, from: 'alice', to, content: 'x'.repeat(length) } });
    const answer = await alice.next((m) => m.type === HeadType.MESSAGE_RESPONSE || m.type === HeadType.MESSAGE_NOTIFICATION);
    alice.destroy();
    if (answer.messageResponse) return answer.messageResponse.result ? 'stored' : answer.messageResponse.errorCode;
    return (JSON.parse(answer.notification?.json ?? '{}') as { data?: { code?: string } }).data?.code;
  };
  for (const [, to, high, low, code] of examples) {
    const largest = Number(`${high}${low}`);
    t.equal(await attempt(to!, largest), 'stored', `alice to ${to}: ${largest} bytes of content are stored`);
    t.equal(await attempt(to!, largest + 1), code, `one more: ${code}`);
  }
});

t.test("PROTOCOL.md §9 lists every peer close code, and §0 every status the gate answers", async (t) => {
  const s9 = section(9);
  for (const code of Object.keys(ERROR_CODES).filter((c) => c.startsWith('SB_ERR_PEER_'))) t.ok(s9.includes(`| \`${code}\` |`), `${code} in the close table`);

  const s0 = section(0);
  const rows = new Set([...s0.matchAll(/^  \| (\d{3}) \| ([^|]+) \|/gm)].flatMap(([, status, codes]) => [...codes!.matchAll(/SB_ERR_\w+/g)].map(([c]) => `${status} ${c}`)));
  const gate = (registration: boolean, registry = new StaticRegistry()) =>
    new WebGate({ host: '127.0.0.1', port: 0, registry, users: new MemoryUserStore(), signer: new TokenSigner('x'.repeat(32)), hasher: new PasswordHasher({ N: 2 ** 14, r: 8, p: 1 }), registration, limits: { ...DEFAULT_GATE_LIMITS, perIp: { max: 1000, windowMs: 60_000 } }, log: silentLogger() });
  const open = gate(true);
  const closed = gate(false);
  t.teardown(() => Promise.all([open.close(), closed.close()]));
  const json = { 'content-type': 'application/json' };
  const login = (body: object) => ({ url: '/api/login', headers: json, payload: JSON.stringify(body) });
  const cases: [WebGate, { method?: 'GET' | 'POST'; url: string; headers?: Record<string, string>; payload?: string }][] = [
    [open, { url: '/api/users', headers: json, payload: JSON.stringify({ username: 'alice', password: 'correct horse' }) }],
    [open, { url: '/api/users', headers: json, payload: JSON.stringify({ username: 'alice', password: 'correct horse' }) }],
    [open, { url: '/api/users', headers: json, payload: JSON.stringify({ username: 'a!', password: 'correct horse' }) }],
    [open, { url: '/api/users', headers: json, payload: JSON.stringify({ username: 'bobby', password: 'short' }) }],
    [open, login({ username: 'alice', password: 'wrong password', deviceId: 'd' })],
    [open, login({ username: 'alice', password: 'correct horse', deviceId: 'd' })],
    [open, login({ username: 'alice', password: 'correct horse', deviceId: '' })],
    [open, login({ username: 'alice', password: 'correct horse', deviceId: 'd'.repeat(129) })],
    [open, { url: '/api/login', headers: json, payload: '{"username": ' }],
    [open, { url: '/api/login', headers: json, payload: JSON.stringify({ username: 'x'.repeat(5000) }) }],
    [open, { url: '/api/login', payload: '{"username":"alice"}' }],
    [open, { url: '/api/login', headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: 'username=alice' }],
    [open, { method: 'GET', url: '/api/login' }],
    [closed, { url: '/api/users', headers: json, payload: JSON.stringify({ username: 'carol', password: 'correct horse' }) }],
    [open, { url: '/api/refresh', headers: json, payload: JSON.stringify({ refreshToken: 'rt1.forged.token' }) }],
  ];
  const seen = new Set<string>();
  for (const [g, request] of cases) {
    const r = await g.app.inject({ method: 'POST', ...request });
    if (r.statusCode < 300) continue;
    const answer = `${r.statusCode} ${(r.json() as { error: { code: string } }).error.code}`;
    seen.add(answer);
    t.ok(rows.has(answer), `${answer} (${request.url}) is in the §0 table`);
  }
  for (const expected of ['401 SB_ERR_REFRESH_INVALID', '400 SB_ERR_BAD_REQUEST', '413 SB_ERR_BAD_REQUEST', '415 SB_ERR_BAD_REQUEST', '503 SB_ERR_NO_WORKER', '401 SB_ERR_LOGIN_FAILED', '409 SB_ERR_USERNAME_TAKEN', '403 SB_ERR_REGISTRATION_CLOSED']) {
    t.ok(seen.has(expected), `the requests above met ${expected}`);
  }
  const exercisedElsewhere = ['429 SB_ERR_RATE_LIMITED', '500 SB_ERR_INTERNAL', '503 SB_ERR_STORE_UNAVAILABLE']; // test/gate
  // test/gate/token-lifecycle.test.ts
  exercisedElsewhere.push('401 SB_ERR_REFRESH_REUSED', '401 SB_ERR_ADMIN_AUTH_FAILED', '403 SB_ERR_TOKEN_MISMATCH');
  t.same([...rows].filter((r) => !seen.has(r) && !exercisedElsewhere.includes(r)), [], 'no row of the table the gate was not seen to answer');
});

/** Each code block of a section, as the bytes that lead its lines (the rest is annotation). */
function hexBlocks(text: string): string[] {
  // Fenced blocks without a language (a ```json block is not frames).
  return [...text.matchAll(/^```(\w*)\n([\s\S]*?)^```$/gm)].filter(([, lang]) => lang === '').map(([, , text]) =>
    text!
      .split('\n')
      .flatMap((line) => {
        const bytes: string[] = [];
        for (const token of line.trim().split(/\s+/)) {
          if (!/^[0-9a-f]{2}$/.test(token)) break;
          bytes.push(token);
        }
        return bytes;
      })
      .join(' '),
  );
}

t.test('the worked own-copy frames of PROTOCOL.md §14 are what the worker writes', async (t) => {
  const blocks = hexBlocks(section(14)).slice(0, 3);
  const login = hexOf(encodeMessageFrame({ type: HeadType.LOGIN_REQUEST, sequence: 1, sessionId: '-1', loginRequest: { uid: 'alice', deviceId: 'laptop', token: 'T', acks: true, ownCopies: true } }));
  const response = hexOf(storedResponseFrame(9, 's1', 12, false, 7));
  const own = ownCopyBody(storedRequestBody({ msgId: 42, to: 'bob', content: 'hi bob' }, 'alice', 1_764_672_000_000, 'bob'), 'phone');
  t.same(blocks, [login, response, hexOf(deliveryFrame(own, 7))], 'the login, the response and the delivery of the copy');
  t.equal(decodeMessage(deliveryFrame(own, 7).subarray(8)).messageRequest?.originDevice, 'phone', 'which decodes with origin_device');
});

t.test('the worked conversation frames of PROTOCOL.md §14 are what client and worker write', async (t) => {
  const blocks = hexBlocks(section(14)).slice(3, 8);
  const frame = (type: number, sequence: number, body: Partial<ImMessage>) => hexOf(encodeMessageFrame({ type, sequence, sessionId: 's1', ...body }));
  const stored = 1_764_672_000_000;
  const list = frame(HeadType.CONVERSATION_REQUEST, 5, { conversationRequest: { op: ConversationOp.LIST, limit: 20 } });
  // The entry as the worker builds it from alice's stored message 42, seq 9.
  const entry = listEntry({ conversation: 'alice', lastSeq: 9, lastAt: stored, readSeq: 7, unread: 2, last: { seq: 9, storedAt: stored, body: Buffer.from(storedRequestBody({ msgId: 42, to: 'bob', content: 'lunch?' }, 'alice', stored, 'bob')) } });
  const listed = frame(HeadType.CONVERSATION_RESPONSE, 5, { conversationResponse: { result: true, code: 0, info: 'ok', conversations: [entry] } });
  const read = frame(HeadType.CONVERSATION_REQUEST, 6, { conversationRequest: { op: ConversationOp.READ, peer: 'alice', seq: 9 } });
  const marked = frame(HeadType.CONVERSATION_RESPONSE, 6, { conversationResponse: { result: true, code: 0, info: 'ok', readSeq: 9, unread: 0, eventSeq: 10 } });
  const event = readEventBody({ uid: 'bob', deviceId: 'phone' }, 'alice', 9, 1_764_672_060_000);
  t.same(blocks, [list, listed, read, marked, hexOf(deliveryFrame(event, 10))], 'the list request and response, the read mark and its response, the read event');
  t.same(JSON.parse(decodeMessage(deliveryFrame(event, 10).subarray(8)).messageRequest!.event!), { type: 'read', peer: 'alice', seq: 9 });
});

t.test('the worked receipt frames of PROTOCOL.md §14 are what client and worker write', async (t) => {
  const blocks = hexBlocks(section(14)).slice(8, 11);
  const login = hexOf(encodeMessageFrame({ type: HeadType.LOGIN_REQUEST, sequence: 1, sessionId: '-1', loginRequest: { uid: 'alice', deviceId: 'phone', token: 'T', acks: true, receipts: true } }));
  const delivered = hexOf(receiptFrame({ kind: ReceiptKind.DELIVERED, peer: 'bob', seq: 12, msgId: 42, at: 1_764_672_030_000 }));
  const read = hexOf(receiptFrame({ kind: ReceiptKind.READ, peer: 'bob', seq: 12, msgId: 42, at: 1_764_672_060_000 }));
  t.same(blocks, [login, delivered, read], 'the login, a DELIVERED and a READ receipt');
});

t.test('the worked recall frames of PROTOCOL.md §14 are what client and worker write', async (t) => {
  const blocks = hexBlocks(subsection(14, 'Recall'));
  const frame = (type: number, sequence: number, body: Partial<ImMessage>) => hexOf(encodeMessageFrame({ type, sequence, sessionId: 's1', ...body }));
  const request = frame(HeadType.CONVERSATION_REQUEST, 8, { conversationRequest: { op: ConversationOp.RECALL, peer: 'bob', msgId: 42 } });
  const response = frame(HeadType.CONVERSATION_RESPONSE, 8, { conversationResponse: { result: true, code: 0, info: 'ok', seq: 12, eventSeq: 9 } });
  const stored = storedRequestBody({ msgId: 42, to: 'bob', content: 'hi bob', msgType: 1 }, 'alice', 1_764_672_000_000, 'bob');
  const event = inboxEventBody(JSON.stringify({ type: 'recall', peer: 'alice', seq: 12, msgId: '42' }), { from: 'alice', to: 'bob', storedAt: 1_764_672_090_000 });
  const tombstone = tombstoneBody(decodeStoredRequest(stored));
  t.same(blocks, [request, response, hexOf(deliveryFrame(event, 13)), hexOf(deliveryFrame(tombstone, 12))], 'the request, its answer, the recall event and the tombstone');
  t.ok(isInboxEvent(event), 'the event starts with its event field');
  t.match(decodeMessage(deliveryFrame(tombstone, 12).subarray(8)).messageRequest, { recalled: true, content: '[recalled]' });
});

t.test('the worked group conversation frames of PROTOCOL.md §14 are what client and worker write', async (t) => {
  const blocks = hexBlocks(section(14).slice(section(14).indexOf('### Groups in the chat list')));
  const frame = (type: number, sequence: number, body: Partial<ImMessage>) => hexOf(encodeMessageFrame({ type, sequence, sessionId: 's1', ...body }));
  const group = 'gabcdefgh2345';
  const stored = 1_764_672_000_000;
  const list = frame(HeadType.CONVERSATION_REQUEST, 5, { conversationRequest: { op: ConversationOp.LIST, limit: 20, groups: true } });
  // The entry as the worker builds it from the group's summary: alice's message 7, as the group chat handler stores it.
  const body = Buffer.from(storedRequestBody({ msgId: 7, group, content: 'at 6?' }, 'alice', stored, group));
  const entry = groupEntry({ id: group, name: 'climbing', memberCount: 3, dissolved: false, head: 7, last: { seq: 7, storedAt: stored, kind: 'message', sender: 'alice', body }, readSeq: 5, unread: 2 });
  const listed = frame(HeadType.CONVERSATION_RESPONSE, 5, { conversationResponse: { result: true, code: 0, info: 'ok', conversations: [entry] } });
  const read = frame(HeadType.CONVERSATION_REQUEST, 6, { conversationRequest: { op: ConversationOp.READ, group, seq: 7 } });
  const marked = frame(HeadType.CONVERSATION_RESPONSE, 6, { conversationResponse: { result: true, code: 0, info: 'ok', readSeq: 7, unread: 0, eventSeq: 10 } });
  const event = groupReadEventBody({ uid: 'bob', deviceId: 'phone' }, group, 7, 1_764_672_060_000);
  const readers = frame(HeadType.CONVERSATION_REQUEST, 9, { conversationRequest: { op: ConversationOp.READERS, group, seq: 7 } });
  const counted = frame(HeadType.CONVERSATION_RESPONSE, 9, {
    conversationResponse: { result: true, code: 0, info: 'ok', readers: [{ uid: 'alice', readSeq: 7 }, { uid: 'bob', readSeq: 7 }, { uid: 'carol', readSeq: 0 }], readCount: 1, memberCount: 2 },
  });
  t.same(blocks, [list, listed, read, marked, hexOf(deliveryFrame(event, 10)), readers, counted], 'the list with groups, the group read mark, its event, and READERS');
  const decoded = decodeMessage(deliveryFrame(event, 10).subarray(8)).messageRequest!;
  t.same(JSON.parse(decoded.event!), { type: 'read', group, seq: 7 });
  t.equal(decoded.group, '', 'the read event is an inbox entry, not a group delivery');
});

t.test('the worked edit frames of PROTOCOL.md §14 are what client and worker write', async (t) => {
  const blocks = hexBlocks(subsection(14, 'Edit'));
  const frame = (type: number, sequence: number, body: Partial<ImMessage>) => hexOf(encodeMessageFrame({ type, sequence, sessionId: 's1', ...body }));
  const request = frame(HeadType.CONVERSATION_REQUEST, 10, { conversationRequest: { op: ConversationOp.EDIT, peer: 'bob', msgId: 42, content: 'hi Bob!' } });
  const response = frame(HeadType.CONVERSATION_RESPONSE, 10, { conversationResponse: { result: true, code: 0, info: 'ok', seq: 12, eventSeq: 9 } });
  const stored = storedRequestBody({ msgId: 42, to: 'bob', content: 'hi bob', msgType: 1 }, 'alice', 1_764_672_000_000, 'bob');
  const event = inboxEventBody(JSON.stringify({ type: 'edit', peer: 'alice', seq: 12, msgId: '42' }), { from: 'alice', to: 'bob', storedAt: 1_764_672_090_000, content: 'hi Bob!', json: '' });
  const edited = editedBody(decodeStoredRequest(stored), 'hi Bob!', '');
  t.same(blocks, [request, response, hexOf(deliveryFrame(event, 13)), hexOf(deliveryFrame(edited, 12))], 'the request, its answer, the edit event and the edited message');
  t.ok(isInboxEvent(event), 'the event starts with its event field');
  t.match(decodeMessage(deliveryFrame(event, 13).subarray(8)).messageRequest, { content: 'hi Bob!', from: 'alice' }, 'the event carries the new content');
  t.match(decodeMessage(deliveryFrame(edited, 12).subarray(8)).messageRequest, { edited: true, content: 'hi Bob!', msgType: 1 });
});

t.test('the worked tokens of PROTOCOL.md §15 are what the gate mints', async (t) => {
  const s15 = protocol.slice(protocol.indexOf('## 15. Token lifecycle'));
  const access = /"token": "sb2\.([\w-]+)\./.exec(s15)![1]!;
  const minted = new TokenSigner({ signing: 'k2', keys: { k2: 'x'.repeat(32) } }).mint({ uid: 'alice', deviceId: 'phone', ttlMs: 900_000, now: 1764672000000 });
  t.equal(minted.split('.')[1], access, 'the access token payload of the example');
  t.ok(s15.includes(Buffer.from(access, 'base64url').toString()), 'and its decoded payload as the text shows it');
  const refresh = [...s15.matchAll(/"refreshToken": "rt1\.([\w-]+)\./g)].map((m) => m[1]!);
  t.same(refresh.map((p) => parseRefreshToken(`rt1.${p}.${'A'.repeat(43)}`)), [
    { uid: 'alice', familyId: '3q_glWdvWapR66VHzwvrFQ', generation: 1 },
    { uid: 'alice', familyId: '3q_glWdvWapR66VHzwvrFQ', generation: 1 },
    { uid: 'alice', familyId: '3q_glWdvWapR66VHzwvrFQ', generation: 2 },
  ], 'the refresh tokens: the login, the refresh request, the next generation');
  t.ok(s15.includes(ERROR_CODES.SB_ERR_REFRESH_REUSED.message), 'the reuse answer carries the catalogue message');
});
