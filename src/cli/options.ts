// Flag parsing shared by every subcommand: each option is a `--flag`, and also an environment
// variable (SWITCHBOARD_<FLAG>, upper case, dashes as underscores, unless the option names its
// own). Flags win over the environment, the environment over defaults. Every value is checked
// against its option's type and range before the command does anything: a bad one is
// SB_ERR_CONFIG naming the flag or variable, the value (never a secret's) and what is allowed.

import { parseArgs } from 'node:util';
import { SwitchboardError } from '../errors.js';

/** How --help groups a command's options, in this order. */
export const OPTION_GROUPS = ['network', 'tls', 'secrets', 'stores', 'cluster', 'gate', 'limits', 'logging', 'target', 'load', 'reports'] as const;
export type OptionGroup = (typeof OPTION_GROUPS)[number];

/** The longest delay a Node.js timer can wait (a longer one fires at once). */
export const MAX_TIMER_MS = 2_147_483_647;

export interface OptionSpec {
  type: 'string' | 'number' | 'boolean';
  description: string;
  default?: string | number | boolean;
  short?: string;
  /**
   * The value is a secret, or can carry one (a URL with a password): --help never shows a value
   * for it, errors never repeat it, and reports of the command line redact it.
   */
  secret?: boolean;
  group?: OptionGroup;
  /** The environment variable; default SWITCHBOARD_<FLAG>. */
  env?: string;
  /** An older variable still read when `env` is unset, with a warning (see parseOptions). */
  legacyEnv?: string;
  /** number: whole numbers only. */
  integer?: boolean;
  /** number: the least value allowed. */
  min?: number;
  /** number: values must be above this (for fractions that must be positive). */
  above?: number;
  /** number: the largest value allowed. */
  max?: number;
  /** string: the values allowed. */
  choices?: readonly string[];
  /** string: a further check of the value, and what it allows (for the error). */
  check?: { test: (value: string) => boolean; allowed: string };
}

export type OptionSpecs = Record<string, OptionSpec>;

export type OptionValues<S extends OptionSpecs> = {
  [K in keyof S]: S[K]['type'] extends 'boolean'
    ? boolean
    : S[K]['type'] extends 'number'
      ? S[K] extends { default: number } ? number : number | undefined
      : S[K] extends { choices: readonly (infer C)[] }
        ? S[K] extends { default: string } ? C : C | undefined
        : S[K] extends { default: string } ? string : string | undefined;
};

export interface ParsedOptions {
  help: boolean;
  /** What the command should log once it has a logger: deprecated variables that were read. */
  warnings: string[];
}

// Range helpers for the option tables.
/** A TCP port; 0 picks a free one. */
export const PORT = { type: 'number', integer: true, min: 0, max: 65_535 } as const;
/** Milliseconds a timer waits: at least `min`, at most what a timer can wait. */
export const ms = (min = 1) => ({ type: 'number', integer: true, min, max: MAX_TIMER_MS }) as const;
/** A whole number from `min` to `max`. */
export const count = (min: number, max: number = Number.MAX_SAFE_INTEGER) => ({ type: 'number', integer: true, min, max }) as const;
/** A string that may not be empty. */
export const NON_EMPTY = { check: { test: (v: string) => v.length > 0, allowed: 'a non-empty string' } } as const;

export function envName(flag: string): string {
  return `SWITCHBOARD_${flag.toUpperCase().replace(/-/g, '_')}`;
}

/** The variable an option is read from. */
export function envOf(flag: string, spec: OptionSpec): string {
  return spec.env ?? envName(flag);
}

const TRUE = new Set(['true', 'yes', 'on', '1']);
const FALSE = new Set(['false', 'no', 'off', '0']);
const NUMBER = /^[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/i;

export function parseOptions<S extends OptionSpecs>(specs: S, argv: string[], env: NodeJS.ProcessEnv = process.env): OptionValues<S> & ParsedOptions {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: {
        help: { type: 'boolean', short: 'h' },
        ...Object.fromEntries(
          Object.entries(specs).map(([name, spec]) => [name, { type: spec.type === 'boolean' ? 'boolean' : 'string', ...(spec.short ? { short: spec.short } : {}) }]),
        ),
      },
    } as const));
  } catch (err) {
    throw new SwitchboardError('SB_ERR_CONFIG', argumentError(err as NodeJS.ErrnoException), { cause: err });
  }
  const out: Record<string, unknown> = { help: values.help === true };
  const warnings: string[] = [];
  for (const [name, spec] of Object.entries(specs)) {
    const flag = values[name];
    if (flag !== undefined) {
      out[name] = convert(`--${name}`, spec, flag);
      continue;
    }
    // An empty variable is an unset one: `SWITCHBOARD_PORT= switchboard worker` runs on the default.
    const variable = envOf(name, spec);
    const fromEnv = env[variable];
    if (fromEnv !== undefined && fromEnv !== '') {
      out[name] = convert(`${variable} (--${name})`, spec, fromEnv);
      continue;
    }
    const legacy = spec.legacyEnv ? env[spec.legacyEnv] : undefined;
    if (spec.legacyEnv && legacy !== undefined && legacy !== '') {
      warnings.push(`${spec.legacyEnv} is read as --${name} for now, but it means something else to other commands: set ${variable} instead`);
      out[name] = convert(`${spec.legacyEnv} (--${name})`, spec, legacy);
      continue;
    }
    out[name] = spec.default === undefined ? (spec.type === 'boolean' ? false : undefined) : convert(`--${name}`, spec, spec.default);
  }
  out.warnings = warnings;
  return out as OptionValues<S> & ParsedOptions;
}

