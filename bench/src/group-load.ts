// The group chat load one driver process generates for `bench group`: its share of the run's
// groups, every member a connection logged in with `groups` and `acks`, the first few members of
// each group sending to it. Closed loop: each sender keeps `window` messages in flight, a message
// being done once every other member received it; or open loop (`rate`): each sender sends at a
// fixed rate whatever the deliveries, latency counted from when each message was due. Members acknowledge cumulatively per group
// once per read (MESSAGE_ACK with the group), as the SDK does, and dedupe by group seq; every
// message the server answered with success is accounted for at every other member: received
// once, lost, or received under a second seq (a duplicate). Optionally a 1:1 control pair sends
// at a fixed rate beside the groups: what other traffic sees while a large group fans out.

import type net from 'node:net';
import { once } from 'node:events';
import { HeadType } from '../../src/protocol/types.js';
import { writePerTick } from '../../src/net/write-per-tick.js';
import { dialFrames } from '../../testkit/raw-client.js';
import { Latency } from './latency.js';
import { LoadClock, drain, openLoop } from './timeline.js';
import { emptyScan, leadingNumber, scanMessage, type Scanned } from './wire-scan.js';
import { ackFrame, groupAckFrame, groupMessageFrame, loginRequestFrame, messageRequestFrame } from './client-frames.js';
import { Marks, type ChatSecond, type Endpoint, type MeasuredLoad } from './chat-load.js';
import type { Accounting } from './report.js';

/** A group of the run, as created by the coordinator. */
export interface GroupSpec {
  id: string;
  /** Its members' uids (the owner first); the first `senders` of them send. */
  members: string[];
  senders: number;
  /** The group's head once created (its membership events): this run's messages come after it. */
  seqBase: number;
}

export interface GroupLoadOptions {
  endpoint: Endpoint;
  /** Local addresses the driver's sockets bind to, in turn (see driverAddresses). */
  localAddresses?: string[];
  groups: GroupSpec[];
  /** Messages of sender slot s have msg_id base + s × 2^24 + k (k = 1, 2, ...): sender and k are read back from a delivery's msg_id. */
  msgIdBase: number;
  /** Messages each sender keeps in flight (not yet received by every other member). */
  window: number;
  /** Open loop instead: messages per second each sender sends (at most RING in flight). */
  rate?: number;
  warmupMs: number;
  durationMs: number;
  payloadBytes: number;
  drainMs: number;
  /** A 1:1 pair (users `${control.name}s` → `${control.name}r`) sending `rate` msg/s in the open loop. */
  control?: { name: string; rate: number };
  /** The members discard this many group deliveries as if lost (tests the accounting). */
  dropForTest?: number;
  token: (uid: string) => string;
  ready?: () => Promise<void>;
  onSecond?: (second: GroupSecond) => void;
}

/** One second of a group run, as a driver saw it: the chat load's shape. */
export type GroupSecond = ChatSecond;

/** The accounting of a group run: `received`, `lost` and `dup` count member deliveries, `sent` and `acked` messages. */
export interface GroupAccounting extends Accounting {
  /** Deliveries owed: every acknowledged message at each of its group's other members. */
  expected: number;
  /** Members that missed at least one message. */
  membersWithLoss: number;
}

export interface GroupLoadResult extends MeasuredLoad {
  /** The measured interval, epoch ms (the coordinator reads the worker's event-loop delay over it). */
  measuredFrom: number;
  measuredTo: number;
  accounting: GroupAccounting;
  /** The control pair's delivery latency (intended send time → delivery) while measuring, encoded; '' without one. */
  controlLatency: string;
  /** The control pair's messages: acknowledged, and acknowledged but never received. */
  control: { acked: number; lost: number };
}

/** msg_id = base + slot × SLOT + k. */
const SLOT = 2 ** 24;
const RING = 1024;
const SHOWN_IDS = 10;
const LOGIN_BATCH = 200;

