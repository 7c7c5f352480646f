// An ImClient's place in each group's stream: per group the highest group seq processed (what
// it acknowledges, cumulatively, and what drops a replayed delivery), and the seqs of its own
// messages above it. The server does not send a device its own message live (the response
// carries its seq) but may replay it after a reconnect: a seq this device sent is processed
// already, and the position moves past it as soon as everything before it was processed.
//
// Bounded: one entry per group the server delivered from or this client sent to (the server's
// groups of the user, --group-max-per-user, plus the ones it recently left: 1 000 + 256 by
// default), and at most MAX_GROUPS of them: beyond, the group heard from least recently is
// forgotten (its next replayed delivery would be shown again). Own seqs kept per group: at most
// MAX_OWN_SEQS, the lowest forgotten first.

/** Groups whose position is kept; far above what a server lets one user be in. */
export const MAX_GROUPS = 10_000;
/** Own messages per group sent above the position and not yet passed by it. */
export const MAX_OWN_SEQS = 256;

interface Position {
  /** Highest group seq processed; undefined until the first delivery of the group. */
  seq: number | undefined;
  /** Seqs of this client's own messages above `seq`, ascending. */
  own: number[];
}

export class GroupPositions {
  /** In order of last use: the first is the one to forget. */
  readonly #groups = new Map<string, Position>();
  /** Groups whose position moved since the last acks were written. */
  readonly #unacked = new Set<string>();

  constructor(initial: Readonly<Record<string, number>> = {}) {
    for (const [group, seq] of Object.entries(initial)) {
      if (Number.isSafeInteger(seq) && seq > 0) this.#touch(group).seq = seq;
    }
  }

  get size(): number {
    return this.#groups.size;
  }

  /** The highest seq of `group` processed, if known. */
  seq(group: string): number | undefined {
    return this.#groups.get(group)?.seq;
  }

  /** Whether a delivery of `group` at `seq` was processed before (a replay, or this client's own message). */
  seen(group: string, seq: number): boolean {
    const p = this.#groups.get(group);
    if (!p) return false;
    return (p.seq !== undefined && seq <= p.seq) || p.own.includes(seq);
  }

  /**
   * The delivery `seq` of `group` is processed (deliveries come in group order). Returns the
   * new position: `seq`, or past it through this client's own messages that follow.
   */
  processed(group: string, seq: number): number {
    const p = this.#touch(group);
    if (p.seq === undefined || seq > p.seq) p.seq = seq;
    this.#advance(p);
    this.#unacked.add(group);
    return p.seq;
  }

  /**
   * This client's message is `seq` of `group` (the response). Right after the position it is
   * the new position (returned); above it, it is remembered until the position reaches it.
   * Returns undefined when the position did not move.
   */
  sent(group: string, seq: number): number | undefined {
    const p = this.#touch(group);
    if (p.seq !== undefined && seq <= p.seq) return undefined;
    if (p.seq !== undefined && seq === p.seq + 1) {
      p.seq = seq;
      this.#advance(p);
      this.#unacked.add(group);
      return p.seq;
    }
    if (p.own.includes(seq)) return undefined;
    p.own.push(seq);
    p.own.sort((a, b) => a - b);
    if (p.own.length > MAX_OWN_SEQS) p.own.shift();
    return undefined;
  }

  /** The groups whose position moved since the last call, with their position: the acks to write. */
  takeAcks(): [group: string, seq: number][] {
    const acks: [string, number][] = [];
    for (const group of this.#unacked) {
      const seq = this.#groups.get(group)?.seq;
      if (seq !== undefined) acks.push([group, seq]);
    }
    this.#unacked.clear();
    return acks;
  }

  /** Marks `group`'s position to be acknowledged again (a replayed delivery whose ack may have been lost). */
  reack(group: string): void {
    if (this.#groups.get(group)?.seq !== undefined) this.#unacked.add(group);
  }

  /** Own seqs at or below the position are passed; the position takes the ones right after it. */
  #advance(p: Position): void {
    if (p.seq === undefined) return;
    while (p.own.length > 0 && p.own[0]! <= p.seq + 1) p.seq = Math.max(p.seq, p.own.shift()!);
  }

  /** The group's position, made the most recently used; the least recently used one goes beyond MAX_GROUPS. */
  #touch(group: string): Position {
    let p = this.#groups.get(group);
    if (p) {
      this.#groups.delete(group);
    } else {
      p = { seq: undefined, own: [] };
      if (this.#groups.size >= MAX_GROUPS) {
        const oldest = this.#groups.keys().next().value as string;
        this.#groups.delete(oldest);
        this.#unacked.delete(oldest);
      }
    }
    this.#groups.set(group, p);
    return p;
  }
}
