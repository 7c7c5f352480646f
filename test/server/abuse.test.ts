// Misbehaving clients over real sockets: malformed frames and message types, and recipients
// that stop reading. Each is closed with the right code while other clients keep chatting, and
// what was sent to a dropped recipient stays in its inbox.

import t, { type Test } from 'tap';
import { pino } from 'pino';
import { startNode, type TestNode } from '../helpers/node.js';
import { frameHeader, isType, seqOf, u64, type RawClient, DEFAULT_TIMEOUT_MS } from '../../testkit/raw-client.js';
import { until } from '../../testkit/wait.js';
import { connect, connectLoggedIn } from '../helpers/raw-client.js';
import { encodeMessageFrame } from '../../src/protocol/codec.js';
import { HeadType } from '../../src/protocol/types.js';

/** A logger that keeps every line, to see why the server closed a connection it could not tell. */
function captureLog() {
  const lines: Record<string, unknown>[] = [];
  const log = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
  const closes = () => lines.filter((l) => l.msg === 'closing connection');
  return { log, closes };
}

/** Two logged-in users that must keep talking whatever happens to other connections. */
async function chattingPair(t: Test, tn: TestNode) {
  const carol = await connectLoggedIn(t, tn.port, 'carol', tn.token('carol'));
  const dave = await connectLoggedIn(t, tn.port, 'dave', tn.token('dave'));
  let n = 0;
  async function exchange(): Promise<void> {
    const i = n++;
    const there = await carol.chatAndWait('dave', `ping ${i}`);
    t.equal(there.messageResponse?.result, true, `carol -> dave ${i} accepted`);
    t.equal((await dave.next(isType(HeadType.MESSAGE_REQUEST))).messageRequest?.content, `ping ${i}`, `dave got ping ${i}`);
    const back = await dave.chatAndWait('carol', `pong ${i}`);
    t.equal(back.messageResponse?.result, true, `dave -> carol ${i} accepted`);
    t.equal((await carol.next(isType(HeadType.MESSAGE_REQUEST))).messageRequest?.content, `pong ${i}`, `carol got pong ${i}`);
  }
  return { carol, dave, exchange };
}

