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
// Positions belong to an inbox epoch (inbox-store.ts). A live message of another epoch than the
// session's, or with a number the session was already sent, is not written but makes the
// session read its inbox; a read that shows another epoch, or a head below what the session was
// sent (its sequence went backwards: a failover to a lagging replica, or a forged delivery),
// closes the session with SB_ERR_INBOX_RESET. So does a delivery, live or read, of a seq the
// session was sent as another message (the session keeps which message each of its last
// SENT_IDS seqs was, and a read starts at the last one sent to compare it): the sequence went
// backwards and the new messages have already passed the session's position again, which the
// head alone cannot show (a rewind by one, or a burst of appends after the failover), while a
// late copy of what was sent is the same message. Its device cannot be resynced in place (an
// ack client drops sequence numbers it has seen); its next login reports the reset and replays
// what the inbox holds. Either finding in the session's epoch also gives the inbox a new epoch
// first, so every other device of the user resyncs too. A new epoch the store refuses is owed
// (OwedResets): until it is stored, no login and no session of this worker goes on in the forked
// epoch.
//
// Positions are saved to the InboxStore write-behind, by the worker's sweep and on release:
// ackedSeq for ack devices; for legacy ones the last delivery whose frame the kernel had taken
// (HandoffRing), so what a dropped connection still held in the process is replayed.
//
// Own copies (a message's copy in its sender's inbox, for the sender's other devices) are passed
// over, not written, for the device that sent them and for devices that did not log in with
// own_copies, and inbox events (recalls, edits) for devices that did not log in with inbox_events: the position moves past them as if written, and a device's ack of the last seq
// actually written to it (writtenSeq) covers those passed over after it.
//
// Nudges (PEER_NUDGE: "deliveries may have been dropped, read the inbox") are coalesced: those
// of one tick are served together after it, a session reads for a nudge at most once per
// nudge interval (the sweep serves the rest), and one arriving during a read makes the session
// read once more afterwards. A live message that comes while a nudge waits is read, not
// written: what was dropped may be a seq handed out again, which its number would hide. A read
// that fails leaves a nudge waiting: the sweep reads again, once per nudge interval.

import { setTimeout as delay } from 'node:timers/promises';
import type { WorkerLimits } from '../config.js';
import type { Logger } from '../log.js';
import type { InboxStore } from '../inbox/inbox-store.js';
import { deliveryFrame } from '../protocol/chat-frames.js';
import { bodyIdentity, isOwnCopy, ownCopyFrom } from '../protocol/codec.js';
import { isInboxEvent } from '../protocol/recall.js';
import type { SyncStart } from '../protocol/messages.js';
import { HandoffRing } from '../session/handoff-ring.js';
import { OwedResets } from './owed-resets.js';
import type { Receipts } from './receipts.js';
import type { LocalSession } from '../session/local-session.js';

/**
 * Seqs whose message a session remembers (LocalSession.sentIds): its last ones. A failover that
 * hands out seqs again delivers the session some of its last ones again, whatever the rewind.
 */
const SENT_IDS = 8;

/** A new epoch for an inbox found forked is tried this many times, this long apart, before its session is closed. */
const RESET_ATTEMPTS = 5;
const RESET_RETRY_MS = 200;

/** Where a device asks its replay to start (LoginRequest.last_seq and inbox_epoch). */
export interface SyncRequest {
  /** Highest sequence the device has processed; undefined: the position the server saved. */
  seq?: number;
  /** The inbox epoch `seq` belongs to; undefined or 0: not known to the device. */
  epoch?: number;
  /** Replay nothing (LoginRequest.no_replay): the position becomes the head, and is saved so at once. */
  noReplay?: boolean;
}

export interface DeliveryOptions {
  /** A session reads its inbox for nudges at most once per this long. */
  nudgeIntervalMs: number;
  /** Told of every delivery written and every ack: the DELIVERED receipts. */
  receipts?: Pick<Receipts, 'written' | 'acknowledged'>;
}

export class Delivery {
  readonly #inbox: InboxStore;
  readonly #limits: WorkerLimits;
  readonly #log: Logger;
  readonly #nudgeIntervalMs: number;
  readonly #receipts: DeliveryOptions['receipts'];
  /** Sessions whose position moved since it was last saved (legacy: or not all handed off yet). */
  readonly #dirty = new Set<LocalSession>();
  /** Sessions nudged during this tick, served after it (each once: nudgePending). */
  #nudged: LocalSession[] = [];
  /** Users whose inbox forked and whose new epoch the store refused. */
  readonly #owed: OwedResets;

