// The appends of one turn of the event loop, sent to Redis together: one script call stores the
// messages of many inboxes (one Redis) or of one inbox (a Redis Cluster, where a script runs in
// one slot), so that Redis parses, looks up and sets up a script once for many messages, and the
// consecutive messages of one sender to one inbox in one conversation (a "run") share one stream
// entry, one index record and one dedupe update (redis-inbox-scripts.ts).
//
// Order: an inbox's appends go in the order they were made, in one call or, past a call's bounds,
// in consecutive ones, and calls go out in order on one connection (a Cluster: on the inbox's
// master's), so an inbox stores them in that order. A failed call fails each of its appends, and
// an inbox the script could not write fails its own (SB_ERR_STORE_UNAVAILABLE); what was stored
// before the failure keeps its seqs, and a resend finds it a duplicate.

import { createHash } from 'node:crypto';
import { storeUnavailable } from '../redis/redis-client.js';
import { bufferOf } from '../protocol/wire.js';
import { dedupeKeyOf } from './dedupe-window.js';
import { type AppendRequest, type AppendResult, type EpochSource } from './inbox-store.js';
import { CHUNK, inboxKeys } from './redis-inbox-scripts.js';

/** Messages per script call at most (a call holds Redis for its duration: a few µs per message). */
export const MAX_BATCH_MESSAGES = 256;
/** Body bytes per script call at most (one body larger than that goes alone). */
export const MAX_BATCH_BYTES = 1 << 20;
/** Messages per run and runs per inbox in one call at most (the script reads each count as 2 bytes). */
const MAX_COUNT = 0xffff;

/** One script call (redis-inbox-scripts.ts, appendBatch): its keys, its appends and their bodies. */
export interface BatchCall {
  keys: string[];
  batch: Buffer;
  /** The bodies, framed: per run, CHUNK a buffer (the last one the rest). */
  chunks: Buffer[];
}

/** Sends the calls of one flush, in order; a promise of each one's reply. */
export type SendBatch = (calls: BatchCall[], now: number) => Promise<unknown>[];

interface Append {
  readonly sender: string;
  readonly conversation: string;
  readonly own: boolean;
  /** The msg_id (dedupeKey); undefined: not deduplicated. */
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

/** An inbox's runs in one call. */
interface Section {
  readonly base: string;
  readonly runs: Run[];
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
  /** Calls sent and not answered yet (close() waits for them). */
  readonly #inFlight = new Set<Promise<unknown>>();

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

