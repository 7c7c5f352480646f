// Merges the per-second records of several chat drivers into one timeline: a second is
// complete once every driver reported it; its latency is the merged histogram of the drivers.

import type { ChatSecond } from './chat-load.js';
import { Latency } from './latency.js';
import type { TimelinePoint } from './report.js';

interface Slot {
  reported: number;
  phase: string;
  sent: number;
  delivered: number;
  acked: number;
  errors: number;
  connections: number;
  latency: Latency;
}

export class ChatTimeline {
  readonly #drivers: number;
  readonly #slots = new Map<number, Slot>();
  readonly #onComplete: (point: TimelinePoint) => void;

  constructor(drivers: number, onComplete: (point: TimelinePoint) => void = () => {}) {
    this.#drivers = drivers;
    this.#onComplete = onComplete;
  }

  add(second: ChatSecond): void {
    let slot = this.#slots.get(second.t);
    if (!slot) {
      slot = { reported: 0, phase: second.phase, sent: 0, delivered: 0, acked: 0, errors: 0, connections: 0, latency: new Latency() };
      this.#slots.set(second.t, slot);
    }
    slot.reported++;
    slot.sent += second.sent;
    slot.delivered += second.delivered;
    slot.acked += second.acked;
    slot.errors += second.errors;
    slot.connections += second.connections;
    slot.latency.merge(Latency.decode(second.latency));
    if (slot.reported === this.#drivers) this.#onComplete(point(second.t, slot));
  }

  points(): TimelinePoint[] {
    return [...this.#slots.entries()].sort(([a], [b]) => a - b).map(([t, slot]) => point(t, slot));
  }
}

function point(t: number, slot: Slot): TimelinePoint {
  const p = slot.latency.percentiles();
  return {
    t,
    phase: slot.phase,
    sent: slot.sent,
    delivered: slot.delivered,
    acked: slot.acked,
    errors: slot.errors,
    connections: slot.connections,
    p50Ms: p.p50,
    p99Ms: p.p99,
  };
}
