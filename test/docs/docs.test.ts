// Documentation is part of the product: every error code is documented, and every CLI flag
// appears in OPERATIONS.md with its environment variable.

import t from 'tap';
import { readFileSync } from 'node:fs';
import { ERROR_CODES } from '../../src/errors.js';
import { CLUSTER_OPTIONS, GATE_OPTIONS, HEALTH_OPTIONS, INBOX_OPTIONS, LIMIT_OPTIONS, LOG_OPTION, PROBE_OPTIONS, REDIS_TIMEOUT_OPTION, SECRET_OPTION } from '../../src/cli/common.js';
import { encodeMessageFrame } from '../../src/protocol/codec.js';
import { HeadType } from '../../src/protocol/types.js';
import { envName } from '../../src/cli/options.js';
import { BENCH_OPTIONS, SCENARIOS } from '../../src/cli/commands/bench.js';

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
  const groups = { ...LIMIT_OPTIONS, ...LOG_OPTION, ...SECRET_OPTION, ...INBOX_OPTIONS, ...REDIS_TIMEOUT_OPTION, ...HEALTH_OPTIONS, ...CLUSTER_OPTIONS, ...GATE_OPTIONS, ...PROBE_OPTIONS };
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
