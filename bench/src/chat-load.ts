// The 1:1 chat load one driver process generates, the same for every target so the bare relay
// and switchboard are measured alike: `pairs` sender→receiver pairs, either closed loop (each
// keeps `window` messages in flight) or open loop (`rate`: send times fixed in advance and
// latency measured from the intended send time, so a stall shows up instead of slowing the
// sender down). Every message carries its (intended) send time; switchboard receivers log in
// with acks and acknowledge cumulatively once per read, as the SDK does, and every message
// the server answered with success is accounted for: received once, lost or duplicated. With
// `receipts` the senders also ask for RECEIPTs (PROTOCOL.md §14) and count the ones they get.

import type net from 'node:net';
import { once } from 'node:events';
import { encodeFrame } from '../../src/protocol/frame.js';
import { HeadType } from '../../src/protocol/types.js';
import { writePerTick } from '../../src/net/write-per-tick.js';
import { Latency } from './latency.js';
import { LoadClock, drain, openLoop } from './timeline.js';
import { emptyScan, leadingNumber, scanMessage } from './wire-scan.js';
import { ackFrame, loginRequestFrame, messageRequestFrame } from './client-frames.js';
import type { Accounting } from './report.js';
import { sleep } from '../../testkit/wait.js';
import { dialFrames } from '../../testkit/raw-client.js';

export type Target = 'switchboard' | 'relay';

export interface ChatLoadOptions {
  target: Target;
  /** The workers (or the relay): pair N's sender uses endpoint N mod count. */
  endpoints: Endpoint[];
  /** Pair N's receiver uses the next endpoint after its sender's (cross-node chat in a cluster). */
  crossNode?: boolean;
  /** Local addresses the driver's sockets bind to, in turn (see driverAddresses). */
  localAddresses?: string[];
  pairs: number;
  /** Users are s<N> and r<N> for N from this offset (drivers of one run use disjoint ranges). */
  pairOffset?: number;
  /**
   * The k-th message of a pair has msg_id base + k. Runs against the same server need distinct
   * bases: the server dedupes an acks sender's msg_ids, so reused ids would not be delivered.
   */
  msgIdBase?: number;
  /** Closed loop (the default): messages each pair keeps in flight. */
  window: number;
  /** Open loop: messages per second over this driver's pairs. */
  rate?: number;
  warmupMs: number;
  durationMs: number;
  payloadBytes: number;
  /** After sending stops, wait this long at most for outstanding answers and deliveries (default 3000). */
  drainMs?: number;
  /** switchboard: the senders log in with `receipts` and count the DELIVERED receipts each ack of their receiver produces. */
  receipts?: boolean;
  /** The receivers discard this many deliveries as if lost (to test the accounting). */
  dropForTest?: number;
  /** switchboard: a login token for a user id. */
  token?: (uid: string) => string;
  /** Called once every pair is connected and logged in; sending starts when it resolves. */
  ready?: () => Promise<void>;
  /** Called about once a second with what happened since the last call. */
  onSecond?: (second: ChatSecond) => void;
}

/** One second of a run, as a driver saw it. */
export interface ChatSecond {
  /** Which second since sending started: 1, 2, ... (the last, after the drain, may be partial). */
  t: number;
  phase: 'warmup' | 'measure' | 'drain';
  sent: number;
  delivered: number;
  acked: number;
  /** RECEIPT frames the senders got (only the chat load sends it, and only with `receipts`). */
  receipts?: number;
  errors: number;
  connections: number;
  /** Delivery latency of this second, encoded (see Latency.decode). */
  latency: string;
}


/**
 * What every chat-shaped load measures in one driver (the raw-frame chat load here, the SDK
 * failover load); histograms encoded so they can be merged across drivers.
 */
