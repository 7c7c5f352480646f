// `switchboard chat`: an interactive terminal client. `@bob hello` sends, incoming messages
// print as they arrive, `/quit` logs out. With --gate it logs in with a password through the
// HTTP gate (registering first with --register) and goes to the worker the gate names.

import readline from 'node:readline';
import { TokenSigner, DEV_SECRET } from '../../auth/token.js';
import { ImClient, type ImClientOptions } from '../../client/im-client.js';
import { gateEndpoint, registerThroughGate } from '../../client/gate-login.js';
import { SwitchboardError, isSwitchboardError } from '../../errors.js';
import { PORT, parseOptions, usage, type OptionSpecs } from '../options.js';
import { SECRET_OPTION } from '../common.js';
import { normalizeUsername } from '../../auth/password.js';

const OPTIONS = {
  user: { type: 'string', description: 'your user id (required)' },
  host: { type: 'string', description: 'worker address', default: '127.0.0.1' },
  port: { ...PORT, description: 'worker port', default: 9000 },
  device: { type: 'string', description: 'device id: the chat resumes where this device left off', default: 'cli' },
  token: { type: 'string', secret: true, description: 'login token; unset: minted locally with --secret' },
  gate: { type: 'string', description: 'gate URL (e.g. http://127.0.0.1:8080): log in with a password instead of a token' },
  password: { type: 'string', secret: true, description: 'with --gate: the password (unset: asked for)' },
  register: { type: 'boolean', description: 'with --gate: create the account first (an existing one is just logged in to)' },
  ...SECRET_OPTION,
} as const satisfies OptionSpecs;

const SUMMARY = 'Interactive chat: "@bob hello" sends to bob, "/quit" logs out.';

export async function chatCommand(argv: string[]): Promise<void> {
  const o = parseOptions(OPTIONS, argv);
  if (o.help) {
    process.stdout.write(usage('chat', SUMMARY, OPTIONS));
    return;
  }
  if (!o.user) throw new SwitchboardError('SB_ERR_CONFIG', '--user is required');
  const deviceId = o.device;
  // On a terminal the password is read before readline takes over the input, so it is not
  // echoed; piped input keeps one reader, so no line is lost between two of them.
  const typedPassword = o.gate && o.password === undefined && process.stdin.isTTY ? await askHidden('password: ') : undefined;
  const rl = readline.createInterface({ input: process.stdin, output: process.stdout, prompt: `${o.user}> ` });
  const abandon = (err: unknown): never => {
    // readline holds stdin open: without this, a refused login or registration printed its
    // error and then left the process waiting on the terminal.
    rl.close();
    process.stdin.destroy();
    throw err;
  };
  let where: Pick<ImClientOptions, 'host' | 'port' | 'token' | 'endpoint'>;
  let uid = o.user;
  if (o.gate) {
    const password = o.password ?? typedPassword ?? (await new Promise<string>((resolve) => rl.question('password: ', resolve)));
    uid = o.user.toLowerCase();
    if (o.register) {
      try {
        await registerThroughGate(o.gate, o.user, password);
      } catch (err) {
        if (!isSwitchboardError(err) || err.code !== 'SB_ERR_USERNAME_TAKEN') abandon(err);
      }
    }
    where = { endpoint: gateEndpoint(o.gate, { username: o.user, password, deviceId }) };
  } else {
    where = { host: o.host, port: o.port, token: o.token ?? new TokenSigner(o.secret ?? DEV_SECRET).mint({ uid: o.user, deviceId, ttlMs: 86_400_000 }) };
  }
  const client = new ImClient({ ...where, uid, deviceId });
  const print = (line: string) => {
    readline.clearLine(process.stdout, 0);
    readline.cursorTo(process.stdout, 0);
    process.stdout.write(`${line}\n`);
    rl.prompt(true);
  };

  client.on('message', (m) => print(`[${new Date(m.time || Date.now()).toLocaleTimeString()}] ${m.from}: ${m.content}`));
  client.on('closing', ({ code, reason }) => print(`* server closing the connection: ${code} ${reason}`));
  client.on('status', (status) => {
    if (status === 'reconnecting') print('* connection lost, reconnecting...');
  });
  client.on('login', () => print(`* logged in as ${uid} (device ${deviceId})`));
  client.on('gap', ({ from }) => print(`* older messages were pruned by the server; showing from #${from + 1}`));
  // The SDK has forgotten the old position; what follows may repeat messages shown before.
  client.on('reset', () => print('* the server lost or rewound its copy of your inbox: showing everything it holds again'));

  await client.connect().catch(abandon);
  rl.prompt();
  const done = new Promise<void>((resolve) => rl.on('close', resolve));
  rl.on('line', (line) => {
    const text = line.trim();
    if (text === '/quit') {
      rl.close();
      return;
    }
    const match = /^@(\S+)\s+(.+)$/.exec(text);
    if (!match) {
      if (text) print('* type "@user message" to send, "/quit" to leave');
      else rl.prompt();
      return;
    }
    // Through the gate the names are switchboard accounts: `@Alice` is alice, as the gate
    // folds names. With a token the server decides (it folds them where it checks accounts).
    const to = o.gate ? (normalizeUsername(match[1]!) ?? match[1]!) : match[1]!;
    client.send(to, match[2]!).then(
      () => rl.prompt(),
      (err: unknown) => print(`* not sent: ${isSwitchboardError(err) ? `${err.code} ${err.message}` : String(err)}`),
    );
  });
  await done;
  // rl.close() only pauses stdin; a piped stdin left open would keep the process alive.
  process.stdin.destroy();
  await client.logout();
}

/** Reads a line from the terminal without echoing it (a password). */
function askHidden(prompt: string): Promise<string> {
  const stdin = process.stdin;
  process.stdout.write(prompt);
  stdin.setRawMode(true);
  stdin.resume();
  return new Promise((resolve) => {
    let value = '';
    const onData = (chunk: Buffer) => {
      for (const ch of chunk.toString('utf8')) {
        if (ch === '\r' || ch === '\n') {
          stdin.off('data', onData);
          stdin.setRawMode(false);
          stdin.pause();
          process.stdout.write('\n');
          resolve(value);
          return;
        }
        if (ch === '\u0003') process.kill(process.pid, 'SIGINT');
        else if (ch === '\u007f' || ch === '\b') value = value.slice(0, -1);
        else value += ch;
      }
    };
    stdin.on('data', onData);
  });
}
