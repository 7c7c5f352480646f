// How the workers learn that a group's log grew outside them: membership changes are made at the
// gate (HTTP API), which appends the event to the group's log and then publishes a GroupChange.
// Each worker's sessions of the group's members then read the log (the event is never carried
// here, only where to look), and sessions of members the change added join the group's fan-out.
// Messages sent by clients do not come this way: the worker that stored one forwards it to its
// peers itself (PEER_GROUP).
//
// At most once: a change lost here (a Redis reconnect) is read by the sessions at the group's
// next entry, or at once when the notifier reports `missed` (a subscription that was down).
// Embedded mode (gate and worker in one process) uses MemoryGroupNotifier; with --redis it is
// Redis pub/sub on one channel, `<prefix>groups`.

export interface GroupChange {
  group: string;
  /** The seq of the event that recorded the change. */
  seq: number;
  /** The members the change added (create, add): their sessions join the group's fan-out from `seq`. */
  added?: string[];
}

export interface GroupNotifierListener {
  change(change: GroupChange): void;
  /** Changes may have been lost (the subscription was down): every session re-reads its groups. */
  missed(): void;
}

export interface GroupNotifier {
  /** Tells every worker (this process's too). Never throws; a failure is logged. */
  publish(change: GroupChange): void;
  /** Starts listening; the returned function stops it. */
  subscribe(listener: GroupNotifierListener): () => void;
  close(): Promise<void>;
}

/** One process: changes go to this process's listeners, after the current tick. */
export class MemoryGroupNotifier implements GroupNotifier {
  readonly #listeners = new Set<GroupNotifierListener>();

  publish(change: GroupChange): void {
    const copy: GroupChange = { ...change, ...(change.added ? { added: [...change.added] } : {}) };
    setImmediate(() => {
      for (const listener of this.#listeners) listener.change(copy);
    });
  }

  subscribe(listener: GroupNotifierListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  async close(): Promise<void> {
    this.#listeners.clear();
  }
}
