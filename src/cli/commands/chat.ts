// `switchboard chat`: a terminal client. `@bob hello` sends, `#team hello` sends to a group,
// incoming messages print as they arrive (and what you send from another device, as `me → bob`),
// `/quit` or the end of input logs out once what was sent is stored. With --gate it logs in with a
// password through the HTTP gate (registering first with --register), goes to the worker the gate
// names, and manages groups through the gate's group API with the login's token (/groups, /create,
// /add, /remove, /members, /leave: chat-groups.ts); /list, /history and /read show and mark the
// conversations through the worker, and /recall and /edit take back or change what it sent
// (chat-conversations.ts).
// Over TLS (--tls, or with --gate when the gate names the worker's TLS port) the worker's
// certificate is verified against --ca (else Node's CA list) and its name (--servername, else
// the host dialed); an https:// gate is verified against --ca too.
// Input may be piped: lines read before the login
// are queued and sent, and output that is not a terminal gets plain lines (no prompt, no escape
// codes).

import readline from 'node:readline';
import { TokenSigner, DEV_SECRET } from '../../auth/token.js';
import { ImClient, defaultRetryStrategy, type ImClientOptions, type IncomingMessage } from '../../client/im-client.js';
import { gateFailure, registerThroughGate } from '../../client/gate-login.js';
import { gateEndpoint, type GateSession } from '../../client/gate-session.js';
import { GateGroups } from '../../client/gate-groups.js';
import { ConversationCommands } from './chat-conversations.js';
import { CHAT_HELP, GroupCommands, GroupDirectory, formatGroupEvent, formatGroupMessage, parseChatLine } from './chat-groups.js';
import { SwitchboardError, isSwitchboardError } from '../../errors.js';
import { PORT, parseOptions, usage, type OptionSpecs, type OptionValues } from '../options.js';
import { SECRET_OPTION } from '../common.js';
import { normalizeUsername } from '../../auth/password.js';
import { readPemFile } from '../../net/tls-files.js';

const OPTIONS = {
  user: { type: 'string', description: 'your user id (required)' },
  host: { type: 'string', description: 'worker address', default: '127.0.0.1' },
  port: { ...PORT, description: 'worker port', default: 9000 },
  device: { type: 'string', description: 'device id: the chat resumes where this device left off', default: 'cli' },
  token: { type: 'string', secret: true, description: 'login token; unset: minted locally with --secret' },
  gate: { type: 'string', description: 'gate URL (e.g. http://127.0.0.1:8080): log in with a password instead of a token' },
  password: { type: 'string', secret: true, description: 'with --gate: the password (unset: asked for on a terminal, else the first line of input)' },
  register: { type: 'boolean', description: 'with --gate: create the account first (asks for the password twice; a name taken by your own account is logged in to)' },
  tls: { type: 'boolean', description: "connect over TLS: --port is the worker's TLS port; with --gate, only to a worker with a TLS port (without --tls: TLS whenever the gate names one)" },
  ca: { type: 'string', description: "PEM file of the CA the worker's (and an https:// gate's) certificate must be issued by; unset: Node's CA list" },
  servername: { type: 'string', description: "name the worker's certificate must carry; default the host dialed" },
  ...SECRET_OPTION,
} as const satisfies OptionSpecs;

const SUMMARY = `Chat: "@bob hello" sends to bob, "#team hello" to a group, "/quit" or the end of input logs out. Input may be piped.
Typed in the chat:
${CHAT_HELP.map((line) => `  ${line}`).join('\n')}
Group commands (/groups ...) need --gate; /list, /history, /read, /recall and /edit work either way.`;

/** Sends written and not yet answered: the SDK's queue (1000) stays well below its bound. */
const MAX_IN_FLIGHT = 100;
/** Peers whose receipts the chat remembers the last printed of (the oldest forgotten first). */
const MAX_MARKED_PEERS = 10_000;
/** Lines read and not yet sent before input is paused (piped input can be any size). */
const MAX_QUEUED_LINES = 1000;

type ChatValues = OptionValues<typeof OPTIONS>;

