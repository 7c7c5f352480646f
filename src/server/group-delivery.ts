// Getting group log entries onto the devices of a group's members, in group order, once each.
//
// A group message is stored once, in the group's log (GroupStore), under the group's next seq.
// Every device that logged in with `groups` keeps one GroupStream per group it can read: its
// position (sent, acked) in that log. The rules are the inbox's (delivery.ts), per group:
// a live entry is written only when it is exactly the stream's next one; anything else (a gap,
// the replay after login, a resend after the ack timeout, a nudge) "pumps": reads the log after
// `sent` in batches until caught up with the highest seq known to exist. Positions are saved
// write-behind by the sweep (acked only: every group device acknowledges).
//
// Fan-out: one entry goes to every local stream of its group with one frame buffer (the seq is
// the group's, the same for every member). A group's local streams are indexed by group id, so
// a message costs no membership read. A fan-out larger than one slice (`fanoutSlice` writes)
// continues on the next turn of the event loop, so a 5 000-member group does not stall the
// worker; entries queued behind it (of any group) wait their turn, which keeps each group's
// order. The queue is bounded (`maxQueuedWrites`): past it, an entry is not queued but its
// streams learn that it exists and read it from the log.
//
// The sending device gets no copy: its response carries the seq. The live path knows the
// sender; a read of the log knows only the user, so an entry of the device's user found while
// the device has appends unanswered waits for their responses (appendStarted / appendEnded),
// which tell whether it is the device's own.
//
// Membership: a session's streams are made at login from the user's groups and recent
// departures; a member added later gets a stream when the gate's change reaches this worker
// (GroupNotifier `added`), starting at the `added` event. A member removed (or who left, or
// whose group was dissolved) reads up to that event, which it is sent, and its stream is dropped
// once it acknowledged it. The store decides what a user may read (group-store.ts, visibility):
// nothing here can show an entry outside the user's membership.

import type { Logger } from '../log.js';
import { isSwitchboardError } from '../errors.js';
import { deliveryFrame } from '../protocol/chat-frames.js';
import { groupEntryBody as entryBody } from '../protocol/conversation-view.js';
import { decodeGroupEvent, type GroupEntry, type GroupEvent, type GroupStore, type ReadResult } from '../groups/group-store.js';
import type { GroupChange } from '../groups/group-notifier.js';
import { GroupStream, type LocalSession } from '../session/local-session.js';

export interface GroupDeliveryOptions {
  /** Entries read from a group's log per batch. */
  batchSize: number;
  /** A device with no saved position in a group gets at most this many of its latest entries. */
  syncNew: number;
  /** Deliveries written per turn of the event loop; a larger fan-out continues on the next turn. */
  fanoutSlice: number;
  /** Deliveries waiting in the fan-out queue at most; beyond, streams read the entry from the log. */
  maxQueuedWrites: number;
  /** Unacknowledged deliveries are sent again after this long. */
  ackTimeoutMs: number;
  /** Groups listed per user at login at most (the store's maxGroupsPerUser). */
  maxGroupsPerUser: number;
  /** Reads and cursor lookups one login issues at once. */
  loginConcurrency?: number;
}

/** Event frames kept for replays (each at most a frame: 64 x 1 MiB at worst, a few KiB usually). */
const EVENT_FRAMES_KEPT = 64;

/**
 * Own entries remembered per stream above its acknowledged position (GroupStream.own). A device
 * that sends more than this many between acknowledgements may be sent a copy of the oldest ones
 * by a resend (the SDK drops them: it keeps its own seqs too).
 */
const OWN_KEPT = 256;

/**
 * Reads of group logs at once, for the whole worker: a resend after the ack timeout, a nudge of
 * everyone after a peer link came back or a fan-out past its queue makes every stream of a
 * large group read at the same moment; they take turns instead.
 */
const READS_AT_ONCE = 64;

/** Positions the sweep saves per turn of the event loop; the rest go on the next turns. */
const SAVE_SLICE = 512;

/** Sessions whose groups a resync lists at once. */
const RESYNC_CONCURRENCY = 8;

