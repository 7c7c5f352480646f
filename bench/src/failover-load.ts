// The load of `bench failover`, in one driver process: `pairs` sender→receiver pairs of SDK
// clients (ImClient, so reconnects, resends of unanswered sends and the dedupe by inbox seq are
// the SDK's own) sending open loop at a fixed rate while the coordinator kills a worker. Every
// msg_id is accounted for (acknowledged, received once, lost or duplicated), and every client
// that lost its connection says when it dropped and when it was logged in again.
//
// Clients find workers without the gate: a resolver over the target's worker list with a
// token minted here. Registering hundreds of users at the gate costs ~400 ms of scrypt each;
// the resolver also places clients exactly, so the killed worker holds a known share of them.

import { ImClient, type ClientStatus, type Endpoint as ClientEndpoint } from '../../src/client/im-client.js';
import { isSwitchboardError } from '../../src/errors.js';
import { Marks, type Endpoint, type MeasuredLoad } from './chat-load.js';
import type { Accounting } from './report.js';
import { Latency } from './latency.js';
import { PhaseClock } from './timeline.js';
import { sleep } from '../../testkit/wait.js';

export interface FailoverLoadOptions {
  /** Every worker of the target: pair N's sender starts on worker N mod count, its receiver on the next. */
  endpoints: Endpoint[];
  pairs: number;
  /** Users are fs<N> and fr<N> for N from this offset (drivers of one run use disjoint ranges). */
  pairOffset: number;
  /** Messages per second over this driver's pairs. */
  rate: number;
  warmupMs: number;
  durationMs: number;
  payloadBytes: number;
  /** After sending stops, wait this long at most for every send to settle and every acknowledged one to arrive. */
  drainMs: number;
  /** A login token for a user id. */
  token: (uid: string) => string;
  /** How long a send waits for its answer, reconnects included (the SDK's requestTimeoutMs). */
  requestTimeoutMs?: number;
  ready: () => Promise<void>;
  onSecond: (second: FailoverSecond) => void;
}

/** One second of a run as one driver saw it. */
export interface FailoverSecond {
  /** Second since sending started: 1, 2, ... (the last, after the drain, may be partial; a stalled driver skips some). */
  t: number;
  phase: 'warmup' | 'measure' | 'drain';
  sent: number;
  acked: number;
  delivered: number;
  errors: number;
  /** Clients logged in ('ready') at the end of the second (named for the report's connections chart). */
  connections: number;
  /** The fewest clients logged in at any moment of the second (an outage shorter than a second shows here). */
  connectionsMin: number;
  /** Delivery latency of this second, encoded (see Latency.decode). */
  latency: string;
}

/** A client that lost its connection: wall-clock times (Date.now(), comparable across processes of one host). */
export interface Outage {
  uid: string;
  /** Worker index it was connected to when it first dropped. */
  worker: number;
  droppedAt: number;
  /** Logged in again (on another worker); null: never within the run. */
  readyAt: number | null;
  /** Times it dropped during the run. */
  drops: number;
}

/** Latencies count from the warm-up's end, the drain included: late deliveries count. */
export interface FailoverLoadResult extends MeasuredLoad {
  clients: number;
  /** Sends the server answered as duplicates: resent after a reconnect, stored once. */
  resentDeduped: number;
  accounting: Accounting;
  outages: Outage[];
}

interface Pair {
  index: number;
  sender: ImClient;
  receiver: ImClient;
  sent: number;
  settled: number;
  okAnswers: number;
  /** Acknowledged msg_ids that were also received. */
  complete: number;
  okIds: Marks;
  receivedIds: Marks;
}

interface Tracked {
  client: ImClient;
  /** Index of the worker the resolver handed out last. */
  worker: number;
  outage?: Outage;
}

const SHOWN_IDS = 10;

/** The content of a message: its intended send time (ms on this process's performance clock), padded. */
function stamp(at: number, payloadBytes: number): string {
  const head = `${at.toFixed(3)}|`;
  return head.length >= payloadBytes ? head : head + 'x'.repeat(payloadBytes - head.length);
}

