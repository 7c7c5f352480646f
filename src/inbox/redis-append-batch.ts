// The appends of one turn of the event loop, sent to Redis together: one script call stores the
// messages of many inboxes (one Redis) or of one inbox (a Redis Cluster, where a script runs in
// one slot), so that Redis parses, looks up and sets up a script once for many messages, and the
// consecutive messages of one sender to one inbox in one conversation (a "run") share one stream
// entry, one index record and one dedupe update (redis-inbox-scripts.ts).
//
// Order: the appends of one inbox go in one call, in the order they were made, and calls go out
// in order on one connection (a Cluster: on the inbox's node's), so an inbox stores them in that
// order. A failed call fails each of its appends (SB_ERR_STORE_UNAVAILABLE); what it stored
// before it failed, if anything, a resend finds as a duplicate.

import { createHash } from 'node:crypto';
import { storeUnavailable } from '../redis/redis-client.js';
import { hasDedupeId, type AppendRequest, type AppendResult, type EpochSource } from './inbox-store.js';

/** Messages per script call at most (a call holds Redis for its duration: a few µs per message). */
export const MAX_BATCH_MESSAGES = 256;
/** Body bytes per script call at most. */
export const MAX_BATCH_BYTES = 1 << 20;
/** Messages per run at most (the script reads a run's count as 2 bytes). */
const MAX_RUN = 0xffff;

/** One script call (redis-inbox-scripts.ts, appendBatch): the inboxes' key bases, now, the appends. */
export type SendBatch = (bases: string[], now: number, batch: Buffer) => Promise<number[]>;

interface Append {
  readonly sender: string;
  readonly conversation: string;
  readonly own: boolean;
  /** The msg_id (dedupeId); undefined: not deduplicated. */
  readonly id: number | string | undefined;
  readonly body: Buffer;
  done(error: unknown, seq: number, epoch: number): void;
}

interface Run {
  readonly appends: Append[];
  readonly sender: Buffer;
  readonly conversation: Buffer;
  readonly own: boolean;
}

interface InboxAppends {
  readonly base: string;
  readonly appends: Append[];
}

export interface AppendBatchOptions {
  /** A Redis Cluster: one call per inbox. */
  perInbox: boolean;
  now: () => number;
  epochs: EpochSource;
  /** The key base of `uid`'s inbox: `<prefix>{uid}`. */
  baseOf(uid: string): string;
}

export class AppendBatch {
  readonly #send: SendBatch;
  readonly #o: AppendBatchOptions;
  #pending = new Map<string, InboxAppends>();
  #scheduled = false;

  constructor(send: SendBatch, options: AppendBatchOptions) {
    this.#send = send;
    this.#o = options;
  }

  append(request: AppendRequest): Promise<AppendResult> {
    return new Promise((resolve, reject) => {
      this.#add(request, (error, seq, epoch) => (error === undefined ? resolve(resultOf(seq, epoch)) : reject(error)));
    });
  }

  /** Both, resolved together; rejected if either failed (the other may be stored: a resend finds it). */
  appendPair(first: AppendRequest, second: AppendRequest): Promise<[AppendResult, AppendResult]> {
    return new Promise((resolve, reject) => {
      const results: AppendResult[] = [];
      let left = 2;
      let failed: unknown;
      const settle = (i: number) => (error: unknown, seq: number, epoch: number) => {
        if (error !== undefined) failed ??= error;
        else results[i] = resultOf(seq, epoch);
        if (--left > 0) return;
        if (failed !== undefined) reject(failed);
        else resolve(results as [AppendResult, AppendResult]);
      };
      this.#add(first, settle(0));
      this.#add(second, settle(1));
    });
  }

  /** Sends what is pending now (the store's close()). */
  flush(): void {
    this.#scheduled = false;
    const pending = this.#pending;
    if (pending.size === 0) return;
    this.#pending = new Map();
    let call: InboxAppends[] = [];
    let messages = 0;
    let bytes = 0;
    for (const inbox of pending.values()) {
      call.push(inbox);
      messages += inbox.appends.length;
      for (const a of inbox.appends) bytes += a.body.length;
      if (this.#o.perInbox || messages >= MAX_BATCH_MESSAGES || bytes >= MAX_BATCH_BYTES) {
        this.#call(call);
        call = [];
        messages = 0;
        bytes = 0;
      }
    }
    if (call.length > 0) this.#call(call);
  }

