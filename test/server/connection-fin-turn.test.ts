// A frame sent while the connection is open, in a turn of the event loop whose I/O callbacks then
// read the client's FIN, must leave before the socket ends itself, or not be counted as handed
// off: handedOffBytes is what a legacy device's saved position is moved by (connection-fin.test.ts's
// rule). A flush of the held frames deferred to the turn's check phase (setImmediate) found the
// socket finished and destroyed itself meanwhile, dropped the frame, and counted it handed off;
// flushed at the end of its tick it leaves before the FIN is read.

import net from 'node:net';
import t from 'tap';
import { Connection } from '../../src/server/connection.js';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { silentLogger } from '../../src/log.js';

t.test('a frame sent in the turn that reads the client FIN is not counted as handed off unless it left', async (t) => {
  let conn: Connection | undefined;
  let socket: net.Socket | undefined;
  let handedAtClosing = -1;
  let received = 0;
  // Not reading until told: the FIN waits in the kernel until the turn chosen below.
  const server = net.createServer({ pauseOnConnect: true }, (s) => {
    socket = s;
    conn = new Connection(
      1,
      s,
      { ...DEFAULT_LIMITS, maxOutboundBytes: 1 << 30 },
      {
        onMessage() {},
        onClosing(c) {
          handedAtClosing = c.handedOffBytes;
        },
        onClose() {},
      },
      silentLogger(),
    );
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
