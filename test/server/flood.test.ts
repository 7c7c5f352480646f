// The memory-exhaustion attack through a worker: one logged-in connection sends as fast as it
// can, each message to a recipient nobody has written to before (every message a new inbox).
// The message rate refuses it past its burst with RATE_LIMITED (9) and closes it as a flood;
// with the rate off, the memory inbox's bound refuses it with STORE_FULL (10). Either way a
// refused message leaves nothing behind, and a pair of users keeps chatting.

import t, { type Test } from 'tap';
import { pino } from 'pino';
import { startNode, type TestNode } from '../helpers/node.js';
import { isType, u64, type RawClient } from '../../testkit/raw-client.js';
import { connectLoggedIn } from '../helpers/raw-client.js';
import { HeadType, ResultCode, type ImMessage } from '../../src/protocol/types.js';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { MemoryInboxStore } from '../../src/inbox/memory-inbox-store.js';
import { encodeMessageFrame } from '../../src/protocol/codec.js';

const MiB = 1024 * 1024;
const GRACE_MS = 10_000;

async function chattingPair(t: Test, tn: TestNode) {
  const carol = await connectLoggedIn(t, tn.port, 'carol', tn.token('carol'));
  const dave = await connectLoggedIn(t, tn.port, 'dave', tn.token('dave'));
  let n = 0;
  return async function exchange(what: string): Promise<void> {
    const i = n++;
    t.equal((await carol.chatAndWait('dave', `ping ${i}`)).messageResponse?.result, true, `${what}: carol -> dave accepted`);
    t.equal((await dave.next(isType(HeadType.MESSAGE_REQUEST))).messageRequest?.content, `ping ${i}`, `${what}: dave got it`);
    t.equal((await dave.chatAndWait('carol', `pong ${i}`)).messageResponse?.result, true, `${what}: dave -> carol accepted`);
    t.equal((await carol.next(isType(HeadType.MESSAGE_REQUEST))).messageRequest?.content, `pong ${i}`, `${what}: carol got it`);
  };
}

/** Sends `count` messages, each to a new recipient, in one write; resolves their sequences and recipients. */
function flood(attacker: RawClient, from: number, count: number, content = 'x'.repeat(100)): Map<string, string> {
  const recipients = new Map<string, string>();
  const frames: Buffer[] = [];
  for (let i = from; i < from + count; i++) {
    const to = `victim-${i}`;
    const message = attacker.chatMessage(to, content, { msgId: i + 1 });
    recipients.set(String(message.sequence), to);
    frames.push(encodeMessageFrame(message));
  }
  attacker.sendRaw(Buffer.concat(frames));
  return recipients;
}

t.test('over the message rate: refused with RATE_LIMITED, then closed as a flood, nothing stored', async (t) => {
  const lines: Record<string, unknown>[] = [];
  const log = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
  // The defaults: 100 messages/s after a burst of 1000, closed at 1000 refusals within 10 s.
  // A long close grace: the server must not reset the socket before this client has read the
  // last of its output (its CLOSING), however slowly the test machine runs it.
  const tn = await startNode(t, { closeGraceMs: GRACE_MS }, { log });
  const exchange = await chattingPair(t, tn);
  await exchange('before');
  const attacker = await connectLoggedIn(t, tn.port, 'mallory', tn.token('mallory'), 'dev-1', { acks: true });
  const started = Date.now();
  const recipients = flood(attacker, 0, 5000);
  const closing = await attacker.nextClosing(20_000);
  const elapsedS = (Date.now() - started) / 1000;
  await attacker.waitClosed();

  const responses = attacker.received.filter((m) => m.type === HeadType.MESSAGE_RESPONSE);
  const accepted = responses.filter((m) => m.messageResponse?.result);
  const refused = responses.filter((m) => !m.messageResponse?.result);
  t.ok(accepted.length >= DEFAULT_LIMITS.messageBurst, `the burst was accepted (${accepted.length})`);
  t.ok(accepted.length <= DEFAULT_LIMITS.messageBurst + DEFAULT_LIMITS.messageRate * elapsedS + 1, `no more than burst + rate × ${elapsedS.toFixed(2)} s`);
  t.equal(refused.length, DEFAULT_LIMITS.floodRefusals, 'refused until the flood rule closed it');
  t.same(
    [...new Set(refused.map((m) => `${m.messageResponse?.code} ${m.messageResponse?.errorCode}`))],
    [`${ResultCode.RATE_LIMITED} SB_ERR_RATE_LIMITED`],
    'every refusal: result code 9, SB_ERR_RATE_LIMITED',
  );
  t.match(refused[0]!.messageResponse?.info, /over 100 messages\/s/);
  t.equal(closing.code, 'SB_ERR_FLOOD', 'closed with a CLOSING of its own');
  t.equal(responses.length, accepted.length + refused.length);
  t.ok(responses.length < 5000, 'what came after the close was not handled');

  const refusedRecipients = refused.map((m) => recipients.get(u64(m.sequence))!);
  let stored = 0;
  for (const to of refusedRecipients) stored += (await tn.node.inbox.range(to, 0, 0)).head;
  t.equal(stored, 0, 'nothing was stored for a refused message');
  t.same(
    lines.filter((l) => l.msg === 'closing connection').map((l) => [l.uid, l.code]),
    [['mallory', 'SB_ERR_FLOOD']],
    'the close is logged once; the refusals are not',
  );
  await exchange('after');

});

