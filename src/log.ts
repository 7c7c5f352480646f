// The one root logger of a process; everything else logs through children of it.
//
// Secrets never reach a log line: fields that can hold one are redacted wherever they appear
// (pino `redact`, on bindings too), URLs keep their host but lose their password, and errors lose
// the arguments of the Redis command they carry (ioredis attaches `command: {name, args}`: for a
// refused AUTH the args are the user name and the password).

import { pino, stdSerializers, type Logger, type LevelWithSilent, type LoggerOptions } from 'pino';
import { REDACTED, redactUrls } from './redact.js';

export type { Logger };

/** Fields, at the top of a line or one level down (`{ options: { secret } }`), that hold a secret. */
const SECRET_FIELDS = ['secret', 'clusterSecret', 'tokenSecret', 'password', 'token', 'authorization', 'cookie'];
/** Fields that can hold a URL or a connect string with credentials in it: kept, minus the password. */
const URL_FIELDS = ['url', 'redis', 'connect', 'zk'];

const REDACT_PATHS = [
  ...[...SECRET_FIELDS, ...URL_FIELDS].flatMap((f) => [f, `*.${f}`]),
  'req.headers.authorization',
  'req.headers.cookie',
  'err.command.args',
];
const URL_FIELD = new Set(URL_FIELDS);

function censor(value: unknown, path: string[]): unknown {
  const field = path[path.length - 1]!;
  return URL_FIELD.has(field) && typeof value === 'string' ? redactUrls(value) : REDACTED;
}

/** The redaction every switchboard logger applies (exported for tests and other destinations). */
export const LOG_REDACTION: Pick<LoggerOptions, 'redact' | 'serializers'> = {
  redact: { paths: REDACT_PATHS, censor },
  serializers: { err: errSerializer },
};

export function createLogger(options: { level?: LevelWithSilent; name?: string } = {}, destination?: pino.DestinationStream): Logger {
  const config: LoggerOptions = { name: options.name ?? 'switchboard', level: options.level ?? 'info', ...LOG_REDACTION };
  return destination ? pino(config, destination) : pino(config);
}

/** A logger that drops everything: the default for library use and tests. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
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
  if (typeof value === 'string') return redactUrls(value);
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
