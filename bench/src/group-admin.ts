// What `bench group` needs from its target besides the workers: a way to create groups, and the
// worker's event-loop delay over a span of the run. Groups are created through the gate's group
// API (PROTOCOL.md §13) with the SDK's GateGroups, as the owner (a token minted with the
// target's secret; the node runs with --allow-unknown-recipients, so members need no account):
// a create names at most MAX_UIDS_PER_CALL members, the rest are added in slices of that size.
// The delay comes from the probe preloaded into the node (loop-delay-probe.ts).

import { TokenSigner } from '../../src/auth/token.js';
import { GateGroups } from '../../src/client/gate-groups.js';
import type { SwitchboardProcess } from '../../testkit/switchboard-process.js';
import { Latency, type LatencyReport } from './latency.js';

/** The most uids one create or add names (GroupLimits.maxUidsPerCall, the gate's request bound). */
export const MAX_UIDS_PER_CALL = 500;

/** A group made for a run: its id, and its head once every member was added (the seq of the last event). */
export interface CreatedGroup {
  id: string;
  head: number;
}

/** Creates groups over a gate's HTTP API. */
export class GroupAdmin {
  readonly #gateUrl: string;
  readonly #signer: TokenSigner;

  constructor(gateUrl: string, secret: string) {
    this.#gateUrl = gateUrl;
    this.#signer = new TokenSigner(secret);
  }

  /** Creates a group owned by `owner` with `members` (the owner among them or not): a create, then adds in slices. */
  async createGroup(owner: string, name: string, members: readonly string[]): Promise<CreatedGroup> {
    const api = new GateGroups(this.#gateUrl, this.#signer.mint({ uid: owner, ttlMs: 600_000 }));
    const others = members.filter((m) => m !== owner);
    const group = await api.createGroup(name, others.slice(0, MAX_UIDS_PER_CALL));
    let head = group.head;
    for (let at = MAX_UIDS_PER_CALL; at < others.length; at += MAX_UIDS_PER_CALL) {
      const { seq } = await api.addMembers(group.id, others.slice(at, at + MAX_UIDS_PER_CALL));
      if (seq !== undefined) head = seq;
    }
    return { id: group.id, head };
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
