// Dialing a switchboard port: a TCP connection (Nagle off) whose bytes go through a frame
// decoder. The two reconnecting clients, the SDK's transport and WorkerReSender, dial so. Each
// attempt belongs to its owner's epoch: once the owner has moved on (a new attempt, a close),
// `current()` is false and the old socket's late events and frames are dropped here.

import net from 'node:net';
import { FrameDecoder } from '../protocol/frame.js';

export interface DialTarget {
  host: string;
  port: number;
}

/** What the owner hears of a current attempt; nothing once `current()` is false. */
export interface FramedSocketHandlers {
  connect(): void;
  /** One frame body, a slice valid until the handler returns. */
  frame(body: Buffer): void;
  /**
   * The decoder's push() threw: a malformed frame (a SwitchboardError, and the decoder stays
   * failed) or whatever `frame` threw. The socket is left open: the handler decides.
   */
  pushFailed(err: unknown): void;
  error(err: Error): void;
  close(): void;
}

export function dialFramed(target: DialTarget, maxFrameLength: number, current: () => boolean, on: FramedSocketHandlers): net.Socket {
  const socket = net.connect({ host: target.host, port: target.port, noDelay: true });
  const decoder = new FrameDecoder(
    (body) => {
      if (current()) on.frame(body);
    },
    { maxFrameLength },
  );
  socket.on('connect', () => {
    if (current()) on.connect();
  });
  socket.on('data', (chunk: Buffer) => {
    if (!current()) return;
    try {
      decoder.push(chunk);
    } catch (err) {
      on.pushFailed(err);
    }
  });
  // Always listened to, current or not: an 'error' without a listener would throw.
  socket.on('error', (err) => {
    if (current()) on.error(err);
  });
  socket.on('close', () => {
    if (current()) on.close();
  });
  return socket;
}
