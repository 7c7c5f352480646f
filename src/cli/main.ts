// The `switchboard` command: dispatches to a subcommand and turns errors into one clear line
// and a non-zero exit code.

import { readFileSync } from 'node:fs';
import { isSwitchboardError } from '../errors.js';
import { redactUrls } from '../redact.js';
import { chatCommand } from './commands/chat.js';
import { startCommand, workerCommand } from './commands/serve.js';
import { tokenCommand } from './commands/token.js';
import { gateCommand } from './commands/gate.js';

const COMMANDS: Record<string, { run: (argv: string[]) => Promise<void>; summary: string }> = {
  start: { run: startCommand, summary: 'run a complete single node: a worker and its HTTP gate in one process' },
  worker: { run: workerCommand, summary: 'run a worker node, alone or in a cluster (--zk)' },
  gate: { run: gateCommand, summary: 'run the HTTP gate of a cluster' },
  chat: { run: chatCommand, summary: 'interactive terminal chat' },
  token: { run: tokenCommand, summary: 'mint a login token for development' },
  // Loaded on use: a server process never loads the load generator.
  bench: { run: async (argv) => (await import('./commands/bench.js')).benchCommand(argv), summary: 'measure throughput, latency, memory and failover under load' },
};

function help(): string {
  const rows = Object.entries(COMMANDS).map(([name, c]) => `  ${name.padEnd(8)} ${c.summary}`);
  return (
    `usage: switchboard <command> [options]\n\ncommands:\n${rows.join('\n')}\n\n` +
    `switchboard help <command> (or switchboard <command> --help) shows a command's options.\n` +
    `switchboard --version prints the version.\n`
  );
}

/** The version in package.json (dist/cli/ and src/cli/ are both two levels down). */
export function version(): string {
  return (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
}

export async function main(argv: string[]): Promise<number> {
  let [name, ...rest] = argv;
  if (!name || name === '--help' || name === '-h' || (name === 'help' && rest.length === 0)) {
    process.stdout.write(help());
    return 0;
  }
  if (name === '--version' || name === '-v' || name === 'version') {
    process.stdout.write(`switchboard ${version()}\n`);
    return 0;
  }
  // `switchboard help worker` is `switchboard worker --help`.
  if (name === 'help') [name, rest] = [rest[0]!, ['--help']];
  const command = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
  if (!command) {
    process.stderr.write(`switchboard: unknown command "${name}"\n\n${help()}`);
    return 2;
  }
  try {
    await command.run(rest);
    return 0;
  } catch (err) {
    const code = isSwitchboardError(err) ? err.code : (err as NodeJS.ErrnoException).code;
    // A connection error can name the URL it was given, password included.
    process.stderr.write(`switchboard ${name}: ${code ? `${code} ` : ''}${redactUrls(String((err as Error).message))}\n`);
    return 1;
  }
}