export async function chatCommand(argv: string[]): Promise<void> {
  const o = parseOptions(OPTIONS, argv);
  if (o.help) {
    process.stdout.write(usage('chat', SUMMARY, OPTIONS));
    return;
  }
  if (!o.user) throw new SwitchboardError('SB_ERR_CONFIG', '--user is required');
  const user = o.user;
  const deviceId = o.device;
  const terminal = process.stdin.isTTY === true && process.stdout.isTTY === true;
  // On a terminal the password is read before readline takes over the input, so it is not
  // echoed; piped input keeps one reader, so no line is lost between two of them.
  let typedPassword: string | undefined;
  if (o.gate && o.password === undefined && process.stdin.isTTY) {
    typedPassword = o.register ? await askNewPassword(askHidden, (line) => process.stdout.write(`${line}\n`)) : await askHidden('password: ');
  }
  const rl = readline.createInterface({ input: process.stdin, output: terminal ? process.stdout : undefined, terminal, prompt: `${user}> ` });
  const out = new ChatOutput(rl, terminal);
  // From the first line on, before the connection is up: piped lines arrive at once.
  const lines = new LineQueue(rl);
  let login: ChatLogin;
  try {
    login = await chatLogin(o, user, typedPassword, lines, out);
  } catch (err) {
    lines.abandon();
    throw err;
  }
  const { uid, taken } = login;
  const directory = new GroupDirectory();
  const { client, ended } = chatClient(login, deviceId, out, directory);
  const userName = o.gate ? (name: string) => normalizeUsername(name) ?? name : (name: string) => name;
  const commands = new GroupCommands(login.groups, directory, userName);
  const conversations = new ConversationCommands(client, userName, (m) => formatMessage(m), { resolve: (ref) => commands.resolve(ref), directory });
  const sender = new Sender(client, lines, out, userName, commands, conversations);
  try {
    await client.connect().catch((err: unknown) => {
      if (taken && isSwitchboardError(err) && err.code === 'SB_ERR_LOGIN_FAILED') {
        throw new SwitchboardError('SB_ERR_USERNAME_TAKEN', `the name ${uid} is taken by another account (this password is not its password): choose another --user`);
      }
      throw err;
    });
    out.prompt();
    await Promise.race([sender.run(), ended]);
  } catch (err) {
    lines.abandon();
    client.close();
    out.end();
    throw err;
  }
  lines.abandon();
  await client.logout();
  // The login's refresh token dies with this process: end it at the gate too (best effort).
  await login.session?.logout().catch(() => {});
  out.end();
  if (sender.failed > 0) throw new SwitchboardError(sender.firstFailure!, `${sender.failed} of ${sender.failed + sender.stored} messages were not sent`);
}

/** Where the client connects and as whom. */
interface ChatLogin {
  where: Pick<ImClientOptions, 'host' | 'port' | 'token' | 'endpoint' | 'tls'>;
  uid: string;
  /** --register found the name taken: a refused login means it is someone else's account. */
  taken: boolean;
  /** With --gate: the gate's group API, with the access token of the gate login. */
  groups?: GateGroups;
  /** With --gate, once logged in: the login at the gate, ended when the chat ends. */
  session?: GateSession;
}

/**
 * With --gate: the password (the option, typed, or the first line of input), registering first
 * with --register, and the gate as the endpoint. Else the worker's address and a token.
 */
async function chatLogin(o: ChatValues, user: string, typedPassword: string | undefined, lines: LineQueue, out: ChatOutput): Promise<ChatLogin> {
  const ca = o.ca === undefined ? undefined : readPemFile(o.ca, 'CA');
  // Used for every TLS connection, and only for those: a plain one ignores it.
  const tls = { ...(ca ? { ca } : {}), ...(o.servername ? { servername: o.servername } : {}) };
  if (!o.gate) {
    const token = o.token ?? new TokenSigner(o.secret ?? DEV_SECRET).mint({ uid: user, deviceId: o.device, ttlMs: 86_400_000 });
    return { where: { host: o.host, port: o.port, token, ...(o.tls ? { tls } : {}) }, uid: user, taken: false };
  }
  const gate = ca ? { url: o.gate, ca } : o.gate;
  const password = o.password ?? typedPassword ?? (await lines.first());
  if (password === undefined) throw new SwitchboardError('SB_ERR_CONFIG', 'no password: give --password, or the password as the first line of input');
  const uid = user.toLowerCase();
  let taken = false;
  if (o.register) {
    try {
      await registerThroughGate(gate, user, password);
      out.line(`* registered ${uid}`);
    } catch (err) {
      if (!isSwitchboardError(err) || err.code !== 'SB_ERR_USERNAME_TAKEN') throw gateFailure(gate, err);
      taken = true;
      out.line(`* the name ${uid} is taken: logging in to it with this password`);
    }
  }
  // The password serves the first login only: from then on the refresh token (held in memory)
  // gets new access tokens, for the reconnects and the gate's group API alike.
  const login: ChatLogin = { where: { tls }, uid, taken };
  login.where.endpoint = gateEndpoint(gate, { username: user, password, deviceId: o.device }, (session) => (login.session = session), { tls: o.tls ? 'require' : 'auto' });
  login.groups = new GateGroups(gate, () => login.session?.accessToken() ?? '');
  return login;
}

