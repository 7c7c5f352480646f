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

// And the environment: glibc's malloc marks its memory for transparent huge pages (glibc 2.35
// and later; the kernel's default THP mode, madvise, then gives it 2 MiB pages). Inbox slabs,
// typed arrays and socket buffers come from malloc, and a growing memory inbox writes only fresh
// pages: the worker took 0.153 page faults per delivered message with 4 KiB pages and 0.020
// with huge ones, and one worker on the memory inbox delivered a mean 17% more msg/s (four
// alternated runs each, bench/README.md, Huge pages for malloc). Ignored by other C libraries.

export const SERVER_ENV = { GLIBC_TUNABLES: 'glibc.malloc.hugetlb=1' } as const;

/** What a server started without SERVER_ENV logs, at info, with `missing`. */
export const MISSING_ENV_MESSAGE = 'node started without the server environment: set it as OPERATIONS.md, Running a node, says';

/**
 * The SERVER_ENV settings this process lacks, as NAME=value: none where the C library is not
 * glibc (`glibc`: its version, null elsewhere), which would ignore them. A tunable is found
 * among the others GLIBC_TUNABLES may hold (colon-separated), with any value but 0.
 */
export function missingServerEnv(env: NodeJS.ProcessEnv = process.env, glibc: string | null = glibcVersion()): string[] {
  if (glibc === null) return [];
  const tunables = new Map((env.GLIBC_TUNABLES ?? '').split(':').map((t) => [t.split('=')[0]!, t.split('=')[1] ?? ''] as const));
  const hugetlb = tunables.get('glibc.malloc.hugetlb');
  return hugetlb === undefined || hugetlb === '' || hugetlb === '0' ? [`GLIBC_TUNABLES=${SERVER_ENV.GLIBC_TUNABLES}`] : [];
}

/** The running glibc's version; null on another C library or system. */
function glibcVersion(): string | null {
  if (process.platform !== 'linux') return null;
  const header = (process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined)?.header;
  return header?.glibcVersionRuntime ?? null;
}

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
