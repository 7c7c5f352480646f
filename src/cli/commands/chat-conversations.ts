// `switchboard chat`'s conversation commands, through the worker connection (PROTOCOL.md §14):
// /list prints the chat list with unread counts, /history USER [N] the last messages of one
// conversation (and marks them read: they were shown), /read USER marks it read up to its last
// message, /recall [USER] recalls the last message this chat sent (to USER), /edit [@USER] TEXT
// edits it. Each returns the lines to print; a refusal throws the server's code.

import type { ConversationSummary, ImClient, IncomingMessage } from '../../client/im-client.js';
import { SwitchboardError } from '../../errors.js';

export type ConversationCommand = 'list' | 'history' | 'read' | 'recall' | 'edit';

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

  constructor(
    readonly client: ImClient,
    /** A user name as typed, as the server knows it. */
    readonly user: (name: string) => string,
    /** How a message prints (the chat's own format). */
    readonly formatMessage: (m: IncomingMessage) => string,
  ) {}

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
        const { conversations, nextBefore } = await this.client.conversations({ limit: LIST_SHOWN });
        if (conversations.length === 0) return ['* no conversations yet'];
        const lines = conversations.map(formatListEntry);
        if (nextBefore !== 0) lines.push(`* older conversations not shown (the ${LIST_SHOWN} most recent)`);
        return lines;
      }
      case 'history': {
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
        const peer = this.user(args[0]!);
        // Past the last message: the server takes it as the last one.
        const mark = await this.client.markRead(peer, Number.MAX_SAFE_INTEGER);
        return [`* ${peer}: read up to #${mark.readSeq}, ${mark.unread} unread`];
      }
    }
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

function oneLine(text: string): string {
  return text.replace(/\s+/g, ' ');
}
