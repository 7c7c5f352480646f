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
import { LoadClock, drain } from './timeline.js';

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
  const run = new FailoverRun(o);
  const pairs = await run.connectPairs();
  await o.ready();
  run.start(pairs);
  const at = { delivered: 0, acked: 0 };
  const { from, to } = await run.clock.measure(o.warmupMs, o.durationMs, () => {
    at.delivered = run.delivered;
    at.acked = run.acked;
  });
  const measured = { delivered: run.delivered - at.delivered, acked: run.acked - at.acked, seconds: (to - from) / 1000 };
  run.clock.enter('drain');
  run.stopSending();
  // Every send answered (or failed) and every acknowledged one received, or the time is up.
  await drain(() => pairs.some((p) => p.settled < p.sent || p.complete < p.okAnswers), o.drainMs);
  run.clock.end();
  const result: FailoverLoadResult = {
    clients: run.tracked.length,
    ...measured,
    deliveryLatency: run.deliveryLatency.encode(),
    ackLatency: run.ackLatency.encode(),
    sendLag: run.sendLag.encode(),
    errors: run.errors,
    resentDeduped: run.resentDeduped,
    accounting: account(pairs),
    outages: run.tracked.flatMap((c) => (c.outage ? [c.outage] : [])),
  };
  for (const c of run.tracked) c.client.close();
  return result;
}

/** One driver's failover load while it runs: its SDK clients, their outages, and what they counted. */
class FailoverRun {
  clock!: LoadClock<FailoverSecond['phase']>;
  readonly tracked: Tracked[] = [];
  readonly errors: Record<string, number> = {};
  errorCount = 0;
  /** Clients logged in now, and the fewest since the last second's report. */
  connected = 0;
  connectedMin = 0;
  sentTotal = 0;
  acked = 0;
  delivered = 0;
  resentDeduped = 0;
  readonly deliveryLatency = new Latency();
  readonly ackLatency = new Latency();
  readonly sendLag = new Latency();
  readonly secondLatency = new Latency();
  /** The k-th send of a pair (msg_id k, from 1) is due at t0 + (k - 1) * interval. */
  readonly interval: number;
  t0 = 0;
  #ticker: NodeJS.Timeout | undefined;

  constructor(readonly o: FailoverLoadOptions) {
    this.interval = (1000 * o.pairs) / o.rate;
  }

  fail(code: string): void {
    this.errorCount++;
    this.errors[code] = (this.errors[code] ?? 0) + 1;
  }

  /** Latencies count from the warm-up's end, the drain included. */
  counting(): boolean {
    return this.clock.current !== 'warmup';
  }

  /** Connects every pair's clients, receiver first, in batches so that a few thousand logins do not overrun the accept backlog. */
  async connectPairs(): Promise<Pair[]> {
    const { o } = this;
    const n = o.endpoints.length;
    const pairs: Pair[] = [];
    for (let first = 0; first < o.pairs; first += 200) {
      const batch = Array.from({ length: Math.min(200, o.pairs - first) }, async (_, j) => {
        const i = o.pairOffset + first + j;
        const receiver = this.#track(`fr${i}`, (i + 1) % n, 2 * i + 1).client;
        const sender = this.#track(`fs${i}`, i % n, 2 * i).client;
        await receiver.connect();
        await sender.connect();
        return { index: i, sender, receiver, sent: 0, settled: 0, okAnswers: 0, complete: 0, okIds: new Marks(), receivedIds: new Marks() } satisfies Pair;
      });
      pairs.push(...(await Promise.all(batch)));
    }
    return pairs;
  }

