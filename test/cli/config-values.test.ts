// Every flag and variable has a type and a range, checked before a command starts anything:
// the parser's rules table-driven (parseOptions), then the values of issue 11 on the real
// `switchboard` command (bin/switchboard.js runs the compiled dist/: `npm run build` first).

import t, { type Test } from 'tap';
import { TokenSigner } from '../../src/auth/token.js';
import { PORT, count, ms, parseOptions, type OptionSpecs } from '../../src/cli/options.js';
import { LOG_LEVELS } from '../../src/cli/common.js';
import { CliProcess } from '../helpers/cli-process.js';
import { catchError } from '../helpers/catch-error.js';

t.setTimeout(180_000);

const SPECS = {
  port: { ...PORT, description: 'a port', default: 9000 },
  wait: { ...ms(), description: 'a delay' },
  burst: { ...count(1, 10), description: 'a count' },
  rate: { type: 'number', above: 0, description: 'a rate' },
  quiet: { type: 'boolean', description: 'a switch' },
  level: { type: 'string', choices: ['info', 'debug'], description: 'a level', default: 'info' },
  token: { type: 'string', secret: true, description: 'a secret' },
} as const satisfies OptionSpecs;

const refusal = (argv: string[], env: NodeJS.ProcessEnv = {}) => catchError(() => parseOptions(SPECS, argv, env)) as { code?: string; message?: string } | undefined;

t.test('numbers: whole where they must be, within their range, in decimal', async (t) => {
  for (const [argv, message] of [
    [['--port', '70000'], '--port must be a whole number from 0 to 65535, got "70000"'],
    [['--port', '9000.5'], '--port must be a whole number from 0 to 65535, got "9000.5"'],
    [['--port=-1'], '--port must be a whole number from 0 to 65535, got "-1"'],
    [['--port', '0x10'], '--port must be a whole number from 0 to 65535, got "0x10"'],
    [['--port', ' 80'], '--port must be a whole number from 0 to 65535, got " 80"'],
    [['--port', ''], '--port must be a whole number from 0 to 65535, got ""'],
    [['--wait', '0'], '--wait must be a whole number from 1 to 2147483647, got "0"'],
    [['--wait', '2147483648'], '--wait must be a whole number from 1 to 2147483647, got "2147483648"'],
    [['--burst', '11'], '--burst must be a whole number from 1 to 10, got "11"'],
    [['--rate', '0'], '--rate must be a number above 0, got "0"'],
    [['--rate', 'Infinity'], '--rate must be a number above 0, got "Infinity"'],
  ] as const) {
    t.match(refusal([...argv]), { code: 'SB_ERR_CONFIG', message }, argv.join(' '));
  }
  t.match(parseOptions(SPECS, ['--port', '0', '--rate', '0.5', '--wait', '1e3'], {}), { port: 0, rate: 0.5, wait: 1000 }, 'in range: taken');
});

t.test('a variable is named as the variable, with its flag; an empty one is unset', async (t) => {
  t.match(refusal([], { SWITCHBOARD_PORT: '70000' }), { code: 'SB_ERR_CONFIG', message: 'SWITCHBOARD_PORT (--port) must be a whole number from 0 to 65535, got "70000"' });
  t.equal(parseOptions(SPECS, [], { SWITCHBOARD_PORT: '' }).port, 9000, 'SWITCHBOARD_PORT= is the default, not 0');
  t.equal(parseOptions(SPECS, [], { SWITCHBOARD_LEVEL: '' }).level, 'info');
  t.equal(parseOptions(SPECS, ['--port', '1'], { SWITCHBOARD_PORT: '2' }).port, 1, 'the flag wins');
});