/**
 * The chat's client, its events shown as lines. `ended` rejects once the client closed for good
 * after the login (a replaced session, a refusal on reconnect), with the reason said plainly.
 */
function chatClient({ where, uid }: ChatLogin, deviceId: string, out: ChatOutput, directory: GroupDirectory): { client: ImClient; ended: Promise<never> } {
  let loggedIn = false;
  const backoff = defaultRetryStrategy();
  const client = new ImClient({
    ...where,
    uid,
    deviceId,
    groups: true,
    // What this user says from another device belongs in the conversation shown here.
    ownCopies: true,
    // "delivered" and "read" marks for what this user sends (unless the user turned them off).
    receipts: true,
    // Recalls and edits: what was recalled or edited prints as such.
    inboxEvents: true,
    // The first connect fails at once, with its reason: a wrong port or a gate that is down is
    // not worth a wait. Once logged in, a lost connection is retried for as long as it takes.
    retryStrategy: (attempt) => (loggedIn ? backoff(attempt) : null),
  });

  client.on('message', (m) => out.line(formatMessage(m)));
  client.on('recall', (r) => out.line(r.from === uid ? `* you recalled your message to ${r.peer} (#${r.seq})` : `* ${r.peer} recalled a message (#${r.seq})`));
  client.on('edit', (e) => out.line(`${e.from === uid ? `* you edited your message to ${e.peer}` : `* ${e.peer} edited a message`} (#${e.seq}): ${e.content}`));
  // One line per step forward: each of the peer's devices acknowledges, and says the same again;
  // two devices marking a group at once may store their read events in either order.
  const marked = new Map<string, number>();
  client.on('read', (r) => {
    const key = `read\0${r.group}\0${r.peer}`;
    if ((marked.get(key) ?? 0) >= r.seq) return;
    if (marked.size >= MAX_MARKED_PEERS && !marked.has(key)) marked.delete(marked.keys().next().value!);
    marked.set(key, r.seq);
    out.line(`* read up to #${r.seq} ${r.group ? `in #${directory.name(r.group) ?? r.group}` : `with ${r.peer}`}${r.originDevice ? ` (on ${r.originDevice})` : ''}`);
  });
  client.on('receipt', (r) => {
    const key = `${r.kind}\0${r.peer}`;
    if ((marked.get(key) ?? 0) >= r.seq) return;
    if (marked.size >= MAX_MARKED_PEERS && !marked.has(key)) marked.delete(marked.keys().next().value!);
    marked.set(key, r.seq);
    out.line(`✓✓ ${r.kind} (${r.peer} #${r.seq})`);
  });
  client.on('groupMessage', (m) => out.line(formatGroupMessage(m, directory.name(m.group))));
  client.on('groupEvent', (e) => {
    directory.heard(e);
    out.line(formatGroupEvent(e, directory.name(e.group)));
  });
  client.on('login', () => {
    out.line(`* logged in as ${uid} (device ${deviceId})`);
    loggedIn = true;
  });
  client.on('disconnect', ({ reason, retryInMs }) => {
    if (retryInMs === null || !loggedIn) return; // the end: the error the command fails with says why
    out.line(`* ${client.status === 'ready' ? 'connection lost' : 'reconnect failed'}: ${reason.code} ${reason.message}; reconnecting in ${formatDelay(retryInMs)}`);
  });
  client.on('gap', ({ from }) => out.line(`* older messages were pruned by the server; showing from #${from + 1}`));
  // The SDK has forgotten the old position; what follows may repeat messages shown before.
  client.on('reset', () => out.line('* the server lost or rewound its copy of your inbox: showing everything it holds again'));
  // The chat ends with that reason instead of leaving a prompt nobody serves.
  const ended = new Promise<never>((_, reject) => client.on('error', (err) => reject(endReason(err, uid, deviceId))));
  ended.catch(() => {});
  return { client, ended };
}

/** Lines of input, in order, waiting to be taken; input is paused while too many wait. */
class LineQueue {
  readonly #rl: readline.Interface;
  readonly #lines: string[] = [];
  #ended = false;
  #paused = false;
  #wake: (() => void) | undefined;

  constructor(rl: readline.Interface) {
    this.#rl = rl;
    rl.on('line', (line) => {
      this.#lines.push(line);
      if (this.#lines.length >= MAX_QUEUED_LINES && !this.#paused) {
        this.#paused = true;
        rl.pause();
      }
      this.#notify();
    });
    // Ctrl-C on a terminal: leave as /quit does.
    rl.on('SIGINT', () => rl.close());
    rl.on('close', () => {
      this.#ended = true;
      this.#notify();
    });
  }

  /** The next line, or undefined once input has ended and every line was taken. */
  async next(): Promise<string | undefined> {
    while (this.#lines.length === 0 && !this.#ended) await new Promise<void>((resolve) => (this.#wake = resolve));
    const line = this.#lines.shift();
    if (this.#paused && this.#lines.length < MAX_QUEUED_LINES / 2) {
      this.#paused = false;
      this.#rl.resume();
    }
    return line;
  }

  /** The first line (the password, on piped input), or undefined if there is none. */
  first(): Promise<string | undefined> {
    return this.next();
  }

  /** Stops reading: readline alone only pauses stdin, and a piped stdin left open keeps the process alive. */
  abandon(): void {
    this.#rl.close();
    process.stdin.destroy();
  }

  #notify(): void {
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }
}

/** Takes lines, sends them in order with a bounded number in flight, and marks each stored. */
class Sender {
  stored = 0;
  failed = 0;
  firstFailure: SwitchboardError['code'] | undefined;
  #inFlight = 0;
  #slot: (() => void) | undefined;

  constructor(
    readonly client: ImClient,
    readonly lines: LineQueue,
    readonly out: ChatOutput,
    readonly recipient: (name: string) => string,
    readonly groups: GroupCommands,
    readonly conversations: ConversationCommands,
  ) {}

  /**
   * Resolves once input ended (or /quit) and every message sent was answered. Messages go out
   * with a bounded number in flight; a command waits for the messages before it to be answered
   * (a /leave comes after what was said to the group), and the next line waits for the command.
   */
  async run(): Promise<void> {
    for (;;) {
      const line = await this.lines.next();
      if (line === undefined) break;
      const parsed = parseChatLine(line);
      switch (parsed.kind) {
        case 'quit':
          await this.#drain(0);
          return;
        case 'empty':
          this.out.prompt();
          break;
        case 'help':
          for (const help of CHAT_HELP) this.out.line(`* ${help}`);
          break;
        case 'bad':
          this.#fail('SB_ERR_BAD_REQUEST', `* not sent: ${parsed.reason}`);
          break;
        case 'direct':
          await this.#drain(MAX_IN_FLIGHT - 1);
          this.#send(this.recipient(parsed.to), parsed.text);
          break;
        case 'group': {
          await this.#drain(MAX_IN_FLIGHT - 1);
          let group: string;
          try {
            group = await this.groups.resolve(parsed.group);
          } catch (err) {
            this.#failWith(err, `* not sent to #${parsed.group}`);
            break;
          }
          this.#sendToGroup(group, parsed.text);
          break;
        }
        case 'command':
        case 'conversation':
          await this.#drain(0);
          try {
            const lines = parsed.kind === 'command' ? await this.groups.run(parsed.name, parsed.args) : await this.conversations.run(parsed.name, parsed.args);
            for (const out of lines) this.out.line(out);
          } catch (err) {
            this.#failWith(err, `* /${parsed.name} refused`);
          }
          break;
      }
    }
    await this.#drain(0);
  }

  /** Waits until at most `n` messages are in flight. */
  async #drain(n: number): Promise<void> {
    while (this.#inFlight > n) await new Promise<void>((resolve) => (this.#slot = resolve));
  }

  // Through the gate the names are switchboard accounts: `@Alice` is alice, as the gate folds
  // names. With a token the server decides (it folds them where it checks accounts).
  #send(to: string, content: string): void {
    const sent = this.client.send(to, content);
    sent.then((r) => this.conversations.sent(to, r.msgId), () => {});
    this.#track(sent, to, to);
  }

  #sendToGroup(group: string, content: string): void {
    const label = `#${this.groups.directory.name(group) ?? group}`;
    const sent = this.client.sendToGroup(group, content);
    sent.then((r) => this.conversations.sentToGroup(group, r.seq), () => {});
    this.#track(sent, label, label);
  }

  /** Counts a message in flight until answered: `✓ stored (bob #3)`, or why not. */
  #track(sent: Promise<{ seq: number }>, label: string, to: string): void {
    this.#inFlight++;
    sent.then(
      (r) => {
        this.stored++;
        this.out.line(`✓ stored (${label} #${r.seq})`);
      },
      (err: unknown) => this.#failWith(err, `* not sent to ${to}`),
    ).finally(() => {
      this.#inFlight--;
      const slot = this.#slot;
      this.#slot = undefined;
      slot?.();
    });
  }

  #failWith(err: unknown, what: string): void {
    const code = isSwitchboardError(err) ? err.code : 'SB_ERR_INTERNAL';
    this.#fail(code, `${what}: ${isSwitchboardError(err) ? `${err.code} ${err.message}` : String(err)}`);
  }

  #fail(code: SwitchboardError['code'], line: string): void {
    this.failed++;
    this.firstFailure ??= code;
    this.out.line(line);
  }
}