/** A growable array of group seqs by message number k. */
class Seqs {
  #a = new Float64Array(256);
  set(k: number, seq: number): void {
    if (k >= this.#a.length) {
      const grown = new Float64Array(Math.max(k + 1, this.#a.length * 2));
      grown.set(this.#a);
      this.#a = grown;
    }
    this.#a[k] = seq;
  }
  get(k: number): number {
    return k < this.#a.length ? this.#a[k]! : 0;
  }
}

/** A driver's connection: its socket and what its frames go to. */
class Conn {
  readonly socket: net.Socket;
  onFrame: (body: Buffer) => void = () => {};
  afterRead: () => void = () => {};
  constructor({ host, port }: Endpoint, localAddress: string | undefined) {
    this.socket = dialFrames({ host, port, ...(localAddress ? { localAddress } : {}) }, this);
    this.socket.on('error', () => {});
  }
}

interface Member {
  uid: string;
  group: Group;
  conn: Conn;
  /** Distinct group seqs received (offset by the group's seqBase). */
  seen: Marks;
  highest: number;
  acked: number;
  /** Set when this member sends. */
  sender?: Sender;
}

interface Sender {
  member: Member;
  slot: number;
  frame: (msgId: number, at: number) => Buffer;
  sent: number;
  answered: number;
  okAnswers: number;
  /** Per k: answered with success. */
  ok: Marks;
  /** Per k: the group seq (from the answer, or the first delivery seen). */
  seqOf: Seqs;
  /** Per k (mod RING): members still to receive it; send times. */
  remaining: Int32Array;
  sendTimes: Float64Array;
}

interface Group {
  spec: GroupSpec;
  members: Member[];
  senders: Sender[];
}

interface ControlPair {
  sender: Conn;
  receiver: Conn;
  sent: number;
  okAnswers: number;
  answered: number;
  received: Marks;
  seqBase: number;
  highestSeq: number;
  ackedSeq: number;
}

export async function runGroupLoad(o: GroupLoadOptions): Promise<GroupLoadResult> {
  if (o.window * 4 > RING) throw new Error(`window must be at most ${RING / 4}`);
  const run = new GroupRun(o);
  await run.connect();
  await o.ready?.();
  run.start();
  const at = { delivered: 0, acked: 0 };
  let measuredFrom = 0;
  const { from, to } = await run.clock.measure(o.warmupMs, o.durationMs, () => {
    at.delivered = run.delivered;
    at.acked = run.acked;
    measuredFrom = Date.now();
  });
  const measuredTo = Date.now();
  const delivered = run.delivered - at.delivered;
  const acked = run.acked - at.acked;
  run.clock.enter('drain');
  run.stopSending();
  await drain(() => run.outstanding(), o.drainMs);
  const result: GroupLoadResult = {
    delivered,
    acked,
    seconds: (to - from) / 1000,
    deliveryLatency: run.deliveryLatency.encode(),
    ackLatency: run.ackLatency.encode(),
    sendLag: '',
    errors: run.errors,
    measuredFrom,
    measuredTo,
    accounting: run.account(),
    controlLatency: run.controlLatency.encode(),
    control: run.controlAccount(),
  };
  run.clock.end();
  run.close();
  return result;
}

class GroupRun {
  readonly o: GroupLoadOptions;
  clock!: LoadClock<GroupSecond['phase']>;
  running = true;
  connections = 0;
  readonly errors: Record<string, number> = {};
  errorCount = 0;
  delivered = 0;
  acked = 0;
  sentTotal = 0;
  dup = 0;
  readonly dupIds: string[] = [];
  toDrop: number;
  readonly groups: Group[] = [];
  /** By slot: the run's senders. */
  readonly senders: Sender[] = [];
  control: ControlPair | undefined;
  readonly deliveryLatency = new Latency();
  readonly ackLatency = new Latency();
  readonly secondLatency = new Latency();
  readonly controlLatency = new Latency();
  readonly scan: Scanned = emptyScan();
  #controlTimer: NodeJS.Timeout | undefined;
  #groupTimer: NodeJS.Timeout | undefined;
  #dialed = 0;

  constructor(o: GroupLoadOptions) {
    this.o = o;
    this.toDrop = o.dropForTest ?? 0;
  }

  fail(code: string): void {
    this.errorCount++;
    this.errors[code] = (this.errors[code] ?? 0) + 1;
  }

  measuring(): boolean {
    return this.clock?.current === 'measure';
  }

  /** Connects and logs in every member (in batches, so that thousands of logins do not overrun the accept backlog), then the control pair. */
  async connect(): Promise<void> {
    const members: Member[] = [];
    for (const spec of this.o.groups) {
      const group: Group = { spec, members: [], senders: [] };
      this.groups.push(group);
      for (const uid of spec.members) group.members.push({ uid, group, conn: undefined as unknown as Conn, seen: new Marks(), highest: 0, acked: 0 });
      members.push(...group.members);
    }
    for (let first = 0; first < members.length; first += LOGIN_BATCH) {
      await Promise.all(members.slice(first, first + LOGIN_BATCH).map((m) => this.#join(m)));
    }
    for (const group of this.groups) {
      for (const member of group.members.slice(0, group.spec.senders)) {
        const slot = this.senders.length;
        const sender: Sender = {
          member,
          slot,
          frame: (msgId, at) => groupMessageFrame(msgId, member.uid, group.spec.id, Date.now(), stamp(at, this.o.payloadBytes)),
          sent: 0,
          answered: 0,
          okAnswers: 0,
          ok: new Marks(),
          seqOf: new Seqs(),
          remaining: new Int32Array(RING),
          sendTimes: new Float64Array(RING),
        };
        member.sender = sender;
        group.senders.push(sender);
        this.senders.push(sender);
      }
    }
    if (this.o.control) await this.#connectControl(this.o.control.name);
  }

  async #dial(): Promise<Conn> {
    const addresses = this.o.localAddresses ?? [];
    const conn = new Conn(this.o.endpoint, addresses.length ? addresses[this.#dialed++ % addresses.length] : undefined);
    await once(conn.socket, 'connect');
    this.connections++;
    conn.socket.once('close', () => {
      this.connections--;
      if (this.running) this.fail('CONNECTION_CLOSED');
    });
    return conn;
  }

  /** Logs `member` in; its frame handler takes over within the read that brought the answer, so no replayed event is missed. */
  async #join(member: Member): Promise<void> {
    member.conn = await this.#dial();
    await this.#login(member.conn, member.uid, true, () => this.#wireMember(member));
  }

  #login(conn: Conn, uid: string, groups: boolean, then: (inboxHead: number) => void): Promise<void> {
    const scan = emptyScan();
    return new Promise<void>((resolve, reject) => {
      conn.onFrame = (body) => {
        scanMessage(body, scan);
        if (scan.type !== HeadType.LOGIN_RESPONSE) return;
        if (!scan.result) return reject(new Error(`login of ${uid} refused: ${scan.errorCode}`));
        then(scan.responseSeq);
        resolve();
      };
      conn.socket.once('close', () => reject(new Error(`login of ${uid}: connection closed`)));
      // Above any inbox head: what earlier runs left in the inbox is not replayed.
      writePerTick(conn.socket, loginRequestFrame(uid, this.o.token(uid), { lastSeq: Number.MAX_SAFE_INTEGER, groups }));
    });
  }

  #wireMember(member: Member): void {
    const { scan, o } = this;
    const { spec } = member.group;
    const ackedTag = spec.id;
    member.conn.onFrame = (body) => {
      scanMessage(body, scan);
      if (scan.type === HeadType.MESSAGE_RESPONSE) {
        if (member.sender) this.#answered(member.sender, scan);
        return;
      }
      if (scan.type !== HeadType.MESSAGE_REQUEST || !scan.group) return;
      const seq = scan.seq;
      if (seq > member.highest) member.highest = seq;
      if (scan.event || seq <= spec.seqBase) return;
      const rel = scan.msgId - o.msgIdBase;
      const slot = Math.floor(rel / SLOT);
      const k = rel - slot * SLOT;
      const sender = this.senders[slot];
      if (sender === undefined || k < 1) return;
      this.delivered++;
      let first: boolean;
      if (this.toDrop > 0) {
        this.toDrop--;
        first = true;
      } else if ((first = member.seen.bump(seq - spec.seqBase) === 1)) {
        const known = sender.seqOf.get(k);
        if (known === 0) sender.seqOf.set(k, seq);
        else if (known !== seq) this.#duplicate(`${member.uid}:${sender.member.uid}:${k}`);
      }
      const now = performance.now();
      const latency = now - leadingNumber(body, scan.contentStart, scan.contentEnd);
      this.secondLatency.add(latency);
      if (this.measuring()) this.deliveryLatency.add(latency);
      // A seq seen before is a resend of the same delivery: it completes nothing.
      if (first && --sender.remaining[k % RING]! === 0 && this.running && this.o.rate === undefined) this.#send(sender);
    };
    member.conn.afterRead = () => {
      if (member.highest <= member.acked) return;
      member.acked = member.highest;
      writePerTick(member.conn.socket, groupAckFrame(ackedTag, member.acked));
    };
  }

  #duplicate(id: string): void {
    this.dup++;
    if (this.dupIds.length < SHOWN_IDS) this.dupIds.push(id);
  }

  #answered(sender: Sender, scan: Scanned): void {
    const k = scan.sequence - this.o.msgIdBase - sender.slot * SLOT;
    sender.answered++;
    if (scan.result) {
      sender.okAnswers++;
      sender.ok.bump(k);
      const known = sender.seqOf.get(k);
      if (known === 0) sender.seqOf.set(k, scan.responseSeq);
      else if (known !== scan.responseSeq) this.#duplicate(`${sender.member.uid}:${k}`);
      this.acked++;
      if (this.measuring()) this.ackLatency.add(performance.now() - sender.sendTimes[k % RING]!);
    } else {
      this.fail(scan.errorCode || 'SB_ERR_UNKNOWN');
      // Refused: never delivered, so its slot in the window is free again.
      sender.remaining[k % RING] = 0;
      if (this.running && this.o.rate === undefined) this.#send(sender);
    }
  }

  #send(sender: Sender): void {
    this.#sendK(sender, ++sender.sent, performance.now());
  }

