// The `switchboard` command: dispatches to a subcommand and turns errors into one clear line
// and a non-zero exit code.

import { isSwitchboardError } from '../errors.js';
import { redactUrls } from '../redact.js';
import { chatCommand } from './commands/chat.js';
import { startCommand, workerCommand } from './commands/serve.js';
import { tokenCommand } from './commands/token.js';
import { gateCommand } from './commands/gate.js';

const COMMANDS: Record<string, { run: (argv: string[]) => Promise<void>; summary: string }> = {
  start: { run: startCommand, summary: 'run a complete single node (embedded stores)' },
  worker: { run: workerCommand, summary: 'run a worker node' },
  gate: { run: gateCommand, summary: 'run the HTTP gate of a cluster' },
  chat: { run: chatCommand, summary: 'interactive terminal chat' },
  token: { run: tokenCommand, summary: 'mint a login token for development' },
  // Loaded on use: a server process never loads the load generator.
  bench: { run: async (argv) => (await import('./commands/bench.js')).benchCommand(argv), summary: 'measure throughput, latency, memory and failover under load' },
};

function help(): string {
  const rows = Object.entries(COMMANDS).map(([name, c]) => `  ${name.padEnd(8)} ${c.summary}`);
  return `usage: switchboard <command> [options]\n\ncommands:\n${rows.join('\n')}\n\nswitchboard <command> --help shows a command's options.\n`;
}

export async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(help());
    return 0;
  }
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