t.test("logging in again does not buy a fresh burst: the user's bucket outlives the connection", async (t) => {
  const limits = { messageRate: 10, messageBurst: 300, userMessageRate: 1, userMessageBurst: 400, floodRefusals: 300 };
  const tn = await startNode(t, { ...limits, closeGraceMs: GRACE_MS });
  const first = await connectLoggedIn(t, tn.port, 'mallory', tn.token('mallory'), 'dev-1', { acks: true });
  flood(first, 0, 1000);
  t.equal((await first.nextClosing(20_000)).code, 'SB_ERR_FLOOD');
  await first.waitClosed();
  const firstAccepted = first.received.filter((m) => m.type === HeadType.MESSAGE_RESPONSE && m.messageResponse?.result).length;
  t.ok(firstAccepted >= limits.messageBurst, `the first connection had its burst (${firstAccepted})`);

  const started = Date.now();
  const again = await connectLoggedIn(t, tn.port, 'mallory', tn.token('mallory'), 'dev-2', { acks: true });
  flood(again, 10_000, 200);
  await again.roundTrip();
  const responses = again.takeResponses();
  const accepted = responses.filter((m) => m.messageResponse?.result).length;
  t.equal(responses.length, 200, 'every message answered');
  t.ok(accepted <= limits.userMessageBurst - firstAccepted + limits.userMessageRate * ((Date.now() - started) / 1000 + 60), `what the user's bucket had left: ${accepted} accepted`);
  t.ok(accepted < 200, 'not the fresh burst of 300 a new connection alone would have');
  t.match(
    responses.find((m) => !m.messageResponse?.result)?.messageResponse,
    { code: ResultCode.RATE_LIMITED, errorCode: 'SB_ERR_RATE_LIMITED', info: /for this user on this worker/ },
    'refused by the user rate',
  );
});

t.test('with the rate off, the memory bound refuses with STORE_FULL and the pair keeps chatting', async (t) => {
  const inbox = new MemoryInboxStore({ maxBytes: 2 * MiB });
  const tn = await startNode(t, { messageRate: 0, userMessageRate: 0 }, { inbox });
  const exchange = await chattingPair(t, tn);
  await exchange('before');
  const attacker = await connectLoggedIn(t, tn.port, 'mallory', tn.token('mallory'), 'dev-1', { acks: true });
  let sent = 0;
  let maxSeen = 0;
  let full: ImMessage | undefined;
  let refusedTo: string | undefined;
  for (let batch = 0; batch < 200 && !full; batch++) {
    const recipients = flood(attacker, sent, 250);
    sent += 250;
    await attacker.roundTrip();
    maxSeen = Math.max(maxSeen, inbox.bytes);
    for (const m of attacker.takeResponses()) {
      if (!m.messageResponse?.result && !full) {
        full = m;
        refusedTo = recipients.get(u64(m.sequence));
      }
    }
    await exchange(`after batch ${batch}`);
  }
  t.ok(full, `refused after ${sent} messages`);
  t.match(full?.messageResponse, { result: false, code: ResultCode.STORE_FULL, errorCode: 'SB_ERR_STORE_FULL' }, 'result code 10, SB_ERR_STORE_FULL');
  t.ok(maxSeen <= inbox.maxBytes, `the accounted total never passed the bound (at most ${maxSeen} of ${inbox.maxBytes})`);
  t.equal((await inbox.range(refusedTo!, 0, 0)).head, 0, 'nothing stored for the refused one');
  t.equal(attacker.isClosed, false, 'a full store is not the sender\'s fault: it stays connected');
  for (let i = 0; i < 20; i++) await exchange(`at the bound ${i}`);
  t.ok(inbox.bytes <= inbox.maxBytes);
});
