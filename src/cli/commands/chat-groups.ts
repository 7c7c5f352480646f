// The group side of `switchboard chat`: what a line asks for (parseChatLine), how a group's
// deliveries and membership events read (`[#team] bob: hi`, `[#team] * alice added bob`), the
// names of the user's groups (GroupDirectory: `#team` is the group named team, if only one of
// the user's groups is), and the commands that go to the gate's group API (/groups, /create,
// /add, /remove, /members, /leave). Kept apart from chat.ts so that each can be tested without
// a terminal.

import type { GroupEventMessage, GroupMessage } from '../../client/im-client.js';
import type { GateGroups } from '../../client/gate-groups.js';
import { isGroupId } from '../../groups/group-store.js';
import { SwitchboardError } from '../../errors.js';

export const CHAT_HELP = (
  [
    ['@user text', 'send to a user'],
    ['#group text', 'send to a group (its id, or the name of one of your groups)'],
    ['/groups', 'your groups: id, name, your role'],
    ['/create NAME [user...]', 'a new group, you its owner, with these members'],
    ['/add GROUP user...', 'add members (admins and the owner)'],
    ['/remove GROUP user...', 'remove members (admins and the owner)'],
    ['/members GROUP', 'who is in it'],
    ['/leave GROUP', 'leave it'],
    ['/list', 'your conversations and groups, most recent first, with unread counts'],
    ['/history USER|#GROUP [N]', 'the last N (20) messages with USER or in GROUP, then marks them read'],
    ['/read USER|#GROUP', 'marks the conversation with USER, or GROUP, read'],
    ['/readers #GROUP', 'how many members read the last message you sent GROUP from this chat'],
    ['/recall [USER]', 'recalls the last message you sent (to USER) from this chat'],
    ['/edit [@USER] TEXT', 'edits the last message you sent (to USER) from this chat to TEXT'],
    ['/help', 'this list'],
    ['/quit', 'log out (so does the end of input)'],
  ] as const
).map(([what, does]) => `${what.padEnd(24)}${does}`);

export type ChatLine =
  | { kind: 'empty' }
  | { kind: 'quit' }
  | { kind: 'help' }
  | { kind: 'direct'; to: string; text: string }
  | { kind: 'group'; group: string; text: string }
  | { kind: 'command'; name: GroupCommand; args: string[] }
  | { kind: 'conversation'; name: ConversationCommand; args: string[] }
  | { kind: 'bad'; reason: string };

/** The conversation commands (chat-conversations.ts runs them). */
export type ConversationCommand = 'list' | 'history' | 'read' | 'recall' | 'edit' | 'readers';

export type GroupCommand = 'groups' | 'create' | 'add' | 'remove' | 'members' | 'leave';

/** Each command's arguments: at least `min`, at most `max` (Infinity: a list of users). */
const COMMANDS: Record<GroupCommand | ConversationCommand, { min: number; max: number; usage: string }> = {
  list: { min: 0, max: 0, usage: '/list' },
  history: { min: 1, max: 2, usage: '/history USER|#GROUP [N]' },
  read: { min: 1, max: 1, usage: '/read USER|#GROUP' },
  readers: { min: 1, max: 1, usage: '/readers #GROUP' },
  recall: { min: 0, max: 1, usage: '/recall [USER]' },
  edit: { min: 1, max: Infinity, usage: '/edit [@USER] TEXT' },
  groups: { min: 0, max: 0, usage: '/groups' },
  create: { min: 1, max: Infinity, usage: '/create NAME [user...]' },
  add: { min: 2, max: Infinity, usage: '/add GROUP user...' },
  remove: { min: 2, max: Infinity, usage: '/remove GROUP user...' },
  members: { min: 1, max: 1, usage: '/members GROUP' },
  leave: { min: 1, max: 1, usage: '/leave GROUP' },
};

