// One socket write per tick: the frames written to a socket during a tick are kept, and at the
// end of the tick leave together, copied into one buffer, in one write, rather than as the writev
// of a buffer each that cork/uncork makes (the stream's bookkeeping per buffer, an iovec each):
// 5-11% less CPU per frame at 16 frames a tick, nothing measurable at 8 (`npm run bench:write`,
// bench/README.md). Output that reaches the socket's high-water mark is written at once, so that
// the caller sees the backpressure (write() returns false, 'drain' follows) when it happens.
//
// A socket whose owner calls end() must flushWrites() first: end() does not know of the frames
// kept here. destroy() drops them, as it drops whatever the socket holds.

import type { Socket } from 'node:net';

const PENDING = Symbol('switchboard.pendingWrites');

interface Pending {
  frames: Uint8Array[];
  bytes: number;
  /** A flush is queued for the end of this tick. */
  queued: boolean;
}

type Tracked = Socket & { [PENDING]?: Pending };

/**
 * Queues `frame` for the end of the tick. Returns false when the socket's output (written and
 * queued) has reached its high-water mark: the frames then went out at once, and 'drain' follows.
 */
export function writePerTick(socket: Socket, frame: Uint8Array): boolean {
  const s = socket as Tracked;
  const p = (s[PENDING] ??= { frames: [], bytes: 0, queued: false });
  p.frames.push(frame);
  p.bytes += frame.length;
  if (!p.queued) {
    p.queued = true;
    process.nextTick(flushTick, s);
  }
  if (socket.writableLength + p.bytes < socket.writableHighWaterMark) return true;
  return flushWrites(socket);
}

/** Bytes queued by writePerTick() and not yet written to the socket. */
export function pendingBytes(socket: Socket): number {
  return (socket as Tracked)[PENDING]?.bytes ?? 0;
}

/** Writes the queued frames now, as one buffer; returns socket.write()'s result (true when none were queued). */
export function flushWrites(socket: Socket): boolean {
  const p = (socket as Tracked)[PENDING];
  if (p === undefined || p.frames.length === 0) return true;
  const { frames, bytes } = p;
  // A destroyed socket takes nothing (destroy() dropped its output too). An ended one is written
  // to all the same: a socket ends itself when its peer's FIN comes, and the write then destroys
  // it (EPIPE), which is what tells its owner that these bytes never left. Dropped here, they
  // would count as handed on once the socket finished.
  if (socket.destroyed) {
    frames.length = 0;
    p.bytes = 0;
    return false;
  }
  let out: Uint8Array;
  if (frames.length === 1) {
    out = frames[0]!;
  } else {
    const joined = Buffer.allocUnsafe(bytes);
    let pos = 0;
    for (const frame of frames) {
      joined.set(frame, pos);
      pos += frame.length;
    }
    out = joined;
  }
  frames.length = 0;
  p.bytes = 0;
  return socket.write(out);
}

function flushTick(socket: Tracked): void {
  socket[PENDING]!.queued = false;
  flushWrites(socket);
}
