// The chat list with groups (PROTOCOL.md §14, "Groups in the chat list"): the user's 1:1
// conversations (the inbox's own list, kept O(1) per message) merged by last activity with the
// groups the user is a member of. A group's entry is not written per member on every message
// (that would cost O(members) per message); it is read when the list is: each of the user's
// groups' summary (last entry, read position, unread: O(log n) each, GroupStore.chatGroups) on
// every page, so a page costs O(groups of the user), at most maxGroupsPerUser (1 000). Shared by
// the worker's CONVERSATION_REQUEST and the gate's HTTP list.
//
// Paging is by an opaque cursor that holds both positions: the 1:1 list's `before` and the last
// group shown (its last activity and id). Each side pages on in its own order; the page is the
// newest `limit` of both.

import { SwitchboardError } from '../errors.js';
import type { GroupStore, GroupSummary } from '../groups/group-store.js';
import type { ConversationEntry, InboxStore } from '../inbox/inbox-store.js';

export type ListedEntry = { kind: 'peer'; entry: ConversationEntry; lastAt: number } | { kind: 'group'; summary: GroupSummary; lastAt: number };

export interface ChatListPage {
  /** Most recent activity first, at most `limit`. */
  entries: ListedEntry[];
  /** The cursor of the page after the first `n` entries ('' when nothing follows them). */
  cursorAfter(n: number): string;
  /** Groups whose summaries were read for this page (all the user's, unless the groups were done). */
  groupsRead: number;
}

// "<before>~<at>.<group id>": the 1:1 list's `before` (0: from the newest) or x when done; the
// last group shown, nothing before the first page's, x when done.
const CURSOR = /^(x|0|[1-9][0-9]{0,15})~(?:(x)|([0-9]{1,16})\.(g[a-z2-7]{12}))?$/;

interface Cursor {
  /** undefined: the 1:1 list is done. */
  before: number | undefined;
  /** undefined: the groups are done; null: from the first. */
  group: { at: number; id: string } | null | undefined;
}

function parseCursor(cursor: string): Cursor {
  if (cursor === '') return { before: 0, group: null };
  const m = CURSOR.exec(cursor);
  if (!m) throw new SwitchboardError('SB_ERR_BAD_REQUEST', 'cursor is not a next_cursor this server gave');
  return {
    before: m[1] === 'x' ? undefined : Number(m[1]),
    group: m[2] === 'x' ? undefined : m[3] === undefined ? null : { at: Number(m[3]), id: m[4]! },
  };
}

/** Newer first; the same time: by id. */
function newerGroup(a: { lastAt: number; id: string }, b: { lastAt: number; id: string }): number {
  return b.lastAt - a.lastAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}

export async function chatList(inbox: InboxStore, groups: GroupStore, uid: string, cursor: string, limit: number): Promise<ChatListPage> {
  const at = parseCursor(cursor);
  const peers = at.before === undefined ? { conversations: [], more: false } : await inbox.conversations(uid, at.before, limit);
  const listed = at.group === undefined ? [] : await groups.chatGroups(uid);
  const from = at.group;
  const rest = listed
    .map((summary) => ({ summary, id: summary.id, lastAt: summary.last?.storedAt ?? 0 }))
    .filter((g) => !from || g.lastAt < from.at || (g.lastAt === from.at && g.id > from.id))
    .sort(newerGroup);
  const entries: ListedEntry[] = [];
  let i = 0;
  let j = 0;
  while (entries.length < limit && (i < peers.conversations.length || j < rest.length)) {
    const peer = peers.conversations[i];
    if (peer !== undefined && (j >= rest.length || peer.lastAt >= rest[j]!.lastAt)) {
      entries.push({ kind: 'peer', entry: peer, lastAt: peer.lastAt });
      i++;
    } else {
      const g = rest[j++]!;
      entries.push({ kind: 'group', summary: g.summary, lastAt: g.lastAt });
    }
  }
  const cursorAfter = (n: number): string => {
    let shownPeers = 0;
    let lastPeer: ConversationEntry | undefined;
    let shownGroups = 0;
    let lastGroup: ListedEntry | undefined;
    for (const e of entries.slice(0, n)) {
      if (e.kind === 'peer') {
        shownPeers++;
        lastPeer = e.entry;
      } else {
        shownGroups++;
        lastGroup = e;
      }
    }
    const peerDone = at.before === undefined || (shownPeers === peers.conversations.length && !peers.more);
    const groupsDone = at.group === undefined || shownGroups === rest.length;
    if (peerDone && groupsDone) return '';
    const before = peerDone ? 'x' : String(lastPeer ? lastPeer.lastSeq : at.before);
    let group: string;
    if (groupsDone) group = 'x';
    else if (lastGroup && lastGroup.kind === 'group') group = `${lastGroup.lastAt}.${lastGroup.summary.id}`;
    else group = at.group ? `${at.group.at}.${at.group.id}` : '';
    return `${before}~${group}`;
  };
  return { entries, cursorAfter, groupsRead: listed.length };
}