/** What a line of input asks for. */
export function parseChatLine(line: string): ChatLine {
  const text = line.trim();
  if (text === '') return { kind: 'empty' };
  if (text === '/quit') return { kind: 'quit' };
  if (text === '/help') return { kind: 'help' };
  const direct = /^@(\S+)\s+(.+)$/s.exec(text);
  if (direct) return { kind: 'direct', to: direct[1]!, text: direct[2]! };
  const group = /^#(\S+)\s+(.+)$/s.exec(text);
  if (group) return { kind: 'group', group: group[1]!, text: group[2]! };
  if (text.startsWith('/')) {
    const [word, ...args] = text.slice(1).split(/\s+/);
    const spec = Object.hasOwn(COMMANDS, word!) ? COMMANDS[word as GroupCommand | ConversationCommand] : undefined;
    if (!spec) return { kind: 'bad', reason: `unknown command /${word}: /help lists them` };
    if (args.length < spec.min || args.length > spec.max) return { kind: 'bad', reason: `usage: ${spec.usage}` };
    if (word === 'list' || word === 'history' || word === 'read' || word === 'recall' || word === 'readers') return { kind: 'conversation', name: word, args };
    // The text as typed, its spacing kept (the user, if named, is its first word).
    if (word === 'edit') return { kind: 'conversation', name: word, args: [text.slice('/edit'.length).trim()] };
    return { kind: 'command', name: word as GroupCommand, args };
  }
  return { kind: 'bad', reason: 'type "@user message" or "#group message" to send, "/help" for the commands, "/quit" to leave' };
}

/** `[#team] bob: hello`. */
export function formatGroupMessage(m: Pick<GroupMessage, 'group' | 'from' | 'content'>, name: string | undefined): string {
  return `[#${name ?? m.group}] ${m.from}: ${m.content}`;
}

/** `[#team] * alice added bob, carol`: the event said in words. */
export function formatGroupEvent(e: Pick<GroupEventMessage, 'group' | 'actor' | 'event'>, name: string | undefined): string {
  const { event } = e;
  const uids = (event.uids ?? []).join(', ');
  let what: string;
  switch (event.type) {
    case 'created':
      what = `created the group${event.name ? ` "${event.name}"` : ''}${uids ? ` with ${uids}` : ''}`;
      break;
    case 'added':
      what = `added ${uids}`;
      break;
    case 'removed':
      what = `removed ${uids}`;
      break;
    case 'left':
      what = 'left';
      break;
    case 'role':
      what = `made ${uids} ${event.role === 'admin' ? 'an admin' : 'a member'}`;
      break;
    case 'transferred':
      what = `handed the group over to ${uids}`;
      break;
    case 'updated':
      what = event.name !== undefined ? `renamed the group "${event.name}"` : "changed the group's details";
      break;
    case 'dissolved':
      what = 'dissolved the group';
      break;
    default:
      what = String((event as { type: unknown }).type);
  }
  return `[#${name ?? e.group}] * ${e.actor} ${what}`;
}

/** Group names asked of the gate at once by /groups. */
const NAME_LOOKUPS = 8;

interface Known {
  name: string;
  role: string | undefined;
}

/**
 * The names of the user's groups, learned from the gate (/groups) and from the events that
 * carry one (created, updated). Bounded by the user's groups (the server's --group-max-per-user)
 * and the groups it hears of.
 */
export class GroupDirectory {
  readonly #known = new Map<string, Known>();

  name(group: string): string | undefined {
    return this.#known.get(group)?.name;
  }

  learn(group: string, name: string, role?: string): void {
    const known = this.#known.get(group);
    this.#known.set(group, { name, role: role ?? known?.role });
  }

  /** What an event tells about its group's name. */
  heard(e: Pick<GroupEventMessage, 'group' | 'event'>): void {
    if ((e.event.type === 'created' || e.event.type === 'updated') && typeof e.event.name === 'string') this.learn(e.group, e.event.name);
  }