/** What the chat prints: on a terminal around the prompt line, elsewhere plain lines only. */
class ChatOutput {
  /** readline refuses prompt() once closed (input ended, /quit), and messages may still come. */
  #open = true;

  constructor(
    readonly rl: readline.Interface,
    readonly terminal: boolean,
  ) {
    rl.on('close', () => (this.#open = false));
  }

  line(text: string): void {
    if (!this.terminal) {
      process.stdout.write(`${text}\n`);
      return;
    }
    readline.clearLine(process.stdout, 0);
    readline.cursorTo(process.stdout, 0);
    process.stdout.write(`${text}\n`);
    this.prompt();
  }

  prompt(): void {
    if (this.terminal && this.#open) this.rl.prompt(true);
  }

  /** Leaves the terminal on a clean line. */
  end(): void {
    if (!this.terminal) return;
    readline.clearLine(process.stdout, 0);
    readline.cursorTo(process.stdout, 0);
  }
}

/** The error a chat that the client ended on its own fails with: the reason, said plainly. */
function endReason(err: Error, uid: string, deviceId: string): Error {
  if (isSwitchboardError(err) && err.code === 'SB_ERR_SESSION_REPLACED') {
    return new SwitchboardError(err.code, `${uid} logged in with device "${deviceId}" elsewhere, which ended this chat (use another --device to chat from both)`);
  }
  return err;
}

/** `[12:01:03] alice: hi`, or `[12:01:03] me → bob: hi` for what this user sent; ` (edited)` after an edited one. */
export function formatMessage(m: IncomingMessage, now = Date.now()): string {
  return `[${formatTime(shownTime(m, now), now)}] ${m.own ? `me → ${m.to}` : m.from}: ${m.content}${m.edited ? ' (edited)' : ''}`;
}

/**
 * The time a message is shown with: the server's (when it stored it) where the delivery says,
 * else when it arrived here; never the sender's clock, which may be anything.
 */
export function shownTime(m: Pick<IncomingMessage, 'storedAt'>, receivedAt: number): number {
  return m.storedAt ?? receivedAt;
}

/** HH:MM:SS, with the date in front when it is not today's. */
export function formatTime(ms: number, now = Date.now()): string {
  const at = new Date(ms);
  const pad = (n: number) => String(n).padStart(2, '0');
  const time = `${pad(at.getHours())}:${pad(at.getMinutes())}:${pad(at.getSeconds())}`;
  if (at.toDateString() === new Date(now).toDateString()) return time;
  return `${at.getFullYear()}-${pad(at.getMonth() + 1)}-${pad(at.getDate())} ${time}`;
}

function formatDelay(ms: number): string {
  return ms < 1000 ? `${ms} ms` : `${Math.round(ms / 1000)} s`;
}

/**
 * A new password, typed twice: a typo in a password nobody sees would lock its owner out of the
 * account just made. Asks again when the two differ, three times at most.
 */
export async function askNewPassword(ask: (prompt: string) => Promise<string>, say: (line: string) => void, tries = 3): Promise<string> {
  for (let i = 0; i < tries; i++) {
    const first = await ask('password: ');
    const second = await ask('password again: ');
    if (first === second) return first;
    say('* the two passwords differ; again');
  }
  throw new SwitchboardError('SB_ERR_BAD_PASSWORD', `the two passwords differed ${tries} times`);
}

/** Reads a line from the terminal without echoing it (a password). */
function askHidden(prompt: string): Promise<string> {
  const stdin = process.stdin;
  process.stdout.write(prompt);
  stdin.setRawMode(true);
  stdin.resume();
  return new Promise((resolve) => {
    let value = '';
    const onData = (chunk: Buffer) => {
      for (const ch of chunk.toString('utf8')) {
        if (ch === '\r' || ch === '\n') {
          stdin.off('data', onData);
          stdin.setRawMode(false);
          stdin.pause();
          process.stdout.write('\n');
          resolve(value);
          return;
        }
        if (ch === '\u0003') process.kill(process.pid, 'SIGINT');
        else if (ch === '\u007f' || ch === '\b') value = value.slice(0, -1);
        else value += ch;
      }
    };
    stdin.on('data', onData);
  });
}
