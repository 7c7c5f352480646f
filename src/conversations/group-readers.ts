// READERS (PROTOCOL.md §14, "Groups in the chat list"): the members' shared read positions, a
// page in byte order of their uids, and with a seq how many of the other members read up to it
// ("read by 3 of 9"). A user whose receipts are off shares no position and sees none, as with
// 1:1 receipts. Shared by the worker's CONVERSATION_REQUEST and the gate's HTTP route.

import { SwitchboardError } from '../errors.js';
import type { GroupStore, Page } from '../groups/group-store.js';

export interface ReadersAnswer {
  readers: { uid: string; readSeq: number }[];
  /** The uid to page on after; undefined at the end. */
  next: string | undefined;
  /** With a seq: how many other members read up to it; else undefined. */
  read: number | undefined;
  /** The other members: what `read` is out of. */
  of: number;
}

/** `sharing`: the asker's receipts setting. Refusals: SB_ERR_RECEIPTS_OFF, then the store's (not a member, ...). */
export async function groupReaders(groups: GroupStore, group: string, uid: string, sharing: boolean, page: Page, seq: number): Promise<ReadersAnswer> {
  if (!sharing) throw new SwitchboardError('SB_ERR_RECEIPTS_OFF', 'your receipts setting is off: you share no read positions and see none (PUT /api/settings)');
  const { readers, next } = await groups.readers(group, uid, page);
  if (seq > 0) {
    const count = await groups.readCount(group, uid, seq);
    return { readers, next, read: count.read, of: count.of };
  }
  return { readers, next, read: undefined, of: (await groups.get(group, uid)).memberCount - 1 };
}
