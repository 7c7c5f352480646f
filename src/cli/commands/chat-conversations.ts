// `switchboard chat`'s conversation commands, through the worker connection (PROTOCOL.md §14):
// /list prints the chat list, groups included, with unread counts, /history USER|#GROUP [N] the
// last messages of one conversation (and marks them read: they were shown), /read USER|#GROUP
// marks it read up to its last message, /recall [USER] recalls the last message this chat sent
// (to USER), /edit [@USER] TEXT edits it, /readers #GROUP how many members read the last message this chat sent there. Each
// returns the lines to print; a refusal throws the server's code.

import type { ChatListEntry, ConversationSummary, ImClient, IncomingMessage } from '../../client/im-client.js';
import { SwitchboardError } from '../../errors.js';
import { formatGroupEvent, formatGroupMessage, type ConversationCommand, type GroupDirectory } from './chat-groups.js';

export type { ConversationCommand };

/** How /history, /read and /readers find a group named `#name` (the chat's GroupCommands and GroupDirectory). */
export interface GroupNames {
  resolve(ref: string): Promise<string>;
  directory: GroupDirectory;
}

/** Conversations /list prints: the most recent ones. */
export const LIST_SHOWN = 20;
/** Messages /history prints unless told how many; at most HISTORY_MAX. */
export const HISTORY_SHOWN = 20;
export const HISTORY_MAX = 100;
/** Peers whose last message from this chat /recall and /edit remember (the oldest forgotten first). */
const MAX_REMEMBERED = 10_000;

export class ConversationCommands {
  /** The msg_id of the last message this chat sent each peer, most recent last. */
  readonly #lastSent = new Map<string, string>();
  /** The seq of the last message this chat sent each group, most recent last. */
  readonly #lastInGroup = new Map<string, number>();

  constructor(
    readonly client: ImClient,
    /** A user name as typed, as the server knows it. */
    readonly user: (name: string) => string,
    /** How a message prints (the chat's own format). */
    readonly formatMessage: (m: IncomingMessage) => string,
    readonly groups?: GroupNames,
  ) {}

