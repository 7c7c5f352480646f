// One socket write per tick: the first frame written in a tick corks the socket and the end of
// the tick uncorks it, so everything written meanwhile leaves in one writev.

import type { Socket } from 'node:net';

const CORKED = Symbol('switchboard.corked');
type Tracked = Socket & { [CORKED]?: boolean };

function uncork(socket: Tracked): void {
  socket[CORKED] = false;
  socket.uncork();
}

/** Writes `frame` corked until the end of the tick; returns socket.write()'s result. */
export function writePerTick(socket: Socket, frame: Uint8Array): boolean {
  const s = socket as Tracked;
  if (!s[CORKED]) {
    s[CORKED] = true;
    s.cork();
    process.nextTick(uncork, s);
  }
  return s.write(frame);
}
