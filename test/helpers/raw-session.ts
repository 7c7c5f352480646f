// A tap test's raw sessions: testkit/raw-client.ts clients destroyed on teardown, logged in, and an
// assertion that nothing more is delivered.

import type { Test } from 'tap';
import { RawClient, seqs, type ConnectOptions, type SyncOptions } from '../../testkit/raw-client.js';

/** Connects a RawClient that the test destroys on teardown. */
export async function connect(t: { teardown(fn: () => unknown): void }, port: number, options: ConnectOptions = {}): Promise<RawClient> {
  const client = await RawClient.connect(port, options);
  t.teardown(() => client.destroy());
  return client;
}

/** Connects and logs in; throws when the server refuses. The LoginResponse is `client.loginResponse`. */
export async function connectLoggedIn(
  t: { teardown(fn: () => unknown): void },
  port: number,
  uid: string,
  token: string,
  deviceId = 'dev-1',
  options: ConnectOptions & SyncOptions = {},
): Promise<RawClient> {
  const { acks, lastSeq, inboxEpoch, groups, ownCopies, noReplay, receipts, inboxEvents, ...socketOptions } = options;
  const client = await connect(t, port, socketOptions);
  const response = await client.login(uid, token, deviceId, { acks, lastSeq, inboxEpoch, groups, ownCopies, noReplay, receipts, inboxEvents });
  if (!response.loginResponse?.result) {
    throw new Error(`login of ${uid}/${deviceId} refused: ${JSON.stringify(response.loginResponse)}`);
  }
  return client;
}

/** Asserts that `client` has no delivery waiting now, nor in flight before a round trip. */
export async function nothingMoreDelivered(t: Test, client: RawClient, what: string): Promise<void> {
  await client.roundTrip();
  t.same(seqs(client.takeDeliveries()), [], what);
}