t.test('booleans take the usual spellings in variables, and nothing else', async (t) => {
  for (const word of ['true', 'TRUE', 'yes', 'Yes', 'on', '1']) t.equal(parseOptions(SPECS, [], { SWITCHBOARD_QUIET: word }).quiet, true, word);
  for (const word of ['false', 'no', 'off', 'OFF', '0']) t.equal(parseOptions(SPECS, [], { SWITCHBOARD_QUIET: word }).quiet, false, word);
  t.equal(parseOptions(SPECS, [], { SWITCHBOARD_QUIET: '' }).quiet, false, 'empty: unset');
  t.match(refusal([], { SWITCHBOARD_QUIET: 'maybe' }), { code: 'SB_ERR_CONFIG', message: 'SWITCHBOARD_QUIET (--quiet) must be true, false, yes, no, on, off, 1 or 0, got "maybe"' });
  t.match(refusal(['--quiet=yes']), { code: 'SB_ERR_CONFIG', message: '--quiet takes no value (it is on when given, off when not)' });
});

t.test('strings: choices, no empty flag values, and a secret is never repeated', async (t) => {
  t.match(refusal(['--level', 'loud']), { code: 'SB_ERR_CONFIG', message: '--level must be one of info, debug, got "loud"' });
  t.match(refusal(['--level', '']), { code: 'SB_ERR_CONFIG', message: /^--level was given an empty value: leave it out for the default, or give one of info, debug$/ });
  t.match(refusal(['--token', '']), { code: 'SB_ERR_CONFIG', message: /^--token was given an empty value/ });
});

t.test('unknown options and missing values are SB_ERR_CONFIG too', async (t) => {
  t.match(refusal(['--frob']), { code: 'SB_ERR_CONFIG', message: /^unknown option --frob / });
  t.match(refusal(['--port']), { code: 'SB_ERR_CONFIG', message: '--port needs a value' });
  t.match(refusal(['--port', '-1']), { code: 'SB_ERR_CONFIG', message: '--port needs a value (one that starts with a dash is written --port=-value)' });
  t.match(refusal(['9000']), { code: 'SB_ERR_CONFIG', message: /^unexpected argument "9000"/ });
});