  /** This chat sent `group` a message, stored as its seq `seq`: what /readers asks about. */
  sentToGroup(group: string, seq: number): void {
    this.#lastInGroup.delete(group);
    if (this.#lastInGroup.size >= MAX_REMEMBERED) this.#lastInGroup.delete(this.#lastInGroup.keys().next().value!);
    this.#lastInGroup.set(group, seq);
  }

  /** This chat sent `peer` the message `msgId` (it was stored): what /recall takes back and /edit changes. */
  sent(peer: string, msgId: string): void {
    this.#lastSent.delete(peer);
    if (this.#lastSent.size >= MAX_REMEMBERED) this.#lastSent.delete(this.#lastSent.keys().next().value!);
    this.#lastSent.set(peer, msgId);
  }

  async run(name: ConversationCommand, args: string[]): Promise<string[]> {
    switch (name) {
      case 'recall': {
        const { peer, msgId } = this.#last(args[0], 'recall');
        const { seq } = await this.client.recall(peer, msgId);
        this.#lastSent.delete(peer);
        return [`* recalled your last message to ${peer} (${peer} #${seq})`];
      }
      case 'edit': {
        const { user, text } = editArgs(args[0]!, (name) => this.#lastSent.has(this.user(name)));
        const { peer, msgId } = this.#last(user, 'edit');
        const { seq } = await this.client.edit(peer, msgId, text);
        return [`* edited your last message to ${peer} (${peer} #${seq})`];
      }
      case 'list': {
        const { entries, nextCursor } = await this.client.chatList({ limit: LIST_SHOWN });
        if (entries.length === 0) return ['* no conversations yet'];
        for (const e of entries) if (e.group) this.groups?.directory.learn(e.group, e.name);
        const lines = entries.map((e) => (e.group ? formatGroupListEntry(e) : formatListEntry(e)));
        if (nextCursor !== '') lines.push(`* older conversations not shown (the ${LIST_SHOWN} most recent)`);
        return lines;
      }
      case 'readers': {
        const group = await this.#group(args[0]!);
        const seq = this.#lastInGroup.get(group);
        if (seq === undefined) throw new SwitchboardError('SB_ERR_NO_MESSAGE', `this chat has sent ${args[0]} nothing yet`);
        const { readCount, memberCount } = await this.client.groupReaders(group, { seq, limit: 1 });
        return [`* your last message to ${args[0]} (#${seq}): read by ${readCount} of ${memberCount}`];
      }
      case 'history': {
        if (args[0]!.startsWith('#')) return this.#groupHistory(args[0]!, args[1]);
        const peer = this.user(args[0]!);
        const count = args[1] === undefined ? HISTORY_SHOWN : Number(args[1]);
        if (!Number.isInteger(count) || count < 1 || count > HISTORY_MAX) throw new SwitchboardError('SB_ERR_BAD_REQUEST', `the count must be 1 to ${HISTORY_MAX}, got ${args[1]}`);
        const page = await this.client.history(peer, { limit: count });
        if (page.messages.length === 0) return [`* no messages with ${peer}${page.pruned ? ' (older ones were pruned by retention)' : ''}`];
        const lines: string[] = [];
        if (page.nextBefore !== 0) lines.push(`* … older messages with ${peer}: /history ${peer} ${HISTORY_MAX}`);
        else if (page.pruned) lines.push('* (older messages were pruned by retention)');
        lines.push(...page.messages.map(this.formatMessage));
        // What was shown is read.
        await this.#markRead(peer, page.messages.at(-1)!.seq);
        return lines;
      }
      case 'read': {
        if (args[0]!.startsWith('#')) {
          const mark = await this.client.markGroupRead(await this.#group(args[0]!), Number.MAX_SAFE_INTEGER);
          return [`* ${args[0]}: read up to #${mark.readSeq}, ${mark.unread} unread`];
        }
        const peer = this.user(args[0]!);
        // Past the last message: the server takes it as the last one.
        const mark = await this.client.markRead(peer, Number.MAX_SAFE_INTEGER);
        return [`* ${peer}: read up to #${mark.readSeq}, ${mark.unread} unread`];
      }
    }
  }

  async #groupHistory(ref: string, n: string | undefined): Promise<string[]> {
    const group = await this.#group(ref);
    const count = n === undefined ? HISTORY_SHOWN : Number(n);
    if (!Number.isInteger(count) || count < 1 || count > HISTORY_MAX) throw new SwitchboardError('SB_ERR_BAD_REQUEST', `the count must be 1 to ${HISTORY_MAX}, got ${n}`);
    const page = await this.client.groupHistory(group, { limit: count });
    if (page.entries.length === 0) return [`* nothing in ${ref}${page.pruned ? ' (older entries were pruned by retention)' : ''}`];
    const name = this.groups?.directory.name(group);
    const lines: string[] = [];
    if (page.nextBefore !== 0) lines.push(`* … older entries of ${ref}: /history ${ref} ${HISTORY_MAX}`);
    else if (page.pruned) lines.push('* (older entries were pruned by retention)');
    lines.push(...page.entries.map((e) => ('event' in e ? formatGroupEvent(e, name) : formatGroupMessage(e, name))));
    // What was shown is read.
    await this.client.markGroupRead(group, page.entries.at(-1)!.seq);
    return lines;
  }

  /** `#name` or `#<group id>` as a group id. */
  async #group(ref: string): Promise<string> {
    const name = ref.startsWith('#') ? ref.slice(1) : ref;
    if (!this.groups) throw new SwitchboardError('SB_ERR_BAD_GROUP', `no group named "${name}" known`);
    return this.groups.resolve(name);
  }

  /** The last message sent to `user`, or to anyone. */
  #last(user: string | undefined, what: string): { peer: string; msgId: string } {
    const peer = user === undefined ? [...this.#lastSent.keys()].at(-1) : this.user(user);
    const msgId = peer === undefined ? undefined : this.#lastSent.get(peer);
    if (peer === undefined || msgId === undefined) throw new SwitchboardError('SB_ERR_NO_MESSAGE', user === undefined ? `this chat has sent nothing to ${what}` : `this chat has sent ${peer} nothing to ${what}`);
    return { peer, msgId };
  }

  async #markRead(peer: string, seq: number): Promise<void> {
    await this.client.markRead(peer, seq).catch((err: unknown) => {
      // Retention may have aged the conversation out between the two requests: nothing to mark.
      if (!(err instanceof SwitchboardError && err.code === 'SB_ERR_NO_CONVERSATION')) throw err;
    });
  }
}

/**
 * What `/edit` was given: `@USER TEXT`, or `USER TEXT` where USER is someone this chat sent to
 * (`sentTo`), names the user; anything else is all TEXT, for the last message sent to anyone.
 */
export function editArgs(line: string, sentTo: (name: string) => boolean): { user: string | undefined; text: string } {
  const [, first, rest] = /^(\S+)\s+(\S[\s\S]*)$/.exec(line) ?? [];
  if (first === undefined || rest === undefined) return { user: undefined, text: line };
  if (first.startsWith('@') && first.length > 1) return { user: first.slice(1), text: rest };
  return sentTo(first) ? { user: first, text: rest } : { user: undefined, text: line };
}

/** `alice  2 unread  [12:01:03] alice: lunch?`, the preview on one line. */
export function formatListEntry(c: ConversationSummary): string {
  const unread = c.unread > 0 ? `${c.unread} unread` : 'read';
  const last = c.last ? `${c.last.own ? 'me' : c.last.from}: ${oneLine(c.last.content)}${c.truncated ? '…' : ''}${c.last.edited ? ' (edited)' : ''}` : '(its last message was pruned)';
  return `* ${c.peer}  ${unread}  ${last}`;
}

/** `#climbing  2 unread  alice: at 6?`: a group's entry of the list. */
export function formatGroupListEntry(e: ChatListEntry): string {
  const unread = e.unread > 0 ? `${e.unread} unread` : 'read';
  const last = e.lastGroupEntry;
  let shown: string;
  if (last === undefined) shown = '(its last entry was pruned)';
  else if ('event' in last) shown = formatGroupEvent(last, e.name).slice(`[#${e.name}] `.length);
  else shown = `${last.from}: ${oneLine(last.content)}${e.truncated ? '…' : ''}`;
  return `* #${e.name || e.group}  ${unread}  ${shown}`;
}

function oneLine(text: string): string {
  return text.replace(/\s+/g, ' ');
}
