// Time in a bench run. In a driver: the phases of its load and the once-a-second record it sends
// (LoadClock, on a PhaseClock), and its drain. In the coordinator: the per-second records of
// several drivers merged into one timeline (DriverTimeline): a second is complete once every
// driver reported it. Every numeric field of a record but `t` is a counter summed over the
// drivers (a sum of per-driver minimums is a lower bound, which is what a minimum needs);
// `latency` is that second's histogram, merged; `phase` is taken as it is.

import { Latency } from './latency.js';
import { sleep } from '../../testkit/wait.js';
import type { TimelinePoint } from './report.js';

/** One second of a run as a driver reports it. */
export interface DriverSecond {
  /** Which second since sending started: 1, 2, ... */
  t: number;
  phase: string;
  /** The second's latency histogram, encoded (Latency.encode). */
  latency: string;
}

interface Slot {
  reported: number;
  phase: string;
  counters: Record<string, number>;
  latency: Latency;
}

export class DriverTimeline {
  readonly #drivers: number;
  readonly #slots = new Map<number, Slot>();
  readonly #marks = new Map<number, Record<string, string>>();
  readonly #onComplete: (point: TimelinePoint) => void;

  constructor(drivers: number, onComplete: (point: TimelinePoint) => void = () => {}) {
    this.#drivers = drivers;
    this.#onComplete = onComplete;
  }

  add<S extends DriverSecond>(second: S): void {
    let slot = this.#slots.get(second.t);
    if (!slot) this.#slots.set(second.t, (slot = { reported: 0, phase: second.phase, counters: {}, latency: new Latency() }));
    slot.reported++;
    for (const [name, value] of Object.entries(second)) {
      if (name !== 't' && typeof value === 'number') slot.counters[name] = (slot.counters[name] ?? 0) + value;
    }
    slot.latency.merge(Latency.decode(second.latency));
    if (slot.reported === this.#drivers) this.#onComplete(this.#point(second.t, slot));
  }

  /** Adds fields to second `t`'s point, e.g. an event that happened in it. */
  mark(t: number, fields: Record<string, string>): void {
    this.#marks.set(t, { ...this.#marks.get(t), ...fields });
  }

  points(): TimelinePoint[] {
    return [...this.#slots.entries()].sort(([a], [b]) => a - b).map(([t, slot]) => this.#point(t, slot));
  }

  #point(t: number, slot: Slot): TimelinePoint {
    const p = slot.latency.percentiles();
    return { t, phase: slot.phase, ...slot.counters, ...this.#marks.get(t), p50Ms: p.p50, p99Ms: p.p99 };
  }
}

/**
 * The phase of a load (warm-up, measure, drain) and which phase each reported second belongs
 * to. Seconds are reported by a 1 s interval timer and the phase changes on a timer that
 * expires at the same moment (the warm-up of 2 s ends as the second second does), so the phase
 * read when a second is reported is often the next one: the last warm-up second would be
 * labelled "measure". A second is labelled with the phase it spent most of its time in, the
 * one in effect at its midpoint, whichever timer fires first.
 */
export class PhaseClock<P extends string> {
  readonly #now: () => number;
  /** Phase changes, oldest first; only those since the current second began are kept. */
  #changes: { at: number; phase: P }[];
  #secondStart: number;

  constructor(phase: P, now: () => number = () => performance.now()) {
    this.#now = now;
    this.#secondStart = now();
    this.#changes = [{ at: this.#secondStart, phase }];
  }

  /** The phase now. */
  get current(): P {
    return this.#changes[this.#changes.length - 1]!.phase;
  }

  enter(phase: P): void {
    this.#changes.push({ at: this.#now(), phase });
  }

  /** Ends the current second (begun at the previous call, or at construction) and returns its phase. */
  second(): P {
    const end = this.#now();
    const middle = (this.#secondStart + end) / 2;
    let phase = this.#changes[0]!.phase;
    for (const change of this.#changes) if (change.at <= middle) phase = change.phase;
    this.#secondStart = end;
    this.#changes = [{ at: end, phase: this.current }];
    return phase;
  }
}

/** The phases a load goes through (each load uses some of them). */
export type LoadPhase = 'connect' | 'warmup' | 'measure' | 'drain';

/**
 * The clock of one driver's load, the same in every load: its phase (a PhaseClock, whose first
 * second begins at construction) and its report once a second, `report(phase, n)` for the n-th
 * second (1, 2, ...) with the phase that second belonged to, from start() until end().
 */
export class LoadClock<P extends LoadPhase> {
  readonly #phases: PhaseClock<P>;
  readonly #report: (phase: P, n: number) => void;
  #timer: NodeJS.Timeout | undefined;
  #n = 0;

  constructor(first: P, report: (phase: P, n: number) => void) {
    this.#phases = new PhaseClock(first);
    this.#report = report;
  }

  /** Starts the reports, once the load is under way. */
  start(): void {
    this.#timer ??= setInterval(() => this.#second(), 1000);
  }

  /** The phase now. */
  get current(): P {
    return this.#phases.current;
  }

  enter(phase: P): void {
    this.#phases.enter(phase);
  }

  /** Reports the second so far now (cut short) and starts the next one from here. */
  reportNow(): void {
    this.#second();
    this.#timer?.refresh();
  }

  /**
   * The warm-up (`warmupMs` in the current phase), then the measured interval: enters
   * 'measure', calls `atStart`, waits `durationMs`. Resolves when the interval began and ended
   * (performance.now()); the phase is still 'measure'.
   */
  async measure(warmupMs: number, durationMs: number, atStart?: () => void): Promise<{ from: number; to: number }> {
    await sleep(warmupMs);
    this.enter('measure' as P);
    atStart?.();
    const from = performance.now();
    await sleep(durationMs);
    return { from, to: performance.now() };
  }

  /** Stops the reports; `last`: after one more, for the (partial) second so far. */
  end(last = true): void {
    clearInterval(this.#timer);
    if (last) this.#second();
  }

  #second(): void {
    this.#report(this.#phases.second(), ++this.#n);
  }
}

/** Waits while `busy()` holds, polling every `everyMs`, for `withinMs` at most: a load's drain. */
export async function drain(busy: () => boolean, withinMs: number, everyMs = 20): Promise<void> {
  const deadline = performance.now() + withinMs;
  while (performance.now() < deadline && busy()) await sleep(everyMs);
}
