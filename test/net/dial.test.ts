// dialFramed, the dial shared by the SDK's transport and WorkerReSender: frames arrive as
// bodies, a malformed frame reaches pushFailed with the decoder's code, and once the owner's
// epoch has moved on nothing of the old socket reaches the owner any more.

import t, { type Test } from 'tap';
import net from 'node:net';
import { once } from 'node:events';
import { dialFramed, type FramedSocketHandlers } from '../../src/net/dial.js';
import { encodeFrame } from '../../src/protocol/frame.js';
import { isSwitchboardError } from '../../src/errors.js';

/** A server that hands each accepted socket to the test. */
async function listen(t: Test): Promise<{ port: number; accepted: () => Promise<net.Socket> }> {
  const waiting: net.Socket[] = [];
  const server = net.createServer((socket) => waiting.push(socket));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.teardown(() => {
    for (const s of waiting) s.destroy();
    server.close();
  });
  const port = (server.address() as net.AddressInfo).port;
  const accepted = async () => {
    while (waiting.length === 0) await once(server, 'connection');
    return waiting.shift()!;
  };
  return { port, accepted };
}

function recorder(): { events: string[]; on: FramedSocketHandlers; errors: unknown[] } {
  const events: string[] = [];
  const errors: unknown[] = [];
  return {
    events,
    errors,
    on: {
      connect: () => events.push('connect'),
      frame: (body) => events.push(`frame ${body.toString()}`),
      pushFailed: (err) => {
        errors.push(err);
        events.push('pushFailed');
      },
      error: () => events.push('error'),
      close: () => events.push('close'),
    },
  };
}

/** 'close', whether or not an 'error' came first (events.once would reject on it). */
const closed = (socket: net.Socket) => new Promise<void>((resolve) => socket.once('close', () => resolve()));

const until = async (check: () => boolean) => {
  for (let i = 0; i < 200 && !check(); i++) await new Promise((r) => setTimeout(r, 10));
};

t.test('frames arrive as bodies, in order, after connect; close is reported', async (t) => {
  const { port, accepted } = await listen(t);
  const r = recorder();
  const socket = dialFramed({ host: '127.0.0.1', port }, 1024, () => true, r.on);
  const peer = await accepted();
  peer.write(Buffer.concat([encodeFrame(Buffer.from('one')), encodeFrame(Buffer.from('two'))]));
  await until(() => r.events.length >= 3);
  peer.end();
  await closed(socket);
  await until(() => r.events.includes('close'));
  t.same(r.events, ['connect', 'frame one', 'frame two', 'close']);
});

t.test('a frame over the limit reaches pushFailed with the decoder\'s code; the socket is the owner\'s to close', async (t) => {
  const { port, accepted } = await listen(t);
  const r = recorder();
  const socket = dialFramed({ host: '127.0.0.1', port }, 8, () => true, r.on);
  const peer = await accepted();
  peer.write(encodeFrame(Buffer.alloc(9)));
  await until(() => r.events.includes('pushFailed'));
  const err = r.errors[0];
  t.ok(isSwitchboardError(err) && err.code === 'SB_ERR_FRAME_TOO_LONG', 'SB_ERR_FRAME_TOO_LONG');
  t.notOk(socket.destroyed, 'still open');
  socket.destroy();
});

t.test('once the attempt is stale, nothing reaches the owner: no frame, no error, no close', async (t) => {
  const { port, accepted } = await listen(t);
  const r = recorder();
  let current = true;
  const socket = dialFramed({ host: '127.0.0.1', port }, 1024, () => current, r.on);
  const peer = await accepted();
  peer.write(encodeFrame(Buffer.from('live')));
  await until(() => r.events.length >= 2);
  current = false;
  peer.write(encodeFrame(Buffer.from('late')));
  peer.destroy();
  await closed(socket);
  await new Promise((r) => setTimeout(r, 20));
  t.same(r.events, ['connect', 'frame live']);
});

t.test('a stale attempt that fails to connect says nothing either', async (t) => {
  const { port } = await listen(t);
  const free = net.createServer();
  free.listen(0, '127.0.0.1');
  await once(free, 'listening');
  const closedPort = (free.address() as net.AddressInfo).port;
  free.close();
  await once(free, 'close');
  t.not(closedPort, port);
  const r = recorder();
  const socket = dialFramed({ host: '127.0.0.1', port: closedPort }, 1024, () => false, r.on);
  await closed(socket);
  t.same(r.events, [], 'no error, no close');
  const live = recorder();
  const refused = dialFramed({ host: '127.0.0.1', port: closedPort }, 1024, () => true, live.on);
  await closed(refused);
  await until(() => live.events.includes('close'));
  t.same(live.events, ['error', 'close'], 'a current one hears the refusal');
});
