// The in-memory UserStore against the shared UserStore conformance suite.

import t from 'tap';
import { MemoryUserStore } from '../../src/users/memory-user-store.js';
import { userStoreConformance } from './user-store.conformance.js';

userStoreConformance(t, async () => new MemoryUserStore());

t.test('close empties the store', async (t) => {
  const store = new MemoryUserStore();
  await store.create({ username: 'alice', passwordHash: 'h', createdAt: 1 });
  await store.close();
  t.equal(await store.get('alice'), undefined);
  t.equal(await store.count(), 0);
});