  constructor(inbox: InboxStore, limits: WorkerLimits, log: Logger, options: DeliveryOptions) {
    this.#inbox = inbox;
    this.#limits = limits;
    this.#log = log;
    this.#nudgeIntervalMs = options.nudgeIntervalMs;
    this.#receipts = options.receipts;
    this.#owed = new OwedResets(inbox, log);
  }

  /**
   * Decides where a new session's replay starts: after the position the device asked for, or
   * else after its saved one, or else from the beginning of what is retained. Messages pruned
   * in between are reported as a gap. A position of another epoch, or above the head, is a
   * reset: the replay starts at the oldest retained message. An inbox whose new epoch is owed
   * gets it first; while the store refuses it, the login is refused (SB_ERR_STORE_UNAVAILABLE).
   */
  async prepare(session: LocalSession, requested: SyncRequest): Promise<SyncStart> {
    const { uid, deviceId } = session;
    let bounds = await this.#inbox.range(uid, 0, 0);
    if (this.#owed.size !== 0 && (await this.#owed.settle(uid, bounds.epoch))) bounds = await this.#inbox.range(uid, 0, 0);
    if (requested.noReplay) {
      // The client pages what it shows (CONVERSATION_REQUEST); its position is right from here on.
      await this.#inbox.saveCursor(uid, deviceId, bounds.head, bounds.epoch);
      this.#begin(session, bounds.head, bounds.epoch, bounds.head);
      session.savedPosition = bounds.head;
      return { inboxHead: bounds.head, syncFrom: bounds.head, gap: false, epoch: bounds.epoch, reset: false };
    }
    let reset = false;
    let position: number;
    // Whether the position claims the inbox's current epoch (a saved one always does): above
    // the head, it shows that this history forked.
    let current = true;
    if (requested.seq !== undefined) {
      position = requested.seq;
      if (!requested.epoch) current = false;
      else if (requested.epoch !== bounds.epoch) reset = true;
    } else {
      position = (await this.#inbox.cursor(uid, deviceId)) ?? 0;
    }
    if (!reset && position > bounds.head) {
      reset = true;
      // Without an epoch, the position may just be from a history that ended (a device that
      // slept through a data loss): a new epoch would only make every other device resync again.
      if (current) {
        let epoch: number;
        try {
          epoch = await this.#inbox.resetEpoch(uid, bounds.epoch);
        } catch (err) {
          // The login is refused, and by the next one the head may have passed its position: owed.
          this.#owed.owe(uid, bounds.epoch);
          throw err;
        }
        this.#log.warn({ uid, deviceId, position, head: bounds.head, from: bounds.epoch, to: epoch }, 'inbox sequence went backwards: new epoch');
        bounds = await this.#inbox.range(uid, 0, 0);
      }
    }
    let from = reset ? bounds.oldest - 1 : position;
    const gap = !reset && from + 1 < bounds.oldest;
    if (gap) from = bounds.oldest - 1;
    this.#begin(session, from, bounds.epoch, bounds.head);
    return { inboxHead: bounds.head, syncFrom: from, gap, epoch: bounds.epoch, reset };
  }

  /** The session's delivery starts after `from`. */
  #begin(session: LocalSession, from: number, epoch: number, head: number): void {
    session.epoch = epoch;
    session.sentSeq = from;
    session.writtenSeq = from;
    session.ackedSeq = from;
    if (!session.acks) session.handoff = new HandoffRing(from);
    if (head > session.knownHead) session.knownHead = head;
  }

  /** The LoginResponse is out: start the replay, and live delivery after it. */
  start(session: LocalSession): void {
    session.ready = true;
    if (session.knownHead > session.sentSeq) this.#pump(session);
  }

  /** A message was stored in the inbox of the owner of `sessions` as `seq` of `epoch`; `id`: its bodyIdentity, when the caller has it. */
  deliverLive(sessions: readonly LocalSession[], seq: number, body: Uint8Array, epoch: number, id?: number): void {
    let frame: Buffer | undefined;
    // A write can drop a session as a slow consumer, which removes it from this very array (the
    // session map's own): iterate a copy, or the session after it would be skipped.
    for (const session of sessions.length > 1 ? [...sessions] : sessions) {
      if (seq > session.knownHead) session.knownHead = seq;
      if (!session.ready) continue;
      if (this.#owed.owes(session.uid, session.epoch)) {
        this.#resync(session, session.epoch); // its new epoch is owed: closed as if stored (to = from)
        continue;
      }
      if (epoch === session.epoch && seq <= session.sentSeq && sentOther(session, seq, (id ??= bodyIdentity(body)))) {
        void this.#forked(session, { reused: seq });
        continue;
      }
      const next = epoch === session.epoch && seq === session.sentSeq + 1;
      if (session.pumping) {
        // The read under way may predate this message: one that is not simply further on is checked again after it.
        if (!next && (epoch !== session.epoch || seq <= session.sentSeq)) session.repump = true;
        continue;
      }
      if (!next || session.nudgePending) {
        // A gap, another epoch, or a number this session was already sent (a late copy, or one
        // older than it remembers, or the inbox's sequence went backwards): the inbox decides what
        // to send. So it does after a nudge (deliveries were dropped): what was dropped may have
        // been a seq handed out again, which only a read shows, not this message's number.
        this.#pump(session);
        continue;
      }
      id ??= bodyIdentity(body);
      if (passesOver(session, body)) {
        this.#passOver(session, seq, id);
        continue;
      }
      frame ??= deliveryFrame(body, seq);
      this.#write(session, seq, frame, body, id);
    }
  }

  /** MESSAGE_ACK: everything up to `seq` is processed by the device. */
  acknowledge(session: LocalSession, seq: number): void {
    // Up to the last seq written, the device has seen everything: what was passed over after it too.
    const upTo = seq >= session.writtenSeq ? session.sentSeq : Math.min(seq, session.sentSeq);
    if (upTo <= session.ackedSeq) return;
    session.ackedSeq = upTo;
    session.unackedSince = upTo < session.sentSeq ? Date.now() : 0;
    this.#dirty.add(session);
    this.#receipts?.acknowledged(session, upTo);
  }

  /**
   * Periodic: resend what ack devices left unacknowledged too long, retry sessions whose pump
   * failed, serve nudges that had to wait, save moved positions, and try owed epochs again.
   */
  sweep(sessions: Iterable<LocalSession>, now: number): void {
    for (const session of sessions) {
      if (!session.ready || session.pumping) continue;
      if (session.acks && session.unackedSince !== 0 && now - session.unackedSince > this.#limits.ackTimeoutMs) {
        session.sentSeq = session.ackedSeq;
        session.unackedSince = 0;
        // Written again by the pump, and remembered again then.
        session.receiptMarks?.clear();
        this.#pump(session);
      } else if (session.knownHead > session.sentSeq) {
        this.#pump(session);
      } else if (session.nudgePending) {
        session.nudgedAt = now;
        this.#pump(session);
      }
    }
    for (const session of this.#dirty) {
      this.#save(session);
      // A legacy device keeps being checked until the kernel has taken all that was written to it.
      const handoff = session.handoff;
      if (handoff === undefined || handoff.pending === 0 || session.released) {
        this.#dirty.delete(session);
        handoff?.compact();
      }
    }
    if (this.#owed.size !== 0) this.#owed.retry(now);
  }

  /** Something may have been stored that this session was not told about: read its inbox. */
  nudge(session: LocalSession): void {
    if (!session.ready || session.nudgePending) return;
    session.nudgePending = true;
    if (this.#nudged.push(session) === 1) setImmediate(this.#serveNudges);
  }

  /** The session is gone: stop sending to it and save its position now. */
  release(session: LocalSession): void {
    session.released = true;
    session.ready = false;
    this.#dirty.delete(session);
    this.#save(session);
  }

  readonly #serveNudges = (): void => {
    const nudged = this.#nudged;
    this.#nudged = [];
    const now = Date.now();
    for (const session of nudged) {
      // Served meanwhile by a read that started after the nudge, or gone.
      if (!session.nudgePending || !session.ready) continue;
      if (session.pumping) {
        session.nudgePending = false;
        session.repump = true;
      } else if (now - session.nudgedAt >= this.#nudgeIntervalMs) {
        session.nudgedAt = now;
        this.#pump(session);
      }
      // else: still pending, for the sweep.
    }
  };

  #write(session: LocalSession, seq: number, frame: Buffer, body: Uint8Array, id: number): void {
    const outbound = session.outbound;
    outbound.sendFrame(frame);
    // Dropped by this very write (slow consumer): it was discarded, and release() has saved the
    // position already; marking the session dirty again would save this seq as sent.
    if (session.released) return;
    if (session.acks) {
      if (session.unackedSince === 0) session.unackedSince = Date.now();
    } else {
      const handoff = session.handoff!;
      // Pairs the kernel has taken make room before the ring grows (one socket reading per ring-full).
      if (handoff.full) handoff.confirm(outbound.handedOffBytes);
      handoff.push(seq, outbound.queuedBytes);
      this.#dirty.add(session);
    }
    session.sentSeq = seq;
    session.writtenSeq = seq;
    remember(session, seq, id);
    this.#receipts?.written(session, seq, body);
  }

  /** An own copy not for this device: its position moves past it as if it had been written. */
  #passOver(session: LocalSession, seq: number, id: number): void {
    if (session.acks) {
      // Nothing written is waiting for an ack: the device has all there is up to here.
      if (session.ackedSeq === session.sentSeq) {
        session.ackedSeq = seq;
        this.#dirty.add(session);
      }
    } else {
      // Delivered once everything written before it is: it ends where the output ends now.
      const handoff = session.handoff!;
      if (handoff.full) handoff.confirm(session.outbound.handedOffBytes);
      handoff.push(seq, session.outbound.queuedBytes);
      this.#dirty.add(session);
    }
    session.sentSeq = seq;
    remember(session, seq, id);
  }

