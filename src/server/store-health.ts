// StoreHealth: whether this worker's stores (session directory, inbox, users where it has them)
// answer, and so whether it can serve a login. Checked once before the worker registers, then by
// one periodic timer: `failures` checks in a row that fail make the worker unready, the first
// one that passes makes it ready again. The worker publishes the state in the registry (the gate
// sends no logins to an unready worker) and refuses logins while unready.
//
// An unready worker stays registered: leaving the registry would make the other workers purge
// its sessions from the directory and close their links to it, so messages for its connected
// users would no longer reach them live; and those users would lose nothing by staying (their
// sends fail cleanly with SB_ERR_STORE_UNAVAILABLE until the stores answer again).

import { SwitchboardError } from '../errors.js';
import type { Logger } from '../log.js';

export interface HealthSettings {
  /** Time between two checks (a check waits for the previous one to finish). */
  intervalMs: number;
  /** Consecutive failed checks that make the worker unready. */
  failures: number;
}

export const DEFAULT_HEALTH_SETTINGS: Readonly<HealthSettings> = Object.freeze({ intervalMs: 1_000, failures: 2 });

/** What a store offers the check: a ping that settles within the store's own bound. */
export interface Pingable {
  ping(): Promise<void>;
}

export interface StoreHealthOptions extends Partial<HealthSettings> {
  /** The stores by name ('session', 'inbox', ...), as they appear in logs. */
  stores: Readonly<Record<string, Pingable>>;
  log: Logger;
}

/** What StoreHealth refuses (SB_ERR_CONFIG), for a caller that checks before building anything. */
export function checkHealthSettings(settings: HealthSettings): void {
  if (!(settings.intervalMs >= 1) || !Number.isInteger(settings.failures) || settings.failures < 1) {
    throw new SwitchboardError('SB_ERR_CONFIG', 'the health check needs an interval of at least 1 ms and a failure threshold of at least 1');
  }
}

export class StoreHealth {
  readonly #stores: [string, Pingable][];
  readonly #settings: HealthSettings;
  readonly #log: Logger;
  #ready = true;
  #failed = 0;
  #checking = false;
  #timer: NodeJS.Timeout | undefined;
  #onChange: ((ready: boolean) => void) | undefined;

  constructor(options: StoreHealthOptions) {
    const settings = { ...DEFAULT_HEALTH_SETTINGS, ...options };
    checkHealthSettings(settings);
    this.#stores = Object.entries(options.stores);
    this.#settings = { intervalMs: settings.intervalMs, failures: settings.failures };
    this.#log = options.log;
  }

  /** False once `failures` checks in a row failed, until one passes. */
  get ready(): boolean {
    return this.#ready;
  }

  /** Pings every store once; rejects with the first failure (SB_ERR_STORE_UNAVAILABLE). */
  async check(): Promise<void> {
    await Promise.all(this.#stores.map(([, store]) => store.ping()));
  }

  /** Starts the periodic check; `onChange` hears every change of readiness. */
  start(onChange: (ready: boolean) => void): void {
    this.#onChange = onChange;
    this.#timer = setInterval(() => void this.#tick(), this.#settings.intervalMs);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
    this.#onChange = undefined;
  }

  async #tick(): Promise<void> {
    if (this.#checking) return;
    this.#checking = true;
    try {
      await this.check();
      this.#failed = 0;
      if (!this.#ready) this.#set(true, {});
    } catch (err) {
      this.#failed++;
      if (this.#ready && this.#failed >= this.#settings.failures) this.#set(false, { err, failures: this.#failed });
    } finally {
      this.#checking = false;
    }
  }

  #set(ready: boolean, fields: Record<string, unknown>): void {
    if (!this.#timer) return; // stopped while the check ran
    this.#ready = ready;
    if (ready) this.#log.info({ ready }, 'stores answer again: ready');
    else this.#log.warn({ ready, ...fields }, 'stores do not answer: not ready');
    this.#onChange?.(ready);
  }
}
