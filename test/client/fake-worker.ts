// A scripted worker for SDK tests that need to say exactly what the server sends and when: it
// speaks the wire protocol on a loopback port (the SDK dials it as it would a worker), answers
// every login, records every frame each connection received, and lets the test answer requests
// (or not), push deliveries and cut connections. No server logic: what a real worker would do
// is the test's to script; test/client/*.test.ts against a real node cover the real thing.

import net from 'node:net';
import type { Test } from 'tap';
import { decodeMessage, encodeMessageFrame } from '../../src/protocol/codec.js';
import { loginResponse, messageResponse, type Failure, type Stored } from '../../src/protocol/messages.js';
import { HeadType, type ImMessage, type MessageRequest } from '../../src/protocol/types.js';
import { readFrames } from '../../testkit/raw-client.js';
import { until } from '../../testkit/wait.js';

export interface FakeConnection {
  /** 0, 1, ...: a reconnect is a new one. */
  index: number;
  socket: net.Socket;
  /** Every frame received on it, in order. */
  received: ImMessage[];
  sessionId: string;
}

/** What to answer a MESSAGE_REQUEST with: a stored seq, a refusal, or nothing (undefined). */
export type RequestAnswer = Stored | Failure | undefined;

export class FakeWorker {
  readonly connections: FakeConnection[] = [];
  /** Answers each chat request; default: nothing (the test answers with respond()). */
  onRequest: ((request: MessageRequest, message: ImMessage, connection: FakeConnection) => RequestAnswer) | undefined;
  readonly #listener: net.Server;

  private constructor(listener: net.Server) {
    this.#listener = listener;
  }

  static async start(t: Test): Promise<FakeWorker> {
    const listener = net.createServer();
    const worker = new FakeWorker(listener);
    listener.on('connection', (socket) => worker.#accept(socket));
    await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
    t.teardown(() => worker.close());
    return worker;
  }

  get port(): number {
    return (this.#listener.address() as net.AddressInfo).port;
  }

  /** The current (last) connection. */
  get current(): FakeConnection {
    const c = this.connections.at(-1);
    if (!c) throw new Error('no connection yet');
    return c;
  }

  /** Frames of `type` received, on one connection or all. */
  seen(type: number, connection?: number): ImMessage[] {
    const from = connection === undefined ? this.connections : [this.connections[connection]!];
    return from.flatMap((c) => c.received.filter((m) => m.type === type));
  }

  /** The group acks received, as [group, seq], in order ('' for an inbox ack). */
  acks(connection?: number): [string, number][] {
    return this.seen(HeadType.MESSAGE_ACK, connection).map((m) => [m.ack?.group ?? '', Number(m.ack?.seq ?? 0)]);
  }

  /** Waits until the `n`th connection (1-based) has logged in. */
  async loggedIn(n = 1): Promise<FakeConnection> {
    await until(`login ${n}`, () => this.connections.length >= n && this.connections[n - 1]!.received.some((m) => m.type === HeadType.LOGIN_REQUEST));
    return this.connections[n - 1]!;
  }

  /** Sends `message` on the current connection. */
  send(message: ImMessage, connection = this.current): void {
    connection.socket.write(encodeMessageFrame({ sessionId: connection.sessionId, ...message }));
  }

  /** A group delivery: a message, or an event when `event` is given (its JSON, or an object to stringify). */
  deliverGroup(group: string, seq: number, fields: { from?: string; content?: string; event?: unknown; msgId?: number; storedAt?: number } = {}, connection = this.current): void {
    const { event, ...rest } = fields;
    const request: MessageRequest = { msgId: 0, from: 'someone', to: group, time: 1, msgType: 1, storedAt: 1_700_000_000_000, ...rest, group, seq };
    if (event !== undefined) {
      request.event = typeof event === 'string' ? event : JSON.stringify(event);
      delete request.content;
    }
    this.send({ type: HeadType.MESSAGE_REQUEST, sequence: seq, messageRequest: request }, connection);
  }

  /** An inbox delivery (no group). */
  deliverInbox(seq: number, from: string, content: string, connection = this.current): void {
    this.send({ type: HeadType.MESSAGE_REQUEST, sequence: seq, messageRequest: { msgId: seq, from, to: 'me', time: 1, msgType: 1, content, seq, storedAt: 1_700_000_000_000 } }, connection);
  }

  /** Answers the request of envelope `sequence`. */
  respond(sequence: unknown, answer: Stored | Failure, connection = this.current): void {
    this.send(messageResponse(sequence as number, connection.sessionId, answer), connection);
  }

  /** Destroys every connection (the SDK sees a lost connection). */
  cut(): void {
    for (const c of this.connections) c.socket.destroy();
  }

  async close(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => this.#listener.close(() => resolve()));
  }

  #accept(socket: net.Socket): void {
    const connection: FakeConnection = { index: this.connections.length, socket, received: [], sessionId: `fake-${this.connections.length}` };
    this.connections.push(connection);
    socket.setNoDelay(true);
    socket.on('error', () => {});
    readFrames(socket, {
      onFrame: (body) => {
        const message = decodeMessage(body);
        connection.received.push(message);
        if (message.type === HeadType.LOGIN_REQUEST) {
          this.send(loginResponse(message.sequence ?? undefined, connection.sessionId, { inboxHead: 0, syncFrom: 0, gap: false, epoch: 1, reset: false }, 60_000), connection);
        } else if (message.type === HeadType.MESSAGE_REQUEST && message.messageRequest) {
          const answer = this.onRequest?.(message.messageRequest, message, connection);
          if (answer) this.respond(message.sequence, answer, connection);
        }
      },
    });
  }
}
