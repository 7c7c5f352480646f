// The one root logger of a process; everything else logs through children of it.

import { pino, stdSerializers, type Logger, type LevelWithSilent } from 'pino';

export type { Logger };

export function createLogger(options: { level?: LevelWithSilent; name?: string } = {}): Logger {
  return pino({ name: options.name ?? 'switchboard', level: options.level ?? 'info', serializers: { err: errSerializer } });
}

/** A logger that drops everything: the default for library use and tests. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}

/** `scheme://user:password@` → `scheme://user:***@`. */
export function redactUrlPasswords(text: string): string {
  return text.replace(/\b([a-z][a-z0-9+.-]*:\/\/)([^\s/@:]*):([^\s/@]*)@/gi, '$1$2:***@');
}

/**
 * pino's error serializer, minus what can carry a secret: ioredis attaches the failed command
 * with its arguments to a ReplyError (a refused AUTH carries the user and the password; a
 * failed write, the values), and a URL can carry a password.
 */
export function errSerializer(err: unknown): unknown {
  return redact(stdSerializers.err(err as Error), 0);
}

function redact(value: unknown, depth: number): unknown {
  if (typeof value === 'string') return redactUrlPasswords(value);
  if (typeof value !== 'object' || value === null || depth > 4) return value;
  if (Array.isArray(value)) return value.map((v) => redact(v, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value)) {
    if (key === 'command' && typeof v === 'object' && v !== null && 'args' in v) {
      out[key] = { name: (v as { name?: unknown }).name };
      continue;
    }
    out[key] = redact(v, depth + 1);
  }
  return out;
}
