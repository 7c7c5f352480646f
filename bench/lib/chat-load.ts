// The 1:1 chat load driver shared by every target, so the bare relay and switchboard are
// measured the same way: `pairs` sender→receiver pairs, either closed-loop (each keeps up to
// `window` messages in flight) or open-loop (`rate`: send times fixed in advance, latency from
// the intended send time, so a stall shows up instead of slowing the sender down). Received
// frames are counted, not decoded: per pair, responses and deliveries come back in send order,
// so the k-th one answers the k-th send. `verify` (switchboard only) decodes them instead and
// accounts for every acknowledged message: lost (acked, never delivered) and dup.

import net from 'node:net';
import { once } from 'node:events';
import * as hdr from 'hdr-histogram-js';
import { FrameDecoder, encodeFrame } from '../../src/protocol/frame.js';
import { writePerTick } from '../../src/net/write-per-tick.js';
import { decodeMessage, encodeMessageFrame } from '../../src/protocol/codec.js';
import { HeadType, type UInt64 } from '../../src/protocol/types.js';

export type Target = 'switchboard' | 'relay';

export interface ChatLoadOptions {
  target: Target;
  host?: string;
  port: number;
  /** Where receivers connect; default `port` (a different worker: cross-node chat). */
  receiverPort?: number;
  pairs: number;
  /** Closed loop (the default): messages each pair keeps in flight. */
  window: number;
  /** Open loop: messages per second over all pairs; each pair sends at rate / pairs. */
  rate?: number;
  warmupMs: number;
  durationMs: number;
  payloadBytes: number;
  /** switchboard only: decode responses and deliveries, and report lost and duplicated messages. */
  verify?: boolean;
  /** With `verify`: after sending stops, wait this long at most for outstanding deliveries (default 3000). */
  drainMs?: number;
  /** With `verify`: the receivers discard this many deliveries as if lost (to test the accounting). */
  dropForTest?: number;
  /** switchboard only: a login token for a user id. */
  token?: (uid: string) => string;
  /** Called once the warm-up is over (to start measuring server CPU). */
  onMeasureStart?: () => void;
}

export interface ChatLoadResult {
  target: Target;
  mode: 'closed' | 'open';
  /** Open loop: the offered rate, msg/s. */
  rate?: number;
  delivered: number;
  acked: number;
  seconds: number;
  deliveredPerSec: number;
  ackedPerSec: number;
  /** Send → delivery latency, ms, over the measured interval (open loop: from the intended send time). */
  delivery: Percentiles;
  /** Send → sender's response latency, ms (switchboard only: the relay does not answer). */
  ack: Percentiles;
  /** Open loop: how late the driver sent, ms after the intended time (its own share of the latency). */
  sendLag?: Percentiles;
  /** With `verify`: refused sends by error code (SB_ERR_...). */
  errors?: Record<string, number>;
  /** With `verify`: the loss accounting over the whole run, warm-up included. */
  accounting?: Accounting;
}

export interface Accounting {
  sent: number;
  /** Sends answered with result=true. */
  acked: number;
  /** Distinct messages received (after dedupe by inbox seq). */
  received: number;
  /** Acknowledged, never received. */
  lost: number;
  /** The same msg_id received under two inbox sequences. */
  dup: number;
  /** The first few lost and duplicated messages, as "sender:msg_id". */
  lostIds: string[];
  dupIds: string[];
}

export interface Percentiles {
  count: number;
  p50: number;
  p90: number;
  p99: number;
  p999: number;
  max: number;
}

/** Latency of the measured interval: an HDR histogram in microseconds, read out in ms. */
class Latency {
  #histogram = hdr.build({ numberOfSignificantValueDigits: 3, highestTrackableValue: 3_600_000_000, autoResize: true });
  add(ms: number): void {
    this.#histogram.recordValue(Math.max(0, Math.round(ms * 1000)));
  }
  percentiles(): Percentiles {
    const h = this.#histogram;
    // A percentile is the top of its bucket (within 0.1%); the max is exact: clamp to it.
    const at = (q: number) => Math.min(h.getValueAtPercentile(q), h.maxValue) / 1000;
    return { count: h.totalCount, p50: at(50), p90: at(90), p99: at(99), p999: at(99.9), max: h.maxValue / 1000 };
  }
}