/** node:util's parseArgs errors, in switchboard's words (its own suggest `-- "--flag"`, which no command takes). */
function argumentError(err: NodeJS.ErrnoException): string {
  const option = /'(-[^' ]+)/.exec(err.message)?.[1];
  switch (err.code) {
    case 'ERR_PARSE_ARGS_UNKNOWN_OPTION':
      return `unknown option ${option ?? err.message} (--help lists this command's options)`;
    case 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL':
      return `${err.message.replace(/^Unexpected argument '([^']*)'.*$/s, 'unexpected argument "$1"')}: every value follows its flag (--help lists this command's options)`;
    case 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE':
      if (/does not take an argument/.test(err.message)) return `${option ?? 'a switch'} takes no value (it is on when given, off when not)`;
      if (/ambiguous/.test(err.message)) return `${option ?? 'an option'} needs a value (one that starts with a dash is written ${option ?? '--flag'}=-value)`;
      return `${option ?? 'an option'} needs a value`;
    default:
      return err.message;
  }
}

/** What an option allows, in words: the end of its error and of its --help line. */
export function allowed(spec: OptionSpec): string | undefined {
  if (spec.type === 'boolean') return 'true, false, yes, no, on, off, 1 or 0';
  if (spec.type === 'string') return spec.choices ? `one of ${spec.choices.join(', ')}` : spec.check?.allowed;
  const kind = spec.integer ? 'a whole number' : 'a number';
  const bounded = spec.max !== undefined && spec.max < Number.MAX_SAFE_INTEGER;
  const parts: string[] = [];
  if (spec.above !== undefined) parts.push(`above ${spec.above}`);
  if (spec.min !== undefined && bounded) parts.push(`from ${spec.min} to ${spec.max}`);
  else if (spec.min !== undefined) parts.push(`of at least ${spec.min}`);
  else if (bounded) parts.push(`of at most ${spec.max}`);
  return [kind, parts.join(' and ')].filter(Boolean).join(' ');
}

function convert(source: string, spec: OptionSpec, raw: string | number | boolean): unknown {
  const refuse = (): never => {
    const got = spec.secret ? '' : `, got ${JSON.stringify(String(raw))}`;
    throw new SwitchboardError('SB_ERR_CONFIG', `${source} must be ${allowed(spec) ?? 'valid'}${got}`);
  };
  if (spec.type === 'boolean') {
    if (typeof raw === 'boolean') return raw;
    const word = String(raw).trim().toLowerCase();
    if (TRUE.has(word)) return true;
    if (FALSE.has(word)) return false;
    return refuse();
  }
  if (spec.type === 'number') {
    if (typeof raw !== 'number' && !NUMBER.test(String(raw))) return refuse();
    const n = Number(raw);
    if (!Number.isFinite(n) || (spec.integer && !Number.isSafeInteger(n))) return refuse();
    if ((spec.min !== undefined && n < spec.min) || (spec.above !== undefined && !(n > spec.above)) || (spec.max !== undefined && n > spec.max)) return refuse();
    return n;
  }
  const value = String(raw);
  if (value === '') {
    // `--host ""`: a script whose variable was empty; leaving the flag out gives the default.
    throw new SwitchboardError('SB_ERR_CONFIG', `${source} was given an empty value: leave it out for the default${spec.choices || spec.check ? `, or give ${allowed(spec)}` : ''}`);
  }
  if (spec.choices && !spec.choices.includes(value)) return refuse();
  if (spec.check && !spec.check.test(value)) return refuse();
  return value;
}

/** The flags of `specs` whose values are secrets. */
export function secretFlags(specs: OptionSpecs): Set<string> {
  return new Set(Object.entries(specs).filter(([, spec]) => spec.secret).map(([name]) => name));
}

/**
 * The help text: the command's own flags by group, each with its description, what it allows,
 * its default and its variable (`env: false`: the command reads none); never a value from the
 * environment, nor a secret's default.
 */
export function usage(command: string, summary: string, specs: OptionSpecs, { env = true } = {}): string {
  const row = (name: string, spec: OptionSpec) => {
    const flag = `--${name}${spec.type === 'boolean' ? '' : ` <${spec.choices ? 'choice' : spec.type === 'number' ? (spec.integer ? 'int' : 'number') : 'string'}>`}`;
    const notes = [
      spec.type === 'boolean' ? undefined : allowed(spec),
      spec.default === undefined || spec.secret ? undefined : `default ${String(spec.default)}`,
      env ? `env ${envOf(name, spec)}` : undefined,
    ].filter(Boolean);
    return `  ${flag.padEnd(30)} ${spec.description}${notes.length > 0 ? `\n  ${''.padEnd(30)} ${notes.join('; ')}` : ''}`;
  };
  const entries = Object.entries(specs);
  const sections = [undefined, ...OPTION_GROUPS]
    .map((group) => ({ group, rows: entries.filter(([, spec]) => spec.group === group).map(([name, spec]) => row(name, spec)) }))
    .filter((s) => s.rows.length > 0)
    .map((s) => `${s.group ?? 'options'}:\n${s.rows.join('\n')}`);
  return `usage: switchboard ${command} [options]\n\n${summary}\n\n${sections.join('\n\n')}\n\n  ${'--help'.padEnd(30)} show this help\n`;
}
