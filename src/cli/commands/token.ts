// `switchboard token`: mints a login token for development (the gate mints them in production).

import { TokenSigner, ANY_DEVICE, DEV_SECRET } from '../../auth/token.js';
import { SwitchboardError } from '../../errors.js';
import { parseOptions, usage, type OptionSpecs } from '../options.js';
import { SECRET_OPTION } from '../common.js';

const OPTIONS = {
  user: { type: 'string', description: 'user id the token is for (required)' },
  device: { type: 'string', description: `device id the token is bound to; ${ANY_DEVICE} = any device`, default: ANY_DEVICE },
  'ttl-s': { type: 'number', description: 'validity in seconds', default: 86_400 },
  ...SECRET_OPTION,
} as const satisfies OptionSpecs;

const SUMMARY = 'Prints a signed login token for a user on stdout.';

export async function tokenCommand(argv: string[]): Promise<void> {
  const o = parseOptions(OPTIONS, argv);
  if (o.help) {
    process.stdout.write(usage('token', SUMMARY, OPTIONS));
    return;
  }
  if (!o.user) throw new SwitchboardError('SB_ERR_CONFIG', '--user is required');
  if (!o.secret) process.stderr.write('warning: signing with the built-in development secret (set --secret or SWITCHBOARD_SECRET)\n');
  const signer = new TokenSigner(o.secret ?? DEV_SECRET);
  process.stdout.write(`${signer.mint({ uid: o.user, deviceId: o.device ?? ANY_DEVICE, ttlMs: o['ttl-s'] * 1000 })}\n`);
}
