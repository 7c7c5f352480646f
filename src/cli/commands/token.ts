// `switchboard token`: mints a login token for development (the gate mints them in production).

import { TokenSigner, ANY_DEVICE } from '../../auth/token.js';
import { SwitchboardError } from '../../errors.js';
import { parseOptions, usage, type OptionSpecs } from '../options.js';
import { DEV_OPTION, MAX_TOKEN_TTL_S, SECRET_OPTION, tokenSecretFrom, tokenTtlMsFrom } from '../common.js';

const OPTIONS = {
  user: { type: 'string', description: 'user id the token is for (required)' },
  device: { type: 'string', description: `device id the token is bound to; ${ANY_DEVICE} = any device`, default: ANY_DEVICE },
  'ttl-s': { type: 'number', above: 0, description: `validity in seconds (at most ${MAX_TOKEN_TTL_S}, 30 days; 365 days in development mode)`, default: 86_400 },
  ...SECRET_OPTION,
  ...DEV_OPTION,
} as const satisfies OptionSpecs;

const SUMMARY = 'Prints a signed login token for a user on stdout.';

export async function tokenCommand(argv: string[]): Promise<void> {
  const o = parseOptions(OPTIONS, argv);
  if (o.help) {
    process.stdout.write(usage('token', SUMMARY, OPTIONS));
    return;
  }
  if (!o.user) throw new SwitchboardError('SB_ERR_CONFIG', '--user is required');
  // Without a secret the token is signed with the development one: a development run.
  const { secret, dev } = tokenSecretFrom(o, true, () => process.stderr.write('warning: signing with the built-in development secret (set --secret or SWITCHBOARD_SECRET)\n'));
  const ttlMs = tokenTtlMsFrom('ttl-s', o['ttl-s'], dev);
  process.stdout.write(`${new TokenSigner(secret).mint({ uid: o.user, deviceId: o.device ?? ANY_DEVICE, ttlMs })}\n`);
}
