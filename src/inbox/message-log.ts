// One user's retained messages, oldest first, without an object per message: bodies are
// copied into slabs and their places and store times kept in typed arrays used as a ring.
// The garbage collector then sees a few arrays and slabs per user instead of two objects per
// retained message (with a million retained messages its marking steps reached 16 ms).

import type { StoredMessage } from './inbox-store.js';
import { grownCapacity } from './pair-queue.js';

/** Slabs start small (a user with one message holds 512 bytes) and double up to 64 KiB. */
const FIRST_SLAB = 512;
const MAX_SLAB = 64 * 1024;
const FIRST_CAPACITY = 16;
/** Bytes of one place in the ring: storedAt and slabOf (8 each), offset and length (4 each). */
const RING_ENTRY_BYTES = 24;

/**
 * Emptied slabs of MAX_SLAB bytes, kept for logs made with `reuseSlabs`: at most SPARE_SLABS
 * (4 MiB) in the process, outside any store's bound. A full inbox gives up a slab and takes a new
 * one every few hundred messages. V8 counts each new ArrayBuffer as external memory and starts a
 * full collection once 64 MiB more of it are held than after the last one, so a worker whose
 * inboxes were full ran one about every second for the slabs alone (bench/README.md).
 */
const SPARE_SLABS = 64;
const spares: Buffer[] = [];

export class MessageLog {
  /** Seq of the oldest retained message; seqs are dense from it. */
  #firstSeq = 1;
  #count = 0;
  /** Ring index of the oldest message. */
  #start = 0;
  #storedAt = new Float64Array(FIRST_CAPACITY);
  /** Per message: its slab (absolute number), offset and length there. */
  #slabOf = new Float64Array(FIRST_CAPACITY);
  #offset = new Int32Array(FIRST_CAPACITY);
  #length = new Int32Array(FIRST_CAPACITY);
  /** Slabs still holding a retained body; #slabs[0] has absolute number #slabBase. */
  #slabs: Buffer[] = [];
  #slabBase = 0;
  /** Bytes used in the newest slab. */
  #fill = 0;
  /** The ring's and the slabs' bytes (see `bytes`). */
  #bytes = FIRST_CAPACITY * RING_ENTRY_BYTES;
  /**
   * Bodies rewritten larger than they were (a recall's tombstone of a tiny message): kept beside
   * the slabs, which must stay in seq order for shift() to free them. Almost always empty.
   */
  #rewritten: Map<number, Buffer> | undefined;
  /** Slabs go to and come from `spares`; get() then copies, since a slab may be written again. */
  readonly #reuseSlabs: boolean;
  readonly #maxCount: number;

  /**
   * `reuseSlabs`: emptied slabs are kept for reuse (by any log that reuses them) and get()
   * returns copies; without it get()'s bodies are views of the slabs, kept alive by them.
   * `maxCount`: the most messages it keeps; a push to a full log forgets the oldest first, and
   * the ring grows to exactly that many places (doubling past it would leave a full inbox's ring
   * 64% empty: 16 384 places for 10 000).
   */
  constructor({ reuseSlabs = false, maxCount = Number.POSITIVE_INFINITY }: { reuseSlabs?: boolean; maxCount?: number } = {}) {
    this.#reuseSlabs = reuseSlabs;
    this.#maxCount = Math.max(1, maxCount);
  }

  /** Spare slabs held in the process (at most SPARE_SLABS). */
  static get spareSlabs(): number {
    return spares.length;
  }

  /** What an empty log costs, and what a first push of `length` bytes adds to it. */
  static readonly EMPTY_BYTES = FIRST_CAPACITY * RING_ENTRY_BYTES;
  static firstPushCost(length: number): number {
    return Math.max(length, FIRST_SLAB);
  }

  get length(): number {
    return this.#count;
  }

  /** Seq of the oldest message (when empty: the seq the next one must have). */
  get firstSeq(): number {
    return this.#firstSeq;
  }