  #add(request: AppendRequest, done: Append['done']): void {
    const base = this.#o.baseOf(request.uid);
    let inbox = this.#pending.get(base);
    if (inbox === undefined) this.#pending.set(base, (inbox = { base, appends: [] }));
    inbox.appends.push({
      sender: request.sender,
      conversation: request.conversation ?? '',
      own: request.own === true,
      id: hasDedupeId(request.msgId) ? dedupeId(request.msgId) : undefined,
      body: bufferOf(request.body),
      done,
    });
    if (!this.#scheduled) {
      this.#scheduled = true;
      // After the I/O of this turn: every socket read in it adds to the same batch.
      setImmediate(() => this.flush());
    }
  }

  #call(inboxes: InboxAppends[]): void {
    // Each inbox's appends as runs: consecutive ones of one sender, conversation and ownness.
    const runs: Run[] = [];
    let size = 0;
    for (const { appends } of inboxes) {
      size += 10;
      for (let i = 0; i < appends.length; ) {
        const { sender, conversation, own } = appends[i]!;
        let j = i + 1;
        while (j < appends.length && j - i < MAX_RUN && appends[j]!.sender === sender && appends[j]!.conversation === conversation && appends[j]!.own === own) j++;
        const run: Run = { appends: appends.slice(i, j), sender: Buffer.from(sender), conversation: Buffer.from(conversation), own };
        runs.push(run);
        size += 13 + run.sender.length + run.conversation.length;
        for (const a of run.appends) size += 12 + a.body.length;
        i = j;
      }
    }
    // The script's second argument (redis-inbox-scripts.ts, appendBatch).
    const batch = Buffer.allocUnsafe(size);
    let at = 0;
    let r = 0;
    for (const { appends } of inboxes) {
      at = batch.writeDoubleBE(this.#o.epochs.next(), at);
      const runsAt = at;
      at += 2;
      let count = 0;
      for (let done = 0; done < appends.length; count++) {
        const run = runs[r++]!;
        at = batch.writeUInt32BE(run.sender.length, at);
        at += run.sender.copy(batch, at);
        at = batch.writeUInt32BE(run.conversation.length, at);
        at += run.conversation.copy(batch, at);
        const flagsAt = at;
        at = batch.writeUInt16BE(run.appends.length, at + 1);
        // Rising: numbers that ascend (ids the script need not look up, past the highest stored).
        let rising = true;
        let last = -1;
        for (const { id } of run.appends) {
          if (id === undefined) batch.fill(0, at, at + 8);
          else writeId(id, batch, at);
          at += 8;
          if (typeof id !== 'number' || id <= last) rising = false;
          else last = id;
        }
        batch[flagsAt] = (run.own ? 1 : 0) + (rising ? 2 : 0);
        for (const { body } of run.appends) {
          at = batch.writeUInt32BE(body.length, at);
          at += body.copy(batch, at);
        }
        done += run.appends.length;
      }
      batch.writeUInt16BE(count, runsAt);
    }
    this.#send(
      inboxes.map((inbox) => inbox.base),
      this.#o.now(),
      batch,
    ).then(
      (reply) => {
        let r = 0;
        let run = 0;
        for (const { appends } of inboxes) {
          const epoch = reply[r++]!;
          for (let done = 0; done < appends.length; run++) {
            const appendsOfRun = runs[run]!.appends;
            const first = reply[r++]!;
            // All new: the seqs that follow the first; else one answer each.
            if (first > 0) appendsOfRun.forEach((a, k) => a.done(undefined, first + k, epoch));
            else for (const a of appendsOfRun) a.done(undefined, reply[r++]!, epoch);
            done += appendsOfRun.length;
          }
        }
      },
      (err: unknown) => {
        const error = storeUnavailable('inbox', err);
        for (const { appends } of inboxes) for (const a of appends) a.done(error, 0, 0);
      },
    );
  }
}

/** A seq as the script answers it: negated for a duplicate. */
function resultOf(seq: number, epoch: number): AppendResult {
  return seq < 0 ? { seq: -seq, duplicate: true, epoch } : { seq, duplicate: false, epoch };
}

const UINT64 = /^(?:0|[1-9]\d{0,19})$/;

/**
 * A msg_id as what the dedupe script compares, 8 big-endian bytes: a canonical decimal up to
 * 2^53 - 1 (what clients send, usually) as its number, written into the run's ids directly;
 * anything else as its string (idBytes).
 */
export function dedupeId(msgId: string): number | string {
  if (msgId.length <= 16 && UINT64.test(msgId)) {
    const n = Number(msgId);
    if (Number.isSafeInteger(n)) return n;
  }
  return msgId;
}

/** Writes `id` (dedupeId) as 8 bytes at `offset`. */
function writeId(id: number | string, ids: Buffer, offset: number): void {
  if (typeof id === 'number') {
    ids.writeUInt32BE(Math.floor(id / 0x1_0000_0000), offset);
    ids.writeUInt32BE(id >>> 0, offset + 4);
  } else {
    idBytes(id).copy(ids, offset);
  }
}

/**
 * The 8 bytes of a msg_id that is no number below 2^53: a canonical uint64 decimal big-endian
 * (ids rising as numbers rise as bytes); anything else (only a caller of the store can make one)
 * the first 8 bytes of its SHA-256.
 */
export function idBytes(msgId: string): Buffer {
  if (UINT64.test(msgId)) {
    const n = BigInt(msgId);
    if (n < 1n << 64n) {
      const bytes = Buffer.allocUnsafe(8);
      bytes.writeBigUInt64BE(n, 0);
      return bytes;
    }
  }
  return createHash('sha256').update(msgId).digest().subarray(0, 8);
}

/** A view of a body as a Buffer, for the Redis client (no copy). */
export function bufferOf(body: Uint8Array): Buffer {
  return Buffer.isBuffer(body) ? body : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
}
