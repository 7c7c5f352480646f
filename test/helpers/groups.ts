// Groups in a cluster test: changes made the way the gate makes them (the GroupStore on the
// cluster's Redis, then GroupNotifier.publish over Redis pub/sub, src/groups/*), and SDK devices
// logged in with `groups` that record every group delivery they are shown, from before their
// login on (a replay can arrive in the same chunk as the LOGIN_RESPONSE).

import type { Test } from 'tap';
import type { GroupEventMessage, GroupMessage } from '../../src/client/im-client.js';
import { RedisGroupNotifier } from '../../src/groups/redis-group-notifier.js';
import { RedisGroupStore } from '../../src/groups/redis-group-store.js';
import { silentLogger } from '../../src/log.js';
import { DEFAULT_WAIT_MS, until } from '../../testkit/wait.js';
import type { ClientOptions, TestClient, TestCluster, WorkerProcess } from './cluster.js';

/** One group delivery as shown: a message (its content) or an event (its type). */
export interface Shown {
  seq: number;
  from: string;
  /** A message's content; an event's type prefixed with '#', e.g. '#added'. */
  what: string;
  event?: GroupEventMessage['event'];
}

/** Every group delivery a client was shown, per group, in arrival order. */
export class GroupReceived {
  readonly #byGroup = new Map<string, Shown[]>();

  constructor(readonly client: TestClient) {
    client.on('groupMessage', (m: GroupMessage) => this.#push(m.group, { seq: m.seq, from: m.from, what: m.content }));
    client.on('groupEvent', (e: GroupEventMessage) => this.#push(e.group, { seq: e.seq, from: e.actor, what: `#${e.event.type}`, event: e.event }));
  }

  of(group: string): Shown[] {
    return this.#byGroup.get(group) ?? [];
  }

  seqs(group: string): number[] {
    return this.of(group).map((s) => s.seq);
  }

  /** `seq:what` per delivery: '1:#created', '2:hello'. */
  summary(group: string): string[] {
    return this.of(group).map((s) => `${s.seq}:${s.what}`);
  }

  /** Waits until `count` deliveries of `group` have been shown. */
  async atLeast(group: string, count: number, withinMs = DEFAULT_WAIT_MS): Promise<Shown[]> {
    const who = `${this.client.uid}/${this.client.deviceId}`;
    await until(() => `${who} shown ${count} deliveries of ${group} (has ${this.of(group).length}: ${this.summary(group).join(' ')})`, () => this.of(group).length >= count, withinMs);
    return this.of(group);
  }

  #push(group: string, shown: Shown): void {
    let list = this.#byGroup.get(group);
    if (!list) this.#byGroup.set(group, (list = []));
    list.push(shown);
  }
}

/** An SDK device logged in with groups, and what it is shown. */
export interface GroupDevice {
  client: TestClient;
  got: GroupReceived;
}

/** `uid`'s device `deviceId` on `worker`, logged in with groups (unless connect: false); closed on teardown. */
export async function groupDevice(cluster: TestCluster, worker: WorkerProcess, uid: string, deviceId: string, options: ClientOptions = {}): Promise<GroupDevice> {
  const client = await cluster.client(worker, uid, deviceId, { groups: true, ...options, connect: false });
  const got = new GroupReceived(client);
  if (options.connect !== false) await client.connect();
  return { client, got };
}

/**
 * What the gate does to groups, from the test process: the store (same Redis and key prefix as
 * the workers, default "sb:") and, after each change that appended an event, the notifier.
 */
export class GroupAdmin {
  readonly store: RedisGroupStore;
  readonly notifier: RedisGroupNotifier;

  constructor(t: Test, redisUrl: string) {
    this.store = new RedisGroupStore({ url: redisUrl });
    this.notifier = new RedisGroupNotifier({ url: redisUrl, log: silentLogger() });
    t.teardown(() => Promise.all([this.store.close(), this.notifier.close()]));
  }

  async create(owner: string, members: string[], name = 'team'): Promise<string> {
    const group = await this.store.create(owner, name, members);
    this.notifier.publish({ group: group.id, seq: group.head, added: [owner, ...members] });
    return group.id;
  }

  async add(group: string, actor: string, uids: string[]): Promise<number> {
    const change = await this.store.addMembers(group, actor, uids);
    if (change.seq === undefined) throw new Error(`adding ${uids.join(', ')} to ${group} changed nothing`);
    this.notifier.publish({ group, seq: change.seq, added: change.uids });
    return change.seq;
  }

  async remove(group: string, actor: string, uids: string[]): Promise<number> {
    const change = await this.store.removeMembers(group, actor, uids);
    if (change.seq === undefined) throw new Error(`removing ${uids.join(', ')} from ${group} changed nothing`);
    this.notifier.publish({ group, seq: change.seq });
    return change.seq;
  }

  /** The group's head as `uid` (a member) reads it. */
  async head(group: string, uid: string): Promise<number> {
    return (await this.store.get(group, uid)).head;
  }

  /** Waits until `uid`'s `deviceId` has a saved position of at least `seq` in `group`. */
  async savedAtLeast(group: string, uid: string, deviceId: string, seq: number): Promise<void> {
    await until(`${uid}/${deviceId} saved a position ≥ ${seq} in ${group}`, async () => ((await this.store.cursor(group, uid, deviceId)) ?? 0) >= seq);
  }
}
