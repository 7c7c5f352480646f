// A `switchboard <command>` process for a test (testkit's SwitchboardProcess: bin/switchboard.js,
// so the compiled dist/), stdin piped for `chat`, killed on teardown if still running.

import type { ChildProcessWithoutNullStreams } from 'node:child_process';
import type { Test } from 'tap';
import { SwitchboardProcess, assertBuilt } from '../../testkit/switchboard-process.js';

export class CliProcess extends SwitchboardProcess {
  /** Spawned with every stream piped. */
  declare readonly child: ChildProcessWithoutNullStreams;

  constructor(
    t: Test,
    name: string,
    args: string[],
    /** Variables added to the environment, which has none of the machine's SWITCHBOARD_* ones. */
    extraEnv: Record<string, string> = {},
  ) {
    assertBuilt();
    super(name, args, { extraEnv, stdin: true });
    t.teardown(() => this.kill());
  }
}