t.test("--log-level is checked against pino's levels", async (t) => {
  t.same(LOG_LEVELS, ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']);
});

async function run(t: Test, args: string[], env: Record<string, string> = {}) {
  const p = new CliProcess(t, args.join(' '), args, env);
  p.child.stdin.end();
  const exit = await p.exit(60_000);
  return { ...exit, stdout: p.stdout, stderr: p.stderr, lines: p.lines };
}

t.test('the values of issue 11 stop the command before it starts anything', async (t) => {
  for (const [args, env, message] of [
    [['start', '--port', '0', '--gate-port', '0', '--max-frame-length', '0'], {}, '--max-frame-length must be a whole number from 256 to 16777216, got "0"'],
    [['start', '--port', '0', '--gate-port', '0', '--max-devices', '0'], {}, '--max-devices must be a whole number from 1 to 1000, got "0"'],
    [['worker', '--port', '70000'], {}, '--port must be a whole number from 0 to 65535, got "70000"'],
    [['worker', '--port', '9000.5'], {}, '--port must be a whole number from 0 to 65535, got "9000.5"'],
    [['start', '--port', '0', '--gate-port', '0'], { SWITCHBOARD_NO_GATE: 'maybe' }, 'SWITCHBOARD_NO_GATE (--no-gate) must be true, false, yes, no, on, off, 1 or 0, got "maybe"'],
    [['worker', '--port', '0', '--log-level', 'loud'], {}, '--log-level must be one of fatal, error, warn, info, debug, trace, silent, got "loud"'],
    // Nothing is connected to before the values are checked: this Redis does not exist.
    [['worker', '--port', '0', '--redis', 'redis://127.0.0.1:1', '--sync-batch', '0'], {}, '--sync-batch must be a whole number from 1 to 10000, got "0"'],
    [['worker', '--port', '0', '--redis', '127.0.0.1:6379'], {}, '--redis must be a redis:// or rediss:// URL'],
    [['gate', '--port', '0', '--zk', '127.0.0.1', '--redis', 'redis://127.0.0.1:1'], {}, '--zk must be host:port[,host:port...]'],
    [['chat', '--user', 'alice', '--port', '70000'], {}, '--port must be a whole number from 0 to 65535, got "70000"'],
    [['bench', 'chat', '--connections', '0'], {}, '--connections must be a whole number of at least 1, got "0"'],
  ] as const) {
    const r = await run(t, [...args], env);
    const what = `${args.join(' ')} ${Object.entries(env).map(([k, v]) => `${k}=${v}`).join(' ')}`;
    t.same({ code: r.code, signal: r.signal }, { code: 1, signal: null }, `${what}: exit 1`);
    t.match(r.stderr, `switchboard ${args[0]}: SB_ERR_CONFIG ${message}`, `${what}: names the flag, the value and what is allowed`);
    t.same(r.lines.filter((l) => /listening/.test(String(l.msg))), [], `${what}: nothing listened`);
  }
});

t.test('a redis URL with a password is refused without repeating it', async (t) => {
  const r = await run(t, ['worker', '--port', '0', '--redis', 'http://app:hunter2-not-shown@127.0.0.1:6379']);
  t.equal(r.code, 1);
  t.match(r.stderr, 'SB_ERR_CONFIG --redis must be a redis:// or rediss:// URL');
  t.notMatch(r.stderr, 'hunter2-not-shown');
});

t.test('an empty variable means unset; booleans take yes', async (t) => {
  const secret = 'config-values-test-secret-of-32-characters';
  const token = await run(t, ['token', '--user', 'alice'], { SWITCHBOARD_TTL_S: '', SWITCHBOARD_SECRET: secret });
  t.equal(token.code, 0, 'SWITCHBOARD_TTL_S= is the default lifetime, not 0');
  t.ok(new TokenSigner(secret).verify(token.stdout.trim()).expiresAt > Date.now() + 3_600_000, 'a day');

  const start = new CliProcess(t, 'start, SWITCHBOARD_NO_GATE=yes', ['start', '--port', '0', '--gate-port', '0', '--log-level', 'info'], { SWITCHBOARD_NO_GATE: 'yes' });
  await start.waitForLog({ msg: 'worker listening' });
  await start.waitFor('the banner', () => start.stderr.includes('switchboard is running'));
  t.notOk(start.lines.some((l) => l.msg === 'gate listening'), 'yes means yes: no gate');
  t.match(start.stderr, '(gate off)');
  t.same(await start.stop(), { code: 0, signal: null });
});

t.test('missing cluster configuration: the error names only what is missing', async (t) => {
  const secret = 'config-values-test-secret-of-32-characters';
  const worker = await run(t, ['worker', '--port', '0', '--zk', '127.0.0.1:1', '--redis', 'redis://127.0.0.1:1', '--secret', secret, '--zk-auth', 'sb-worker:pw']);
  t.equal(worker.code, 1);
  t.match(worker.stderr, /^switchboard worker: SB_ERR_CONFIG cluster mode \(--zk\) needs --cluster-secret \(or SWITCHBOARD_CLUSTER_SECRET\)$/m, 'the cluster secret, and not --redis, which was given');
  const both = await run(t, ['worker', '--port', '0', '--zk', '127.0.0.1:1']);
  t.match(both.stderr, 'SB_ERR_CONFIG cluster mode (--zk) needs --redis (or SWITCHBOARD_REDIS) and --cluster-secret (or SWITCHBOARD_CLUSTER_SECRET)', 'both, when both are missing');
  const gate = await run(t, ['gate', '--port', '0', '--zk', '127.0.0.1:1', '--secret', secret]);
  t.match(gate.stderr, /^switchboard gate: SB_ERR_CONFIG the gate needs --redis \(or SWITCHBOARD_REDIS\)$/m, 'the gate: --redis, not --zk');
});
