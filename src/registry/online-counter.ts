// OnlineCounter: how many users and sessions are online in the whole system, for the gate's
// /api/stats. Embedded mode counts its one worker's sessions (MemoryOnlineCounter, below); a
// cluster keeps the counts in ZooKeeper, one read for anyone (ZooKeeperOnlineCounter,
// zk-online-counter.ts, on the registry's ZooKeeper session).

export interface OnlineCounts {
  users: number;
  sessions: number;
}

export interface OnlineCounter {
  /** A worker: starts publishing its counts. A reader (the gate) never starts it. */
  start(): void;
  /** The counts of the whole system now. */
  read(): Promise<OnlineCounts>;
  /** Stops publishing; closes nothing it was given. */
  close(): Promise<void>;
}

/** This worker's counts, for the counter it publishes: its distinct users and its sessions. */
export interface LocalCounts {
  /** This worker's id, '' until registered. */
  selfId: () => string;
  /** This worker's current counts. */
  local: () => OnlineCounts;
}

/** Embedded mode: the one worker is the whole system. */
export class MemoryOnlineCounter implements OnlineCounter {
  readonly #local: () => OnlineCounts;

  constructor({ local }: Pick<LocalCounts, 'local'>) {
    this.#local = local;
  }

  start(): void {}

  async read(): Promise<OnlineCounts> {
    const { users, sessions } = this.#local();
    return { users, sessions };
  }

  async close(): Promise<void> {}
}