/** An entry on its way to a group's local streams. */
interface FanoutJob {
  group: string;
  seq: number;
  frame: Buffer;
  /** The session that sent it: answered by its response, not sent a copy. */
  sender: LocalSession | undefined;
  streams: GroupStream[];
  next: number;
  /** A membership event: the streams of users it ends the membership of stop after it. */
  event: GroupEvent | undefined;
}

export class GroupDelivery {
  readonly #store: GroupStore;
  readonly #o: Required<GroupDeliveryOptions>;
  readonly #log: Logger;
  /** Every ready-or-preparing stream of this worker, by group. */
  readonly #byGroup = new Map<string, Set<GroupStream>>();
  readonly #queue: FanoutJob[] = [];
  #queuedWrites = 0;
  #scheduled = false;
  /** Streams whose acked position moved since it was saved. */
  readonly #dirty = new Set<GroupStream>();
  /** Streams the sweep looks at: deliveries unacknowledged, or entries known but not sent. */
  readonly #watched = new Set<GroupStream>();
  /**
   * Delivery frames of recently read events, by group and seq: every member device replaying a
   * group reads the same events (a 500-uid `added` is 33 KiB to re-encode). At most
   * EVENT_FRAMES_KEPT, the oldest forgotten first.
   */
  readonly #eventFrames = new Map<string, Buffer>();
  /** Reads of group logs under way (#pump), at most READS_AT_ONCE; the others wait in #slotWaiters. */
  #reading = 0;
  readonly #slotWaiters: (() => void)[] = [];
  /** Deliveries written from reads this turn: at most fanoutSlice, the rest on the next turn (#nextTurn). */
  #readWrites = 0;
  #turnScheduled = false;
  /** Reads waiting for a turn with budget left, in order. */
  readonly #turnWaiters: (() => void)[] = [];
  /** The sweep's saves are under way (#saveSlice). */
  #saving = false;
  /** Issue numbers of appends (appendStarted), one sequence for the worker so that none is reused by a later stream. */
  #appendsIssued = 0;

  constructor(store: GroupStore, options: GroupDeliveryOptions, log: Logger) {
    this.#store = store;
    this.#o = { loginConcurrency: 32, ...options };
    this.#log = log;
  }

  /** Local streams of `group` (tests, metrics). */
  streamsOf(group: string): number {
    return this.#byGroup.get(group)?.size ?? 0;
  }

