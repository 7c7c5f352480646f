// The bare-relay baseline: the least a Node process can do to move a framed message from one
// socket to another. Same 8-byte header as switchboard, no protobuf, no sessions, no acks.
// First frame of a connection: body = its name. Every later frame: body = [1 byte n][n bytes
// target name][payload]; the whole frame is written unchanged to the target's socket.
// Run: node bench/dist/bench/src/relay-server.js <port>

import net from 'node:net';
import { writeHeader, HEADER_LENGTH } from '../../src/protocol/frame.js';
import { readFrames } from '../../testkit/raw-client.js';
import { writePerTick } from '../../src/net/write-per-tick.js';

interface Peer {
  socket: net.Socket;
}

export function startRelay(port: number): net.Server {
  const byName = new Map<string, Peer>();
  const server = net.createServer((socket) => {
    socket.setNoDelay(true);
    let name: string | undefined;
    const self: Peer = { socket };
    readFrames(socket, {
      onFrame: (body) => {
        if (name === undefined) {
          name = body.toString('latin1');
          byName.set(name, self);
          return;
        }
        const target = byName.get(body.toString('latin1', 1, 1 + body[0]!));
        if (!target) return;
        const frame = Buffer.allocUnsafe(HEADER_LENGTH + body.length);
        writeHeader(frame, 0, body.length);
        body.copy(frame, HEADER_LENGTH);
        // One write per tick per socket, as switchboard's Connection does.
        writePerTick(target.socket, frame);
      },
    });
    socket.on('error', () => {});
    socket.on('close', () => {
      if (name !== undefined && byName.get(name) === self) byName.delete(name);
    });
  });
  server.listen(port, '127.0.0.1');
  return server;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const server = startRelay(Number(process.argv[2] ?? 0));
  // A JSON line as switchboard's listeners log it, for the bench that waits for it.
  server.on('listening', () => process.stdout.write(`${JSON.stringify({ msg: 'relay listening', port: (server.address() as net.AddressInfo).port })}\n`));
}
