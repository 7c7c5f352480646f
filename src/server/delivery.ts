// Getting inbox messages onto devices, in sequence order, without gaps or duplicates.
//
// Each LocalSession carries its position: `sentSeq` (written to the socket) and, for devices
// that acknowledge, `ackedSeq`. A message arriving live is written only when it is exactly the
// next one; anything else (a gap, a replay after login, a resend after the ack timeout)
// "pumps": reads the inbox after `sentSeq` in batches, writing only while the socket is not
// congested (waiting for it to drain otherwise, within a batch too), until it has caught up
// with the highest sequence known to exist. Live messages that
// arrive while pumping only raise `knownHead`, so the pump picks them up: that is the seam
// between replay and live delivery.
//
// Positions are saved to the InboxStore write-behind, by the worker's sweep and on release:
// ackedSeq for ack devices, sentSeq for legacy ones (at-most-once past the socket write).

import type { WorkerLimits } from '../config.js';
import type { Logger } from '../log.js';
import type { InboxStore } from '../inbox/inbox-store.js';
import { deliveryFrame } from '../protocol/chat-frames.js';
import type { SyncStart } from '../protocol/messages.js';
import type { LocalSession } from '../session/local-session.js';

export class Delivery {
  readonly #inbox: InboxStore;
  readonly #limits: WorkerLimits;
  readonly #log: Logger;
  /** Sessions whose position moved since it was last saved. */
  readonly #dirty = new Set<LocalSession>();

  constructor(inbox: InboxStore, limits: WorkerLimits, log: Logger) {
    this.#inbox = inbox;
    this.#limits = limits;
    this.#log = log;
  }

  /**
   * Decides where a new session's replay starts: after the position the device asked for, or
   * else after its saved one, or else from the beginning of what is retained. Messages pruned
   * in between are reported as a gap.
   */
  async prepare(session: LocalSession, requested: number | undefined): Promise<SyncStart> {
    const position = requested ?? (await this.#inbox.cursor(session.uid, session.deviceId)) ?? 0;
    const { head, oldest } = await this.#inbox.range(session.uid, 0, 0);
    let from = Math.min(position, head);
    const gap = from + 1 < oldest;
    if (gap) from = oldest - 1;
    session.sentSeq = from;
    session.ackedSeq = from;
    if (head > session.knownHead) session.knownHead = head;
    return { inboxHead: head, syncFrom: from, gap };
  }

  /** The LoginResponse is out: start the replay, and live delivery after it. */
  start(session: LocalSession): void {
    session.ready = true;
    if (session.knownHead > session.sentSeq) this.#pump(session);
  }

  /** A message was stored in the inbox of the owner of `sessions`. */
  deliverLive(sessions: readonly LocalSession[], seq: number, body: Uint8Array): void {
    let frame: Buffer | undefined;
    // A write can drop a session as a slow consumer, which removes it from this very array (the
    // session map's own): iterate a copy, or the session after it would be skipped.
    for (const session of sessions.length > 1 ? [...sessions] : sessions) {
      if (seq > session.knownHead) session.knownHead = seq;
      if (!session.ready || session.pumping || seq <= session.sentSeq) continue;
      if (seq !== session.sentSeq + 1) {
        this.#pump(session);
        continue;
      }
      frame ??= deliveryFrame(body, seq);
      this.#write(session, seq, frame);
    }
  }

  /** MESSAGE_ACK: everything up to `seq` is processed by the device. */
  acknowledge(session: LocalSession, seq: number): void {
    const upTo = Math.min(seq, session.sentSeq);
    if (upTo <= session.ackedSeq) return;
    session.ackedSeq = upTo;
    session.unackedSince = upTo < session.sentSeq ? Date.now() : 0;
    this.#dirty.add(session);
  }

  /**
   * Periodic: resend what ack devices left unacknowledged too long, retry sessions whose pump
   * failed, and save moved positions.
   */
  sweep(sessions: Iterable<LocalSession>, now: number): void {
    for (const session of sessions) {
      if (!session.ready || session.pumping) continue;
      if (session.acks && session.unackedSince !== 0 && now - session.unackedSince > this.#limits.ackTimeoutMs) {
        session.sentSeq = session.ackedSeq;
        session.unackedSince = 0;
        this.#pump(session);
      } else if (session.knownHead > session.sentSeq) {
        this.#pump(session);
      }
    }
    for (const session of this.#dirty) this.#save(session);
    this.#dirty.clear();
  }

  /** Something may have been stored that this session was not told about: read its inbox. */
  nudge(session: LocalSession): void {
    if (session.ready && !session.pumping) this.#pump(session);
  }

  /** The session is gone: stop sending to it and save its position now. */
  release(session: LocalSession): void {
    session.released = true;
    session.ready = false;
    this.#dirty.delete(session);
    this.#save(session);
  }

  #write(session: LocalSession, seq: number, frame: Buffer): void {
    session.outbound.sendFrame(frame);
    // Dropped by this very write (slow consumer): it was discarded, and release() has saved the
    // position already; marking the session dirty again would save this seq as sent.
    if (session.released) return;
    if (session.acks) {
      if (session.unackedSince === 0) session.unackedSince = Date.now();
    } else {
      this.#dirty.add(session);
    }
    session.sentSeq = seq;
  }

  async #pump(session: LocalSession): Promise<void> {
    session.pumping = true;
    const batch = this.#limits.syncBatchSize;
    try {
      for (;;) {
        const knownBefore = session.knownHead;
        const { messages } = await this.#inbox.range(session.uid, session.sentSeq, batch);
        if (session.released) return;
        for (const m of messages) {
          // Paced within a batch too: a batch of large messages written at once would overrun
          // maxOutboundBytes before the socket could take any of it.
          if (session.outbound.congested) {
            await session.outbound.drained();
            if (session.released) return;
          }
          if (m.seq > session.sentSeq) this.#write(session, m.seq, deliveryFrame(m.body, m.seq));
          // The write dropped the connection: nothing after it is sent, so none of it may count.
          if (session.released) return;
        }
        if (messages.length === 0) {
          // Nothing retained after sentSeq: what knownHead promised was pruned meanwhile. (A
          // message that arrived during the read raised knownHead: read again.)
          if (session.knownHead !== knownBefore) continue;
          session.knownHead = session.sentSeq;
          return;
        }
        if (messages.length < batch && session.knownHead <= session.sentSeq) return;
        if (session.outbound.congested) await session.outbound.drained();
        if (session.released) return;
      }
    } catch (err) {
      // The sweep retries: knownHead is still ahead of sentSeq.
      this.#log.error({ err, uid: session.uid, deviceId: session.deviceId }, 'inbox read failed');
    } finally {
      session.pumping = false;
    }
  }

  #save(session: LocalSession): void {
    const position = session.acks ? session.ackedSeq : session.sentSeq;
    if (position <= session.savedPosition) return;
    session.savedPosition = position;
    this.#inbox.saveCursor(session.uid, session.deviceId, position).catch((err: unknown) => {
      this.#log.error({ err, uid: session.uid, deviceId: session.deviceId }, 'position save failed');
    });
  }
}