  /**
   * Login of a device with `groups`: makes a stream for every group the user is in and every
   * group it recently left, and finds where each replay starts (the saved position, else the
   * latest `syncNew` entries it may read). Rejects when the store does not answer.
   */
  async prepare(session: LocalSession): Promise<void> {
    const groups = new Map<string, GroupStream>();
    session.groups = groups;
    const { uid, deviceId } = session;
    const departed = await this.#store.departedOf(uid);
    const member = await this.#groupsOf(uid);
    // Released meanwhile: nothing may be indexed any more (release() has run).
    if (session.released) return;
    // Indexed before the positions are read, so an entry stored meanwhile is in the bounds read
    // or reaches the stream live. (A stream the `added` notification made meanwhile stays.)
    const pending: GroupStream[] = [];
    for (const id of member) if (!groups.has(id)) pending.push(this.#add(new GroupStream(session, id)));
    for (const d of departed) {
      if (groups.has(d.id)) continue;
      const stream = new GroupStream(session, d.id);
      stream.until = d.seq;
      pending.push(this.#add(stream));
    }
    await this.#positionAll(pending, deviceId);
  }

  /**
   * The notifier may have lost changes: every session's groups are listed again and streams made
   * for those it lacks (an `added` it never heard of), and every stream reads its log. A few
   * sessions at a time (RESYNC_CONCURRENCY); resolves when all are done.
   */
  async resync(sessions: Iterable<LocalSession>): Promise<void> {
    const queue = [...sessions].filter((s) => s.groups !== undefined && !s.released);
    const worker = async (): Promise<void> => {
      for (let session = queue.pop(); session; session = queue.pop()) {
        this.nudge(session);
        try {
          await this.#resyncOne(session);
        } catch (err) {
          this.#log.warn({ err, uid: session.uid, deviceId: session.deviceId }, 'group resync failed: missing groups come with the next login');
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(RESYNC_CONCURRENCY, queue.length) }, worker));
  }

  async #resyncOne(session: LocalSession): Promise<void> {
    const member = await this.#groupsOf(session.uid);
    const groups = session.groups;
    if (session.released || groups === undefined) return;
    const pending = member.filter((id) => !groups.has(id)).map((id) => this.#add(new GroupStream(session, id)));
    if (pending.length === 0) return;
    try {
      await this.#positionAll([...pending], session.deviceId);
    } finally {
      for (const stream of pending) {
        if (!stream.ready) this.#drop(stream);
        // The sweep starts its reads (once the session is ready, if it is not yet).
        else this.#watched.add(stream);
      }
    }
  }

  /** The ids of the groups `uid` is a member of, at most maxGroupsPerUser. */
  async #groupsOf(uid: string): Promise<string[]> {
    const member: string[] = [];
    let after: string | undefined;
    do {
      const page = await this.#store.groupsOf(uid, { after, limit: this.#o.maxGroupsPerUser });
      for (const g of page.groups) member.push(g.id);
      after = page.next;
    } while (after !== undefined && member.length < this.#o.maxGroupsPerUser);
    return member;
  }

  /** Finds where each of `pending`'s replays starts, loginConcurrency at a time (consumes `pending`). */
  async #positionAll(pending: GroupStream[], deviceId: string): Promise<void> {
    const worker = async (): Promise<void> => {
      for (let stream = pending.pop(); stream; stream = pending.pop()) await this.#position(stream, deviceId);
    };
    await Promise.all(Array.from({ length: Math.min(this.#o.loginConcurrency, pending.length) }, worker));
  }

  /** The LoginResponse is out: start every replay. */
  start(session: LocalSession): void {
    for (const stream of session.groups?.values() ?? []) {
      if (stream.ready && stream.known > stream.sent) void this.#pump(stream);
    }
  }

  /**
   * Entry `seq` of `group` was stored (`body` is its delivered MessageRequest, group set): write
   * it to the group's local streams. `sender`: the session that sent it, if it is on this worker.
   * Without `body`, the entry is only known to exist: streams that lack it read it from the log.
   */
  deliver(group: string, seq: number, body: Uint8Array | undefined, sender?: LocalSession): void {
    const streams = this.#byGroup.get(group);
    if (streams === undefined || streams.size === 0) return;
    if (body === undefined) {
      // Only known to exist (a resend found it stored): the streams that lack it read the log.
      for (const stream of streams) if (stream.session !== sender) this.#behind(stream, seq);
      return;
    }
    this.#fanout({ group, seq, frame: deliveryFrame(body, seq), sender, streams: [...streams], next: 0, event: undefined });
  }

  #fanout(job: FanoutJob): void {
    if (this.#queue.length === 0 && job.streams.length <= this.#o.fanoutSlice) {
      this.#run(job, job.streams.length);
      return;
    }
    if (this.#queuedWrites + job.streams.length > this.#o.maxQueuedWrites) {
      // Too much waiting already: the entry is not held here; its streams read it from the log.
      for (const stream of job.streams) this.#behind(stream, job.seq);
      return;
    }
    this.#queue.push(job);
    this.#queuedWrites += job.streams.length;
    this.#schedule();
  }

  /** A change made at the gate (GroupNotifier): streams of the group read its log; added members' sessions join. */
  changed(change: GroupChange, sessionsOf: (uid: string) => readonly LocalSession[]): void {
    const created: GroupStream[] = [];
    for (const uid of change.added ?? []) {
      for (const session of sessionsOf(uid)) {
        if (session.groups === undefined || session.released) continue;
        const existing = session.groups.get(change.group);
        if (existing !== undefined) {
          // Back after a departure its stream still reads up to: it reads on (the store shows it
          // nothing between the departure and this event).
          if (existing.until < change.seq) existing.until = Infinity;
          continue;
        }
        const stream = new GroupStream(session, change.group);
        // Its first entry is the `added` event itself; the position is saved at once (as at login).
        stream.sent = stream.acked = change.seq - 1;
        stream.ready = true;
        created.push(this.#add(stream));
        stream.saved = -1;
        this.#save(stream);
      }
    }
    const streams = this.#byGroup.get(change.group);
    if (streams === undefined) return;
    // The event is read once for the worker, then fanned out like a message; until it is,
    // the streams know it exists (so the sweep reads it if this fails).
    let reader: GroupStream | undefined;
    for (const stream of streams) {
      if (change.seq > stream.known) stream.known = change.seq;
      if (reader === undefined && stream.until === Infinity) reader = stream;
    }
    if (reader !== undefined) void this.#readChange(change, reader.session.uid, created);
  }

  /**
   * Reads event `change.seq` (as `uid`, who can) and fans it out; on any trouble every stream
   * reads it itself. `created`: streams made by the change, which may have missed entries after
   * it that arrived before the change did.
   */
  async #readChange(change: GroupChange, uid: string, created: readonly GroupStream[]): Promise<void> {
    const { group, seq } = change;
    let entry: GroupEntry | undefined;
    let event: GroupEvent | undefined;
    let head = seq;
    try {
      const read = await this.#store.read(group, uid, seq - 1, 1);
      entry = read.entries[0];
      head = read.head;
      if (entry?.kind === 'event') event = decodeGroupEvent(entry.body);
    } catch (err) {
      this.#log.debug({ err, group, seq }, 'group change read failed: its streams read it');
    }
    const streams = this.#byGroup.get(group);
    if (streams === undefined) return;
    if (entry === undefined || entry.seq !== seq || event === undefined) {
      for (const stream of streams) this.#behind(stream, seq);
      return;
    }
    this.#fanout({ group, seq, frame: deliveryFrame(entryBody(group, entry), seq), sender: undefined, streams: [...streams], next: 0, event });
    if (head > seq) for (const stream of created) this.#behind(stream, head);
  }

  /**
   * The device is about to append to `group`: until appendEnded, an entry of its user that a
   * read finds is held back (it may be this append's, which the device must get no copy of).
   * Returns the append's issue number, or 0 when the device has no stream there.
   */
  appendStarted(session: LocalSession, group: string): number {
    const stream = session.groups?.get(group);
    if (stream === undefined) return 0;
    const issue = ++this.#appendsIssued;
    stream.appending.add(issue);
    return issue;
  }

  /** Append `issue` was answered: stored as `seq`, or refused (undefined). A read it held continues. */
  appendEnded(session: LocalSession, group: string, issue: number, seq: number | undefined): void {
    const stream = session.groups?.get(group);
    if (stream === undefined || !stream.appending.delete(issue)) return;
    if (seq !== undefined) this.#remember(stream, seq);
    if (stream.heldFor !== 0 && !this.#appendingUpTo(stream, stream.heldFor)) {
      stream.heldFor = 0;
      this.#readAgain(stream);
    }
  }

  /** Whether an append issued up to `issue` is unanswered. */
  #appendingUpTo(stream: GroupStream, issue: number): boolean {
    for (const i of stream.appending) if (i <= issue) return true;
    return false;
  }

  /** `seq` is the device's own entry: remembered while above its acknowledged position (at most OWN_KEPT). */
  #remember(stream: GroupStream, seq: number): void {
    const own = stream.own;
    if (seq <= stream.acked || own.has(seq)) return;
    if (own.size >= OWN_KEPT) own.delete(Math.min(...own));
    own.add(seq);
  }

  /**
   * The device's own entry `seq` (its response carried the seq): not written, counted as
   * acknowledged with the entries before it (the device never acknowledges what it was not sent).
   */
  #skipOwn(stream: GroupStream, seq: number): void {
    stream.sent = seq;
    if (stream.acked === seq - 1) this.#acked(stream, seq);
    else this.#remember(stream, seq);
  }

  /** The device has `upTo` (and its own entries right after it): the position moves, to be saved. */
  #acked(stream: GroupStream, upTo: number): void {
    const own = stream.own;
    while (upTo < stream.sent && own.has(upTo + 1)) upTo++;
    stream.acked = upTo;
    for (const seq of own) if (seq <= upTo) own.delete(seq);
    this.#dirty.add(stream);
  }