  async #pump(session: LocalSession): Promise<void> {
    session.pumping = true;
    // A read for a nudge compares every seq the session remembers: what was stored unseen may be
    // below the last one sent (a message written live since then).
    let nudged = session.nudgePending || session.repump;
    // This read serves whatever asked for one so far.
    session.repump = false;
    session.nudgePending = false;
    const batch = this.#limits.syncBatchSize;
    try {
      for (;;) {
        const knownBefore = session.knownHead;
        // From the last seq sent, when the session knows which message that was: another one
        // there shows that the inbox handed the seq out again, also once its head has passed it.
        const sent = session.sentSeq;
        let from = batch > 1 && remembers(session, sent) ? sent - 1 : sent;
        if (nudged) {
          nudged = false;
          while (from > 0 && sent - from < SENT_IDS && batch > sent - from + 1 && remembers(session, from)) from--;
        }
        const { messages, head, epoch } = await this.#inbox.range(session.uid, from, batch);
        if (session.released) return;
        if (epoch !== session.epoch) {
          this.#resync(session, epoch);
          return;
        }
        if (this.#owed.owes(session.uid, epoch)) {
          this.#resync(session, session.epoch); // its new epoch is owed: closed as if stored (to = from)
          return;
        }
        if (head < session.sentSeq) {
          await this.#forked(session, { head });
          return;
        }
        for (const m of messages) {
          // Paced within a batch too: a batch of large messages written at once would overrun
          // maxOutboundBytes before the socket could take any of it.
          if (session.outbound.congested) {
            await session.outbound.drained();
            if (session.released) return;
          }
          const id = bodyIdentity(m.body);
          // A seq it was sent before as another message: the last one sent, read again to
          // compare, or (after an ack timeout) one it is sent again.
          if (sentOther(session, m.seq, id)) {
            await this.#forked(session, { reused: m.seq });
            return;
          }
          if (m.seq <= session.sentSeq) continue;
          if (passesOver(session, m.body)) this.#passOver(session, m.seq, id);
          else this.#write(session, m.seq, deliveryFrame(m.body, m.seq), m.body, id);
          // The write dropped the connection: nothing after it is sent, so none of it may count.
          if (session.released) return;
        }
        if (messages.length === 0 || (messages.length === 1 && messages[0]!.seq <= sent)) {
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
      // The read is still owed, to a nudge or a delivery that asked for it, or for what knownHead
      // promises: the sweep serves it, as a nudge, once per nudge interval.
      session.nudgePending = true;
      this.#log.error({ err, uid: session.uid, deviceId: session.deviceId }, 'inbox read failed');
    } finally {
      session.pumping = false;
      if (session.repump && session.ready) {
        session.repump = false;
        const now = Date.now();
        if (now - session.nudgedAt >= this.#nudgeIntervalMs) {
          session.nudgedAt = now;
          void this.#pump(session);
        } else {
          session.nudgePending = true;
        }
      }
    }
  }

  /**
   * The inbox's head is below what this session was sent, in the session's epoch, or it holds
   * another message at a seq the session was sent (`reused`): its sequence went backwards and
   * now reuses numbers this device (and maybe others) saw for other messages. The inbox gets a
   * new epoch, so that no device resumes from such a number, then the session resyncs. A new
   * epoch the store kept refusing is owed: tried again at the user's logins and every sweep.
   */
  async #forked(session: LocalSession, found: { head: number } | { reused: number }): Promise<void> {
    const from = session.epoch;
    // From here on its position is of a past history: never saved, even if the reset fails.
    session.epoch = 0;
    let to = 0;
    // Tried again before the session is closed: its device would log in at once, and once new
    // messages have passed its position again, nothing would show the fork to the login (right
    // after a failover a worker's client may not reach the new master for a moment).
    for (let attempt = 1; ; attempt++) {
      try {
        to = await this.#inbox.resetEpoch(session.uid, from);
        break;
      } catch (err) {
        if (attempt >= RESET_ATTEMPTS) {
          this.#log.error({ err, uid: session.uid, deviceId: session.deviceId, attempts: attempt }, 'inbox epoch reset failed');
          this.#owed.owe(session.uid, from);
          break;
        }
        await delay(RESET_RETRY_MS, undefined, { ref: false });
      }
    }
    this.#log.warn({ uid: session.uid, deviceId: session.deviceId, position: session.sentSeq, ...found, from, to }, 'inbox sequence went backwards: new epoch');
    this.#close(session, from, to);
  }