  /** Message `k` of `sender`, stamped `at` (when it was due, in the open loop). */
  #sendK(sender: Sender, k: number, at: number): void {
    if (sender.remaining[k % RING]! > 0) {
      // RING messages still in flight: its slot is taken; this one is not sent (nor owed).
      this.fail('TOO_MANY_IN_FLIGHT');
      sender.answered++;
      return;
    }
    sender.sendTimes[k % RING] = at;
    sender.remaining[k % RING] = sender.member.group.members.length - 1;
    this.sentTotal++;
    writePerTick(sender.member.conn.socket, sender.frame(this.o.msgIdBase + sender.slot * SLOT + k, at));
  }

  async #connectControl(name: string): Promise<void> {
    const [sender, receiver] = await Promise.all([this.#dial(), this.#dial()]);
    const pair: ControlPair = { sender, receiver, sent: 0, okAnswers: 0, answered: 0, received: new Marks(), seqBase: 0, highestSeq: 0, ackedSeq: 0 };
    await this.#login(receiver, `${name}r`, false, (head) => (pair.seqBase = head));
    await this.#login(sender, `${name}s`, false, () => {});
    const { scan, o } = this;
    sender.onFrame = (body) => {
      scanMessage(body, scan);
      if (scan.type !== HeadType.MESSAGE_RESPONSE) return;
      pair.answered++;
      if (scan.result) {
        pair.okAnswers++;
      } else this.fail(scan.errorCode || 'SB_ERR_UNKNOWN');
    };
    receiver.onFrame = (body) => {
      scanMessage(body, scan);
      const k = scan.msgId - o.msgIdBase;
      if (scan.type !== HeadType.MESSAGE_REQUEST || scan.seq <= pair.seqBase || k < 1) return;
      if (scan.seq > pair.highestSeq) pair.highestSeq = scan.seq;
      if (pair.received.bump(k) !== 1) return;
      if (this.measuring()) this.controlLatency.add(performance.now() - leadingNumber(body, scan.contentStart, scan.contentEnd));
    };
    receiver.afterRead = () => {
      if (pair.highestSeq <= pair.ackedSeq) return;
      pair.ackedSeq = pair.highestSeq;
      writePerTick(receiver.socket, ackFrame(pair.ackedSeq));
    };
    this.control = pair;
  }

  start(): void {
    this.clock = new LoadClock<GroupSecond['phase']>('warmup', this.#reporter());
    const rate = this.o.rate;
    if (rate === undefined) {
      for (const sender of this.senders) for (let i = 0; i < this.o.window; i++) this.#send(sender);
    } else {
      // Senders spread over one interval, so that groups' messages do not all fall due at once.
      const interval = 1000 / rate;
      const slot = new Map(this.senders.map((s, i) => [s, (i * interval) / this.senders.length]));
      this.#groupTimer = openLoop(this.senders, { t0: performance.now(), interval, offset: (s) => slot.get(s)! }, (sender, k, dueAt) => this.#sendK(sender, k, dueAt));
    }
    const pair = this.control;
    if (pair) {
      const interval = 1000 / this.o.control!.rate;
      this.#controlTimer = openLoop([pair], { t0: performance.now(), interval }, (_, k, at) => {
        writePerTick(pair.sender.socket, messageRequestFrame(this.o.msgIdBase + k, `${this.o.control!.name}s`, `${this.o.control!.name}r`, Date.now(), stamp(at, this.o.payloadBytes)));
      });
    }
    this.clock.start();
  }

  stopSending(): void {
    this.running = false;
    clearInterval(this.#controlTimer);
    clearInterval(this.#groupTimer);
  }

  /** Sends not yet answered, or messages not yet at every other member. */
  outstanding(): boolean {
    for (const sender of this.senders) {
      if (sender.answered < sender.sent) return true;
      for (let i = 0; i < RING; i++) if (sender.remaining[i]! > 0) return true;
    }
    return false;
  }

  account(): GroupAccounting {
    const a: GroupAccounting = { sent: 0, acked: 0, received: 0, lost: 0, dup: this.dup, lostIds: [], dupIds: [...this.dupIds], expected: 0, membersWithLoss: 0 };
    const missed = new Set<Member>();
    for (const group of this.groups) {
      const base = group.spec.seqBase;
      for (const sender of group.senders) {
        a.sent += sender.sent;
        for (let k = 1; k <= sender.sent; k++) {
          if (sender.ok.get(k) === 0) continue;
          a.acked++;
          const seq = sender.seqOf.get(k);
          for (const member of group.members) {
            if (member === sender.member) continue;
            a.expected++;
            if (member.seen.get(seq - base) > 0) {
              a.received++;
              continue;
            }
            a.lost++;
            missed.add(member);
            if (a.lostIds.length < SHOWN_IDS) a.lostIds.push(`${member.uid}:${sender.member.uid}:${k}`);
          }
        }
      }
    }
    a.membersWithLoss = missed.size;
    return a;
  }

  controlAccount(): { acked: number; lost: number } {
    const pair = this.control;
    if (!pair) return { acked: 0, lost: 0 };
    let received = 0;
    for (let k = 1; k <= pair.sent; k++) if (pair.received.get(k) > 0) received++;
    return { acked: pair.okAnswers, lost: Math.max(0, pair.okAnswers - received) };
  }

  close(): void {
    for (const group of this.groups) for (const member of group.members) member.conn.socket.destroy();
    this.control?.sender.socket.destroy();
    this.control?.receiver.socket.destroy();
  }

  #reporter(): (phase: GroupSecond['phase'], t: number) => void {
    let last = { sent: 0, delivered: 0, acked: 0, errors: 0 };
    return (phase, t) => {
      this.o.onSecond?.({
        t,
        phase,
        sent: this.sentTotal - last.sent,
        delivered: this.delivered - last.delivered,
        acked: this.acked - last.acked,
        errors: this.errorCount - last.errors,
        connections: this.connections,
        latency: this.secondLatency.encode(),
      });
      this.secondLatency.reset();
      last = { sent: this.sentTotal, delivered: this.delivered, acked: this.acked, errors: this.errorCount };
    };
  }
}

/** A message's content: its send time (ms on this process's performance clock), padded. */
function stamp(at: number, payloadBytes: number): string {
  const head = `${at.toFixed(3)}|`;
  return head.length >= payloadBytes ? head : head + 'x'.repeat(payloadBytes - head.length);
}
