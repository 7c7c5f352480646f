import t from 'tap';
import { MemoryInboxStore } from '../../src/inbox/memory-inbox-store.js';
import { inboxStoreConformance } from './inbox-store.conformance.js';

inboxStoreConformance(t, async (limits) => new MemoryInboxStore(limits));
