// In-memory InboxStore: the embedded default. Bounded like the Redis one: per user at most
// maxMessages messages, none older than maxAgeMs, dedupe entries for dedupeWindowMs (and at
// most maxMessages of them). Nothing here waits, so append() answers synchronously.
// Message bodies live in a MessageLog per user (slabs and typed arrays, not an object each),
// dedupe entries in a DedupeWindow per user (ascending runs of ids per sender).
//
// And bounded as a whole: every inbox's memory is accounted (see `bytes`), and an append that
// would take the total past maxBytes is refused with SB_ERR_STORE_FULL, before anything is
// stored or any inbox made. Pruning gives its memory back to the total. A sweep prunes by age
// the inboxes nobody touches and shrinks one left with nothing in it to its sequence alone, so
// retention frees room even after a flood to recipients who never come.
//
// Epochs: every inbox of one store starts in the store's own random epoch (so reading an inbox
// that does not exist yet allocates nothing, and a restarted process, whose inboxes are all new,
// has a new one); resetEpoch() gives that one inbox a fresh epoch.

import { SwitchboardError } from '../errors.js';
import type { Logger } from '../log.js';
import { DedupeWindow, dedupeKeyOf, type DedupeKey } from './dedupe-window.js';
import { MessageLog } from './message-log.js';
import { ConversationIndex } from './conversation-index.js';
import { DEFAULT_INBOX_LIMITS, newEpoch, type AppendRequest, type AppendResult, type ConversationEntry, type ConversationPage, type HistoryPage, type InboxLimits, type InboxRange, type InboxStore, type ReadResult, type RewriteResult, type StoredMessage } from './inbox-store.js';

export interface MemoryInboxLimits extends InboxLimits {
  /** Accounted bytes of all inboxes together; an append past it is refused (SB_ERR_STORE_FULL). */
  maxBytes: number;
}

/** Sized for an embedded node: a quarter of a GiB of inboxes. */
export const DEFAULT_MEMORY_INBOX_BYTES = 256 * 1024 * 1024;

// The accounting's estimates of what the objects cost (measured with V8's heap statistics on
// Node 20, rounded up; test/inbox/memory-inbox-bound.test.ts checks them): an inbox (its entry
// in the Map, the Inbox, MessageLog, DedupeWindow and cursor Map objects, the typed arrays' and
// slab's object headers), plus its uid's characters; an emptied inbox shrunk to its sequence
// (a Map entry), plus its uid's characters; a device position (its Map entry and number), plus
// the device id's characters. The typed arrays' and slabs' own bytes are counted exactly
// (MessageLog.bytes), dedupe entries by DedupeWindow.bytes.
const INBOX_BYTES = 2048;
const HEAD_BYTES = 64;
const CURSOR_BYTES = 64;

/**
 * A new inbox is made only while the total is below this share of the bound: the rest is kept
 * for the inboxes that exist, so a flood to new recipients cannot stop conversations under way.
 */
const NEW_INBOX_SHARE = 7 / 8;

/** The sweep visits this many inboxes per run, one run a second. */
const SWEEP_BATCH = 10_000;
const SWEEP_MS = 1000;
/** At most one log line a minute about refused appends. */
const FULL_LOG_MS = 60_000;

interface Inbox {
  head: number;
  epoch: number;
  /** Retained messages, ascending. */
  log: MessageLog;
  dedupe: DedupeWindow;
  cursors: Map<string, number>;
  /** The chat list: made by the first append that names a conversation. */
  conversations: ConversationIndex | undefined;
  /** What this inbox's cursors are accounted at (CURSOR_BYTES and the device ids). */
  cursorBytes: number;
  /** INBOX_BYTES and the uid's characters. */
  fixedBytes: number;
}