  /**
   * A client starting on worker `first` that moves on at every reconnect. The step differs by
   * client (1 .. n-1), so the clients of a dead worker spread over all the survivors.
   */
  #track(uid: string, first: number, clientIndex: number): Tracked {
    const { o } = this;
    const n = o.endpoints.length;
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
      if (status === 'ready') this.connected++;
      else if (previous === 'ready') this.connected--;
      if (this.connected < this.connectedMin) this.connectedMin = this.connected;
      if (previous === 'ready' && status !== 'ready') {
        if (entry.outage) entry.outage.drops++;
        else entry.outage = { uid, worker: entry.worker, droppedAt: Date.now(), readyAt: null, drops: 1 };
      } else if (status === 'ready' && entry.outage && entry.outage.readyAt === null) {
        entry.outage.readyAt = Date.now();
      }
      previous = status;
    });
    entry.client.on('error', (err) => this.fail(isSwitchboardError(err) ? err.code : 'CLIENT_ERROR'));
    this.tracked.push(entry);
    return entry;
  }

  /** Starts the receivers' accounting, the 1 ms timer that sends every message that is due, then the reports. */
  start(pairs: Pair[]): void {
    this.connectedMin = this.connected;
    this.clock = new LoadClock<FailoverSecond['phase']>('warmup', this.#reporter());
    this.t0 = performance.now();
    for (const pair of pairs) this.#receive(pair);
    // However far behind the server (or the reconnect) is, every due message is sent.
    const tick = () => {
      const now = performance.now();
      const due = Math.floor((now - this.t0) / this.interval) + 1;
      for (const pair of pairs) {
        while (pair.sent < due) {
          const msgId = ++pair.sent;
          this.sentTotal++;
          if (this.counting()) this.sendLag.add(now - this.#dueAt(msgId));
          this.#send(pair, msgId, this.#dueAt(msgId));
        }
      }
    };
    tick();
    this.#ticker = setInterval(tick, 1);
    this.clock.start();
  }

  stopSending(): void {
    clearInterval(this.#ticker);
  }

  #dueAt(msgId: number): number {
    return this.t0 + (msgId - 1) * this.interval;
  }

  #receive(pair: Pair): void {
    const from = `fs${pair.index}`;
    pair.receiver.on('message', (m) => {
      // The SDK already dropped deliveries at or below its last seq: what remains is distinct.
      if (m.from !== from) return this.fail('UNEXPECTED_SENDER');
      this.delivered++;
      const msgId = Number(m.msgId);
      if (pair.receivedIds.bump(msgId) === 1 && pair.okIds.get(msgId) > 0) pair.complete++;
      const latency = performance.now() - Number.parseFloat(m.content);
      this.secondLatency.add(latency);
      if (this.counting()) this.deliveryLatency.add(latency);
    });
  }

  #send(pair: Pair, msgId: number, at: number): void {
    pair.sender.send(`fr${pair.index}`, stamp(at, this.o.payloadBytes), { msgId }).then(
      (result) => {
        pair.settled++;
        pair.okAnswers++;
        pair.okIds.bump(msgId);
        if (pair.receivedIds.get(msgId) > 0) pair.complete++;
        this.acked++;
        if (result.duplicate) this.resentDeduped++;
        if (this.counting()) this.ackLatency.add(performance.now() - at);
      },
      (err: unknown) => {
        pair.settled++;
        this.fail(isSwitchboardError(err) ? err.code : 'SEND_FAILED');
      },
    );
  }

  /** The once-a-second record: what happened since the last one. */
  #reporter(): (phase: FailoverSecond['phase']) => void {
    let last = { sent: 0, acked: 0, delivered: 0, errors: 0 };
    let seconds = 0;
    return (phase) => {
      // By the clock, not by count: a driver that stalled skips seconds instead of drifting.
      seconds = Math.max(seconds + 1, Math.round((performance.now() - this.t0) / 1000));
      this.o.onSecond({
        t: seconds,
        phase,
        sent: this.sentTotal - last.sent,
        acked: this.acked - last.acked,
        delivered: this.delivered - last.delivered,
        errors: this.errorCount - last.errors,
        connections: this.connected,
        connectionsMin: this.connectedMin,
        latency: this.secondLatency.encode(),
      });
      this.secondLatency.reset();
      this.connectedMin = this.connected;
      last = { sent: this.sentTotal, acked: this.acked, delivered: this.delivered, errors: this.errorCount };
    };
  }
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