export interface MeasuredLoad {
  /** Messages delivered, and sends answered with success, within the measured interval. */
  delivered: number;
  acked: number;
  seconds: number;
  /** Intended send time → delivery, and → the sender's successful answer. */
  deliveryLatency: string;
  ackLatency: string;
  /** How late the driver itself sent, after the intended time. */
  sendLag: string;
  /** Refused sends and other failures by code (SB_ERR_..., or CONNECTION_CLOSED). */
  errors: Record<string, number>;
}

/** What one chat driver measured. The relay answers no sends: its `acked` and ack latency stay empty. */
export interface ChatLoadResult extends MeasuredLoad {
  target: Target;
  mode: 'closed' | 'open';
  /** Open loop: send → delivery from the actual send time (without the driver's lateness). */
  fromSendLatency: string;
  /** switchboard: the loss accounting over the whole run, warm-up included. */
  accounting?: Accounting;
  /** With `receipts`: RECEIPT frames the senders got, and MESSAGE_ACKs the receivers sent, within the measured interval. */
  receipts?: number;
  receiverAcks?: number;
}

/** Flags by a dense non-negative index (msg_ids and inbox sequences count up from 1 per pair). */
export class Marks {
  #bytes = new Uint8Array(1024);
  /** Increments the mark at `i` and returns its new value (saturating at 255). */
  bump(i: number): number {
    if (i >= this.#bytes.length) {
      const grown = new Uint8Array(Math.max(i + 1, this.#bytes.length * 2));
      grown.set(this.#bytes);
      this.#bytes = grown;
    }
    const v = this.#bytes[i]!;
    if (v < 255) this.#bytes[i] = v + 1;
    return v + 1;
  }
  get(i: number): number {
    return i < this.#bytes.length ? this.#bytes[i]! : 0;
  }
}

const RING = 1024;
const SHOWN_IDS = 10;

export interface Endpoint {
  host: string;
  port: number;
  /** A TLS port: dialed over TLS, the certificate verified against this CA (PEM) as `localhost`. */
  tls?: { ca: string };
}

/** A driver's connection: its socket and what its frames go to (set once it is logged in). */
class Conn {
  readonly socket: net.Socket;
  onFrame: (body: Buffer) => void = () => {};
  /** Called after each read's frames were handled (receivers acknowledge there). */
  afterRead: () => void = () => {};

  constructor({ host, port, tls }: Endpoint, localAddress: string | undefined) {
    this.socket = dialFrames({ host, port, ...(localAddress ? { localAddress } : {}), ...(tls ? { tls: { ca: tls.ca, servername: 'localhost' } } : {}) }, this);
    this.socket.on('error', () => {});
  }
}

async function connect(endpoint: Endpoint, localAddress: string | undefined, onClose: () => void): Promise<Conn> {
  const conn = new Conn(endpoint, localAddress);
  await once(conn.socket, endpoint.tls ? 'secureConnect' : 'connect');
  conn.socket.once('close', onClose);
  return conn;
}

function write(endpoint: Conn, frame: Buffer): void {
  writePerTick(endpoint.socket, frame);
}

/**
 * Logs a bench user in and resolves its inbox head. The device claims to have seen everything
 * (last_seq above any head), so what earlier runs left in the inbox is not replayed: the server
 * starts it at the head (PROTOCOL.md, LoginRequest.last_seq).
 */
async function login(target: Target, endpoint: Conn, uid: string, token: ((uid: string) => string) | undefined, receipts = false): Promise<number> {
  if (target === 'relay') {
    write(endpoint, encodeFrame(Buffer.from(uid, 'latin1')));
    return 0;
  }
  const scan = emptyScan();
  const answered = new Promise<number>((resolve, reject) => {
    endpoint.onFrame = (body) => {
      scanMessage(body, scan);
      if (scan.type !== HeadType.LOGIN_RESPONSE) return;
      if (scan.result) resolve(scan.responseSeq);
      else reject(new Error(`login of ${uid} refused: ${scan.errorCode}`));
    };
    endpoint.socket.once('close', () => reject(new Error(`login of ${uid}: connection closed`)));
  });
  write(endpoint, loginRequestFrame(uid, token!(uid), { lastSeq: Number.MAX_SAFE_INTEGER, receipts }));
  return answered;
}

/**
 * The content of a message: its intended and its actual send time (ms on this process's
 * performance clock; the same in the closed loop), padded: "intended|actual|xxx...".
 */
function stamp(at: number, payloadBytes: number): string {
  const head = `${at.toFixed(3)}|${performance.now().toFixed(3)}|`;
  return head.length >= payloadBytes ? head : head + 'x'.repeat(payloadBytes - head.length);
}

/** Frames for one pair; the k-th send (from 1) has msg_id base + k, which the server dedupes by. */
function messageFrames(target: Target, from: string, to: string, payloadBytes: number, msgIdBase: number): (k: number, at: number) => Buffer {
  if (target === 'relay') {
    const name = Buffer.from(to, 'latin1');
    return (_msgId, at) => encodeFrame(Buffer.concat([Buffer.from([name.length]), name, Buffer.from(stamp(at, payloadBytes), 'latin1')]));
  }
  return (k, at) => messageRequestFrame(msgIdBase + k, from, to, Date.now(), stamp(at, payloadBytes));
}

interface Pair {
  name: string;
  sender: Conn;
  receiver: Conn;
  frame: (msgId: number, at: number) => Buffer;
  /** Closed loop: actual send times of the last RING sends, by msg_id. */
  sendTimes: Float64Array;
  sent: number;
  answered: number;
  okAnswers: number;
  deliveries: number;
  highestSeq: number;
  ackedSeq: number;
  /** MESSAGE_ACKs the receiver sent, and RECEIPTs the sender got (each ack makes one, with `receipts`). */
  acksSent: number;
  receipts: number;
  /** The receiver's inbox head at login: this run's deliveries have higher seqs. */
  seqBase: number;
  /** Open loop: this pair's offset within each interval, ms. */
  phase: number;
  /** Per msg_id: answered with success; received. Per inbox seq: seen. */
  okIds: Marks;
  receivedIds: Marks;
  seenSeqs: Marks;
}

export async function runChatLoad(o: ChatLoadOptions): Promise<ChatLoadResult> {
  const open = o.rate !== undefined;
  if (open && !(o.rate! > 0)) throw new Error('rate must be positive');
  if (!open && o.window * 4 > RING) throw new Error(`window must be at most ${RING / 4}`);
  const run = new ChatRun(o);
  const pairs = await run.connectPairs();
  // Relay logins have no answer: give the hello frames a moment to land before sending.
  if (!run.sb) await sleep(200);
  await o.ready?.();
  run.start(pairs);
  const at = { delivered: 0, acked: 0, receipts: 0, receiverAcks: 0 };
  const { from, to } = await run.clock.measure(o.warmupMs, o.durationMs, () => {
    at.delivered = run.delivered;
    at.acked = run.acked;
    at.receipts = run.receipts;
    at.receiverAcks = run.receiverAcks;
  });
  const result: ChatLoadResult = {
    target: o.target,
    mode: open ? 'open' : 'closed',
    delivered: run.delivered - at.delivered,
    acked: run.acked - at.acked,
    seconds: (to - from) / 1000,
    deliveryLatency: run.deliveryLatency.encode(),
    ackLatency: run.ackLatency.encode(),
    sendLag: run.sendLag.encode(),
    fromSendLatency: run.fromSendLatency.encode(),
    errors: run.errors,
    ...(run.sb && o.receipts ? { receipts: run.receipts - at.receipts, receiverAcks: run.receiverAcks - at.receiverAcks } : {}),
  };
  run.clock.enter('drain');
  run.stopSending();
  if (run.sb) {
    // Wait until every send is answered, every accepted one delivered and (with receipts) every
    // receiver ack's receipt in, or the time is up.
    await drain(() => pairs.some((p) => p.answered < p.sent || p.deliveries < p.okAnswers || (o.receipts === true && p.receipts < p.acksSent)), o.drainMs ?? 3000);
    result.accounting = account(pairs, o.receipts === true);
  }
  run.clock.end();
  for (const { sender, receiver } of pairs) {
    sender.socket.destroy();
    receiver.socket.destroy();
  }
  return result;
}

/**
 * One driver's chat load while it runs: its connections, its counters and latencies, and the
 * frame handlers of its pairs, which count into them.
 */
class ChatRun {
  readonly sb: boolean;
  readonly open: boolean;
  readonly msgIdBase: number;
  clock!: LoadClock<ChatSecond['phase']>;
  running = true;
  connections = 0;
  readonly errors: Record<string, number> = {};
  errorCount = 0;
  delivered = 0;
  acked = 0;
  /** RECEIPT frames the senders got (they ask for them with `receipts` only), and MESSAGE_ACKs the receivers sent. */
  receipts = 0;
  receiverAcks = 0;
  sentTotal = 0;
  toDrop: number;
  readonly deliveryLatency = new Latency();
  readonly ackLatency = new Latency();
  readonly sendLag = new Latency();
  readonly secondLatency = new Latency();
  readonly fromSendLatency = new Latency();
  readonly scan = emptyScan();
  /** Open loop: the k-th send of pair i (msg_id k, from 1) is due at t0 + pair.phase + (k - 1) * interval. */
  interval = 0;
  t0 = 0;
  #ticker: NodeJS.Timeout | undefined;
  #dialed = 0;

  constructor(readonly o: ChatLoadOptions) {
    this.sb = o.target === 'switchboard';
    this.open = o.rate !== undefined;
    this.msgIdBase = o.msgIdBase ?? 0;
    this.toDrop = o.dropForTest ?? 0;
  }

  fail(code: string): void {
    this.errors[code] = (this.errors[code] ?? 0) + 1;
  }

  measuring(): boolean {
    return this.clock.current === 'measure';
  }

  /** Connects and logs in every pair, in batches so that a few thousand logins do not overrun the accept backlog. */
  async connectPairs(): Promise<Pair[]> {
    const { o } = this;
    const offset = o.pairOffset ?? 0;
    const n = o.endpoints.length;
    const pairs: Pair[] = [];
    for (let first = 0; first < o.pairs; first += 200) {
      const batch = Array.from({ length: Math.min(200, o.pairs - first) }, async (_, j) => {
        const i = offset + first + j;
        const [sender, receiver] = await Promise.all([this.#dial(o.endpoints[i % n]!), this.#dial(o.endpoints[(i + (o.crossNode ? 1 : 0)) % n]!)]);
        const seqBase = await login(o.target, receiver, `r${i}`, o.token);
        await login(o.target, sender, `s${i}`, o.token, o.receipts);
        return this.#pair(`s${i}`, `r${i}`, sender, receiver, seqBase);
      });
      pairs.push(...(await Promise.all(batch)));
    }
    return pairs;
  }

  async #dial(endpoint: Endpoint): Promise<Conn> {
    const addresses = this.o.localAddresses ?? [];
    const conn = await connect(endpoint, addresses.length ? addresses[this.#dialed++ % addresses.length] : undefined, () => {
      this.connections--;
      if (this.running) this.fail('CONNECTION_CLOSED');
    });
    this.connections++;
    return conn;
  }

  #pair(name: string, to: string, sender: Conn, receiver: Conn, seqBase: number): Pair {
    const { o } = this;
    return {
      name,
      sender,
      receiver,
      frame: messageFrames(o.target, name, to, o.payloadBytes, this.msgIdBase),
      sendTimes: new Float64Array(o.rate === undefined ? RING : 0),
      sent: 0,
      answered: 0,
      okAnswers: 0,
      deliveries: 0,
      highestSeq: 0,
      ackedSeq: 0,
      acksSent: 0,
      receipts: 0,
      seqBase,
      phase: 0,
      okIds: new Marks(),
      receivedIds: new Marks(),
      seenSeqs: new Marks(),
    };
  }

  /** Starts the load (every pair's handlers, then the closed loop's windows or the open loop's timer), then its reports. */
  start(pairs: Pair[]): void {
    const { o } = this;
    this.clock = new LoadClock<ChatSecond['phase']>('warmup', this.#reporter());
    // Open loop: the pairs' phases are staggered, so the total is an even stream, not a burst of
    // every pair at once each interval.
    this.interval = this.open ? (1000 * o.pairs) / o.rate! : 0;
    pairs.forEach((pair, i) => (pair.phase = (i / pairs.length) * this.interval));
    this.t0 = performance.now();
    for (const pair of pairs) {
      if (this.sb) this.#wireSwitchboard(pair);
      else this.#wireRelay(pair);
      if (!this.open) for (let k = 0; k < o.window; k++) this.#send(pair, performance.now());
    }
    if (this.open) this.#startOpenLoop(pairs);
    this.clock.start();
  }

  stopSending(): void {
    this.running = false;
    clearInterval(this.#ticker);
  }

  /** The intended send time of a pair's msg_id k (closed loop: the actual one, from the ring). */
  #sentAt(pair: Pair, k: number): number {
    return this.open ? this.t0 + pair.phase + (k - 1) * this.interval : pair.sendTimes[k % RING]!;
  }

  /** Closed loop: the next message of `pair`, at `at`. */
  #send(pair: Pair, at: number): void {
    const msgId = ++pair.sent;
    this.sentTotal++;
    if (!this.open) pair.sendTimes[msgId % RING] = at;
    write(pair.sender, pair.frame(msgId, at));
  }

  /** A delivery's latencies, from the stamp in its content at body[start, end). */
  #received(body: Buffer, start: number, end: number): void {
    const now = performance.now();
    const latency = now - leadingNumber(body, start, end);
    this.secondLatency.add(latency);
    if (!this.measuring()) return;
    this.deliveryLatency.add(latency);
    if (this.open) this.fromSendLatency.add(now - leadingNumber(body, body.indexOf(0x7c, start) + 1, end));
  }

  #wireSwitchboard(pair: Pair): void {
    const { scan, msgIdBase } = this;
    pair.sender.onFrame = (body) => {
      scanMessage(body, scan);
      // A DELIVERED receipt for what the receiver acknowledged (with `receipts` only): counted, neither a delivery nor an answer.
      if (scan.type === HeadType.RECEIPT) {
        pair.receipts++;
        this.receipts++;
        return;
      }
      if (scan.type !== HeadType.MESSAGE_RESPONSE) return;
      pair.answered++;
      if (scan.result) {
        pair.okAnswers++;
        pair.okIds.bump(scan.sequence - msgIdBase);
        this.acked++;
        if (this.measuring()) this.ackLatency.add(performance.now() - this.#sentAt(pair, scan.sequence - msgIdBase));
      } else {
        this.errorCount++;
        this.fail(scan.errorCode || 'SB_ERR_UNKNOWN');
        // Refused: it will never be delivered, so its slot in the window is free again.
        if (this.running && !this.open) this.#send(pair, performance.now());
      }
    };
    pair.receiver.onFrame = (body) => {
      scanMessage(body, scan);
      // Only this run's messages: not a notification, nor anything an earlier run left behind.
      const k = scan.msgId - msgIdBase;
      if (scan.type !== HeadType.MESSAGE_REQUEST || scan.seq <= pair.seqBase || k < 1) return;
      pair.deliveries++;
      if (scan.seq > pair.highestSeq) pair.highestSeq = scan.seq;
      if (this.toDrop > 0) this.toDrop--;
      // A seq seen before is a resend of the same delivery: a client dedupes it.
      else if (pair.seenSeqs.bump(scan.seq - pair.seqBase) === 1) pair.receivedIds.bump(k);
      this.delivered++;
      this.#received(body, scan.contentStart, scan.contentEnd);
      if (this.running && !this.open) this.#send(pair, performance.now());
    };
    pair.receiver.afterRead = () => {
      if (pair.highestSeq <= pair.ackedSeq) return;
      pair.ackedSeq = pair.highestSeq;
      pair.acksSent++;
      this.receiverAcks++;
      write(pair.receiver, ackFrame(pair.ackedSeq));
    };
  }

  #wireRelay(pair: Pair): void {
    pair.receiver.onFrame = (body) => {
      pair.deliveries++;
      this.delivered++;
      this.#received(body, 1 + body[0]!, body.length);
      if (this.running && !this.open) this.#send(pair, performance.now());
    };
  }

  /** Open loop: a 1 ms timer sends every message that is due, however far behind the server is. */
  #startOpenLoop(pairs: Pair[]): void {
    this.#ticker = openLoop(pairs, { t0: this.t0, interval: this.interval, offset: (pair) => pair.phase }, (pair, k, at, now) => {
      if (this.measuring()) this.sendLag.add(now - at);
      this.sentTotal++;
      write(pair.sender, pair.frame(k, at));
    });
  }

  /** The once-a-second record: what happened since the last one. */
  #reporter(): (phase: ChatSecond['phase'], t: number) => void {
    let last = { sent: 0, delivered: 0, acked: 0, receipts: 0, errors: 0 };
    return (phase, t) => {
      this.o.onSecond?.({
        t,
        phase,
        sent: this.sentTotal - last.sent,
        delivered: this.delivered - last.delivered,
        acked: this.acked - last.acked,
        ...(this.o.receipts ? { receipts: this.receipts - last.receipts } : {}),
        errors: this.errorCount - last.errors,
        connections: this.connections,
        latency: this.secondLatency.encode(),
      });
      this.secondLatency.reset();
      last = { sent: this.sentTotal, delivered: this.delivered, acked: this.acked, receipts: this.receipts, errors: this.errorCount };
    };
  }
}