export class MemoryInboxStore implements InboxStore {
  readonly #inboxes = new Map<string, Inbox>();
  /** The epoch of every inbox this store creates. */
  readonly #epoch = newEpoch();
  /**
   * Inboxes with nothing retained, no dedupe entry and no device position, in the store's epoch:
   * their head alone.
   */
  readonly #heads = new Map<string, number>();
  readonly #limits: MemoryInboxLimits;
  /** Up to where a new inbox may be made. */
  readonly #newInboxBytes: number;
  readonly #now: () => number;
  readonly #log: Logger | undefined;
  #bytes = 0;
  #sweepAt: Iterator<[string, Inbox]> | undefined;
  readonly #sweep: NodeJS.Timeout;
  #refused = 0;
  #lastFullLog = Number.NEGATIVE_INFINITY;

  constructor(limits: Partial<MemoryInboxLimits> = {}, now: () => number = Date.now, log?: Logger) {
    this.#limits = { ...DEFAULT_INBOX_LIMITS, maxBytes: DEFAULT_MEMORY_INBOX_BYTES, ...limits };
    this.#newInboxBytes = Math.floor(this.#limits.maxBytes * NEW_INBOX_SHARE);
    this.#now = now;
    this.#log = log;
    this.#sweep = setInterval(() => this.sweep(), SWEEP_MS);
    this.#sweep.unref();
  }

  /**
   * The accounted memory of every inbox: bodies and their slabs, the typed arrays, dedupe
   * entries, device positions, and a per-inbox estimate of the objects. Never above maxBytes.
   */
  get bytes(): number {
    return this.#bytes;
  }

  get maxBytes(): number {
    return this.#limits.maxBytes;
  }

  /** Inboxes held, the ones shrunk to their sequence included. */
  get inboxes(): number {
    return this.#inboxes.size + this.#heads.size;
  }

