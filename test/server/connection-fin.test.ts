// A legacy device's position counts only output the kernel took. Frames a connection sends after
// its client's FIN (the socket ends itself: no half-open sockets) and before the socket finishes
// never reach the client; they must not count as handed off, or HandoffRing would confirm
// deliveries the device never got and its next login would not replay them.

import net from 'node:net';
import t from 'tap';
import { Connection } from '../../src/server/connection.js';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { silentLogger } from '../../src/log.js';

t.test('frames sent between the client FIN and the end of the socket are not counted as handed off', async (t) => {
  let handedAtClosing = -1;
  let conn!: Connection;
  let received = 0;
  const server = net.createServer((s) => {
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
