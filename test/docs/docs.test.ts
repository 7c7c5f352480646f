// Documentation is part of the product: every error code is documented, and every CLI flag
// appears in OPERATIONS.md with its environment variable.

import t from 'tap';
import { readFileSync } from 'node:fs';
import { ERROR_CODES } from '../../src/errors.js';
import { CLUSTER_OPTIONS, DEV_OPTION, GATE_OPTIONS, HEALTH_OPTIONS, INBOX_OPTIONS, LIMIT_OPTIONS, LOG_OPTION, PROBE_OPTIONS, RECIPIENT_OPTIONS, REDIS_TIMEOUT_OPTION, SECRET_OPTION } from '../../src/cli/common.js';
import { encodeMessage, encodeMessageFrame } from '../../src/protocol/codec.js';
import { loginResponse } from '../../src/protocol/messages.js';
import { HeadType } from '../../src/protocol/types.js';
import { envName } from '../../src/cli/options.js';
import { BENCH_OPTIONS, SCENARIOS } from '../../src/cli/commands/bench.js';
import { peerProof, proofInput, type Transcript } from '../../src/cluster/peer-auth.js';
import { SWITCHBOARD_ACL } from '../helpers/redis.js';

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
  const cited = new Set<string>();
  const walk = (dir: string): void => {
    for (const entry of readdirSync(new URL(dir, root), { withFileTypes: true })) {
      const path = `${dir}/${entry.name}`;
      if (entry.isDirectory()) walk(path);
      else if (/\.(ts|py|js|sh)$/.test(entry.name)) for (const m of readFileSync(new URL(path, root), 'utf8').matchAll(/[\w./-]+\.md\b/g)) cited.add(m[0]);
    }
  };
  for (const dir of ['src', 'test', 'bin', 'scripts', 'bench']) if (existsSync(new URL(dir, root))) walk(dir);
  t.ok(cited.has('PROTOCOL.md'), 'the scan finds citations');
  for (const file of cited) t.ok(existsSync(new URL(file.replace(/^\.?\//, ''), root)), `${file} exists`);
});
