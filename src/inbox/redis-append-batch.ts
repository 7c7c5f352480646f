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

/** One script call: the inboxes' key bases, then its arguments (inbox-scripts.ts, appendBatch). */
export type SendBatch = (args: (string | Buffer | number)[]) => Promise<number[]>;

interface Append {
  readonly sender: string;
  readonly conversation: string;
  readonly own: boolean;
  /** The msg_id as 8 bytes; undefined: not deduplicated. */
  readonly id: Buffer | undefined;
  readonly body: Buffer;
  done(error: unknown, seq: number, epoch: number): void;
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
      id: hasDedupeId(request.msgId) ? idBytes(request.msgId) : undefined,
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
    const args: (string | Buffer | number)[] = [inboxes.length];
    for (const inbox of inboxes) args.push(inbox.base);
    args.push(this.#o.now());
    // Each inbox's appends as runs: consecutive ones of one sender, conversation and ownness.
    const runs: Append[][] = [];
    for (const { appends } of inboxes) {
      args.push(this.#o.epochs.next());
      const runsAt = args.push(0) - 1;
      let count = 0;
      for (let i = 0; i < appends.length; ) {
        const { sender, conversation, own } = appends[i]!;
        let j = i + 1;
        while (j < appends.length && appends[j]!.sender === sender && appends[j]!.conversation === conversation && appends[j]!.own === own) j++;
        const run = appends.slice(i, j);
        const ids = Buffer.allocUnsafe(8 * run.length);
        let rising = true;
        for (let k = 0; k < run.length; k++) {
          const id = run[k]!.id;
          if (id === undefined) ids.fill(0, 8 * k, 8 * k + 8);
          else id.copy(ids, 8 * k);
          if (id === undefined || (k > 0 && Buffer.compare(id, ids.subarray(8 * k - 8, 8 * k)) <= 0)) rising = false;
        }
        args.push(sender, conversation, own ? (rising ? '11' : '10') : rising ? '01' : '00', run.length, ids);
        for (const a of run) args.push(a.body);
        runs.push(run);
        count++;
        i = j;
      }
      args[runsAt] = count;
    }
    this.#send(args).then(
      (reply) => {
        let r = 0;
        let run = 0;
        for (const { appends } of inboxes) {
          const epoch = reply[r++]!;
          for (let done = 0; done < appends.length; run++) {
            const appendsOfRun = runs[run]!;
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

const MAX_EXACT = Number.MAX_SAFE_INTEGER;
const UINT64 = /^(?:0|[1-9]\d{0,19})$/;

/**
 * A msg_id as the 8 bytes the dedupe script compares: a canonical uint64 decimal (what clients
 * send) big-endian, so that ids rising as numbers rise as bytes; anything else (only a caller
 * of the store can make one) the first 8 bytes of its SHA-256.
 */
export function idBytes(msgId: string): Buffer {
  const bytes = Buffer.allocUnsafe(8);
  if (msgId.length <= 15 && UINT64.test(msgId)) {
    const n = Number(msgId);
    if (n <= MAX_EXACT) {
      bytes.writeUInt32BE(Math.floor(n / 0x1_0000_0000), 0);
      bytes.writeUInt32BE(n >>> 0, 4);
      return bytes;
    }
  }
  if (UINT64.test(msgId)) {
    const n = BigInt(msgId);
    if (n < 1n << 64n) {
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