export async function runFailoverLoad(o: FailoverLoadOptions): Promise<FailoverLoadResult> {
  if (!(o.rate > 0)) throw new Error('rate must be positive');
  const n = o.endpoints.length;
  const errors: Record<string, number> = {};
  let errorCount = 0;
  const fail = (code: string) => {
    errorCount++;
    errors[code] = (errors[code] ?? 0) + 1;
  };
  const tracked: Tracked[] = [];
  let connected = 0;
  let connectedMin = 0;

  /**
   * A client starting on worker `first` that moves on at every reconnect. The step differs by
   * client (1 .. n-1), so the clients of a dead worker spread over all the survivors.
   */
  const track = (uid: string, first: number, clientIndex: number): Tracked => {
    const step = n > 1 ? 1 + (clientIndex % (n - 1)) : 0;
    let calls = 0;
    const entry = { worker: first } as Tracked;
    const endpoint = async (): Promise<ClientEndpoint> => {
      if (calls++ > 0) entry.worker = (entry.worker + step) % n;
      const { host, port } = o.endpoints[entry.worker]!;
      return { host, port, token: o.token(uid) };
    };
    entry.client = new ImClient({ uid, deviceId: 'bench', endpoint, requestTimeoutMs: o.requestTimeoutMs ?? 60_000, maxPendingRequests: 100_000 });
    let previous: ClientStatus = 'idle';
    entry.client.on('status', (status) => {
      if (status === 'ready') connected++;
      else if (previous === 'ready') connected--;
      if (connected < connectedMin) connectedMin = connected;
      if (previous === 'ready' && status !== 'ready') {
        if (entry.outage) entry.outage.drops++;
        else entry.outage = { uid, worker: entry.worker, droppedAt: Date.now(), readyAt: null, drops: 1 };
      } else if (status === 'ready' && entry.outage && entry.outage.readyAt === null) {
        entry.outage.readyAt = Date.now();
      }
      previous = status;
    });
    entry.client.on('error', (err) => fail(isSwitchboardError(err) ? err.code : 'CLIENT_ERROR'));
    tracked.push(entry);
    return entry;
  };

  const pairs: Pair[] = [];
  // Log in in batches so that a few thousand logins do not overrun the accept backlog.
  for (let first = 0; first < o.pairs; first += 200) {
    const batch = Array.from({ length: Math.min(200, o.pairs - first) }, async (_, j) => {
      const i = o.pairOffset + first + j;
      const receiver = track(`fr${i}`, (i + 1) % n, 2 * i + 1).client;
      const sender = track(`fs${i}`, i % n, 2 * i).client;
      await receiver.connect();
      await sender.connect();
      return { index: i, sender, receiver, sent: 0, settled: 0, okAnswers: 0, complete: 0, okIds: new Marks(), receivedIds: new Marks() } satisfies Pair;
    });
    pairs.push(...(await Promise.all(batch)));
  }
  await o.ready();
  connectedMin = connected;

  const phases = new PhaseClock<FailoverSecond['phase']>('warmup');
  let sentTotal = 0;
  let acked = 0;
  let delivered = 0;
  let resentDeduped = 0;
  const deliveryLatency = new Latency();
  const ackLatency = new Latency();
  const sendLag = new Latency();
  const secondLatency = new Latency();
  // The k-th send of a pair (msg_id k, from 1) is due at t0 + (k - 1) * interval.
  const interval = (1000 * o.pairs) / o.rate;
  const t0 = performance.now();
  const dueAt = (msgId: number) => t0 + (msgId - 1) * interval;

  for (const pair of pairs) {
    const from = `fs${pair.index}`;
    pair.receiver.on('message', (m) => {
      // The SDK already dropped deliveries at or below its last seq: what remains is distinct.
      if (m.from !== from) return fail('UNEXPECTED_SENDER');
      delivered++;
      const msgId = Number(m.msgId);
      if (pair.receivedIds.bump(msgId) === 1 && pair.okIds.get(msgId) > 0) pair.complete++;
      const latency = performance.now() - Number.parseFloat(m.content);
      secondLatency.add(latency);
      if (phases.current !== 'warmup') deliveryLatency.add(latency);
    });
  }

  const send = (pair: Pair, msgId: number, at: number) => {
    pair.sender.send(`fr${pair.index}`, stamp(at, o.payloadBytes), { msgId }).then(
      (result) => {
        pair.settled++;
        pair.okAnswers++;
        pair.okIds.bump(msgId);
        if (pair.receivedIds.get(msgId) > 0) pair.complete++;
        acked++;
        if (result.duplicate) resentDeduped++;
        if (phases.current !== 'warmup') ackLatency.add(performance.now() - at);
      },
      (err: unknown) => {
        pair.settled++;
        fail(isSwitchboardError(err) ? err.code : 'SEND_FAILED');
      },
    );
  };
  // A 1 ms timer sends every message that is due, however far behind the server (or the reconnect) is.
  const tick = () => {
    const now = performance.now();
    const due = Math.floor((now - t0) / interval) + 1;
    for (const pair of pairs) {
      while (pair.sent < due) {
        const msgId = ++pair.sent;
        sentTotal++;
        if (phases.current !== 'warmup') sendLag.add(now - dueAt(msgId));
        send(pair, msgId, dueAt(msgId));
      }
    }
  };
  tick();
  const ticker = setInterval(tick, 1);

  let last = { sent: 0, acked: 0, delivered: 0, errors: 0 };
  let seconds = 0;
  const reportSecond = () => {
    // By the clock, not by count: a driver that stalled skips seconds instead of drifting.
    seconds = Math.max(seconds + 1, Math.round((performance.now() - t0) / 1000));
    o.onSecond({
      t: seconds,
      phase: phases.second(),
      sent: sentTotal - last.sent,
      acked: acked - last.acked,
      delivered: delivered - last.delivered,
      errors: errorCount - last.errors,
      connections: connected,
      connectionsMin: connectedMin,
      latency: secondLatency.encode(),
    });
    secondLatency.reset();
    connectedMin = connected;
    last = { sent: sentTotal, acked, delivered, errors: errorCount };
  };
  const secondTimer = setInterval(reportSecond, 1000);

  await sleep(o.warmupMs);
  phases.enter('measure');
  const startDelivered = delivered;
  const startAcked = acked;
  const start = performance.now();
  await sleep(o.durationMs);
  const measured = {
    delivered: delivered - startDelivered,
    acked: acked - startAcked,
    seconds: (performance.now() - start) / 1000,
  };
  phases.enter('drain');
  clearInterval(ticker);
  // Every send answered (or failed) and every acknowledged one received, or the time is up.
  const deadline = performance.now() + o.drainMs;
  const outstanding = (p: Pair) => p.settled < p.sent || p.complete < p.okAnswers;
  while (performance.now() < deadline && pairs.some(outstanding)) await sleep(20);
  clearInterval(secondTimer);
  reportSecond();
  const result: FailoverLoadResult = {
    clients: tracked.length,
    ...measured,
    deliveryLatency: deliveryLatency.encode(),
    ackLatency: ackLatency.encode(),
    sendLag: sendLag.encode(),
    errors,
    resentDeduped,
    accounting: account(pairs),
    outages: tracked.flatMap((c) => (c.outage ? [c.outage] : [])),
  };
  for (const c of tracked) c.client.close();
  return result;
}

function account(pairs: Pair[]): Accounting {
  const a: Accounting = { sent: 0, acked: 0, received: 0, lost: 0, dup: 0, lostIds: [], dupIds: [] };
  for (const pair of pairs) {
    const name = `fs${pair.index}`;
    a.sent += pair.sent;
    for (let id = 1; id <= pair.sent; id++) {
      const got = pair.receivedIds.get(id);
      if (got > 0) a.received++;
      if (got > 1) {
        a.dup++;
        if (a.dupIds.length < SHOWN_IDS) a.dupIds.push(`${name}:${id}`);
      }
      if (pair.okIds.get(id) === 0) continue;
      a.acked++;
      if (got === 0) {
        a.lost++;
        if (a.lostIds.length < SHOWN_IDS) a.lostIds.push(`${name}:${id}`);
      }
    }
  }
  return a;
}
