// writePerTick: the frames of one tick leave in one write, in order; output at the socket's
// high-water mark goes at once and reports the backpressure; flushWrites() before end().

import net from 'node:net';
import t, { type Test } from 'tap';
import { flushWrites, pendingBytes, writePerTick } from '../../src/net/write-per-tick.js';

/** A connected pair on loopback: the client socket, and everything the server side reads. */
async function pair(t: Test): Promise<{ client: net.Socket; received: () => Buffer; ended: Promise<void>; server: () => net.Socket }> {
  const chunks: Buffer[] = [];
  let accepted: net.Socket | undefined;
  let ended!: () => void;
  const endedP = new Promise<void>((r) => (ended = r));
  const server = net.createServer((s) => {
    accepted = s;
    s.on('data', (c: Buffer) => chunks.push(c));
    s.on('end', () => ended());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const client = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
  await new Promise<void>((r) => client.once('connect', r));
  while (accepted === undefined) await new Promise((r) => setImmediate(r));
  t.teardown(() => {
    client.destroy();
    server.close();
  });
  return { client, received: () => Buffer.concat(chunks), ended: endedP, server: () => accepted! };
}

function frame(byte: number, length: number): Buffer {
  return Buffer.alloc(length, byte);
}

t.test('the frames of one tick go to the socket in one write, in order, after the tick', async (t) => {
  const { client, received, ended } = await pair(t);
  const writes: number[] = [];
  const write = client.write.bind(client);
  client.write = ((chunk: Uint8Array, ...rest: never[]) => {
    writes.push(chunk.length);
    return write(chunk, ...rest);
  }) as typeof client.write;
  t.ok(writePerTick(client, frame(1, 10)));
  t.ok(writePerTick(client, frame(2, 20)));
  t.ok(writePerTick(client, frame(3, 30)));
  t.equal(pendingBytes(client), 60, 'held until the end of the tick');
  t.same(writes, [], 'nothing written yet');
  await new Promise((r) => process.nextTick(r));
  t.same(writes, [60], 'one write of all three');
  t.equal(pendingBytes(client), 0);
  t.ok(writePerTick(client, frame(4, 5)), 'a later tick');
  await new Promise((r) => setImmediate(r));
  t.same(writes, [60, 5], 'a single frame is written as it is');
  client.end();
  await ended;
  t.same(received(), Buffer.concat([frame(1, 10), frame(2, 20), frame(3, 30), frame(4, 5)]), 'every byte, in order');
});

t.test('output reaching the high-water mark is written at once; backpressure is reported, and drain follows', async (t) => {
  const { client, received, ended, server } = await pair(t);
  // The reader stops: the kernel's buffers fill, and the socket's own after them.
  server().pause();
  const sent: Buffer[] = [];
  let accepted = true;
  for (let i = 0; accepted && i < 10_000; i++) {
    const f = frame(i & 0xff, 64 * 1024);
    sent.push(f);
    accepted = writePerTick(client, f);
    // A frame past the mark (16 KiB) goes out at once, not at the end of the tick.
    if (pendingBytes(client) !== 0) break;
  }
  t.equal(pendingBytes(client), 0, 'every frame written at once');
  t.notOk(accepted, 'false once the socket is backed up');
  const drained = new Promise<void>((r) => client.once('drain', r));
  server().resume();
  await drained;
  t.pass('drain came');
  client.end();
  await ended;
  t.ok(received().equals(Buffer.concat(sent)), 'every byte, in order');
});

t.test('flushWrites() before end(): what the tick holds is sent, then the end', async (t) => {
  const { client, received, ended } = await pair(t);
  writePerTick(client, frame(7, 40));
  t.ok(flushWrites(client));
  t.equal(pendingBytes(client), 0);
  client.end();
  await ended;
  t.same(received(), frame(7, 40));
  t.ok(flushWrites(client), 'nothing held: true');
});

t.test('a destroyed socket takes nothing: the held frames are dropped, nothing throws', async (t) => {
  const { client } = await pair(t);
  const errors: Error[] = [];
  client.on('error', (err) => errors.push(err));
  writePerTick(client, frame(1, 10));
  client.destroy();
  await new Promise((r) => setImmediate(r));
  t.equal(pendingBytes(client), 0, 'dropped');
  t.same(errors, [], 'no write after destroy');
});