  /** `bytes` recomputed from every inbox, for tests of the bookkeeping. */
  audit(): number {
    let total = 0;
    for (const inbox of this.#inboxes.values()) total += bytesOf(inbox, inbox.conversations?.recount() ?? 0);
    for (const uid of this.#heads.keys()) total += HEAD_BYTES + uid.length;
    return total;
  }

  /** Synchronous: returns the result, or throws SB_ERR_STORE_FULL. */
  append(request: AppendRequest): AppendResult {
    return this.#append(request, this.#now(), dedupeKeyOf(request.msgId));
  }

  /** append() at `now`, `key` being the msg_id's dedupe key (undefined: none). */
  #append({ uid, sender, body, conversation, own }: AppendRequest, now: number, key: DedupeKey | undefined): AppendResult {
    const dedupeCost = key === undefined ? 0 : DedupeWindow.MAX_ADD_BYTES;
    let inbox = this.#inboxes.get(uid);
    let before = 0;
    if (inbox === undefined) {
      // Refused before the inbox exists: a flood of new recipients leaves nothing behind.
      inbox = this.#open(uid, MessageLog.firstPushCost(body.length) + dedupeCost + (conversation === undefined ? 0 : ConversationIndex.newCost(conversation)), now);
    } else {
      before = bytesOf(inbox);
      if (key !== undefined) {
        inbox.dedupe.expire(now);
        const seen = inbox.dedupe.find(sender, key);
        if (seen !== undefined) {
          this.#settle(inbox, before);
          return { seq: seen, duplicate: true, epoch: inbox.epoch };
        }
      }
      // What retention drops anyway makes room first.
      this.#pruneAge(inbox, now);
      const pruned = bytesOf(inbox);
      this.#bytes += pruned - before;
      before = pruned;
      const listCost = conversation === undefined ? 0 : (inbox.conversations?.addCost(conversation) ?? ConversationIndex.newCost(conversation));
      this.#reserve(inbox.log.pushCost(body.length) + dedupeCost + listCost, now, this.#limits.maxBytes);
    }
    const seq = this.#push(inbox, now, body);
    if (key !== undefined) inbox.dedupe.add(sender, key, seq, now + this.#limits.dedupeWindowMs);
    if (conversation !== undefined) (inbox.conversations ??= new ConversationIndex(this.#limits.maxMessages, this.#limits.maxMessages)).add(conversation, seq, now, own === true);
    this.#settle(inbox, before);
    return { seq, duplicate: false, epoch: inbox.epoch };
  }

  /** Stores `body` as the inbox's next seq (the log keeps maxMessages: see #open); the caller settles the bytes. */
  #push(inbox: Inbox, now: number, body: Uint8Array): number {
    const seq = ++inbox.head;
    inbox.log.push(seq, now, body);
    return seq;
  }

  async conversations(uid: string, before: number, limit: number): Promise<ConversationPage> {
    const inbox = this.#read(uid);
    if (inbox?.conversations === undefined) return { conversations: [], more: false };
    const { conversations, more } = inbox.conversations.page(before, limit);
    const { log } = inbox;
    return {
      more,
      conversations: conversations.map((c): ConversationEntry => ({ conversation: c.id, lastSeq: c.lastSeq, lastAt: c.lastAt, last: log.get(c.lastSeq), readSeq: c.readSeq, unread: c.unread })),
    };
  }

  async history(uid: string, conversation: string, before: number, limit: number): Promise<HistoryPage> {
    const inbox = this.#read(uid);
    const oldest = inbox ? oldestOf(inbox) : (this.#heads.get(uid) ?? 0) + 1;
    const c = inbox?.conversations?.get(conversation);
    if (c === undefined) return { messages: [], more: false, pruned: false, oldest };
    const before0 = bytesOf(inbox!);
    const page = inbox!.conversations!.history(c, before, limit, oldest);
    this.#settle(inbox!, before0);
    return { messages: page.seqs.map((seq) => inbox!.log.get(seq)!), more: page.more, pruned: page.pruned, oldest };
  }

  async markRead(uid: string, conversation: string, seq: number, event: Uint8Array): Promise<ReadResult> {
    const inbox = this.#read(uid);
    const c = inbox?.conversations?.get(conversation);
    if (c === undefined) return { found: false, readSeq: 0, unread: 0, eventSeq: undefined, epoch: inbox?.epoch ?? this.#epoch };
    const now = this.#now();
    const before = bytesOf(inbox!);
    // Room for the event first: a mark that cannot tell the other devices is not made.
    if (Math.min(seq, c.lastSeq) > c.readSeq) this.#reserve(inbox!.log.pushCost(event.length), now, this.#limits.maxBytes);
    const moved = inbox!.conversations!.markRead(c, seq, oldestOf(inbox!));
    const eventSeq = moved ? this.#push(inbox!, now, event) : undefined;
    this.#settle(inbox!, before);
    return { found: true, readSeq: c.readSeq, unread: c.unread, eventSeq, epoch: inbox!.epoch };
  }

  async rewrite(uid: string, seq: number, body: Uint8Array, event: AppendRequest | undefined, expected?: Uint8Array): Promise<RewriteResult> {
    const inbox = this.#read(uid);
    const current = inbox?.log.get(seq);
    if (inbox === undefined || current === undefined) return { found: false, rewritten: false, changed: false, eventSeq: undefined, epoch: inbox?.epoch ?? this.#epoch };
    if (Buffer.compare(current.body, body) === 0) return { found: true, rewritten: false, changed: false, eventSeq: undefined, epoch: inbox.epoch };
    if (expected !== undefined && Buffer.compare(current.body, expected) !== 0) return { found: true, rewritten: false, changed: true, eventSeq: undefined, epoch: inbox.epoch };
    const now = this.#now();
    const before = bytesOf(inbox);
    // Room for both first: a rewrite that cannot tell the devices is not made.
    this.#reserve(inbox.log.rewriteCost(seq, body.length) + (event ? inbox.log.pushCost(event.body.length) : 0), now, this.#limits.maxBytes);
    inbox.log.rewrite(seq, body);
    const eventSeq = event ? this.#push(inbox, now, event.body) : undefined;
    this.#settle(inbox, before);
    return { found: true, rewritten: true, changed: false, eventSeq, epoch: inbox.epoch };
  }

  /** The inbox, pruned by age (its messages and conversations) as every read does; undefined when there is none. */
  #read(uid: string): Inbox | undefined {
    const inbox = this.#inboxes.get(uid);
    if (inbox === undefined) return undefined;
    const before = bytesOf(inbox);
    const now = this.#now();
    this.#pruneAge(inbox, now);
    inbox.conversations?.expire(now - this.#limits.maxAgeMs);
    this.#settle(inbox, before);
    return inbox;
  }

  appendPair(first: AppendRequest, second: AppendRequest): [AppendResult, AppendResult] {
    const now = this.#now();
    const key = dedupeKeyOf(first.msgId);
    // A message and its own copy: one msg_id (the copy is keyed apart by its sender).
    return [this.#append(first, now, key), this.#append(second, now, second.msgId === first.msgId ? key : dedupeKeyOf(second.msgId))];
  }

  async range(uid: string, after: number, limit: number): Promise<InboxRange> {
    const inbox = this.#inboxes.get(uid);
    if (!inbox) {
      const head = this.#heads.get(uid) ?? 0;
      return { head, oldest: head + 1, epoch: this.#epoch, messages: [] };
    }
    const before = bytesOf(inbox);
    this.#pruneAge(inbox, this.#now());
    this.#settle(inbox, before);
    const { log, head, epoch } = inbox;
    const oldest = oldestOf(inbox);
    const messages: StoredMessage[] = [];
    for (let seq = Math.max(after + 1, oldest); seq <= head && messages.length < limit; seq++) messages.push(log.get(seq)!);
    return { head, oldest, epoch, messages };
  }

  async cursor(uid: string, deviceId: string): Promise<number | undefined> {
    return this.#inboxes.get(uid)?.cursors.get(deviceId);
  }

  /**
   * A device seen before always has its position updated; a new one's position is not kept
   * while the store is at its bound (its next login replays what is retained, or from the
   * `last_seq` it sends). A position is clamped to the head, and one of another epoch ignored.
   */
  async saveCursor(uid: string, deviceId: string, seq: number, epoch: number): Promise<void> {
    let inbox = this.#inboxes.get(uid);
    if (epoch !== (inbox?.epoch ?? this.#epoch)) return;
    seq = Math.min(seq, inbox?.head ?? this.#heads.get(uid) ?? 0);
    const saved = inbox?.cursors.get(deviceId);
    if (saved !== undefined) {
      if (seq > saved) inbox!.cursors.set(deviceId, seq);
      return;
    }
    const cost = CURSOR_BYTES + deviceId.length;
    let before = 0;
    try {
      // A position refused is not logged: positions are saved in the background, again and again.
      if (inbox === undefined) inbox = this.#open(uid, cost, undefined);
      else {
        before = bytesOf(inbox);
        this.#reserve(cost, undefined, this.#limits.maxBytes);
      }
    } catch {
      return;
    }
    inbox.cursors.set(deviceId, seq);
    inbox.cursorBytes += cost;
    this.#settle(inbox, before);
  }

  /**
   * Gives the inbox a new epoch, and forgets its device positions, if it is still in `from`;
   * resolves its epoch. A store at its bound cannot make an inbox that does not exist: the
   * epoch then stays.
   */
  async resetEpoch(uid: string, from: number): Promise<number> {
    let inbox = this.#inboxes.get(uid);
    if ((inbox?.epoch ?? this.#epoch) !== from) return inbox?.epoch ?? this.#epoch;
    if (inbox === undefined) {
      try {
        inbox = this.#open(uid, 0, undefined);
      } catch {
        return this.#epoch;
      }
    }
    const before = bytesOf(inbox);
    inbox.epoch = newEpoch();
    inbox.cursors.clear();
    inbox.cursorBytes = 0;
    this.#settle(inbox, before);
    return inbox.epoch;
  }

  /**
   * In the next SWEEP_BATCH inboxes (all of them in turn, a batch a second): prunes by age,
   * forgets expired dedupe entries, and shrinks an inbox left with nothing to its sequence.
   * Memory of inboxes nobody reads or writes goes back too.
   */
  sweep(): void {
    const now = this.#now();
    for (let n = 0; n < SWEEP_BATCH; n++) {
      this.#sweepAt ??= this.#inboxes.entries();
      const next = this.#sweepAt.next();
      if (next.done) {
        this.#sweepAt = undefined;
        return;
      }
      const [uid, inbox] = next.value;
      const before = bytesOf(inbox);
      this.#pruneAge(inbox, now);
      inbox.dedupe.expire(now);
      inbox.conversations?.expire(now - this.#limits.maxAgeMs);
      inbox.conversations?.trimAll(oldestOf(inbox));
      if (inbox.log.length === 0 && inbox.dedupe.size === 0 && inbox.cursors.size === 0 && !inbox.conversations?.size && inbox.epoch === this.#epoch) {
        this.#inboxes.delete(uid);
        this.#heads.set(uid, inbox.head);
        this.#bytes += HEAD_BYTES + uid.length - before;
      } else {
        this.#settle(inbox, before);
      }
    }
  }

  /** Memory always answers. */
  async ping(): Promise<void> {}

  async close(): Promise<void> {
    clearInterval(this.#sweep);
    this.#inboxes.clear();
    this.#heads.clear();
    this.#bytes = 0;
  }

  /**
   * Makes `uid`'s inbox, with room for `cost` more bytes, or throws SB_ERR_STORE_FULL. A new
   * recipient's inbox must fit in NEW_INBOX_SHARE of the bound; one shrunk to its head is an
   * existing inbox, and comes back with its sequence.
   */
  #open(uid: string, cost: number, now: number | undefined): Inbox {
    const head = this.#heads.get(uid);
    const fixedBytes = INBOX_BYTES + uid.length;
    const made = fixedBytes + MessageLog.EMPTY_BYTES;
    if (head === undefined) this.#reserve(made + cost, now, this.#newInboxBytes);
    else this.#reserve(made + cost - (HEAD_BYTES + uid.length), now, this.#limits.maxBytes);
    const inbox: Inbox = { head: head ?? 0, epoch: this.#epoch, log: new MessageLog({ reuseSlabs: true, maxCount: this.#limits.maxMessages }), dedupe: new DedupeWindow(this.#limits.maxMessages), cursors: new Map(), conversations: undefined, cursorBytes: 0, fixedBytes };
    if (head !== undefined) {
      this.#heads.delete(uid);
      this.#bytes -= HEAD_BYTES + uid.length;
    }
    this.#inboxes.set(uid, inbox);
    return inbox;
  }

  /** Throws SB_ERR_STORE_FULL unless `cost` more bytes fit under `bound`; logs it (at most once a minute) when `now` is given. */
  #reserve(cost: number, now: number | undefined, bound: number): void {
    if (this.#bytes + cost <= bound) return;
    if (now !== undefined) {
      this.#refused++;
      if (this.#log && now - this.#lastFullLog >= FULL_LOG_MS) {
        this.#lastFullLog = now;
        this.#log.warn({ bytes: this.#bytes, maxBytes: this.#limits.maxBytes, inboxes: this.inboxes, refused: this.#refused }, 'inbox memory full: appends refused');
        this.#refused = 0;
      }
    }
    throw new SwitchboardError('SB_ERR_STORE_FULL', `the inbox store holds ${this.#bytes} of its ${this.#limits.maxBytes} bytes; send it again later with the same msg_id`);
  }

  /** Books the change of `inbox`'s bytes since they were `before`. */
  #settle(inbox: Inbox, before: number): void {
    this.#bytes += bytesOf(inbox) - before;
  }

  #pruneAge(inbox: Inbox, now: number): void {
    const cutoff = now - this.#limits.maxAgeMs;
    const { log } = inbox;
    while (log.length > 0 && log.oldestStoredAt() < cutoff) log.shift();
  }
}

/** An inbox's accounted bytes; `conversations`: its chat list's (audit() passes a recount). */
function bytesOf(inbox: Inbox, conversations = inbox.conversations?.bytes ?? 0): number {
  return inbox.fixedBytes + inbox.log.bytes + inbox.dedupe.bytes + inbox.cursorBytes + conversations;
}

/** The lowest seq the inbox retains; its head + 1 when it retains none. */
function oldestOf(inbox: Inbox): number {
  return inbox.log.length > 0 ? inbox.log.firstSeq : inbox.head + 1;
}
