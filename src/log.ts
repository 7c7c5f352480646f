// The one root logger of a process; everything else logs through children of it.

import { pino, type Logger, type LevelWithSilent } from 'pino';

export type { Logger };

export function createLogger(options: { level?: LevelWithSilent; name?: string } = {}): Logger {
  return pino({ name: options.name ?? 'switchboard', level: options.level ?? 'info' });
}

/** A logger that drops everything: the default for library use and tests. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
