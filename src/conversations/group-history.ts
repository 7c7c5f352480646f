// A page back through a group's log (PROTOCOL.md §14, "Groups in the chat list"): what HISTORY
// with `group` answers, over TCP and at the gate. Group seqs are dense (every seq is an entry),
// so a page back is one read forward from `before - limit`; the GroupStore decides what the
// user may read (from its joining, up to its departure).

import type { GroupStore } from '../groups/group-store.js';
import type { StoredMessage } from '../inbox/inbox-store.js';
import { groupEntryBody } from '../protocol/conversation-view.js';

export interface GroupHistoryPage {
  /** The entries as delivered in the group (messages, and events with `event`), ascending by seq. */
  entries: StoredMessage[];
  /** Older entries the user may read exist: ask again with `before` = entries[0].seq. */
  more: boolean;
  /** The group's lowest retained seq. */
  oldest: number;
  /** Entries the user could read were pruned by retention. */
  pruned: boolean;
}

export async function groupHistory(groups: GroupStore, group: string, uid: string, before: number, limit: number): Promise<GroupHistoryPage> {
  let last = before > 0 ? before - 1 : (await groups.read(group, uid, 0, 0)).head;
  let read = await groups.read(group, uid, Math.max(0, last - limit), Math.min(limit, last));
  // A `before` past what the user may read pages back from its last entry, as 0 does.
  if (read.head < last) {
    last = read.head;
    read = await groups.read(group, uid, Math.max(0, last - limit), Math.min(limit, last));
  }
  // The store returns at most its maxPageSize, from the oldest end: the page is the newest.
  const n = read.entries.length;
  if (n > 0 && n < Math.min(limit, last) && read.entries[n - 1]!.seq < last) read = await groups.read(group, uid, last - n, n);
  const entries = read.entries.filter((e) => e.seq <= last).map((e) => ({ seq: e.seq, storedAt: e.storedAt, body: Buffer.from(groupEntryBody(group, e)) }));
  const first = Math.max(read.joined, read.oldest);
  return { entries, more: entries.length > 0 && entries[0]!.seq > first, oldest: read.oldest, pruned: read.oldest > read.joined };
}