t.test('malformed input closes only the connection that sent it', async (t) => {
  const tn = await startNode(t);
  const { exchange } = await chattingPair(t, tn);
  await exchange();

  const validHeartbeat = encodeMessageFrame({ type: HeadType.HEART_BEAT, sequence: 1, sessionId: '-1', heartBeat: { seq: 1 } });
  const cases: [name: string, bytes: Buffer, code: string][] = [
    ['bad magic (an HTTP request)', Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n'), 'SB_ERR_FRAME_BAD_MAGIC'],
    ['bad magic (all zeros)', Buffer.alloc(16), 'SB_ERR_FRAME_BAD_MAGIC'],
    ['unsupported version', Buffer.concat([frameHeader(2, { version: 2 }), Buffer.from([0x08, 0x04])]), 'SB_ERR_FRAME_BAD_VERSION'],
    // Only the header is sent: the server must refuse it without waiting for 2 GB of body.
    ['a 2 GB length', frameHeader(0x7fffffff), 'SB_ERR_FRAME_TOO_LONG'],
    ['one byte over the maximum length', frameHeader(64 * 1024 + 1), 'SB_ERR_FRAME_TOO_LONG'],
    ['a negative length (-1)', frameHeader(-1), 'SB_ERR_FRAME_NEGATIVE_LENGTH'],
    ['a negative length (-2^31)', frameHeader(-0x80000000), 'SB_ERR_FRAME_NEGATIVE_LENGTH'],
    // loginRequest (field 4) claims 3 bytes, none follow.
    ['a truncated sub-message', Buffer.concat([frameHeader(2), Buffer.from([0x22, 0x03])]), 'SB_ERR_BAD_PROTOBUF'],
    // sequence (field 2) is a varint whose last byte still says "more follows".
    ['a truncated varint', Buffer.concat([frameHeader(2), Buffer.from([0x10, 0xff])]), 'SB_ERR_BAD_PROTOBUF'],
    // Field 15 with wire type 7, which does not exist.
    ['an invalid wire type', Buffer.concat([frameHeader(2), Buffer.from([0x7f, 0x00])]), 'SB_ERR_BAD_PROTOBUF'],
    // A LOGIN_REQUEST whose uid (field 1 of loginRequest) is a varint: skipped before, a login without uid.
    ['a known field with the wrong wire type', Buffer.concat([frameHeader(4), Buffer.from([0x22, 0x02, 0x08, 0x01])]), 'SB_ERR_BAD_PROTOBUF'],
    // A MESSAGE_REQUEST whose `to` (field 3) is a varint: the hand decoder's own refusal.
    ['a chat field with the wrong wire type', Buffer.concat([frameHeader(6), Buffer.from([0x08, 0x05, 0x32, 0x02, 0x18, 0x01])]), 'SB_ERR_BAD_PROTOBUF'],
    ['an unknown HeadType (99)', encodeMessageFrame({ type: 99, sequence: 1, sessionId: '-1' }), 'SB_ERR_UNKNOWN_TYPE'],
    [
      'a LOGIN_RESPONSE sent by a client',
      encodeMessageFrame({ type: HeadType.LOGIN_RESPONSE, sequence: 1, sessionId: '-1', loginResponse: { result: true } }),
      'SB_ERR_UNKNOWN_TYPE',
    ],
    ['a MESSAGE_RESPONSE sent by a client', encodeMessageFrame({ type: HeadType.MESSAGE_RESPONSE, sequence: 1 }), 'SB_ERR_UNKNOWN_TYPE'],
    ['a MESSAGE_NOTIFICATION sent by a client', encodeMessageFrame({ type: HeadType.MESSAGE_NOTIFICATION, sequence: 1 }), 'SB_ERR_UNKNOWN_TYPE'],
    // PROTOCOL.md §10: a node without cluster mode has only this port, where peer frames are refused.
    ['a PEER_HELLO on a node without cluster mode', encodeMessageFrame({ type: HeadType.PEER_HELLO, peerHello: { nodeId: '0000000001', nonce: Buffer.alloc(16) } }), 'SB_ERR_UNKNOWN_TYPE'],
    ['a PEER_DELIVER on a node without cluster mode', encodeMessageFrame({ type: HeadType.PEER_DELIVER, peerDeliver: { uid: 'bob', seq: 1, body: Buffer.from('1a03626f62', 'hex') } }), 'SB_ERR_UNKNOWN_TYPE'],
  ];

  for (const [name, bytes, code] of cases) {
    t.test(name, async (t) => {
      const client = await connect(t, tn.port);
      // A valid frame first, in the same write: handled before the garbage behind it.
      client.sendRaw(Buffer.concat([validHeartbeat, bytes]));
      t.equal((await client.next()).type, HeadType.HEART_BEAT, 'the valid frame before the garbage is handled');
      const closing = await client.nextClosing();
      t.equal(closing.code, code);
      await client.waitClosed();
      t.equal(client.pending.length, 0, 'nothing after the CLOSING');
      await exchange();
    });
  }

  t.test('garbage from a logged-in client also removes its session', async (t) => {
    for (const [name, bytes, code] of [
      ['bad magic', Buffer.from('\x00\x01garbage!'), 'SB_ERR_FRAME_BAD_MAGIC'],
      ['server-only type', encodeMessageFrame({ type: HeadType.LOGOUT_RESPONSE, sequence: 1 }), 'SB_ERR_UNKNOWN_TYPE'],
      ['a peer frame', encodeMessageFrame({ type: HeadType.PEER_NUDGE, peerNudge: { all: true } }), 'SB_ERR_UNKNOWN_TYPE'],
    ] as const) {
      const erin = await connectLoggedIn(t, tn.port, 'erin', tn.token('erin'));
      t.equal(tn.node.server.sessions.byUser('erin').length, 1);
      erin.sendRaw(bytes);
      const closing = await erin.nextClosing();
      t.equal(closing.code, code, name);
      t.equal(tn.node.server.sessions.byUser('erin').length, 0, `${name}: no longer reachable once told it is closing`);
      await erin.waitClosed();
      await until('the store record to be removed', async () => (await tn.node.store.byUser('erin')).length === 0, DEFAULT_TIMEOUT_MS);
      await exchange();
    }
  });

  t.test('a frame trickled in one byte at a time is still understood', async (t) => {
    const frank = await connect(t, tn.port);
    const login = encodeMessageFrame({
      type: HeadType.LOGIN_REQUEST,
      sequence: 5,
      sessionId: '-1',
      loginRequest: { uid: 'frank', deviceId: 'd', token: tn.token('frank') },
    });
    for (const byte of login) {
      frank.sendRaw(Buffer.from([byte]));
      await new Promise((resolve) => setImmediate(resolve));
    }
    const response = await frank.next(isType(HeadType.LOGIN_RESPONSE));
    t.equal(response.loginResponse?.result, true);
    await exchange();
  });
});

/**
 * Floods `victim` (paused, so its kernel buffers fill) from `sender` in batches of large
 * messages, with the pair exchanging messages between batches, until the victim's session is
 * gone. Every message is accepted and stored whether or not the victim is still there; resolves
 * how many were sent.
 */
/** Flooding is what these tests do: the message rate is off, so a slow machine meets the output bound, not the rate. */
const UNLIMITED_RATE = { messageRate: 0, userMessageRate: 0 };

async function floodUntilGone(
  t: Test,
  tn: TestNode,
  sender: RawClient,
  victim: string,
  exchange: () => Promise<void>,
  reader?: { uid: string; client: RawClient },
): Promise<number> {
  const content = 'x'.repeat(16 * 1024);
  const maxMessages = 8000; // 128 MB: far more than loopback socket buffers can hold
  let sent = 0;
  let batches = 0;
  while (sent < maxMessages) {
    const sequences: number[] = [];
    for (let i = 0; i < 10; i++, sent++) {
      sequences.push(sender.chat(victim, content));
      // The same load to a recipient that keeps reading, which must survive it.
      if (reader) sender.chat(reader.uid, content);
    }
    const seqs = [];
    for (const sequence of sequences) {
      const response = (await sender.response(sequence, 10_000)).messageResponse;
      if (!response?.result) throw new Error(`message to ${victim} refused: ${JSON.stringify(response)}`);
      seqs.push(Number(u64(response.seq)));
    }
    t.same(
      seqs,
      Array.from({ length: 10 }, (_, i) => sent - 9 + i),
      `batch ${batches} stored as ${sent - 9}..${sent}`,
    );
    if (reader) {
      for (let i = 0; i < 10; i++) await reader.client.next(isType(HeadType.MESSAGE_REQUEST), 10_000);
    }
    batches++;
    if (tn.node.server.sessions.byUser(victim).length === 0) {
      t.pass(`${victim} was dropped after ${batches} batches, the pair chatting in between`);
      t.equal((await tn.node.inbox.range(victim, 0, 0)).head, sent, `all ${sent} messages to ${victim} are in its inbox`);
      return sent;
    }
    await exchange();
  }
  throw new Error(`${victim} was still online after ${sent} messages`);
}

t.test('a recipient whose output exceeds maxOutboundBytes is dropped as a slow consumer', async (t) => {
  const { log, closes } = captureLog();
  // Above what one socket read (64 KiB) can make the server send in one tick, so only output
  // that really piles up counts.
  const tn = await startNode(t, { ...UNLIMITED_RATE, maxOutboundBytes: 256 * 1024 }, { log });
  const { carol, exchange } = await chattingPair(t, tn);
  const alice = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'));
  const reader = await connectLoggedIn(t, tn.port, 'reader', tn.token('reader'));
  const slow = await connectLoggedIn(t, tn.port, 'slow', tn.token('slow'));
  slow.pause();

  await floodUntilGone(t, tn, alice, 'slow', exchange, { uid: 'reader', client: reader });
  t.equal(reader.isClosed, false, 'a recipient that reads survives the same load');
  t.equal(tn.node.server.sessions.byUser('reader').length, 1);
  t.same(tn.node.server.sessions.byUser('slow'), [], 'the slow session is gone');
  await until('the store record to be removed', async () => (await tn.node.store.byUser('slow')).length === 0, DEFAULT_TIMEOUT_MS);
  const slowCloses = closes().filter((l) => l.uid === 'slow');
  t.same(
    slowCloses.map((l) => l.code),
    ['SB_ERR_SLOW_CONSUMER'],
    'closed as a slow consumer',
  );
  t.match(String(slowCloses[0]?.reason), /bytes of output waiting/);
  t.same(
    closes().filter((l) => l.uid !== 'slow'),
    [],
    'no other connection was closed',
  );

  slow.resume();
  await slow.waitClosed(10_000);
  t.equal(alice.isClosed, false, 'the sender is not punished');
  t.equal((await alice.chatAndWait('carol', 'still here')).messageResponse?.result, true);
  t.equal((await carol.next(isType(HeadType.MESSAGE_REQUEST))).messageRequest?.content, 'still here');
  await exchange();
});

t.test('a recipient whose output does not drain within drainTimeoutMs is dropped', async (t) => {
  const { log, closes } = captureLog();
  const tn = await startNode(t, { ...UNLIMITED_RATE, maxOutboundBytes: 256 * 1024 * 1024, drainTimeoutMs: 300 }, { log });
  const { exchange } = await chattingPair(t, tn);
  const alice = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'));
  const slow = await connectLoggedIn(t, tn.port, 'slow', tn.token('slow'));
  slow.pause();

  await floodUntilGone(t, tn, alice, 'slow', exchange);
  t.same(tn.node.server.sessions.byUser('slow'), []);
  const slowCloses = closes().filter((l) => l.uid === 'slow');
  t.same(
    slowCloses.map((l) => l.code),
    ['SB_ERR_SLOW_CONSUMER'],
  );
  t.match(String(slowCloses[0]?.reason), /not drained within 300 ms/, 'by the drain timeout, not the byte limit');
  t.equal(closes().length, 1, 'no other connection was closed');

  slow.resume();
  await slow.waitClosed(10_000);
  await exchange();
});

t.test('a reader that is merely slower than the sender is not dropped', async (t) => {
  const tn = await startNode(t, { maxOutboundBytes: 64 * 1024, drainTimeoutMs: 1_000 });
  const alice = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'));
  const bob = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'));
  const content = 'y'.repeat(1024);
  // Paced by the responses: the output never piles up, whatever the kernel buffers.
  for (let batch = 0; batch < 20; batch++) {
    let last = 0;
    for (let i = 0; i < 20; i++) last = alice.chat('bob', content);
    t.equal((await alice.response(last)).messageResponse?.result, true);
  }
  let received = 0;
  while (received < 400) {
    await bob.next(isType(HeadType.MESSAGE_REQUEST));
    received++;
  }
  t.equal(received, 400);
  t.equal(bob.isClosed, false);
  t.equal(tn.node.server.sessions.byUser('bob').length, 1);
});

t.test("a device dropped as a slow consumer does not cost the user's other device a message", async (t) => {
  // bob's paused phone logged in first, so it comes first when a message is delivered to bob.
  // The message whose write drops it must still reach the tablet, and is the last one sent.
  const { log, closes } = captureLog();
  const tn = await startNode(t, { maxOutboundBytes: 256 * 1024 }, { log });
  const alice = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'));
  const phone = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'phone');
  phone.pause();
  const tablet = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'tablet');

  const content = 'q'.repeat(16 * 1024);
  let sent = 0;
  while (tn.node.server.sessions.byUser('bob').length === 2) {
    if (sent === 8000) throw new Error('the paused phone was never dropped');
    // One at a time: when the response is here, the delivery to both devices has been written.
    t.equal((await alice.chatAndWait('bob', content)).messageResponse?.result, true);
    sent++;
  }
  t.same(
    closes().map((l) => [l.deviceId, l.code]),
    [['phone', 'SB_ERR_SLOW_CONSUMER']],
    'the phone was dropped as a slow consumer',
  );
  const got = await tablet.deliveries(sent, 10_000);
  t.equal(seqOf(got.at(-1)!), sent, `the tablet received all ${sent}, the last one included`);
  t.equal(tablet.isClosed, false);
  phone.resume();
  await phone.waitClosed(10_000);
});