  /** Bytes of the slabs held (the retained bodies and the free room of the newest slab). */
  get slabBytes(): number {
    let bytes = 0;
    for (const slab of this.#slabs) bytes += slab.length;
    return bytes;
  }

  /**
   * The memory this log holds in typed arrays and slabs (the slabs' free room included), kept
   * up to date as they are allocated and dropped; not the objects themselves (see
   * MemoryInboxStore's per-inbox estimate).
   */
  get bytes(): number {
    return this.#bytes;
  }

  /** How much `bytes` grows if message `seq` is rewritten to `length` bytes (0 when it fits its place). */
  rewriteCost(seq: number, length: number): number {
    const k = seq - this.#firstSeq;
    if (k < 0 || k >= this.#count) return 0;
    return length <= this.#length[(this.#start + k) % this.#storedAt.length]! ? 0 : length;
  }

  /** Replaces the body of retained message `seq` (copied); its store time stays. False when not retained. */
  rewrite(seq: number, body: Uint8Array): boolean {
    const k = seq - this.#firstSeq;
    if (k < 0 || k >= this.#count) return false;
    const i = (this.#start + k) % this.#storedAt.length;
    const previous = this.#rewritten?.get(seq);
    if (previous) {
      this.#bytes -= previous.length;
      this.#rewritten!.delete(seq);
    }
    if (body.length <= this.#length[i]!) {
      // In its place: what is left of the old body is simply not read any more.
      this.#slabs[this.#slabOf[i]! - this.#slabBase]!.set(body, this.#offset[i]!);
      this.#length[i] = body.length;
      return true;
    }
    (this.#rewritten ??= new Map()).set(seq, Buffer.from(body));
    this.#bytes += body.length;
    return true;
  }

  /** How much `bytes` grows if a body of `length` bytes is pushed now (before any pruning). */
  pushCost(length: number): number {
    const capacity = this.#storedAt.length;
    let cost = this.#count === capacity && this.#count < this.#maxCount ? (grownCapacity(capacity, this.#maxCount) - capacity) * RING_ENTRY_BYTES : 0;
    const newest = this.#slabs[this.#slabs.length - 1];
    if (!newest || newest.length - this.#fill < length) cost += this.#slabSize(length, newest);
    return cost;
  }

  /** Appends `body` (copied) as `seq`, which must follow the newest retained seq; a full log (maxCount) forgets its oldest first. */
  push(seq: number, storedAt: number, body: Uint8Array): void {
    if (this.#count > 0 && seq !== this.#firstSeq + this.#count) throw new RangeError(`seq ${seq} does not follow ${this.#firstSeq + this.#count - 1}`);
    if (this.#count >= this.#maxCount) this.shift();
    if (this.#count === 0) this.#firstSeq = seq;
    if (this.#count === this.#storedAt.length) this.#resize(grownCapacity(this.#storedAt.length, this.#maxCount));
    const slab = this.#room(body.length);
    const i = (this.#start + this.#count) % this.#storedAt.length;
    this.#storedAt[i] = storedAt;
    this.#slabOf[i] = this.#slabBase + this.#slabs.length - 1;
    this.#offset[i] = this.#fill;
    this.#length[i] = body.length;
    slab.set(body, this.#fill);
    this.#fill += body.length;
    this.#count++;
  }

  /** Store time of the oldest message (when empty: Infinity). */
  oldestStoredAt(): number {
    return this.#count === 0 ? Number.POSITIVE_INFINITY : this.#storedAt[this.#start]!;
  }

  /** Forgets the oldest message, and the slabs no retained message uses any more. */
  shift(): void {
    if (this.#count === 0) return;
    const rewritten = this.#rewritten?.get(this.#firstSeq);
    if (rewritten) {
      this.#bytes -= rewritten.length;
      this.#rewritten!.delete(this.#firstSeq);
    }
    this.#start = (this.#start + 1) % this.#storedAt.length;
    this.#count--;
    this.#firstSeq++;
    if (this.#count === 0) {
      // Nothing retained: no slab either (an idle user's emptied inbox costs no body memory),
      // and the ring back to its first size.
      this.#slabBase += this.#slabs.length;
      for (const slab of this.#slabs) this.#release(slab);
      this.#slabs = [];
      this.#fill = 0;
      if (this.#storedAt.length > FIRST_CAPACITY) this.#resize(FIRST_CAPACITY);
      this.#bytes = this.#storedAt.length * RING_ENTRY_BYTES;
      return;
    }
    const oldestSlab = this.#slabOf[this.#start]!;
    while (this.#slabBase < oldestSlab) {
      const slab = this.#slabs.shift()!;
      this.#bytes -= slab.length;
      this.#release(slab);
      this.#slabBase++;
    }
    // Pruned to a quarter of the ring: half of it goes back (amortised, like the doubling).
    const capacity = this.#storedAt.length;
    if (capacity > FIRST_CAPACITY && this.#count <= capacity / 4) this.#resize(Math.max(FIRST_CAPACITY, Math.floor(capacity / 2)));
  }

  /** The message `seq` (a fresh object; its body a view of the slab, or a copy when slabs are reused), or undefined. */
  get(seq: number): StoredMessage | undefined {
    const k = seq - this.#firstSeq;
    if (k < 0 || k >= this.#count) return undefined;
    const i = (this.#start + k) % this.#storedAt.length;
    const rewritten = this.#rewritten?.get(seq);
    if (rewritten) return { seq, storedAt: this.#storedAt[i]!, body: rewritten };
    const slab = this.#slabs[this.#slabOf[i]! - this.#slabBase]!;
    const offset = this.#offset[i]!;
    const view = slab.subarray(offset, offset + this.#length[i]!);
    return { seq, storedAt: this.#storedAt[i]!, body: this.#reuseSlabs ? Buffer.from(view) : view };
  }

  /** A slab with `bytes` free at #fill: the newest, or a new one. */
  #room(bytes: number): Buffer {
    const newest = this.#slabs[this.#slabs.length - 1];
    if (newest && newest.length - this.#fill >= bytes) return newest;
    const size = this.#slabSize(bytes, newest);
    // Unpooled: a slab must not share (and keep alive) Buffer's pool with unrelated buffers.
    const slab = (this.#reuseSlabs && size === MAX_SLAB ? spares.pop() : undefined) ?? Buffer.allocUnsafeSlow(size);
    this.#slabs.push(slab);
    this.#bytes += size;
    this.#fill = 0;
    return slab;
  }

  /** A slab no retained message uses any more: a spare, if this log reuses slabs and there is room. */
  #release(slab: Buffer): void {
    if (this.#reuseSlabs && slab.length === MAX_SLAB && spares.length < SPARE_SLABS) spares.push(slab);
  }

  #slabSize(bytes: number, newest: Buffer | undefined): number {
    return Math.max(bytes, newest ? Math.min(newest.length * 2, MAX_SLAB) : FIRST_SLAB);
  }

  /** Moves the ring into arrays of `capacity` places (at least the count). */
  #resize(capacity: number): void {
    this.#bytes += (capacity - this.#storedAt.length) * RING_ENTRY_BYTES;
    this.#storedAt = unwrap(this.#storedAt, new Float64Array(capacity), this.#start, this.#count);
    this.#slabOf = unwrap(this.#slabOf, new Float64Array(capacity), this.#start, this.#count);
    this.#offset = unwrap(this.#offset, new Int32Array(capacity), this.#start, this.#count);
    this.#length = unwrap(this.#length, new Int32Array(capacity), this.#start, this.#count);
    this.#start = 0;
  }
}

/** Copies a ring's `count` entries from `start` to the front of `into`, in order: two block copies at most. */
function unwrap<T extends Float64Array | Int32Array>(ring: T, into: T, start: number, count: number): T {
  const first = Math.min(count, ring.length - start);
  into.set(ring.subarray(start, start + first), 0);
  if (first < count) into.set(ring.subarray(0, count - first), first);
  return into;
}
