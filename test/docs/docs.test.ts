// Documentation is part of the product: every error code is documented, and every CLI flag
// appears in OPERATIONS.md with its environment variable.

import t from 'tap';
import { readFileSync } from 'node:fs';
import { ERROR_CODES } from '../../src/errors.js';
import { LIMIT_OPTIONS, LOG_OPTION, SECRET_OPTION } from '../../src/cli/common.js';
import { envName } from '../../src/cli/options.js';

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
  for (const flag of Object.keys({ ...LIMIT_OPTIONS, ...LOG_OPTION, ...SECRET_OPTION })) {
    t.ok(operations.includes(`\`--${flag}\``), `--${flag} is documented`);
    t.ok(operations.includes(envName(flag)), `${envName(flag)} is documented`);
  }
});

t.test('README quick start is the two commands', async (t) => {
  t.match(readme, /npm install && npm start/);
  t.match(readme, /npm test/);
});
