// The node flags a server process is meant to run with. A worker keeps each message's objects
// alive until the store answers (a Redis round trip); with V8's default young generation (16 MiB
// semi-spaces) many of them are still alive when the scavenger runs, so they are copied to the
// old generation and collected again there at full cost. 64 MiB semi-spaces gave one worker on
// the Redis inbox a median 29% more delivered msg/s at less CPU (bench/README.md, The young
// generation); the memory inbox and cross-node runs were unchanged. V8's heap limit grows by
// 144 MiB (the young generation is three semi-spaces).
//
// `npm start` passes them; a process manager or `npx switchboard` passes them in NODE_OPTIONS
// (not in the #! line: BusyBox's env, Alpine's, has no -S). A server started without them says so.

export const SERVER_NODE_FLAGS = ['--max-semi-space-size=64'] as const;

/** What a server started without SERVER_NODE_FLAGS logs, at info, with `missing`. */
export const MISSING_FLAGS_MESSAGE = 'node started without the server flags: give them in NODE_OPTIONS or to node (OPERATIONS.md, Running a node)';

/** The SERVER_NODE_FLAGS this process was started without (on its command line or in NODE_OPTIONS). */
export function missingServerFlags(execArgv: readonly string[] = process.execArgv, nodeOptions = process.env.NODE_OPTIONS ?? ''): string[] {
  const given = [...execArgv, ...splitNodeOptions(nodeOptions)].map((flag) => flag.split('=')[0]!.replaceAll('_', '-'));
  return SERVER_NODE_FLAGS.filter((flag) => !given.includes(flag.split('=')[0]!));
}

/**
 * NODE_OPTIONS as node splits it: at whitespace outside double quotes; inside them a backslash
 * takes the next character as it is, and the quotes are dropped.
 */
export function splitNodeOptions(value: string): string[] {
  const out: string[] = [];
  let current = '';
  let quoted = false;
  let started = false;
  for (let i = 0; i < value.length; i++) {
    const c = value[i]!;
    if (quoted && c === '\\' && i + 1 < value.length) {
      current += value[++i];
    } else if (c === '"') {
      quoted = !quoted;
      started = true;
    } else if (!quoted && /\s/.test(c)) {
      if (started) out.push(current);
      current = '';
      started = false;
    } else {
      current += c;
      started = true;
    }
  }
  if (started) out.push(current);
  return out;
}
