// A legacy device's position counts only output the kernel took. Frames a connection sends after
// its client's FIN (the socket ends itself: no half-open sockets) and before the socket finishes
// never reach the client; they must not count as handed off, or HandoffRing would confirm
// deliveries the device never got and its next login would not replay them. So must a frame
// sent while the connection is open, in a turn of the event loop whose I/O callbacks then read
// the FIN, unless it left: a flush of held frames deferred to the turn's check phase
// (setImmediate) found the socket finished and destroyed meanwhile, dropped the frame, and
// counted it; flushed at the end of its tick it leaves before the FIN is read.

import net from 'node:net';
import t from 'tap';
import { Connection } from '../../src/server/connection.js';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { silentLogger } from '../../src/log.js';

/** A connection on `socket` that reports its handed-off bytes as it starts closing. */
function watched(socket: net.Socket, onClosing: (handedOff: number) => void): Connection {
  return new Connection(
    1,
    socket,
    { ...DEFAULT_LIMITS, maxOutboundBytes: 1 << 30 },
    {
      onMessage() {},
      onClosing(c) {
        onClosing(c.handedOffBytes);
      },
      onClose() {},
    },
    silentLogger(),
  );
}

t.test('frames sent between the client FIN and the end of the socket are not counted as handed off', async (t) => {
  let handedAtClosing = -1;
  let conn!: Connection;
  let received = 0;
  const server = net.createServer((s) => {
    conn = watched(s, (handed) => (handedAtClosing = handed));
    // Enough output that the kernel's buffers fill and the rest waits in the socket.
    conn.sendFrame(Buffer.alloc(16 << 20, 1));
    s.once('end', () =>
      setImmediate(() => {
        t.ok(s.writableEnded, 'the socket ended itself after the client FIN');
        t.equal(conn.state, 'open', 'the connection is still open: deliveries go on');
        for (let i = 0; i < 3; i++) conn.sendFrame(Buffer.alloc(1000, 2));
      }),
    );
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => server.close());
  const client = net.connect({ port: (server.address() as net.AddressInfo).port, host: '127.0.0.1', allowHalfOpen: true });
  client.pause();
  client.on('data', (d: Buffer) => (received += d.length));
  client.once('connect', () => {
    // Half-closed: it still reads, later.
    client.end();
    setTimeout(() => client.resume(), 200);
  });
  await new Promise<void>((r) => client.on('close', () => r()));
  client.destroy();
  while (conn.state !== 'closed') await new Promise((r) => setTimeout(r, 20));
  t.ok(handedAtClosing >= 0, 'closing was reported');
  t.ok(handedAtClosing <= received, `counted as handed off (${handedAtClosing}) only what the client got (${received})`);
});

t.test('a frame sent in the turn that reads the client FIN is not counted as handed off unless it left', async (t) => {
  let conn: Connection | undefined;
  let socket: net.Socket | undefined;
  let handedAtClosing = -1;
  let received = 0;
  // Not reading until told: the FIN waits in the kernel until the turn chosen below.
  const server = net.createServer({ pauseOnConnect: true }, (s) => {
    socket = s;
    conn = watched(s, (handed) => (handedAtClosing = handed));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => server.close());
  const client = net.connect({ port: (server.address() as net.AddressInfo).port, host: '127.0.0.1', allowHalfOpen: true });
  client.on('data', (d: Buffer) => (received += d.length));
  const closed = new Promise<void>((r) => client.on('close', () => r()));
  await new Promise<void>((r) => client.once('connect', r));
  // The client half-closes (it still reads): its FIN is sent, and waits in the server's kernel.
  client.end();
  await new Promise<void>((r) => client.once('finish', r));
  while (conn === undefined) await new Promise((r) => setTimeout(r, 5));
  await new Promise((r) => setTimeout(r, 20));
  const c = conn;
  const s = socket!;
  // In a check phase: reading starts, and a timer is due when the next turn begins. That turn
  // runs the timer (a delivery to this still open connection), then reads the FIN in its poll.
  setImmediate(() => {
    s.resume();
    setTimeout(() => {
      t.equal(c.state, 'open', 'the delivery is sent while the connection is open');
      t.notOk(s.readableEnded, 'before the FIN was read');
      c.sendFrame(Buffer.alloc(1000, 7));
    }, 1);
    const until = Date.now() + 10;
    while (Date.now() < until);
  });
  await closed;
  while (c.state !== 'closed') await new Promise((r) => setTimeout(r, 10));
  t.equal(c.queuedBytes, 1000, 'the frame was queued');
  t.ok(handedAtClosing >= 0, 'closing was reported');
  t.ok(handedAtClosing <= received, `counted as handed off (${handedAtClosing}) only what the client got (${received})`);
});
