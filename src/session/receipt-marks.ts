// A session's deliveries written and not yet acknowledged, for the DELIVERED receipts its acks
// produce (src/server/receipts.ts): each delivery's seq, sender and msg_id, in a ring of
// MAX_MARKS. Written per delivery, so nothing here allocates in the usual case: seqs and msg_ids
// in typed arrays, the sender's bytes read in place and matched against the last sender's (most
// of a device's deliveries come from the few it talks to), a string made only for a new one.

import { readOrigin, type OriginBytes } from '../protocol/receipts.js';
import type { UInt64 } from '../protocol/types.js';
import { WireReader, bufferOf } from '../protocol/wire.js';

/** Deliveries remembered per session until acknowledged (24 bytes each); past it the oldest is forgotten. */
export const MAX_MARKS = 256;
/** The ring starts this small and doubles up to MAX_MARKS: most devices acknowledge within a window of 32. */
const FIRST_CAPACITY = 16;

/** A delivery acknowledged: the receipt it produces. */
export interface ReceiptMark {
  seq: number;
  from: string;
  msgId: UInt64;
}

const EMPTY = Buffer.alloc(0);

export class ReceiptMarks {
  #seqs = new Float64Array(FIRST_CAPACITY);
  /** A msg_id below 2^53; NaN for a larger one, which is in #longIds by seq. */
  #msgIds = new Float64Array(FIRST_CAPACITY);
  #froms: string[] = new Array<string>(FIRST_CAPACITY).fill('');
  /** The ring's size - 1 (a power of two). */
  #mask = FIRST_CAPACITY - 1;
  #longIds: Map<number, UInt64> | undefined;
  /** Ring index of the oldest mark. */
  #start = 0;
  #count = 0;
  #lastFrom = '';
  #lastFromBytes = EMPTY;
  readonly #reader = new WireReader(EMPTY, 0, 0, false);
  readonly #origin: OriginBytes = { fromStart: 0, fromEnd: 0, msgId: 0 };

  get length(): number {
    return this.#count;
  }

  /** Seq of the oldest mark; Infinity when there is none. */
  get oldestSeq(): number {
    return this.#count === 0 ? Number.POSITIVE_INFINITY : this.#seqs[this.#start]!;
  }

  /**
   * Remembers delivery `seq` (ascending) of stored `body` from a sender other than `self`; nothing
   * for what no receipt is about (an event, a body without a sender). Full: the oldest is
   * forgotten (a later receipt from its sender covers it).
   */
  add(seq: number, body: Uint8Array, self: string): void {
    const buf = bufferOf(body);
    const origin = this.#origin;
    const read = readOrigin(this.#reader.reset(buf, 0, buf.length), origin);
    // The reader lets go of the body: it may be a view of an inbox slab.
    this.#reader.reset(EMPTY, 0, 0);
    if (!read) return;
    const from = this.#sender(buf, origin.fromStart, origin.fromEnd);
    if (from === self) return;
    if (this.#count > this.#mask) {
      if (this.#count === MAX_MARKS) this.#shift();
      else this.#grow();
    }
    const i = (this.#start + this.#count++) & this.#mask;
    this.#seqs[i] = seq;
    this.#froms[i] = from;
    const msgId = origin.msgId;
    if (typeof msgId === 'number') this.#msgIds[i] = msgId;
    else {
      this.#msgIds[i] = Number.NaN;
      (this.#longIds ??= new Map()).set(seq, msgId);
    }
  }

  /** Forgets the marks up to `seq`, and returns the newest of each sender among them. */
  take(seq: number): ReceiptMark[] {
    const taken: ReceiptMark[] = [];
    const senders = new Set<string>();
    let n = 0;
    while (n < this.#count && this.#seqs[(this.#start + n) & this.#mask]! <= seq) n++;
    // Newest first: the first mark seen of a sender is its newest.
    for (let k = n - 1; k >= 0; k--) {
      const i = (this.#start + k) & this.#mask;
      const from = this.#froms[i]!;
      if (senders.has(from)) continue;
      senders.add(from);
      const markSeq = this.#seqs[i]!;
      const id = this.#msgIds[i]!;
      taken.push({ seq: markSeq, from, msgId: Number.isNaN(id) ? this.#longIds!.get(markSeq)! : id });
    }
    for (let k = 0; k < n; k++) this.#shift();
    return taken;
  }

  clear(): void {
    while (this.#count > 0) this.#shift();
  }

  #shift(): void {
    const i = this.#start;
    if (Number.isNaN(this.#msgIds[i]!)) this.#longIds?.delete(this.#seqs[i]!);
    this.#froms[i] = '';
    this.#start = (i + 1) & this.#mask;
    this.#count--;
  }

  /** Doubles the ring, its marks moved to the front in order. */
  #grow(): void {
    const capacity = 2 * (this.#mask + 1);
    const seqs = new Float64Array(capacity);
    const msgIds = new Float64Array(capacity);
    const froms = new Array<string>(capacity).fill('');
    for (let k = 0; k < this.#count; k++) {
      const i = (this.#start + k) & this.#mask;
      seqs[k] = this.#seqs[i]!;
      msgIds[k] = this.#msgIds[i]!;
      froms[k] = this.#froms[i]!;
    }
    this.#seqs = seqs;
    this.#msgIds = msgIds;
    this.#froms = froms;
    this.#mask = capacity - 1;
    this.#start = 0;
  }

  /** The sender whose UTF-8 bytes are buf[start, end): the last one's string when it is the same. */
  #sender(buf: Buffer, start: number, end: number): string {
    const last = this.#lastFromBytes;
    if (sameBytes(buf, start, end, last)) return this.#lastFrom;
    const from = buf.toString('utf8', start, end);
    this.#lastFrom = from;
    this.#lastFromBytes = Buffer.from(from, 'utf8');
    return from;
  }
}

/** Whether buf[start, end) holds `bytes`: byte by byte, since a sender's id is short and Buffer#compare is a call into C++. */
function sameBytes(buf: Buffer, start: number, end: number, bytes: Buffer): boolean {
  const n = bytes.length;
  if (end - start !== n) return false;
  for (let i = 0; i < n; i++) if (buf[start + i] !== bytes[i]) return false;
  return true;
}