  /** The inbox has another epoch than the session's position: the session must log in again. */
  #resync(session: LocalSession, inboxEpoch: number): void {
    const from = session.epoch;
    if (from === 0) return;
    session.epoch = 0;
    this.#close(session, from, inboxEpoch);
  }

  #close(session: LocalSession, from: number, to: number): void {
    this.#log.info({ uid: session.uid, deviceId: session.deviceId, sessionId: session.sessionId, from, to }, 'inbox reset: closing session');
    session.outbound.close({ code: 'SB_ERR_INBOX_RESET', reason: 'the inbox was reset (new epoch); log in again to resync' });
  }

  #save(session: LocalSession): void {
    if (session.epoch === 0) return;
    const position = session.acks ? session.ackedSeq : session.handoff!.confirm(session.outbound.handedOffBytes);
    if (position <= session.savedPosition) return;
    session.savedPosition = position;
    this.#inbox.saveCursor(session.uid, session.deviceId, position, session.epoch).catch((err: unknown) => {
      this.#log.error({ err, uid: session.uid, deviceId: session.deviceId }, 'position save failed');
    });
  }
}

/** `seq` was written to `session` (or passed over) as the message `id` (bodyIdentity). */
function remember(session: LocalSession, seq: number, id: number): void {
  const ids = (session.sentIds ??= new Float64Array(SENT_IDS * 2));
  const i = (seq % SENT_IDS) * 2;
  ids[i] = seq;
  ids[i + 1] = id;
}

/** Whether `session` remembers which message it was sent as `seq`. */
function remembers(session: LocalSession, seq: number): boolean {
  return session.sentIds !== undefined && session.sentIds[(seq % SENT_IDS) * 2] === seq;
}

/** Whether `session` was sent `seq` as another message than `id`; false when it does not remember. */
function sentOther(session: LocalSession, seq: number, id: number): boolean {
  const ids = session.sentIds;
  const i = (seq % SENT_IDS) * 2;
  return ids !== undefined && ids[i] === seq && ids[i + 1] !== id;
}

/**
 * An entry `session` does not take: an own copy (isOwnCopy) when it sent the message or did not
 * ask for own copies; an inbox event (a recall, an edit) when it did not ask for them.
 */
function passesOver(session: LocalSession, body: Uint8Array): boolean {
  if (isOwnCopy(body)) return !session.ownCopies || ownCopyFrom(body, session.deviceIdBytes);
  return !session.inboxEvents && isInboxEvent(body);
}
