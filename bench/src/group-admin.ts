// What `bench group` needs from its target besides the workers: a way to create groups, and the
// worker's event-loop delay over a span of the run. Groups are created as the gate's API will
// create them (issue 13): a create names at most MAX_UIDS_PER_CALL members, the rest are added
// in slices of that size. Until that API is on main, the target is the interim group node
// (group-node.ts), driven over its stdin; the delay comes from the probe preloaded into it
// (loop-delay-probe.ts).

import type { SwitchboardProcess } from '../../testkit/switchboard-process.js';
import { Latency, type LatencyReport } from './latency.js';
import type { GroupOp } from './group-node.js';

/** The most uids one create or add names (GroupLimits.maxUidsPerCall, the gate's request bound). */
export const MAX_UIDS_PER_CALL = 500;

/** A group made for a run: its id, and its head once every member was added (the seq of the last event). */
export interface CreatedGroup {
  id: string;
  head: number;
}

/** What one create or add answered: the group, and the seq of the event it appended. */
interface OpResult {
  group: string;
  seq: number;
}

export interface GroupAdmin {
  /** Creates a group owned by `owner` with `members` (the owner among them or not), in slices. */
  createGroup(owner: string, name: string, members: readonly string[]): Promise<CreatedGroup>;
}

/** Calls of a group admin, one at a time per group: the create, then each slice of members. */
export async function createGroup(call: (op: DistributiveOmit<GroupOp, 'n'>) => Promise<OpResult>, owner: string, name: string, members: readonly string[]): Promise<CreatedGroup> {
  const others = members.filter((m) => m !== owner);
  const { group, seq } = await call({ op: 'create', owner, name, members: others.slice(0, MAX_UIDS_PER_CALL) });
  let head = seq;
  for (let at = MAX_UIDS_PER_CALL; at < others.length; at += MAX_UIDS_PER_CALL) {
    head = (await call({ op: 'add', group, actor: owner, uids: others.slice(at, at + MAX_UIDS_PER_CALL) })).seq;
  }
  return { id: group, head };
}

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

/** The interim group node's admin: requests on its stdin, answers among its log lines. */
export class StdinGroupAdmin implements GroupAdmin {
  readonly #server: SwitchboardProcess;
  #n = 0;

  constructor(server: SwitchboardProcess) {
    this.#server = server;
  }

  createGroup(owner: string, name: string, members: readonly string[]): Promise<CreatedGroup> {
    return createGroup((op) => this.#call(op), owner, name, members);
  }

  async #call(op: DistributiveOmit<GroupOp, 'n'>): Promise<OpResult> {
    const n = ++this.#n;
    const answered = this.#server.waitForLog({ msg: 'bench group op', n }, { timeoutMs: 60_000 });
    this.#server.write(`${JSON.stringify({ n, ...op })}\n`);
    const line = await answered;
    if (typeof line.error === 'string') throw new Error(`group ${op.op} refused: ${line.error}`);
    return { group: String(line.group), seq: Number(line.seq) };
  }
}

interface DelaySecond {
  from: number;
  to: number;
  latency: string;
}

/** The probe's once-a-second histograms from a server's stdout, merged over a span on request. */
export class LoopDelayReader {
  readonly #seconds: DelaySecond[] = [];
  #partial = '';

  constructor(server: SwitchboardProcess) {
    server.child.stdout!.on('data', (chunk: string | Buffer) => {
      const parts = (this.#partial + chunk.toString()).split('\n');
      this.#partial = parts.pop()!;
      for (const text of parts) {
        if (!text.includes('"bench loop delay"')) continue;
        try {
          const line = JSON.parse(text) as DelaySecond & { msg: string };
          if (line.msg === 'bench loop delay') this.#seconds.push({ from: line.from, to: line.to, latency: line.latency });
        } catch {
          // Not a whole line of the probe's: skipped.
        }
      }
    });
  }

  /**
   * The delay in the probe's seconds that lie mostly within [from, to] (epoch ms), or in those
   * that overlap it when none does (a span shorter than a second), and how many seconds that was.
   */
  between(from: number, to: number): { delay: LatencyReport; seconds: number; each: { spanMs: number; maxMs: number }[] } {
    const overlap = (s: DelaySecond) => Math.max(0, Math.min(s.to, to) - Math.max(s.from, from));
    let seconds = this.#seconds.filter((s) => overlap(s) >= (s.to - s.from) / 2);
    if (seconds.length === 0) seconds = this.#seconds.filter((s) => overlap(s) > 0);
    const each = seconds.map((s) => ({ spanMs: s.to - s.from, maxMs: Latency.decode(s.latency).percentiles().max }));
    return { delay: Latency.merged(seconds.map((s) => s.latency)).report(), seconds: seconds.length, each };
  }
}
