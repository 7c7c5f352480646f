// The node flags a server process is meant to run with. A worker keeps each message's objects
// alive until the store answers (a Redis round trip); with V8's default young generation (16 MiB
// semi-spaces) many of them are still alive when the scavenger runs, so they are copied to the
// old generation and collected again there at full cost. 64 MiB semi-spaces gave one worker on
// the Redis inbox a median 29% more delivered msg/s at less CPU (bench/README.md, The young
// generation); the memory inbox and cross-node runs were unchanged. V8's heap limit grows by
// 144 MiB (the young generation is three semi-spaces).
//
// And V8 starts a full collection once the old generation's free room (what its limit allows
// beyond the live objects and the external memory allocated since the last one: the inboxes'
// slabs, sockets' buffers) is less than a semi-space. A worker's live heap is small (~20 MiB),
// its limit followed (~100 MiB), so with 64 MiB semi-spaces 13 MiB of new slabs started one:
// a full collection every 0.3-0.5 s under chat load. A 256 MiB initial old generation made them
// 3x fewer, and gave one worker on the memory inbox 13% more delivered msg/s (four alternated
// runs; 10% on the Redis inbox, three; bench/README.md, The old generation's first limit). The
// heap may hold up to that much garbage before it is collected.
//
// `npm start` passes them; a process manager gives them to node on its command line, or
// --max-semi-space-size in NODE_OPTIONS (node refuses --initial-old-space-size there), not in the
// #! line: BusyBox's env, Alpine's, has no -S. A server started without them says so.

import { readFileSync } from 'node:fs';

export const SERVER_NODE_FLAGS = ['--max-semi-space-size=64', '--initial-old-space-size=256'] as const;

// And the environment: glibc's malloc marks its memory for transparent huge pages (glibc 2.35
// and later, with the kernel's THP mode at madvise, Debian's and Ubuntu's default: 2 MiB pages
// then). Inbox slabs, typed arrays and socket buffers come from malloc, and a growing memory
// inbox writes only fresh pages: the worker took 0.153 page faults per delivered message with
// 4 KiB pages and 0.020 with huge ones, and one worker on the memory inbox delivered a median
// 12% more msg/s in four alternated pairs (bench/README.md, Huge pages for malloc).

export const SERVER_ENV = { GLIBC_TUNABLES: 'glibc.malloc.hugetlb=1' } as const;

/** What a server started without SERVER_ENV logs, at info, with `missing`. */
export const MISSING_ENV_MESSAGE = 'node started without the server environment: set it as OPERATIONS.md, Running a node, says';

/** What decides whether the tunable does anything: glibc's version (null: another C library) and the kernel's THP mode (null: unknown). */
export interface MallocHost {
  glibc: string | null;
  thpMode: string | null;
}

/**
 * The SERVER_ENV settings this process lacks, as NAME=value. glibc.malloc.hugetlb counts as set
 * at 1 (its last occurrence among GLIBC_TUNABLES' colon-separated tunables, as glibc reads them).
 * Nothing is missing where it would do nothing: another C library, glibc before 2.35, THP
 * `always` (the kernel gives huge pages anyway) or `never`. `host` is asked only when the
 * tunable is not set (reading glibc's version takes a process report, ~10 ms).
 */
export function missingServerEnv(env: NodeJS.ProcessEnv = process.env, host: () => MallocHost = mallocHost): string[] {
  let hugetlb: string | undefined;
  for (const tunable of (env.GLIBC_TUNABLES ?? '').split(':')) {
    const [name, value] = tunable.split('=');
    if (name === 'glibc.malloc.hugetlb') hugetlb = value;
  }
  if (hugetlb !== undefined && /^[0-9]+$/.test(hugetlb) && Number(hugetlb) === 1) return [];
  const { glibc, thpMode } = host();
  const [major = 0, minor = 0] = (glibc ?? '').split('.').map(Number);
  if (glibc === null || major < 2 || (major === 2 && minor < 35) || thpMode !== 'madvise') return [];
  return [`GLIBC_TUNABLES=${SERVER_ENV.GLIBC_TUNABLES}`];
}

/** This process's: glibc's version from a process report, the THP mode from sysfs. */
function mallocHost(): MallocHost {
  if (process.platform !== 'linux') return { glibc: null, thpMode: null };
  const header = (process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined)?.header;
  let thpMode: string | null = null;
  try {
    thpMode = /\[(\w+)\]/.exec(readFileSync('/sys/kernel/mm/transparent_hugepage/enabled', 'utf8'))?.[1] ?? null;
  } catch {
    // No THP in this kernel, or no sysfs: nothing to say.
  }
  return { glibc: header?.glibcVersionRuntime ?? null, thpMode };
}

/** What a server started without SERVER_NODE_FLAGS logs, at info, with `missing`. */
export const MISSING_FLAGS_MESSAGE = 'node started without the server flags: give them to node on its command line (OPERATIONS.md, Running a node)';

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
