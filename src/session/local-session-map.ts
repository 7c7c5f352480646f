// This worker's logged-in sessions, found by user id (for delivery) and by user + device (for
// replacement). The seed's static SessionMap, as an instance owned by one worker.

import type { LocalSession } from './local-session.js';

const NONE: readonly LocalSession[] = Object.freeze([]);

export class LocalSessionMap {
  readonly #byUser = new Map<string, LocalSession[]>();
  #size = 0;

  /** Number of sessions. */
  get size(): number {
    return this.#size;
  }

  /** Number of distinct users with at least one session. */
  get users(): number {
    return this.#byUser.size;
  }

  /** The user's sessions; an empty frozen array when there are none. Do not mutate. */
  byUser(uid: string): readonly LocalSession[] {
    return this.#byUser.get(uid) ?? NONE;
  }

  find(uid: string, deviceId: string): LocalSession | undefined {
    return this.#byUser.get(uid)?.find((s) => s.deviceId === deviceId);
  }

  add(session: LocalSession): void {
    const list = this.#byUser.get(session.uid);
    if (list) list.push(session);
    else this.#byUser.set(session.uid, [session]);
    this.#size++;
  }

  /** Removes exactly this session object; false when it is not (or no longer) in the map. */
  remove(session: LocalSession): boolean {
    const list = this.#byUser.get(session.uid);
    const i = list ? list.indexOf(session) : -1;
    if (!list || i < 0) return false;
    if (list.length === 1) this.#byUser.delete(session.uid);
    else list.splice(i, 1);
    this.#size--;
    return true;
  }

  /**
   * Every session. The worker's sweep walks them all once a second: unlike a generator (two
   * objects per session), this iterator hands out one result object, reused, so an idle worker
   * allocates next to nothing (and the collector can tell that it is idle and shrink the heap).
   */
  [Symbol.iterator](): IterableIterator<LocalSession> {
    const lists = this.#byUser.values();
    let list: LocalSession[] = [];
    let i = 0;
    const result: { done: false; value: LocalSession | undefined } = { done: false, value: undefined };
    const iterator: IterableIterator<LocalSession> = {
      next() {
        while (i >= list.length) {
          const next = lists.next();
          if (next.done) return { value: undefined, done: true };
          list = next.value;
          i = 0;
        }
        result.value = list[i++]!;
        return result as IteratorYieldResult<LocalSession>;
      },
      [Symbol.iterator]: () => iterator,
    };
    return iterator;
  }
}