  /** Sends what is pending now, and resolves once every call sent is answered (the store's close()). */
  async drain(): Promise<void> {
    this.flush();
    await Promise.allSettled([...this.#inFlight]);
  }

  /** Sends what is pending now. */
  flush(): void {
    this.#scheduled = false;
    const pending = this.#pending;
    if (pending.size === 0) return;
    this.#pending = new Map();
    const calls: Section[][] = [];
    let call: Section[] = [];
    let messages = 0;
    let bytes = 0;
    const close = () => {
      if (call.length > 0) calls.push(call);
      call = [];
      messages = 0;
      bytes = 0;
    };
    for (const { base, appends } of pending.values()) {
      if (this.#o.perInbox || messages >= MAX_BATCH_MESSAGES || bytes >= MAX_BATCH_BYTES) close();
      let section: Section = { base, runs: [] };
      call.push(section);
      for (const run of runsOf(appends)) {
        let runBytes = 0;
        for (const a of run.appends) runBytes += a.body.length;
        // Past a bound, the call goes and the inbox's next runs go in the next one (a run larger
        // than a bound goes alone).
        if (section.runs.length > 0 && (messages + run.appends.length > MAX_BATCH_MESSAGES || bytes + runBytes > MAX_BATCH_BYTES || section.runs.length === MAX_COUNT)) {
          close();
          section = { base, runs: [] };
          call.push(section);
        }
        section.runs.push(run);
        messages += run.appends.length;
        bytes += runBytes;
      }
    }
    close();
    let replies: Promise<unknown>[];
    try {
      replies = this.#send(
        calls.map((sections) => this.#encode(sections)),
        this.#o.now(),
      );
    } catch (err) {
      // Nothing was sent: every append of this flush gets the error, none is left waiting.
      for (const sections of calls) failCall(sections, storeUnavailable('inbox', err));
      return;
    }
    replies.forEach((reply, i) => {
      const sections = calls[i]!;
      const sent = reply.then(
        (answer) => settleCall(sections, answer as (number | string)[]),
        (err: unknown) => failCall(sections, storeUnavailable('inbox', err)),
      );
      this.#inFlight.add(sent);
      void sent.finally(() => this.#inFlight.delete(sent));
    });
  }

  #add(request: AppendRequest, done: Append['done']): void {
    const base = this.#o.baseOf(request.uid);
    let inbox = this.#pending.get(base);
    if (inbox === undefined) this.#pending.set(base, (inbox = { base, appends: [] }));
    inbox.appends.push({
      sender: request.sender,
      conversation: request.conversation ?? '',
      own: request.own === true,
      id: dedupeKeyOf(request.msgId),
      body: bufferOf(request.body),
      done,
    });
    if (!this.#scheduled) {
      this.#scheduled = true;
      // After the I/O of this turn: every socket read in it adds to the same batch.
      setImmediate(() => this.flush());
    }
  }

  /** A call's keys, its second argument and its chunks of bodies (redis-inbox-scripts.ts, appendBatch). */
  #encode(sections: Section[]): BatchCall {
    const keys: string[] = [];
    let size = 0;
    let bodyBytes = 0;
    let chunkCount = 0;
    for (const { base, runs } of sections) {
      const k = inboxKeys(base);
      keys.push(k.seq, k.ep, k.lg, k.cv, k.cl);
      size += 18;
      for (const run of runs) {
        keys.push(`${base}:dr:${run.appends[0]!.sender}`, `${base}:ci:${run.appends[0]!.conversation}`);
        size += 11 + run.sender.length + run.conversation.length + 8 * run.appends.length;
        for (const a of run.appends) bodyBytes += 4 + a.body.length;
        chunkCount += Math.ceil(run.appends.length / CHUNK);
      }
    }
    const batch = Buffer.allocUnsafe(size);
    // Every chunk is a view of one buffer: one allocation a call.
    const bodies = Buffer.allocUnsafe(bodyBytes);
    const chunks: Buffer[] = new Array<Buffer>(chunkCount);
    let at = 0;
    let bodyAt = 0;
    let c = 0;
    for (const { runs } of sections) {
      at = batch.writeDoubleBE(this.#o.epochs.next(), at);
      at = batch.writeUInt16BE(runs.length, at);
      const bytesAt = at;
      const inboxChunksAt = at + 4;
      at += 8;
      const firstChunk = c;
      for (const run of runs) {
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
        const { appends } = run;
        let chunkStart = bodyAt;
        for (let i = 0; i < appends.length; i++) {
          const { body } = appends[i]!;
          bodyAt = bodies.writeUInt32BE(body.length, bodyAt);
          bodyAt += body.copy(bodies, bodyAt);
          if ((i + 1) % CHUNK === 0 || i === appends.length - 1) {
            chunks[c++] = bodies.subarray(chunkStart, bodyAt);
            chunkStart = bodyAt;
          }
        }
      }
      batch.writeUInt32BE(at - bytesAt - 8, bytesAt);
      batch.writeUInt32BE(c - firstChunk, inboxChunksAt);
    }
    return { keys, batch, chunks };
  }
}

/** An inbox's appends as runs: consecutive ones of one sender, conversation and ownness. */
function runsOf(appends: Append[]): Run[] {
  const runs: Run[] = [];
  for (let i = 0; i < appends.length; ) {
    const { sender, conversation, own } = appends[i]!;
    let j = i + 1;
    while (j < appends.length && j - i < MAX_COUNT && appends[j]!.sender === sender && appends[j]!.conversation === conversation && appends[j]!.own === own) j++;
    runs.push({ appends: appends.slice(i, j), sender: Buffer.from(sender), conversation: Buffer.from(conversation), own });
    i = j;
  }
  return runs;
}

/** Each inbox of a call: its epoch, then per run its first seq (all new) or 0 and a seq each; or -1 and why it failed. */
function settleCall(sections: Section[], reply: (number | string)[]): void {
  let r = 0;
  for (const { runs } of sections) {
    const epoch = reply[r++] as number;
    if (epoch === -1) {
      const error = storeUnavailable('inbox', new Error(String(reply[r++])));
      for (const run of runs) for (const a of run.appends) a.done(error, 0, 0);
      continue;
    }
    for (const { appends } of runs) {
      const first = reply[r++] as number;
      // All new: the seqs that follow the first; else one answer each.
      if (first > 0) for (let k = 0; k < appends.length; k++) appends[k]!.done(undefined, first + k, epoch);
      else for (const a of appends) a.done(undefined, reply[r++] as number, epoch);
    }
  }
}

function failCall(sections: Section[], error: unknown): void {
  for (const { runs } of sections) for (const run of runs) for (const a of run.appends) a.done(error, 0, 0);
}

/** A seq as the script answers it: negated for a duplicate. */
function resultOf(seq: number, epoch: number): AppendResult {
  return seq < 0 ? { seq: -seq, duplicate: true, epoch } : { seq, duplicate: false, epoch };
}

const UINT64 = /^(?:0|[1-9]\d{0,19})$/;

/** Writes `id` (a dedupeKey) as the 8 bytes the script compares, at `offset`. */
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