/** Flags by a dense non-negative index (msg_ids and inbox sequences count up from 1 per pair). */
class Marks {
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

interface Endpoint {
  socket: net.Socket;
  frames: number;
  onFrame: (body: Buffer) => void;
}

function connect(host: string, port: number): Promise<Endpoint> {
  const socket = net.connect({ host, port, noDelay: true });
  const endpoint: Endpoint = { socket, frames: 0, onFrame: () => {} };
  const decoder = new FrameDecoder((body) => endpoint.onFrame(body), { maxFrameLength: 1 << 20 });
  socket.on('data', (chunk: Buffer) => decoder.push(chunk));
  socket.on('error', () => {});
  return once(socket, 'connect').then(() => endpoint);
}

function write(endpoint: Endpoint, frame: Buffer): void {
  writePerTick(endpoint.socket, frame);
}

const num = (v: UInt64 | null | undefined): number => (v == null ? 0 : typeof v === 'number' ? v : v.toNumber());

async function login(target: Target, endpoint: Endpoint, uid: string, token: ((uid: string) => string) | undefined): Promise<void> {
  if (target === 'relay') {
    write(endpoint, encodeFrame(Buffer.from(uid, 'latin1')));
    return;
  }
  const answered = new Promise<void>((resolve, reject) => {
    endpoint.onFrame = (body) => {
      const message = decodeMessage(body);
      if (message.type !== HeadType.LOGIN_RESPONSE) return;
      if (message.loginResponse?.result) resolve();
      else reject(new Error(`login of ${uid} refused: ${message.loginResponse?.info}`));
    };
  });
  write(endpoint, encodeMessageFrame({ type: HeadType.LOGIN_REQUEST, sequence: 1, loginRequest: { uid, deviceId: 'bench', token: token!(uid) } }));
  await answered;
}

/** A frame factory per pair: switchboard messages need their own msg_id (dedupe); the k-th send has msg_id k + 1. */
function messageFrames(target: Target, from: string, to: string, payload: string): () => Buffer {
  if (target === 'relay') {
    const name = Buffer.from(to, 'latin1');
    const frame = encodeFrame(Buffer.concat([Buffer.from([name.length]), name, Buffer.from(payload, 'latin1')]));
    return () => frame;
  }
  let n = 0;
  const request = { msgId: 0, from, to, time: 0, msgType: 1, content: payload };
  const envelope = { type: HeadType.MESSAGE_REQUEST, sequence: 0, messageRequest: request };
  return () => {
    request.msgId = envelope.sequence = ++n;
    request.time = Date.now();
    return encodeMessageFrame(envelope);
  };
}

interface Pair {
  name: string;
  sender: Endpoint;
  receiver: Endpoint;
  next: () => Buffer;
  /** Closed loop: actual send times of the last RING sends. */
  sendTimes: Float64Array;
  sent: number;
  acks: number;
  /** With `verify`: sends answered with result=true. */
  okAcks: number;
  deliveries: number;
  /** With `verify`: per msg_id, acknowledged; per msg_id, received; per inbox seq, seen. */
  ackedIds: Marks;
  receivedIds: Marks;
  seenSeqs: Marks;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function runChatLoad(o: ChatLoadOptions): Promise<ChatLoadResult> {
  const host = o.host ?? '127.0.0.1';
  const payload = 'x'.repeat(o.payloadBytes);
  const verify = o.verify ?? false;
  if (verify && o.target !== 'switchboard') throw new Error('verify needs the switchboard target');
  const open = o.rate !== undefined;
  if (open && !(o.rate! > 0)) throw new Error('rate must be positive');
  if (!open && o.window * 4 > RING) throw new Error(`window must be at most ${RING / 4}`);
  const pairs: Pair[] = await Promise.all(
    Array.from({ length: o.pairs }, async (_, i) => {
      const [sender, receiver] = await Promise.all([connect(host, o.port), connect(host, o.receiverPort ?? o.port)]);
      await login(o.target, receiver, `r${i}`, o.token);
      await login(o.target, sender, `s${i}`, o.token);
      return {
        name: `s${i}`,
        sender,
        receiver,
        next: messageFrames(o.target, `s${i}`, `r${i}`, payload),
        sendTimes: new Float64Array(open ? 0 : RING),
        sent: 0,
        acks: 0,
        okAcks: 0,
        deliveries: 0,
        ackedIds: new Marks(),
        receivedIds: new Marks(),
        seenSeqs: new Marks(),
      };
    }),
  );
  // Relay logins have no answer: give the hello frames a moment to land before sending.
  if (o.target === 'relay') await sleep(200);

  let running = true;
  let measuring = false;
  let delivered = 0;
  let acked = 0;
  let toDrop = o.dropForTest ?? 0;
  const errors: Record<string, number> = {};
  const deliveryLatency = new Latency();
  const ackLatency = new Latency();
  const sendLag = new Latency();
  // Open loop: the k-th send of a pair (0-based) is due at t0 + k * interval.
  const interval = open ? (1000 * o.pairs) / o.rate! : 0;
  const t0 = performance.now();
  const sentAt = (pair: Pair, k: number) => (open ? t0 + k * interval : pair.sendTimes[k % RING]!);

  for (const pair of pairs) {
    const send = () => {
      if (!open) pair.sendTimes[pair.sent % RING] = performance.now();
      pair.sent++;
      write(pair.sender, pair.next());
    };
    pair.sender.onFrame = (body) => {
      const k = pair.acks++;
      if (verify) {
        const response = decodeMessage(body);
        if (response.type !== HeadType.MESSAGE_RESPONSE) return void pair.acks--;
        const r = response.messageResponse;
        if (r?.result) {
          pair.okAcks++;
          pair.ackedIds.bump(num(response.sequence));
        }
        else errors[r?.errorCode || 'unknown'] = (errors[r?.errorCode || 'unknown'] ?? 0) + 1;
      }
      acked++;
      if (measuring) ackLatency.add(performance.now() - sentAt(pair, k));
    };
    pair.receiver.onFrame = (body) => {
      const k = pair.deliveries++;
      if (verify) {
        const message = decodeMessage(body);
        if (message.type !== HeadType.MESSAGE_REQUEST) return void pair.deliveries--;
        const request = message.messageRequest!;
        if (toDrop > 0) toDrop--;
        // A seq seen before is a replay of the same delivery: the client dedupes it.
        else if (pair.seenSeqs.bump(num(request.seq)) === 1) pair.receivedIds.bump(num(request.msgId));
      }
      delivered++;
      if (measuring) deliveryLatency.add(performance.now() - sentAt(pair, k));
      if (running && !open) send();
    };
    if (!open) for (let k = 0; k < o.window; k++) send();
  }

  // Open loop: one timer sends every message that is due, however far behind the server is.
  let ticker: NodeJS.Timeout | undefined;
  if (open) {
    const tick = () => {
      const now = performance.now();
      const due = Math.floor((now - t0) / interval) + 1;
      for (const pair of pairs) {
        while (pair.sent < due) {
          if (measuring) sendLag.add(now - sentAt(pair, pair.sent));
          pair.sent++;
          write(pair.sender, pair.next());
        }
      }
    };
    tick();
    ticker = setInterval(tick, 1);
  }

  await sleep(o.warmupMs);
  measuring = true;
  o.onMeasureStart?.();
  const startDelivered = delivered;
  const startAcked = acked;
  const start = process.hrtime.bigint();
  await sleep(o.durationMs);
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  measuring = false;
  running = false;
  clearInterval(ticker);
  const result: ChatLoadResult = {
    target: o.target,
    mode: open ? 'open' : 'closed',
    ...(open ? { rate: o.rate } : {}),
    delivered: delivered - startDelivered,
    acked: acked - startAcked,
    seconds,
    deliveredPerSec: (delivered - startDelivered) / seconds,
    ackedPerSec: (acked - startAcked) / seconds,
    delivery: deliveryLatency.percentiles(),
    ack: ackLatency.percentiles(),
    ...(open ? { sendLag: sendLag.percentiles() } : {}),
  };
  if (verify) {
    // Drain: wait until every send is answered and every accepted one delivered, or the time is up.
    const deadline = performance.now() + (o.drainMs ?? 3000);
    while (performance.now() < deadline && pairs.some((p) => p.acks < p.sent || p.deliveries < p.okAcks)) await sleep(20);
    result.errors = errors;
    result.accounting = account(pairs);
  }
  for (const { sender, receiver } of pairs) {
    sender.socket.destroy();
    receiver.socket.destroy();
  }
  return result;
}

function account(pairs: Pair[]): Accounting {
  const a: Accounting = { sent: 0, acked: 0, received: 0, lost: 0, dup: 0, lostIds: [], dupIds: [] };
  for (const pair of pairs) {
    a.sent += pair.sent;
    for (let id = 1; id <= pair.sent; id++) {
      const got = pair.receivedIds.get(id);
      if (got > 0) a.received++;
      if (got > 1) {
        a.dup++;
        if (a.dupIds.length < SHOWN_IDS) a.dupIds.push(`${pair.name}:${id}`);
      }
      if (pair.ackedIds.get(id) === 0) continue;
      a.acked++;
      if (got === 0) {
        a.lost++;
        if (a.lostIds.length < SHOWN_IDS) a.lostIds.push(`${pair.name}:${id}`);
      }
    }
  }
  return a;
}
