// The in-memory SessionStore against the shared SessionStore conformance suite.

import t from 'tap';
import { MemorySessionStore } from '../../src/session/memory-session-store.js';
import { sessionStoreConformance } from './session-store.conformance.js';

sessionStoreConformance(t, async (options) => new MemorySessionStore(options));

t.test('close empties the store', async (t) => {
  const store = new MemorySessionStore();
  await store.add({ sessionId: 's1', uid: 'alice', deviceId: 'd1', nodeId: 'n1', platform: 0, loginAt: 1 });
  await store.close();
  t.same(await store.byUser('alice'), []);
});
