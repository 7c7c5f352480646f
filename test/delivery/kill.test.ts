// A worker process killed with SIGKILL in the middle of a stream of messages loses none that it
// acknowledged. Real processes, real Redis: senders in this process keep sending to one user who
// is offline and one who is online; the worker is killed mid-stream and a new worker process is
// started on the same port with the same Redis. Every send that resolved must then reach its
// recipient exactly once (the SDK drops resends by seq), in the order its sender sent it. Sends
// that failed or were cut off may or may not have been stored: they are not required, but if
// they arrive they must not break the order or arrive twice.
// bin/switchboard.js runs the compiled dist/: `npm run build` (npm test does) first.

import t, { type Test } from 'tap';
import { TokenSigner } from '../../src/auth/token.js';
import { ImClient, type ClientStatus, type IncomingMessage, type SendResult } from '../../src/client/im-client.js';
import { RedisInboxStore } from '../../src/inbox/redis-inbox-store.js';
import { startRedis } from '../helpers/redis.js';
import { freePort } from '../../testkit/services.js';
import { SwitchboardProcess, assertBuilt } from '../../testkit/switchboard-process.js';
import { until } from '../../testkit/wait.js';

const SECRET = 'kill-test-secret-at-least-32-characters';
const SENDERS = ['s0', 's1', 's2'];
const RECIPIENTS = ['bob', 'carol']; // bob is offline until the end, carol is online throughout
/** Sends each sender keeps in flight. */
const WINDOW = 4;
/** Acknowledged sends per sender before the kill, and again after the restart. */
const BATCH = 25;
/** How long a wait of this test lasts before it fails. */
const WAIT_MS = 20_000;

/** A worker on `port` keeping its inboxes in Redis, killed on teardown; resolves once it listens. */
async function startWorker(t: Test, port: number, redisUrl: string): Promise<SwitchboardProcess> {
  assertBuilt();
  // The users have tokens, not accounts.
  const worker = new SwitchboardProcess('worker', ['worker', '--port', String(port), '--secret', SECRET, '--redis', redisUrl, '--log-level', 'info', '--allow-unknown-recipients']);
  t.teardown(() => worker.kill());
  await worker.waitForLog({ msg: 'worker listening' });
  return worker;
}

interface Acked {
  sender: string;
  i: number;
  to: string;
  result: SendResult;
}