  /**
   * The group `ref` names: a group id as it is, else the one group of that name (exactly, or
   * else ignoring case). Undefined when none is known by that name; SB_ERR_BAD_GROUP when
   * several are (the ids say which).
   */
  resolve(ref: string): string | undefined {
    // (isGroupId narrows what it is given: a string that is not an id would be typed `never`.)
    if (isGroupId(ref as unknown)) return ref;
    const folded = ref.toLowerCase();
    const same = [(name: string) => name === ref, (name: string) => name.toLowerCase() === folded];
    for (const matching of same) {
      const matches: string[] = [];
      for (const [id, known] of this.#known) if (matching(known.name)) matches.push(id);
      if (matches.length === 1) return matches[0];
      if (matches.length > 1) throw new SwitchboardError('SB_ERR_BAD_GROUP', `${matches.length} of your groups are named "${ref}": use the id (${matches.join(', ')})`);
    }
    return undefined;
  }
}

/**
 * The group commands, through the gate's group API (undefined without --gate). Each returns the
 * lines to print; a refusal throws (the gate's code, or SB_ERR_BAD_GROUP for a name that is none
 * of the user's groups).
 */
export class GroupCommands {
  constructor(
    readonly api: GateGroups | undefined,
    readonly directory: GroupDirectory,
    /** A user name as typed, as the gate knows it (folded). */
    readonly user: (name: string) => string,
  ) {}

  /** The group `ref` names, asking the gate for the user's groups once when the name is unknown. */
  async resolve(ref: string): Promise<string> {
    const known = this.directory.resolve(ref);
    if (known !== undefined) return known;
    if (this.api) {
      await this.#refresh();
      const found = this.directory.resolve(ref);
      if (found !== undefined) return found;
    }
    throw new SwitchboardError('SB_ERR_BAD_GROUP', this.api ? `none of your groups is named "${ref}" (/groups lists them)` : `no group named "${ref}" known: use its id (names need --gate)`);
  }

  async run(name: GroupCommand, args: string[]): Promise<string[]> {
    const api = this.api;
    if (!api) throw new SwitchboardError('SB_ERR_BAD_REQUEST', `/${name} needs --gate: groups are managed through the gate`);
    switch (name) {
      case 'groups': {
        const groups = await this.#refresh();
        if (groups.length === 0) return ['* you are in no group (/create NAME makes one)'];
        return groups.map((g) => `* ${g.id}  #${g.name}  ${g.role}`);
      }
      case 'create': {
        const [groupName, ...members] = args;
        const group = await api.createGroup(groupName!, members.map(this.user));
        this.directory.learn(group.id, group.name, 'owner');
        return [`* created #${group.name} (${group.id}) with ${group.memberCount} member${group.memberCount === 1 ? '' : 's'}`];
      }
      case 'add':
      case 'remove': {
        const [ref, ...users] = args;
        const id = await this.resolve(ref!);
        const change = name === 'add' ? await api.addMembers(id, users.map(this.user)) : await api.removeMembers(id, users.map(this.user));
        const label = this.#label(id);
        if (change.seq === undefined) return [`* ${label}: nothing changed (${name === 'add' ? 'already members' : 'not members'})`];
        return [`* ${label}: ${name === 'add' ? 'added' : 'removed'} ${change.uids.join(', ')}`];
      }
      case 'members': {
        const id = await this.resolve(args[0]!);
        const lines: string[] = [];
        let after: string | undefined;
        // Every page, up to the server's largest group.
        for (let pages = 0; pages < 100; pages++) {
          const page = await api.members(id, after === undefined ? {} : { after });
          for (const m of page.members) lines.push(`* ${m.uid}  ${m.role}`);
          after = page.next;
          if (after === undefined) break;
        }
        return [`* ${this.#label(id)}: ${lines.length} member${lines.length === 1 ? '' : 's'}`, ...lines];
      }
      case 'leave': {
        const id = await this.resolve(args[0]!);
        await api.leave(id);
        return [`* you left ${this.#label(id)}`];
      }
    }
  }

  #label(id: string): string {
    const name = this.directory.name(id);
    return name === undefined ? id : `#${name}`;
  }

  /** The user's groups with their names (one GET each: the listing has ids and roles). */
  async #refresh(): Promise<{ id: string; name: string; role: string }[]> {
    const api = this.api!;
    const groups = await api.allGroups();
    const named: { id: string; name: string; role: string }[] = [];
    // A few at a time: a user may be in a thousand groups.
    for (let i = 0; i < groups.length; i += NAME_LOOKUPS) {
      const slice = groups.slice(i, i + NAME_LOOKUPS);
      named.push(...(await Promise.all(slice.map(async (g) => ({ ...g, name: (await api.getGroup(g.id)).name })))));
    }
    for (const g of named) this.directory.learn(g.id, g.name, g.role);
    return named;
  }
}