function account(pairs: Pair[], receipts: boolean): Accounting {
  const a: Accounting = { sent: 0, acked: 0, received: 0, lost: 0, dup: 0, lostIds: [], dupIds: [], ...(receipts ? { receiverAcks: 0, receipts: 0 } : {}) };
  for (const pair of pairs) {
    a.sent += pair.sent;
    if (receipts) {
      a.receiverAcks! += pair.acksSent;
      a.receipts! += pair.receipts;
    }
    for (let id = 1; id <= pair.sent; id++) {
      const got = pair.receivedIds.get(id);
      if (got > 0) a.received++;
      if (got > 1) {
        a.dup++;
        if (a.dupIds.length < SHOWN_IDS) a.dupIds.push(`${pair.name}:${id}`);
      }
      if (pair.okIds.get(id) === 0) continue;
      a.acked++;
      if (got === 0) {
        a.lost++;
        if (a.lostIds.length < SHOWN_IDS) a.lostIds.push(`${pair.name}:${id}`);
      }
    }
  }
  return a;
}

/** Sums the accounting of several drivers (ids: the first few of all). */
export function mergeAccounting(parts: Accounting[]): Accounting {
  const a: Accounting = { sent: 0, acked: 0, received: 0, lost: 0, dup: 0, lostIds: [], dupIds: [] };
  for (const p of parts) {
    a.sent += p.sent;
    if (p.receipts !== undefined) {
      a.receiverAcks = (a.receiverAcks ?? 0) + p.receiverAcks!;
      a.receipts = (a.receipts ?? 0) + p.receipts;
    }
    a.acked += p.acked;
    a.received += p.received;
    a.lost += p.lost;
    a.dup += p.dup;
    a.lostIds.push(...p.lostIds);
    a.dupIds.push(...p.dupIds);
  }
  a.lostIds = a.lostIds.slice(0, SHOWN_IDS);
  a.dupIds = a.dupIds.slice(0, SHOWN_IDS);
  return a;
}
