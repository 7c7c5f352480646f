// A closed-loop 1:1 chat load driver shared by every target, so the bare relay and switchboard
// are measured the same way: `pairs` sender→receiver pairs, each keeping up to `window`
// messages in flight (sent, not yet delivered). Frames are pre-encoded and received frames are
// counted, not decoded, so the driver does as little as it can per message.

import net from 'node:net';
import { once } from 'node:events';
import { FrameDecoder, encodeFrame } from '../../src/protocol/frame.js';
import { decodeMessage, encodeMessageFrame } from '../../src/protocol/codec.js';
import { HeadType } from '../../src/protocol/types.js';

export type Target = 'switchboard' | 'relay';

export interface ChatLoadOptions {
  target: Target;
  host?: string;
  port: number;
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
}

interface Endpoint {
  socket: net.Socket;
  frames: number;
  onFrame: (body: Buffer) => void;
  corked: boolean;
}

function connect(host: string, port: number): Promise<Endpoint> {
  const socket = net.connect({ host, port, noDelay: true });
  const endpoint: Endpoint = { socket, frames: 0, onFrame: () => {}, corked: false };
  const decoder = new FrameDecoder((body) => endpoint.onFrame(body), { maxFrameLength: 1 << 20 });
  socket.on('data', (chunk: Buffer) => decoder.push(chunk));
  socket.on('error', () => {});
  return once(socket, 'connect').then(() => endpoint);
}

function write(endpoint: Endpoint, frame: Buffer): void {
  if (!endpoint.corked) {
    endpoint.corked = true;
    endpoint.socket.cork();
    process.nextTick(() => {
      endpoint.corked = false;
      endpoint.socket.uncork();
    });
  }
  endpoint.socket.write(frame);
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

function messageFrame(target: Target, from: string, to: string, payload: string): Buffer {
  if (target === 'relay') {
    const name = Buffer.from(to, 'latin1');
    return encodeFrame(Buffer.concat([Buffer.from([name.length]), name, Buffer.from(payload, 'latin1')]));
  }
  return encodeMessageFrame({
    type: HeadType.MESSAGE_REQUEST,
    sequence: 1,
    messageRequest: { msgId: 1, from, to, time: Date.now(), msgType: 1, content: payload },
  });
}

export async function runChatLoad(o: ChatLoadOptions): Promise<ChatLoadResult> {
  const host = o.host ?? '127.0.0.1';
  const payload = 'x'.repeat(o.payloadBytes);
  const pairs = await Promise.all(
    Array.from({ length: o.pairs }, async (_, i) => {
      const [sender, receiver] = await Promise.all([connect(host, o.port), connect(host, o.port)]);
      await login(o.target, receiver, `r${i}`, o.token);
      await login(o.target, sender, `s${i}`, o.token);
      return { sender, receiver, frame: messageFrame(o.target, `s${i}`, `r${i}`, payload) };
    }),
  );
  // Relay logins have no answer: give the hello frames a moment to land before sending.
  if (o.target === 'relay') await new Promise((r) => setTimeout(r, 200));

  let running = true;
  let delivered = 0;
  let acked = 0;
  for (const { sender, receiver, frame } of pairs) {
    sender.onFrame = () => {
      acked++;
    };
    receiver.onFrame = () => {
      delivered++;
      if (running) write(sender, frame);
    };
    for (let k = 0; k < o.window; k++) write(sender, frame);
  }

  await new Promise((r) => setTimeout(r, o.warmupMs));
  o.onMeasureStart?.();
  const startDelivered = delivered;
  const startAcked = acked;
  const start = process.hrtime.bigint();
  await new Promise((r) => setTimeout(r, o.durationMs));
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  const result: ChatLoadResult = {
    target: o.target,
    delivered: delivered - startDelivered,
    acked: acked - startAcked,
    seconds,
    deliveredPerSec: (delivered - startDelivered) / seconds,
  };
  running = false;
  for (const { sender, receiver } of pairs) {
    sender.socket.destroy();
    receiver.socket.destroy();
  }
  return result;
}
