import t from 'tap';
import { MemoryGroupStore } from '../../src/groups/memory-group-store.js';
import { groupStoreConformance } from './group-store.conformance.js';

groupStoreConformance(
  t,
  async (limits, now) => new MemoryGroupStore(limits, now),
  async (store) => store,
);
