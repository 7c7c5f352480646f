// The group flags reach the configuration: the store's limits (start, worker, gate) as
// GroupLimits, the worker's own (--group-sync-new, --group-fanout-slice) in WorkerLimits, with
// the documented defaults, and out-of-range values refused before anything starts.

import t from 'tap';
import { parseOptions } from '../../src/cli/options.js';
import { GROUP_OPTIONS, LIMIT_OPTIONS, groupLimitsFrom, limitsFrom } from '../../src/cli/common.js';
import { DEFAULT_GROUP_LIMITS, groupLimits } from '../../src/groups/group-store.js';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { SERVE_COMMAND_OPTIONS } from '../../src/cli/commands/serve.js';
import { GATE_COMMAND_OPTIONS } from '../../src/cli/commands/gate.js';
import { catchError } from '../helpers/catch-error.js';

const SPECS = { ...GROUP_OPTIONS, ...LIMIT_OPTIONS };

t.test('defaults: DEFAULT_GROUP_LIMITS, and 100 / 512 for the worker', async (t) => {
  const o = parseOptions(SPECS, [], {});
  t.same(groupLimits(groupLimitsFrom(o)), DEFAULT_GROUP_LIMITS);
  t.equal(limitsFrom(o).groupSyncNew, 100);
  t.equal(limitsFrom(o).groupFanoutSlice, 512);
  t.equal(DEFAULT_LIMITS.groupSyncNew, 100);
  t.equal(DEFAULT_LIMITS.groupFanoutSlice, 512);
});

t.test('flags and variables reach the limits', async (t) => {
  const o = parseOptions(SPECS, ['--group-max-members', '50', '--group-max-per-user', '3', '--group-max-age-s', '60', '--group-sync-new', '0', '--group-fanout-slice', '64'], { SWITCHBOARD_GROUP_MAX_ENTRIES: '500' });
  t.match(groupLimitsFrom(o), { maxMembers: 50, maxGroupsPerUser: 3, maxEntries: 500, maxAgeMs: 60_000 });
  t.match(limitsFrom(o), { groupSyncNew: 0, groupFanoutSlice: 64 });
});

t.test('out of range: SB_ERR_CONFIG naming the flag', async (t) => {
  for (const argv of [['--group-max-members', '1'], ['--group-max-per-user', '0'], ['--group-fanout-slice', '0'], ['--group-sync-new', '10001'], ['--group-max-entries', '1.5']]) {
    t.match(catchError(() => parseOptions(SPECS, argv, {})), { code: 'SB_ERR_CONFIG', message: new RegExp(`^${argv[0]} must be`) }, argv.join(' '));
  }
});

t.test('which command takes which', async (t) => {
  for (const flag of Object.keys(GROUP_OPTIONS)) {
    for (const [command, specs] of Object.entries({ ...SERVE_COMMAND_OPTIONS, gate: GATE_COMMAND_OPTIONS })) t.ok(flag in specs, `${command} --${flag}`);
  }
  for (const flag of ['group-sync-new', 'group-fanout-slice']) {
    t.ok(flag in SERVE_COMMAND_OPTIONS.start && flag in SERVE_COMMAND_OPTIONS.worker, `start and worker --${flag}`);
    t.notOk(flag in GATE_COMMAND_OPTIONS, `gate: no --${flag}`);
  }
});