t.test('SIGKILL of a worker mid-stream loses no acknowledged message and duplicates none', async (t) => {
  const redis = await startRedis(t);
  const port = await freePort();
  const signer = new TokenSigner(SECRET);
  const client = (uid: string, deviceId: string) => {
    const c = new ImClient({
      host: '127.0.0.1',
      port,
      uid,
      deviceId,
      token: signer.mint({ uid, ttlMs: 300_000 }),
      retryStrategy: () => 25,
      // Long enough that a send waiting for the new worker is not given up on.
      requestTimeoutMs: 60_000,
    });
    t.teardown(() => c.close());
    return c;
  };

  const first = await startWorker(t, port, redis.url);

  const carol = client('carol', 'carol-phone');
  const carolGot: IncomingMessage[] = [];
  carol.on('message', (m) => carolGot.push(m));
  await carol.connect();

  const senders = SENDERS.map((uid) => client(uid, `${uid}-device`));
  await Promise.all(senders.map((s) => s.connect()));

  const acked: Acked[] = [];
  const failed: { sender: string; i: number; code: string }[] = [];
  const ackedBy = new Map(SENDERS.map((s) => [s, 0]));
  /** Every send by `${sender}:${i}`, and how it ended. */
  const outcome = new Map<string, 'pending' | 'acked' | 'failed'>();
  let stop = false;

  const run = async (sender: ImClient) => {
    const inFlight = new Set<Promise<void>>();
    for (let i = 0; !stop; i++) {
      const to = RECIPIENTS[i % RECIPIENTS.length]!;
      const key = `${sender.uid}:${i}`;
      outcome.set(key, 'pending');
      const p: Promise<void> = sender
        .send(to, key)
        .then(
          (result) => {
            outcome.set(key, 'acked');
            acked.push({ sender: sender.uid, i, to, result });
            ackedBy.set(sender.uid, ackedBy.get(sender.uid)! + 1);
          },
          (err: { code?: string }) => {
            outcome.set(key, 'failed');
            failed.push({ sender: sender.uid, i, code: String(err.code) });
          },
        )
        .finally(() => inFlight.delete(p));
      inFlight.add(p);
      if (inFlight.size >= WINDOW) await Promise.race(inFlight);
    }
    await Promise.all(inFlight);
  };
  const running = Promise.all(senders.map(run));

  await until(`${BATCH} acknowledged sends per sender`, () => [...ackedBy.values()].every((n) => n >= BATCH), WAIT_MS);
  process.kill(first.child.pid!, 'SIGKILL');
  const atKill = new Map(ackedBy);
  await first.exited;
  t.equal(first.child.signalCode, 'SIGKILL', 'the first worker was killed');

  // Everyone notices; sends go on queueing meanwhile.
  await until('every client lost its connection', () => [carol, ...senders].every((c) => (['reconnecting', 'connecting'] as ClientStatus[]).includes(c.status)), WAIT_MS);
  // Whatever is unanswered now was cut off by the kill or sent into the void since: each
  // sender's window is full of them, and only the new worker can answer them.
  const pendingAtRestart = [...outcome].filter(([, state]) => state === 'pending').map(([key]) => key);
  const second = await startWorker(t, port, redis.url);
  await until(`${BATCH} more acknowledged sends per sender`, () => SENDERS.every((s) => ackedBy.get(s)! >= atKill.get(s)! + BATCH), WAIT_MS);
  stop = true;
  await running;
  t.equal(pendingAtRestart.length, SENDERS.length * WINDOW, 'every sender had a full window of sends waiting across the restart');
  t.same(
    pendingAtRestart.filter((key) => outcome.get(key) !== 'acked'),
    [],
    'all of them were resent to the new worker and acknowledged',
  );
  t.comment(
    `${acked.length} acknowledged (${acked.filter((a) => a.result.duplicate).length} as duplicates of a stored resend), ` +
      `${failed.length} failed${failed.length ? `: ${[...new Set(failed.map((f) => f.code))].join(', ')}` : ''}`,
  );

  // What the inbox holds now is what each recipient must end up with, exactly once.
  const inbox = new RedisInboxStore({ url: redis.url });
  t.teardown(() => inbox.close());
  const heads = new Map<string, number>();
  for (const uid of RECIPIENTS) heads.set(uid, (await inbox.range(uid, 0, 0)).head);

  const bob = client('bob', 'bob-phone');
  const bobGot: IncomingMessage[] = [];
  bob.on('message', (m) => bobGot.push(m));
  await bob.connect();
  await until('bob processed his whole inbox', () => bob.lastSeq === heads.get('bob'), WAIT_MS);
  await until('carol processed her whole inbox', () => carol.lastSeq === heads.get('carol'), WAIT_MS);

  for (const [uid, got] of [
    ['bob', bobGot],
    ['carol', carolGot],
  ] as const) {
    const head = heads.get(uid)!;
    t.same(
      got.map((m) => m.seq),
      Array.from({ length: head }, (_, k) => k + 1),
      `${uid}: every stored message (1..${head}) shown once, in seq order`,
    );
    const byKey = new Map(got.map((m) => [m.content, m]));
    t.equal(byKey.size, got.length, `${uid}: no message was stored twice`);
    const mine = acked.filter((a) => a.to === uid);
    const missing = mine.filter((a) => byKey.get(`${a.sender}:${a.i}`)?.seq !== a.result.seq);
    t.same(
      missing.map((a) => `${a.sender}:${a.i}@${a.result.seq}`),
      [],
      `${uid}: all ${mine.length} acknowledged messages arrived, each at the seq its sender was told`,
    );
    for (const sender of SENDERS) {
      const order = got.filter((m) => m.from === sender).map((m) => Number(m.content.split(':')[1]));
      t.same(
        order,
        [...order].sort((a, b) => a - b),
        `${uid}: ${sender}'s ${order.length} messages in the order sent`,
      );
    }
  }
  t.equal(second.child.exitCode, null, 'the second worker is still running');
});
