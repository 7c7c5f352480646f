// The node flags a server process is meant to run with. A worker keeps each message's objects
// alive until the store answers (a Redis round trip); with V8's default young generation (16 MiB
// semi-spaces) the scavenger runs so often that many of them survive it and are copied to the old
// generation, which is then collected at full cost. 64 MiB semi-spaces gave one worker on the
// Redis inbox 25-30% more delivered msg/s at less CPU (bench/README.md) for at most 128 MiB more
// memory; the memory inbox and cross-node runs were unchanged.
//
// bin/switchboard.js passes them in its #! line (npx, an installed `switchboard`), `npm start`
// in its script; `node bin/switchboard.js` does not, and the server says so at startup.

export const SERVER_NODE_FLAGS = ['--max-semi-space-size=64'] as const;

/** The SERVER_NODE_FLAGS this process was started without (on its command line or in NODE_OPTIONS). */
export function missingServerFlags(execArgv: readonly string[] = process.execArgv, nodeOptions = process.env.NODE_OPTIONS ?? ''): string[] {
  const given = [...execArgv, ...nodeOptions.split(/\s+/)].map((flag) => flag.split('=')[0]!.replaceAll('_', '-'));
  return SERVER_NODE_FLAGS.filter((flag) => !given.includes(flag.split('=')[0]!));
}
