// A bench driver process: runs one task from driver-tasks.ts for the coordinator, which forks
// it with an IPC channel. Protocol: coordinator → {run, task, options, index}; driver → ready;
// coordinator → go; driver → tick* then result (or error); then the driver exits.

import { DRIVER_TASKS, type DriverTask } from './driver-tasks.js';

type FromCoordinator = { kind: 'run'; task: DriverTask; options: unknown; index: number } | { kind: 'go' };

let go: (() => void) | undefined;
const started = new Promise<void>((resolve) => {
  go = resolve;
});

process.on('message', (message: FromCoordinator) => {
  if (message.kind === 'go') return go?.();
  const run = DRIVER_TASKS[message.task] as (options: unknown, channel: Parameters<(typeof DRIVER_TASKS)['chat']>[1]) => Promise<unknown>;
  run(message.options, {
    index: message.index,
    ready: () => {
      process.send!({ kind: 'ready' });
      return started;
    },
    emit: (tick) => process.send!({ kind: 'tick', tick }),
  }).then(
    (result) => process.send!({ kind: 'result', result }, () => process.disconnect()),
    (err: Error) => process.send!({ kind: 'error', message: err.message, code: (err as NodeJS.ErrnoException).code }, () => process.disconnect()),
  );
});
