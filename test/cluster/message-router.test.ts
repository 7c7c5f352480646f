// The cluster's message router on its own, with its peers and the session store played: a message
// whose recipient's sessions cannot be looked up (the session store failing, as right after a
// Redis Cluster failover) is delivered here and the other workers are told to read that user's
// inbox (PEER_NUDGE), rather than waiting for the user's next message to show a gap: after a
// failover to a lagging replica the next one may bear the number after a device's position while
// the dropped one reused a number it was sent.

import t from 'tap';
import { ClusterMessageRouter } from '../../src/cluster/cluster-message-router.js';
import { RouteCache } from '../../src/cluster/route-cache.js';
import type { WorkerRouter } from '../../src/cluster/worker-router.js';
import { SwitchboardError } from '../../src/errors.js';
import { silentLogger } from '../../src/log.js';
import { decodeMessage } from '../../src/protocol/codec.js';
import { HEADER_LENGTH } from '../../src/protocol/frame.js';
import { HeadType, type ImMessage } from '../../src/protocol/types.js';
import type { LocalPort } from '../../src/server/cluster-seam.js';
import type { SessionRecord, SessionStore } from '../../src/session/session-store.js';
import { until } from '../../testkit/wait.js';

function routerWith(byUser: (uid: string) => Promise<SessionRecord[]>) {
  const local: string[] = [];
  const nudged: string[] = [];
  const sent: { to: string; message: ImMessage; uid?: string }[] = [];
  const port: LocalPort = {
    nodeId: Promise.resolve('w1'),
    deliver: (uid, seq) => void local.push(`${uid}@${seq}`),
    deliverGroup: () => {},
    receipt: () => {},
    nudge: (uids) => void nudged.push(...(uids ?? ['*'])),
  };
  const decode = (frame: Buffer) => decodeMessage(frame.subarray(HEADER_LENGTH));
  const workers = {
    send: (nodeId: string, frame: Buffer, uid?: string) => void sent.push({ to: nodeId, message: decode(frame), uid }),
    broadcast: (frame: Buffer, uid?: string) => void sent.push({ to: '*', message: decode(frame), uid }),
    close: () => {},
  } as unknown as WorkerRouter;
  const store = { byUser } as unknown as SessionStore;
  const router = new ClusterMessageRouter({
    local: port,
    workers,
    routes: new RouteCache({ store, selfId: () => 'w1', ttlMs: 1_000, maxEntries: 100 }),
    selfId: () => 'w1',
    routeCacheTtlMs: 1_000,
    directory: { onRepublished: () => () => {} },
    log: silentLogger(),
  });
  t.teardown(() => router.close());
  return { router, local, nudged, sent };
}

t.test("a failed lookup of the recipient's sessions: delivered here, and every other worker is nudged for that user", async (t) => {
  const { router, local, sent } = routerWith(() => Promise.reject(new SwitchboardError('SB_ERR_STORE_UNAVAILABLE', 'session store unavailable: MOVED 4495 127.0.0.1:7001')));
  router.deliver('bob', 7, Buffer.from('body'), 1);
  t.same(local, ['bob@7'], "this worker's sessions get it");
  await until('the nudge is sent', () => sent.length > 0);
  t.same(
    sent.map(({ to, message, uid }) => ({ to, type: message.type, uids: message.peerNudge?.uids, uid })),
    [{ to: '*', type: HeadType.PEER_NUDGE, uids: ['bob'], uid: 'bob' }],
    'one PEER_NUDGE for bob to every peer (remembered for a link that is down)',
  );
});

t.test('a lookup that works: forwarded to the workers holding the sessions, nobody nudged', async (t) => {
  const { router, sent } = routerWith(async () => [{ sessionId: 's', uid: 'bob', deviceId: 'phone', nodeId: 'w2', platform: 0, loginAt: 0 }]);
  router.deliver('bob', 7, Buffer.from('body'), 1);
  await until('the forward is sent', () => sent.length > 0);
  t.same(
    sent.map(({ to, message }) => ({ to, type: message.type, seq: Number(message.peerDeliver?.seq) })),
    [{ to: 'w2', type: HeadType.PEER_DELIVER, seq: 7 }],
  );
});

// A resend found stored what a send answered as failed had stored (chat.ts, stored()): nothing
// delivered it, so every session of the recipient reads its inbox, wherever it is.
t.test("a nudge for a user: this worker's sessions, and one PEER_NUDGE to each worker holding any", async (t) => {
  const { router, nudged, sent } = routerWith(async () => [
    { sessionId: 's1', uid: 'bob', deviceId: 'phone', nodeId: 'w2', platform: 0, loginAt: 0 },
    { sessionId: 's2', uid: 'bob', deviceId: 'pad', nodeId: 'w3', platform: 0, loginAt: 0 },
    { sessionId: 's3', uid: 'bob', deviceId: 'desk', nodeId: 'w1', platform: 0, loginAt: 0 },
  ]);
  router.nudge('bob');
  t.same(nudged, ['bob'], "this worker's sessions read");
  await until('the nudges are sent', () => sent.length >= 2);
  t.same(
    sent.map(({ to, message, uid }) => ({ to, type: message.type, uids: message.peerNudge?.uids, uid })).sort((a, b) => a.to.localeCompare(b.to)),
    [
      { to: 'w2', type: HeadType.PEER_NUDGE, uids: ['bob'], uid: 'bob' },
      { to: 'w3', type: HeadType.PEER_NUDGE, uids: ['bob'], uid: 'bob' },
    ],
  );
});

t.test('a nudge whose lookup fails: every other worker is nudged for that user', async (t) => {
  const { router, nudged, sent } = routerWith(() => Promise.reject(new SwitchboardError('SB_ERR_STORE_UNAVAILABLE', 'session store unavailable')));
  router.nudge('bob');
  t.same(nudged, ['bob']);
  await until('the nudge is sent', () => sent.length > 0);
  t.same(
    sent.map(({ to, message }) => ({ to, type: message.type, uids: message.peerNudge?.uids })),
    [{ to: '*', type: HeadType.PEER_NUDGE, uids: ['bob'] }],
  );
});