  /** Deliveries of these sessions may have been lost (a peer link or the notifier was down): read every group again. */
  nudge(session: LocalSession): void {
    for (const stream of session.groups?.values() ?? []) {
      if (stream.ready) this.#readAgain(stream);
    }
  }

  /** Reads the stream's log now, or once more when the read under way ends. */
  #readAgain(stream: GroupStream): void {
    if (stream.pumping) stream.repump = true;
    else void this.#pump(stream);
  }

  /** MESSAGE_ACK with a group: the device processed the group's entries up to `seq`. */
  acknowledge(session: LocalSession, group: string, seq: number): void {
    const stream = session.groups?.get(group);
    if (stream === undefined) return;
    const upTo = Math.min(seq, stream.sent);
    if (upTo <= stream.acked) return;
    this.#acked(stream, upTo);
    stream.unackedSince = stream.acked < stream.sent ? Date.now() : 0;
  }

  /** Periodic: resends what was not acknowledged in time, retries failed reads, saves positions. */
  sweep(now: number): void {
    for (const stream of this.#watched) {
      const session = stream.session;
      if (session.released) {
        this.#watched.delete(stream);
        continue;
      }
      if (!stream.ready || !session.ready || stream.pumping) continue;
      if (stream.unackedSince !== 0 && now - stream.unackedSince > this.#o.ackTimeoutMs) {
        stream.sent = stream.acked;
        stream.unackedSince = 0;
        void this.#pump(stream);
      } else if (stream.known > stream.sent) {
        void this.#pump(stream);
      } else if (stream.unackedSince === 0) {
        this.#watched.delete(stream);
      }
    }
    if (!this.#saving && this.#dirty.size > 0) {
      this.#saving = true;
      this.#saveSlice();
    }
  }

  /** Saves up to SAVE_SLICE dirty positions, the rest on the next turns (a 5 000-member group's acks make 5 000 at once). */
  readonly #saveSlice = (): void => {
    let budget = SAVE_SLICE;
    const later: GroupStream[] = [];
    for (const stream of this.#dirty) {
      if (budget-- === 0) break;
      this.#dirty.delete(stream);
      this.#save(stream);
      // Its departure is acknowledged: nothing more to read in that group (unless a read under
      // way finds it added back: the next sweep looks again).
      if (stream.acked >= stream.until) {
        if (stream.pumping) later.push(stream);
        else this.#drop(stream);
      }
    }
    if (this.#dirty.size > 0) setImmediate(this.#saveSlice);
    else this.#saving = false;
    for (const stream of later) this.#dirty.add(stream);
  };

  /** The session is gone: its streams leave the fan-out and their positions are saved. */
  release(session: LocalSession): void {
    for (const stream of session.groups?.values() ?? []) {
      this.#dirty.delete(stream);
      this.#watched.delete(stream);
      this.#unindex(stream);
      this.#save(stream);
    }
  }

  #add(stream: GroupStream): GroupStream {
    stream.session.groups!.set(stream.group, stream);
    let streams = this.#byGroup.get(stream.group);
    if (streams === undefined) this.#byGroup.set(stream.group, (streams = new Set()));
    streams.add(stream);
    return stream;
  }

  #unindex(stream: GroupStream): void {
    const streams = this.#byGroup.get(stream.group);
    if (streams?.delete(stream) && streams.size === 0) this.#byGroup.delete(stream.group);
  }

  #drop(stream: GroupStream): void {
    this.#unindex(stream);
    this.#watched.delete(stream);
    if (stream.session.groups?.get(stream.group) === stream) stream.session.groups.delete(stream.group);
  }

  /** Finds where a new stream's replay starts. */
  async #position(stream: GroupStream, deviceId: string): Promise<void> {
    const { group } = stream;
    const uid = stream.session.uid;
    let cursor: number | undefined;
    let bounds;
    try {
      [cursor, bounds] = await Promise.all([this.#store.cursor(group, uid, deviceId), this.#store.read(group, uid, 0, 0)]);
    } catch (err) {
      // Gone (a group of a lost store, or forgotten meanwhile): nothing to read there.
      if (isSwitchboardError(err) && (err.code === 'SB_ERR_GROUP_NOT_FOUND' || err.code === 'SB_ERR_GROUP_NOT_MEMBER')) {
        this.#drop(stream);
        return;
      }
      throw err;
    }
    if (stream.session.groups?.get(group) !== stream) return;
    let from: number;
    if (cursor !== undefined) {
      from = cursor;
    } else if (stream.until !== Infinity) {
      // A new device has nothing to show of a group its user had left.
      this.#drop(stream);
      return;
    } else {
      from = Math.max(bounds.joined - 1, bounds.head - this.#o.syncNew);
    }
    // Pruned meanwhile: the replay starts at the oldest retained entry.
    from = Math.max(from, bounds.oldest - 1, bounds.joined - 1);
    if (from > bounds.head) {
      // Only after a failover to a replica that lagged: positions above the head are of entries
      // that are gone; the stream continues from the head.
      this.#log.warn({ uid, deviceId, group, position: from, head: bounds.head }, 'group position above its head');
      from = bounds.head;
    }
    if (stream.until !== Infinity && from >= stream.until) {
      this.#drop(stream);
      return;
    }
    if (cursor === undefined) {
      // Saved before the replay starts: should this worker die before its sweep saves what the
      // device acknowledged, the next login (anywhere) replays from here, not as a new device's
      // latest syncNew entries (which could skip what the device has not seen).
      await this.#store.saveCursor(group, uid, deviceId, from);
      if (stream.session.groups?.get(group) !== stream) return;
    }
    stream.sent = stream.acked = stream.saved = from;
    if (bounds.head > stream.known) stream.known = bounds.head;
    stream.ready = true;
  }

  /** An entry up to `seq` exists that `stream` may not have: read it, now or when the read under way ends. */
  #behind(stream: GroupStream, seq: number): void {
    if (seq > stream.known) stream.known = seq;
    if (!stream.ready || !stream.session.ready) return;
    if (stream.pumping) stream.repump = true;
    else if (stream.known > stream.sent) void this.#pump(stream);
  }

  #schedule(): void {
    if (this.#scheduled) return;
    this.#scheduled = true;
    setImmediate(this.#drain);
  }

  readonly #drain = (): void => {
    this.#scheduled = false;
    let budget = this.#o.fanoutSlice;
    while (budget > 0 && this.#queue.length > 0) {
      const job = this.#queue[0]!;
      const before = job.next;
      this.#run(job, budget);
      const done = job.next - before;
      budget -= done;
      this.#queuedWrites -= done;
      if (job.next >= job.streams.length) this.#queue.shift();
    }
    if (this.#queue.length > 0) this.#schedule();
  };

  /** Writes `job` to up to `budget` more of its streams. */
  #run(job: FanoutJob, budget: number): void {
    const { streams, seq, frame, sender, event } = job;
    const end = Math.min(streams.length, job.next + budget);
    for (let i = job.next; i < end; i++) {
      const stream = streams[i]!;
      const session = stream.session;
      if (seq > stream.known) stream.known = seq;
      if (event !== undefined && stream.sent === seq - 1 && departsBy(event, session.uid)) stream.until = seq;
      // Added back after the departure it was reading up to (the change may have come before the departure's read).
      else if (event?.type === 'added' && seq > stream.until && event.uids?.includes(session.uid) === true) stream.until = Infinity;
      // Past its user's departure; the store would not show it either.
      if (!stream.ready || !session.ready || seq > stream.until) continue;
      if (stream.pumping) {
        if (seq <= stream.sent) stream.repump = true;
        continue;
      }
      if (seq !== stream.sent + 1) {
        // A gap (an entry still on its way, or dropped): the log decides. An entry already sent is ignored.
        if (seq > stream.sent) void this.#pump(stream);
        continue;
      }
      if (session === sender) {
        // Its device has the seq from the response.
        this.#skipOwn(stream, seq);
        continue;
      }
      this.#write(stream, seq, frame);
    }
    job.next = end;
  }

  #write(stream: GroupStream, seq: number, frame: Buffer): void {
    const session = stream.session;
    session.outbound.sendFrame(frame);
    // Dropped by this very write (slow consumer): its positions were saved on release.
    if (session.released) return;
    stream.sent = seq;
    if (stream.unackedSince === 0) {
      stream.unackedSince = Date.now();
      this.#watched.add(stream);
    }
  }

  async #pump(stream: GroupStream): Promise<void> {
    // Held at an entry that may be the device's own: appendEnded continues.
    if (stream.heldFor !== 0) return;
    const session = stream.session;
    stream.pumping = true;
    stream.repump = false;
    const { group } = stream;
    try {
      for (;;) {
        const knownBefore = stream.known;
        const { read, issuedBefore } = await this.#read(group, session.uid, stream.sent);
        if (session.released || session.groups?.get(group) !== stream) return;
        if (read.head > stream.known) stream.known = read.head;
        if (read.head < stream.sent) {
          this.#log.warn({ uid: session.uid, deviceId: session.deviceId, group, position: stream.sent, head: read.head }, 'group head below the position sent');
          stream.known = read.head;
          return;
        }
        for (const entry of read.entries) {
          if (session.outbound.congested) {
            await session.outbound.drained();
            if (session.released) return;
          }
          if (this.#readWrites >= this.#o.fanoutSlice) {
            await this.#nextTurn();
            if (session.released || session.groups?.get(group) !== stream) return;
          }
          if (entry.seq <= stream.sent) continue;
          if (entry.kind === 'message' && entry.sender === session.uid) {
            if (stream.own.has(entry.seq)) {
              this.#skipOwn(stream, entry.seq);
              continue;
            }
            // Maybe this device's, its response not out yet: written (or skipped) once it is.
            if (this.#appendingUpTo(stream, issuedBefore)) {
              stream.heldFor = issuedBefore;
              return;
            }
          }
          if (entry.kind === 'event') {
            if (stream.until === Infinity) {
              if (departs(entry, session.uid)) stream.until = entry.seq;
            } else if (rejoins(entry, session.uid)) {
              // Added back after the departure it was reading up to.
              stream.until = Infinity;
            }
          }
          this.#countReadWrite();
          this.#write(stream, entry.seq, this.#frameOf(group, entry));
          if (session.released) return;
        }
        if (read.entries.length === 0) {
          if (stream.known !== knownBefore) continue;
          stream.known = stream.sent;
          return;
        }
        if (read.entries.length < this.#o.batchSize && stream.known <= stream.sent) return;
      }
    } catch (err) {
      if (isSwitchboardError(err) && (err.code === 'SB_ERR_GROUP_NOT_FOUND' || err.code === 'SB_ERR_GROUP_NOT_MEMBER')) {
        this.#drop(stream);
        return;
      }
      // The sweep retries: known is still ahead of sent.
      this.#watched.add(stream);
      this.#log.error({ err, uid: session.uid, deviceId: session.deviceId, group }, 'group read failed');
    } finally {
      stream.pumping = false;
      if (stream.repump && !session.released) void this.#pump(stream);
    }
  }

  /**
   * A batch of the log after `after`, in one of READS_AT_ONCE read slots (held for the read
   * only: a device slow to take what it reads cannot hold one).
   */
  async #read(group: string, uid: string, after: number): Promise<{ read: ReadResult; issuedBefore: number }> {
    await this.#readSlot();
    try {
      // Only appends issued before the read is issued can be in it.
      const issuedBefore = this.#appendsIssued;
      return { read: await this.#store.read(group, uid, after, this.#o.batchSize), issuedBefore };
    } finally {
      this.#releaseSlot();
    }
  }

  /** Waits for one of READS_AT_ONCE read slots (FIFO). */
  #readSlot(): Promise<void> | undefined {
    if (this.#reading < READS_AT_ONCE) {
      this.#reading++;
      return undefined;
    }
    return new Promise((resolve) => this.#slotWaiters.push(resolve));
  }

  #releaseSlot(): void {
    const next = this.#slotWaiters.shift();
    // Handed on as it is: the count stays.
    if (next) next();
    else this.#reading--;
  }

  #countReadWrite(): void {
    this.#readWrites++;
    if (!this.#turnScheduled) {
      this.#turnScheduled = true;
      setImmediate(this.#newTurn);
    }
  }

  /** Resolves on a later turn of the event loop, in order (#newTurn is scheduled: the budget was used this turn). */
  #nextTurn(): Promise<void> {
    return new Promise((resolve) => this.#turnWaiters.push(resolve));
  }

  /**
   * A new turn: the reads' write budget is full again. Up to a budget's worth of waiting reads
   * go on (each writes at least one delivery), the others on the next turn.
   */
  readonly #newTurn = (): void => {
    this.#turnScheduled = false;
    this.#readWrites = 0;
    const waiters = this.#turnWaiters;
    for (let n = Math.min(waiters.length, this.#o.fanoutSlice); n > 0; n--) waiters.shift()!();
    if (waiters.length > 0 && !this.#turnScheduled) {
      this.#turnScheduled = true;
      setImmediate(this.#newTurn);
    }
  };

  #frameOf(group: string, entry: GroupEntry): Buffer {
    if (entry.kind === 'message') return deliveryFrame(entry.body, entry.seq);
    const key = `${group}:${entry.seq}`;
    let frame = this.#eventFrames.get(key);
    if (frame === undefined) {
      frame = deliveryFrame(entryBody(group, entry), entry.seq);
      if (this.#eventFrames.size >= EVENT_FRAMES_KEPT) this.#eventFrames.delete(this.#eventFrames.keys().next().value!);
      this.#eventFrames.set(key, frame);
    }
    return frame;
  }

  #save(stream: GroupStream): void {
    if (stream.acked <= stream.saved) return;
    stream.saved = stream.acked;
    const session = stream.session;
    this.#store.saveCursor(stream.group, session.uid, session.deviceId, stream.acked).catch((err: unknown) => {
      this.#log.error({ err, uid: session.uid, deviceId: session.deviceId, group: stream.group }, 'group position save failed');
    });
  }
}

