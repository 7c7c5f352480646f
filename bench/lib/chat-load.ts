// A closed-loop 1:1 chat load driver shared by every target, so the bare relay and switchboard
// are measured the same way: `pairs` sender→receiver pairs, each keeping up to `window`
// messages in flight (sent, not yet delivered). Received frames are counted, not decoded: per
// pair, responses and deliveries come back in send order, so the k-th one answers the k-th
// send, and its latency is read from a ring of send times.

import net from 'node:net';
import { once } from 'node:events';
import { FrameDecoder, encodeFrame } from '../../src/protocol/frame.js';
import { writePerTick } from '../../src/net/write-per-tick.js';
import { decodeMessage, encodeMessageFrame } from '../../src/protocol/codec.js';
import { HeadType } from '../../src/protocol/types.js';

export type Target = 'switchboard' | 'relay';

export interface ChatLoadOptions {
  target: Target;
  host?: string;
  port: number;
  /** Where receivers connect; default `port` (a different worker: cross-node chat). */
  receiverPort?: number;
  pairs: number;
  window: number;
  warmupMs: number;
  durationMs: number;
  payloadBytes: number;
  /** switchboard only: a login token for a user id. */
  token?: (uid: string) => string;
  /** Called once the warm-up is over (to start measuring server CPU). */
  onMeasureStart?: () => void;
}

export interface ChatLoadResult {
  target: Target;
  delivered: number;
  acked: number;
  seconds: number;
  deliveredPerSec: number;
  /** Send → delivery latency, ms, over the measured interval. */
  delivery: Percentiles;
  /** Send → sender's response latency, ms (switchboard only: the relay does not answer). */
  ack: Percentiles;
}

export interface Percentiles {
  p50: number;
  p99: number;
  max: number;
}

/** Latency samples of the measured interval. */
class Samples {
  #values = new Float64Array(1 << 16);
  #n = 0;
  add(v: number): void {
    if (this.#n === this.#values.length) {
      const grown = new Float64Array(this.#values.length * 2);
      grown.set(this.#values);
      this.#values = grown;
    }
    this.#values[this.#n++] = v;
  }
  percentiles(): Percentiles {
    const sorted = this.#values.subarray(0, this.#n).sort();
    const at = (q: number) => (this.#n === 0 ? 0 : sorted[Math.min(this.#n - 1, Math.floor(q * this.#n))]!);
    return { p50: at(0.5), p99: at(0.99), max: this.#n === 0 ? 0 : sorted[this.#n - 1]! };
  }
}

const RING = 1024;

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

/** A frame factory per pair: switchboard messages need their own msg_id (dedupe). */
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

export async function runChatLoad(o: ChatLoadOptions): Promise<ChatLoadResult> {
  const host = o.host ?? '127.0.0.1';
  const payload = 'x'.repeat(o.payloadBytes);
  const pairs = await Promise.all(
    Array.from({ length: o.pairs }, async (_, i) => {
      const [sender, receiver] = await Promise.all([connect(host, o.port), connect(host, o.receiverPort ?? o.port)]);
      await login(o.target, receiver, `r${i}`, o.token);
      await login(o.target, sender, `s${i}`, o.token);
      return { sender, receiver, next: messageFrames(o.target, `s${i}`, `r${i}`, payload), sendTimes: new Float64Array(RING), sent: 0, acks: 0, deliveries: 0 };
    }),
  );
  // Relay logins have no answer: give the hello frames a moment to land before sending.
  if (o.target === 'relay') await new Promise((r) => setTimeout(r, 200));

  if (o.window * 4 > RING) throw new Error(`window must be at most ${RING / 4}`);
  let running = true;
  let measuring = false;
  let delivered = 0;
  let acked = 0;
  const deliveryLatency = new Samples();
  const ackLatency = new Samples();
  for (const pair of pairs) {
    const send = () => {
      pair.sendTimes[pair.sent++ % RING] = performance.now();
      write(pair.sender, pair.next());
    };
    pair.sender.onFrame = () => {
      acked++;
      const sentAt = pair.sendTimes[pair.acks++ % RING]!;
      if (measuring) ackLatency.add(performance.now() - sentAt);
    };
    pair.receiver.onFrame = () => {
      delivered++;
      const sentAt = pair.sendTimes[pair.deliveries++ % RING]!;
      if (measuring) deliveryLatency.add(performance.now() - sentAt);
      if (running) send();
    };
    for (let k = 0; k < o.window; k++) send();
  }

  await new Promise((r) => setTimeout(r, o.warmupMs));
  measuring = true;
  o.onMeasureStart?.();
  const startDelivered = delivered;
  const startAcked = acked;
  const start = process.hrtime.bigint();
  await new Promise((r) => setTimeout(r, o.durationMs));
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  measuring = false;
  const result: ChatLoadResult = {
    target: o.target,
    delivered: delivered - startDelivered,
    acked: acked - startAcked,
    seconds,
    deliveredPerSec: (delivered - startDelivered) / seconds,
    delivery: deliveryLatency.percentiles(),
    ack: ackLatency.percentiles(),
  };
  running = false;
  for (const { sender, receiver } of pairs) {
    sender.socket.destroy();
    receiver.socket.destroy();
  }
  return result;
}
