// Latency recording for the bench: an HDR histogram in microseconds (3 significant digits),
// read out in milliseconds. Histograms cross process boundaries (driver → coordinator) in
// hdr-histogram-js's compressed base64 form and are merged there.

import * as hdr from 'hdr-histogram-js';

export interface Percentiles {
  count: number;
  p50: number;
  p90: number;
  p99: number;
  p999: number;
  max: number;
}

/** [percentile, ms] points of the latency distribution, for the report's chart. */
export type Distribution = [number, number][];

/** A latency as the report shows it: percentiles and the distribution to plot. */
export interface LatencyReport extends Percentiles {
  distribution: Distribution;
}

const PLOTTED = [0, 10, 25, 50, 75, 90, 95, 99, 99.5, 99.9, 99.95, 99.99, 100];

export class Latency {
  #histogram = hdr.build({ numberOfSignificantValueDigits: 3, highestTrackableValue: 3_600_000_000, autoResize: true });

  static decode(encoded: string): Latency {
    const latency = new Latency();
    if (encoded) latency.#histogram.add(hdr.decodeFromCompressedBase64(encoded));
    return latency;
  }

  /** The histograms of several drivers (encoded), merged into one. */
  static merged(encoded: Iterable<string>): Latency {
    const latency = new Latency();
    for (const e of encoded) if (e) latency.#histogram.add(hdr.decodeFromCompressedBase64(e));
    return latency;
  }

  get count(): number {
    return this.#histogram.totalCount;
  }

  add(ms: number): void {
    this.#histogram.recordValue(Math.max(0, Math.round(ms * 1000)));
  }

  merge(other: Latency): void {
    this.#histogram.add(other.#histogram);
  }

  reset(): void {
    this.#histogram.reset();
  }

  encode(): string {
    return this.#histogram.totalCount === 0 ? '' : hdr.encodeIntoCompressedBase64(this.#histogram);
  }

  percentiles(): Percentiles {
    const h = this.#histogram;
    if (h.totalCount === 0) return { count: 0, p50: 0, p90: 0, p99: 0, p999: 0, max: 0 };
    return { count: h.totalCount, p50: this.at(50), p90: this.at(90), p99: this.at(99), p999: this.at(99.9), max: h.maxValue / 1000 };
  }

  /** The value at a percentile, ms: the top of its bucket (within 0.1%), clamped to the exact max. */
  at(percentile: number): number {
    const h = this.#histogram;
    return Math.min(h.getValueAtPercentile(percentile), h.maxValue) / 1000;
  }

  report(): LatencyReport {
    return { ...this.percentiles(), distribution: this.distribution() };
  }

  distribution(): Distribution {
    return this.count === 0 ? [] : PLOTTED.map((q) => [q, q === 0 ? this.#histogram.minNonZeroValue / 1000 : this.at(q)]);
  }
}
