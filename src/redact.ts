// Keeping secrets out of what switchboard writes: logs, bench reports, --help. A secret is
// recognised by where it sits (a field or a flag that holds one: a token or cluster secret, a
// password, a credential), by what it looks like (the user-info part of a URL such as
// redis://user:pass@host), or by its value when the writer knows it (a bench report knows the
// secret it ran with). Whatever is recognised is replaced by REDACTED; nothing else changes.

export const REDACTED = '[redacted]';

/** Field names that hold a secret. */
const SECRET_KEY = /(secret|password|passwd|credential|authorization|cookie)s?$|^(token|auth)$/i;

/**
 * scheme://user-info@ : the user-info is what is redacted. It runs to the authority's last `@`,
 * as URL parsers (and so ioredis) read it: a raw `@` in a password is still the password.
 */
const URL_USERINFO = /\b([a-z][a-z0-9+.-]*:\/\/)([^\s/?#]*)@/gi;

export function isSecretKey(key: string): boolean {
  return SECRET_KEY.test(key.replace(/[-_]/g, ''));
}

/**
 * `text` with the password of every URL in it redacted (redis://user:[redacted]@host); a
 * user-info without a password (https://TOKEN@host) is redacted whole.
 */
export function redactUrls(text: string): string {
  return text.replace(URL_USERINFO, (_match, scheme: string, userinfo: string) => {
    const colon = userinfo.indexOf(':');
    return colon === -1 ? `${scheme}${REDACTED}@` : `${scheme}${userinfo.slice(0, colon)}:${REDACTED}@`;
  });
}

/**
 * Shorter secrets are not searched for by value: replacing every "s" of a text would mangle it
 * and still say what the secret was. Only development mode accepts them (src/cli/common.ts);
 * the field and flag rules still cover them.
 */
export const MIN_SEARCHED_SECRET_LENGTH = 8;

/** `text` with every occurrence of each of `secrets` (and URL passwords) redacted. */
export function redactText(text: string, secrets: readonly string[] = []): string {
  let out = text;
  for (const secret of secrets) if (secret.length >= MIN_SEARCHED_SECRET_LENGTH) out = out.split(secret).join(REDACTED);
  return redactUrls(out);
}

/**
 * A deep copy of `value` in which every field with a secret's name is REDACTED and every string
 * has `secrets` and URL passwords redacted. For JSON-like data (reports, option objects).
 */
export function redactDeep<T>(value: T, secrets: readonly string[] = []): T {
  const walk = (v: unknown, key?: string): unknown => {
    if (key !== undefined && isSecretKey(key) && v !== undefined && v !== null) return REDACTED;
    if (typeof v === 'string') return redactText(v, secrets);
    if (Array.isArray(v)) return v.map((item) => walk(item));
    if (v && typeof v === 'object' && Object.getPrototypeOf(v) === Object.prototype) {
      return Object.fromEntries(Object.entries(v).map(([k, item]) => [k, walk(item, k)]));
    }
    return v;
  };
  return walk(value) as T;
}

/**
 * Command-line arguments with the value of every flag in `secretFlags` redacted (`--secret X`
 * and `--secret=X`), and URL passwords redacted in every argument.
 */
export function redactArgv(argv: readonly string[], secretFlags: ReadonlySet<string>): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const eq = arg.indexOf('=');
    const flag = arg.startsWith('--') ? arg.slice(2, eq === -1 ? undefined : eq) : undefined;
    if (flag !== undefined && secretFlags.has(flag)) {
      if (eq !== -1) out.push(`--${flag}=${REDACTED}`);
      else {
        out.push(arg);
        if (i + 1 < argv.length) {
          out.push(REDACTED);
          i++;
        }
      }
      continue;
    }
    out.push(redactUrls(arg));
  }
  return out;
}