/** How the events that can end a membership start (eventJson writes the type first). */
const DEPARTING = ['removed', 'left', 'dissolved'].map((type) => Buffer.from(`{"type":"${type}"`));
const ADDED = Buffer.from('{"type":"added"');

/** Whether event `entry` ends `uid`'s membership (its last readable entry). */
function departs(entry: GroupEntry, uid: string): boolean {
  // Most events are not departures: those (an `added` of 500 uids, say) are not parsed per device.
  const body = entry.body;
  if (!DEPARTING.some((prefix) => body.length >= prefix.length && body.compare(prefix, 0, prefix.length, 0, prefix.length) === 0)) return false;
  let event;
  try {
    event = decodeGroupEvent(entry.body);
  } catch {
    return false;
  }
  return departsBy(event, uid);
}

/** Whether `entry` is an `added` event of `uid` (only asked of a stream past its user's departure: rare). */
function rejoins(entry: GroupEntry, uid: string): boolean {
  const body = entry.body;
  if (body.length < ADDED.length || body.compare(ADDED, 0, ADDED.length, 0, ADDED.length) !== 0) return false;
  try {
    const event = decodeGroupEvent(entry.body);
    return event.type === 'added' && event.uids?.includes(uid) === true;
  } catch {
    return false;
  }
}

function departsBy(event: GroupEvent, uid: string): boolean {
  if (event.type === 'dissolved') return true;
  if (event.type === 'left') return event.actor === uid;
  if (event.type === 'removed') return event.uids?.includes(uid) === true;
  return false;
}
