// The requests an ImClient waits on (chat messages, the logout) until the server answers, by
// envelope sequence and in the order they were made: bounded (maxPendingRequests), each with a
// deadline. A request made while the client is not logged in waits unsent and goes out after
// the login. When a connection is lost, what was written on it may or may not have reached the
// server: requests that may be sent again (an ack client's chat messages, which the server
// deduplicates by msg_id) wait for the next connection, the others fail.

import { uint64Number } from '../protocol/codec.js';
import { SwitchboardError } from '../errors.js';
import type { ImMessage } from '../protocol/types.js';

interface Pending {
  resolve: (value: ImMessage) => void;
  reject: (err: Error) => void;
  deadline: number;
  frame: Buffer;
  /** True once written on the current connection. */
  sent: boolean;
  /** Sent again after a reconnect (chat messages: the server deduplicates by msg_id). */
  retry: boolean;
}

export class PendingRequests {
  /** Map keeps insertion order: the oldest request, the first to expire, comes first. */
  readonly #pending = new Map<number, Pending>();
  readonly #limit: number;
  readonly #timeoutMs: number;

  constructor(limit: number, timeoutMs: number) {
    this.#limit = limit;
    this.#timeoutMs = timeoutMs;
  }

  get size(): number {
    return this.#pending.size;
  }

  /** SB_ERR_CLIENT_QUEUE_FULL when `limit` requests wait already; undefined while there is room. */
  full(): SwitchboardError | undefined {
    if (this.#pending.size < this.#limit) return undefined;
    return new SwitchboardError('SB_ERR_CLIENT_QUEUE_FULL', `${this.#pending.size} requests are already waiting`);
  }

  /**
   * Waits for the answer to `sequence`: `frame` was written already when `sent`, else it goes
   * with flushUnsent(). `retry`: sent again after a lost connection instead of failing.
   */
  add(sequence: number, frame: Buffer, sent: boolean, retry: boolean): Promise<ImMessage> {
    return new Promise<ImMessage>((resolve, reject) => {
      this.#pending.set(sequence, { resolve, reject, deadline: Date.now() + this.#timeoutMs, frame, sent, retry });
    });
  }

  /** The server's answer: settles the request of its sequence, if one waits. */
  settle(message: ImMessage): void {
    const sequence = uint64Number(message.sequence);
    const pending = this.#pending.get(sequence);
    if (!pending) return;
    this.#pending.delete(sequence);
    pending.resolve(message);
  }

  /** Writes, in order, every request not yet written on this connection (after a login). */
  flushUnsent(write: (frame: Buffer) => void): void {
    for (const pending of this.#pending.values()) {
      if (!pending.sent) {
        pending.sent = true;
        write(pending.frame);
      }
    }
  }

  /** Rejects the requests whose deadline has come (SB_ERR_CLIENT_TIMEOUT). */
  expire(now: number): void {
    for (const [sequence, pending] of this.#pending) {
      if (pending.deadline > now) break;
      this.#pending.delete(sequence);
      pending.reject(new SwitchboardError('SB_ERR_CLIENT_TIMEOUT', `no answer within ${this.#timeoutMs} ms`));
    }
  }

  /**
   * The connection they were written on is lost. Unless `final` (no connection follows), the
   * ones to retry wait to be written again; the others written on it reject with an `err()`
   * each. Those never written keep waiting either way (close() rejects them, see rejectAll).
   */
  connectionLost(final: boolean, err: () => SwitchboardError): void {
    for (const [sequence, pending] of this.#pending) {
      if (!pending.sent) continue;
      if (pending.retry && !final) {
        pending.sent = false;
        continue;
      }
      this.#pending.delete(sequence);
      pending.reject(err());
    }
  }

  rejectAll(err: SwitchboardError): void {
    for (const pending of this.#pending.values()) pending.reject(err);
    this.#pending.clear();
  }
}
