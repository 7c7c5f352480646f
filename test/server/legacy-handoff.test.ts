// Legacy (non-acknowledging) devices are delivered to "past the kernel": a message counts as
// delivered once its whole frame is in the kernel's socket buffers, not when it is written to the
// process's own output buffer. A legacy client that stops reading is cut as a slow consumer with
// output still queued in the process: its next login replays exactly what the kernel had not
// taken. What the kernel had taken is what this test measures as the remaining window.

import t from 'tap';
import { startNode } from '../helpers/node.js';
import { seqs, u64, type RawClient, DEFAULT_TIMEOUT_MS } from '../../testkit/raw-client.js';
import { until } from '../../testkit/wait.js';
import { connect, connectLoggedIn } from '../helpers/raw-client.js';
import { HeadType, type ImMessage } from '../../src/protocol/types.js';

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);
/** 100 bytes of content, as the remaining window is stated in OPERATIONS.md. */
const CONTENT = 'x'.repeat(100);

/** Sends `count` messages to `to` in bursts, each burst's responses awaited. */
async function flood(sender: RawClient, to: string, count: number): Promise<void> {
  for (let sent = 0; sent < count; ) {
    const burst = Math.min(1000, count - sent);
    const sequences = Array.from({ length: burst }, () => sender.chat(to, CONTENT));
    for (const sequence of sequences) {
      const r = await sender.response(sequence, 20_000);
      if (!r.messageResponse?.result) throw new Error(`refused: ${JSON.stringify(r.messageResponse)}`);
    }
    sent += burst;
  }
}

t.test('a legacy device cut as a slow consumer: its next login replays all that the kernel had not taken', async (t) => {
  const tn = await startNode(t, { maxOutboundBytes: 64 * 1024, messageRate: 0, userMessageRate: 0 });
  const alice = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'));
  const bob = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'legacy');
  bob.pause();

  // Enough to fill the kernel's buffers (a few MB on loopback) and then the 64 KiB limit.
  let total = 0;
  while (tn.node.server.sessions.byUser('bob').length > 0) {
    await flood(alice, 'bob', 5000);
    total += 5000;
    if (total > 200_000) throw new Error('bob was never cut');
  }
  t.equal(await tn.node.inbox.cursor('bob', 'legacy').then((c) => (c ?? 0) < total), true, 'not everything written counts as delivered');

  // Whatever the kernel took still reaches the device; a frame it took only part of is cut short.
  bob.resume();
  await bob.waitClosed(20_000);
  t.equal(bob.closing, undefined, 'cut without a CLOSING frame (slow consumer)');
  const received = seqs(bob.takeDeliveries());
  t.same(received, range(1, received.length), 'the device read 1..k in order');
  const k = received.length;
  const saved = await tn.node.inbox.cursor('bob', 'legacy');
  t.equal(saved, k, 'the saved position is exactly the last message the kernel took whole');
  t.comment(`remaining window on loopback: the kernel held ${k} deliveries of 100-byte messages when the device was cut`);

  const again = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'legacy');
  t.equal(u64(again.loginResponse?.syncFrom), String(k), 'the replay starts right after it');
  const replayed = await again.deliveries(total - k, 20_000);
  t.same(seqs(replayed), range(k + 1, total), `the ${total - k} messages that were still in the process are replayed`);
  t.equal(k + replayed.length, total, 'none lost, none twice');
});

t.test('a legacy device that resets its connection: the position stays at the last reading of the kernel', async (t) => {
  const tn = await startNode(t, { messageRate: 0, userMessageRate: 0 });
  const alice = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'));
  const bob = await connect(t, tn.port);
  await bob.login('bob', tn.token('bob'), 'legacy');
  bob.pause();
  // More than the kernel takes, less than the 1 MiB limit: output stays queued in the process.
  let total = 0;
  const session = () => tn.node.server.sessions.byUser('bob')[0];
  while (!session()?.outbound.congested) {
    await flood(alice, 'bob', 2000);
    total += 2000;
    if (total > 100_000) throw new Error('the output never backed up');
  }
  const s = session()!;
  const handed = s.outbound.handedOffBytes;
  t.ok(handed < s.outbound.queuedBytes, `the kernel has taken ${handed} of ${s.outbound.queuedBytes} bytes`);
  // Unread data in its receive buffer: closing sends a reset, the server's socket errors out.
  bob.destroy();
  await until('bob to be gone', () => tn.node.server.sessions.byUser('bob').length === 0, DEFAULT_TIMEOUT_MS);
  const saved = (await tn.node.inbox.cursor('bob', 'legacy')) ?? 0;
  t.ok(saved < total, `the saved position (${saved}) is not what was written (${total})`);
  const again = await connectLoggedIn(t, tn.port, 'bob', tn.token('bob'), 'legacy');
  t.equal(u64(again.loginResponse?.syncFrom), String(saved));
  t.same(seqs(await again.deliveries(total - saved, 20_000)), range(saved + 1, total), 'everything after it is replayed');
  again.send({ type: HeadType.LOGOUT_REQUEST, sequence: again.nextSequence(), sessionId: again.sessionId });
  await again.next((m) => m.type === HeadType.LOGOUT_RESPONSE);
  await until('the position saved at logout', async () => (await tn.node.inbox.cursor('bob', 'legacy')) === total, DEFAULT_TIMEOUT_MS);
});
