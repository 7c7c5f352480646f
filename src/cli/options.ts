// Flag parsing shared by every subcommand: each option is a `--flag`, and also the environment
// variable SWITCHBOARD_<FLAG> (upper case, dashes as underscores). Flags win over the
// environment, the environment over defaults.

import { parseArgs } from 'node:util';
import { SwitchboardError } from '../errors.js';

export interface OptionSpec {
  type: 'string' | 'number' | 'boolean';
  description: string;
  default?: string | number | boolean;
  short?: string;
  /**
   * The value is a secret, or can carry one (a URL with a password): --help never shows a value
   * for it, and reports of the command line redact it.
   */
  secret?: boolean;
}

export type OptionSpecs = Record<string, OptionSpec>;

export type OptionValues<S extends OptionSpecs> = {
  [K in keyof S]: S[K]['type'] extends 'boolean'
    ? boolean
    : S[K]['type'] extends 'number'
      ? S[K] extends { default: number } ? number : number | undefined
      : S[K] extends { default: string } ? string : string | undefined;
};

export function envName(flag: string): string {
  return `SWITCHBOARD_${flag.toUpperCase().replace(/-/g, '_')}`;
}

export function parseOptions<S extends OptionSpecs>(specs: S, argv: string[], env: NodeJS.ProcessEnv = process.env): OptionValues<S> & { help: boolean } {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    allowPositionals: false,
    options: {
      help: { type: 'boolean', short: 'h' },
      ...Object.fromEntries(
        Object.entries(specs).map(([name, spec]) => [name, { type: spec.type === 'boolean' ? 'boolean' : 'string', ...(spec.short ? { short: spec.short } : {}) }]),
      ),
    },
  } as const);
  const out: Record<string, unknown> = { help: values.help === true };
  for (const [name, spec] of Object.entries(specs)) {
    const raw = (values as Record<string, string | boolean | undefined>)[name] ?? env[envName(name)] ?? spec.default;
    out[name] = convert(name, spec, raw);
  }
  return out as OptionValues<S> & { help: boolean };
}

function convert(name: string, spec: OptionSpec, raw: string | number | boolean | undefined): unknown {
  if (raw === undefined) return spec.type === 'boolean' ? false : undefined;
  if (spec.type === 'boolean') return raw === true || raw === 'true' || raw === '1';
  if (spec.type === 'number') {
    const n = Number(raw);
    if (!Number.isFinite(n) || n < 0) throw new SwitchboardError('SB_ERR_CONFIG', `--${name} must be a non-negative number, got ${JSON.stringify(raw)}`);
    return n;
  }
  return String(raw);
}

/** The flags of `specs` whose values are secrets. */
export function secretFlags(specs: OptionSpecs): Set<string> {
  return new Set(Object.entries(specs).filter(([, spec]) => spec.secret).map(([name]) => name));
}

/** The help text: flags, descriptions, defaults and variable names; never a value from the environment, nor a secret's default. */
export function usage(command: string, summary: string, specs: OptionSpecs): string {
  const rows = Object.entries(specs).map(([name, spec]) => {
    const flag = `--${name}${spec.type === 'boolean' ? '' : ` <${spec.type}>`}`;
    const def = spec.default === undefined || spec.secret ? '' : ` (default ${spec.default})`;
    return `  ${flag.padEnd(30)} ${spec.description}${def}\n  ${''.padEnd(30)} env ${envName(name)}`;
  });
  return `usage: switchboard ${command} [options]\n\n${summary}\n\noptions:\n${rows.join('\n')}\n  ${'--help'.padEnd(30)} show this help\n`;
}
