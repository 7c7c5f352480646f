// `bench conversations`' load: fills one user's inbox with conversations from many senders, then
// asks for that user's chat list or history pages (PROTOCOL.md §14) over the user's own
// connections, a fixed number of requests in flight, each timed from its write to its
// CONVERSATION_RESPONSE. It runs in the bench process itself: one user's few connections with a
// few requests in flight need no driver processes to stay cheaper than the server they measure.

import type net from 'node:net';
import { once } from 'node:events';
import { encodeMessageFrame } from '../../src/protocol/codec.js';
import { ConversationOp, Field, HeadType } from '../../src/protocol/types.js';
import { WireReader } from '../../src/protocol/wire.js';
import { writePerTick } from '../../src/net/write-per-tick.js';
import { dialFrames } from '../../testkit/raw-client.js';
import { conversationRequestFrame, loginRequestFrame, messageRequestFrame } from './client-frames.js';
import { Latency } from './latency.js';
import { LoadClock, drain } from './timeline.js';
import { emptyScan, scanMessage } from './wire-scan.js';
import type { TimelinePoint } from './report.js';

export interface Endpoint {
  host: string;
  port: number;
}

/** The few fields the load reads of a CONVERSATION_RESPONSE; those absent stay 0 / empty. */
export interface ConversationScan {
  /** Message.type and .sequence. */
  type: number;
  sequence: number;
  result: boolean;
  errorCode: string;
  /** Conversations (LIST) or messages (HISTORY) in the page. */
  entries: number;
  /** Where the next page starts; 0: this was the last. */
  nextBefore: number;
  /** The frame body's length. */
  bytes: number;
}

export function emptyConversationScan(): ConversationScan {
  return { type: 0, sequence: 0, result: false, errorCode: '', entries: 0, nextBefore: 0, bytes: 0 };
}

const M = Field.Message;
const CR = Field.ConversationResponse;
// Reused by every scan, as wire-scan.ts does: a scan is one synchronous step.
const MESSAGE_FIELDS = new WireReader(Buffer.alloc(0), 0, 0, false);
const RESPONSE_FIELDS = new WireReader(Buffer.alloc(0), 0, 0, false);

/**
 * Fills `out` from a Message body, walking the wire format instead of decoding it: a page's
 * entries are counted, not decoded (a LIST page of 100 is 100 nested messages with a preview each).
 */
export function scanConversationResponse(body: Buffer, out: ConversationScan): ConversationScan {
  out.type = out.sequence = out.entries = out.nextBefore = 0;
  out.result = false;
  out.errorCode = '';
  out.bytes = body.length;
  const fields = MESSAGE_FIELDS.reset(body, 0, body.length);
  while (fields.next()) {
    if (fields.field === M.type) out.type = fields.value;
    else if (fields.field === M.sequence) out.sequence = fields.value;
    else if (fields.field === M.conversationResponse) {
      const inner = RESPONSE_FIELDS.reset(body, fields.start, fields.end);
      while (inner.next()) {
        if (inner.field === CR.result) out.result = inner.value !== 0;
        else if (inner.field === CR.conversations || inner.field === CR.messages) out.entries++;
        else if (inner.field === CR.nextBefore) out.nextBefore = inner.value;
        else if (inner.field === CR.errorCode) out.errorCode = body.toString('utf8', inner.start, inner.end);
      }
    }
  }
  return out;
}

/** A request's answer, valid during the call only (the scan is reused); undefined: the connection closed first. */
export type OnResponse = (scan: ConversationScan | undefined) => void;

/**
 * One device of the measured user: a logged-in connection whose CONVERSATION_REQUESTs are
 * matched to their responses by sequence, so any number may be in flight on it.
 */
export class Device {
  readonly socket: net.Socket;
  readonly #pending = new Map<number, OnResponse>();
  readonly #scan = emptyConversationScan();
  readonly #loginScan = emptyScan();
  #sequence = 0;
  #onLogin: (result: boolean, errorCode: string) => void = () => {};

  private constructor(endpoint: Endpoint) {
    this.socket = dialFrames(endpoint, { onFrame: (body) => this.#onFrame(body) });
    this.socket.on('error', () => {});
    this.socket.once('close', () => {
      const pending = [...this.#pending.values()];
      this.#pending.clear();
      for (const onResponse of pending) onResponse(undefined);
    });
  }

  /**
   * Connects and logs `uid` in as a new device with `no_replay` (PROTOCOL.md §14, "A new device"):
   * nothing of the inbox is replayed, so what is measured next is the list and history alone.
   */
  static async login(endpoint: Endpoint, uid: string, token: string, deviceId: string): Promise<Device> {
    const device = new Device(endpoint);
    await once(device.socket, 'connect');
    const answered = new Promise<void>((resolve, reject) => {
      device.#onLogin = (result, errorCode) => (result ? resolve() : reject(new Error(`login of ${uid} on ${deviceId} refused: ${errorCode}`)));
      device.socket.once('close', () => reject(new Error(`login of ${uid} on ${deviceId}: connection closed`)));
    });
    writePerTick(device.socket, encodeMessageFrame({ type: HeadType.LOGIN_REQUEST, sequence: 1, loginRequest: { uid, deviceId, token, acks: true, noReplay: true } }));
    await answered;
    return device;
  }

  /** Requests sent and not answered yet. */
  get outstanding(): number {
    return this.#pending.size;
  }

  /**
   * Sends a LIST (`peer` empty; `groups`: the user's groups merged in, first page only: such a
   * list pages by cursor, and every page costs the same) or HISTORY request; `onResponse` is
   * called once, with its answer.
   */
  request(op: number, before: number, limit: number, peer: string, onResponse: OnResponse, groups = false): void {
    if (this.socket.destroyed) {
      onResponse(undefined);
      return;
    }
    const sequence = ++this.#sequence;
    this.#pending.set(sequence, onResponse);
    writePerTick(this.socket, conversationRequestFrame(sequence, op, before, limit, peer, groups));
  }

  /** One request, awaited: its answer (a copy of the scan). */
  ask(op: number, before: number, limit: number, peer = ''): Promise<ConversationScan> {
    return new Promise((resolve, reject) => {
      this.request(op, before, limit, peer, (scan) => (scan ? resolve({ ...scan }) : reject(new Error('the connection closed before the answer'))));
    });
  }

  close(): void {
    this.socket.destroy();
  }

  #onFrame(body: Buffer): void {
    const scan = scanConversationResponse(body, this.#scan);
    if (scan.type === HeadType.CONVERSATION_RESPONSE) {
      const onResponse = this.#pending.get(scan.sequence);
      if (onResponse === undefined) return;
      this.#pending.delete(scan.sequence);
      onResponse(scan);
    } else if (scan.type === HeadType.LOGIN_RESPONSE) {
      const login = scanMessage(body, this.#loginScan);
      this.#onLogin(login.result, login.errorCode);
    }
  }
}

export interface PopulateOptions {
  /** Sender i connects to endpoint i mod count. */
  endpoints: Endpoint[];
  /** The measured user: every sender writes to it. */
  user: string;
  /** Senders of one message each. */
  senders: string[];
  /** The other party of the history conversation, and the messages it sends. */
  historyPeer: string;
  historyMessages: number;
  payloadBytes: number;
  token: (uid: string) => string;
}

export interface PopulateResult {
  /** Messages stored (each acknowledged with success). */
  messages: number;
  seconds: number;
  /** Send → MESSAGE_RESPONSE. */
  sendLatency: Latency;
}

/** Sender connections at once while populating; the history peer keeps this many messages in flight too. */
const SETUP_WINDOW = 64;

/**
 * Every sender logs in, sends its message(s) to `user` and waits for the success answers, at
 * most SETUP_WINDOW senders at once, beside the history peer's messages. The user is not logged
 * in meanwhile: the messages wait in its inbox, as they would for a phone that was off. Any
 * refusal fails the setup: the figures would not be of the user the report names.
 */
export async function populate(o: PopulateOptions): Promise<PopulateResult> {
  const startedAt = performance.now();
  const sendLatency = new Latency();
  const content = 'x'.repeat(o.payloadBytes);
  const endpointOf = (i: number) => o.endpoints[i % o.endpoints.length]!;
  let next = 0;
  const sendLoop = async () => {
    for (let i = next++; i < o.senders.length; i = next++) await sendAs(endpointOf(i + 1), o.senders[i]!, o.user, 1, content, o.token, sendLatency);
  };
  const loops = Array.from({ length: Math.min(SETUP_WINDOW, o.senders.length) }, sendLoop);
  if (o.historyMessages > 0) loops.push(sendAs(endpointOf(0), o.historyPeer, o.user, o.historyMessages, content, o.token, sendLatency));
  await Promise.all(loops);
  return { messages: o.senders.length + o.historyMessages, seconds: (performance.now() - startedAt) / 1000, sendLatency };
}

/** One sender's connection: logs `from` in, sends `count` messages to `to` (SETUP_WINDOW in flight), resolves once all are stored. */
async function sendAs(endpoint: Endpoint, from: string, to: string, count: number, content: string, token: (uid: string) => string, latency: Latency): Promise<void> {
  const scan = emptyScan();
  let onFrame: (body: Buffer) => void = () => {};
  const socket = dialFrames(endpoint, { onFrame: (body) => onFrame(body) });
  socket.on('error', () => {});
  try {
    await once(socket, 'connect');
    await new Promise<void>((resolve, reject) => {
      const sentAt = new Float64Array(count + 1);
      let sent = 0;
      let stored = 0;
      // msg_id k is also the request's sequence (messageRequestFrame), echoed in its answer.
      const send = () => {
        const k = ++sent;
        sentAt[k] = performance.now();
        writePerTick(socket, messageRequestFrame(k, from, to, Date.now(), content));
      };
      onFrame = (body) => {
        scanMessage(body, scan);
        if (scan.type === HeadType.LOGIN_RESPONSE) {
          if (!scan.result) reject(new Error(`setup: login of ${from} refused: ${scan.errorCode}`));
          else while (sent < Math.min(SETUP_WINDOW, count)) send();
        } else if (scan.type === HeadType.MESSAGE_RESPONSE) {
          if (!scan.result) {
            reject(new Error(`setup: ${from} → ${to}, msg_id ${scan.sequence} refused: ${scan.errorCode}`));
            return;
          }
          latency.add(performance.now() - sentAt[scan.sequence]!);
          if (++stored === count) resolve();
          else if (sent < count) send();
        }
      };
      socket.once('close', () => reject(new Error(`setup: ${from}'s connection closed`)));
      writePerTick(socket, loginRequestFrame(from, token(from), { lastSeq: Number.MAX_SAFE_INTEGER }));
    });
  } finally {
    socket.destroy();
  }
}

export interface Walk {
  /** Entries over all pages. */
  entries: number;
  pages: number;
  /** The first page's entries, and whether it said there is more (next_before ≠ 0). */
  firstPage: number;
  firstMore: boolean;
}

/** A walk stops here whatever the pages say: 10 000 conversations at 1 a page. */
const MAX_WALK_PAGES = 10_000;

/** Pages through the whole list (`peer` empty) or a whole conversation's history, one request at a time. */
export async function walk(device: Device, op: number, limit: number, peer = ''): Promise<Walk> {
  const w: Walk = { entries: 0, pages: 0, firstPage: 0, firstMore: false };
  let before = 0;
  do {
    const page = await device.ask(op, before, limit, peer);
    if (!page.result) throw new Error(`${opName(op)} refused: ${page.errorCode}`);
    if (w.pages === 0) {
      w.firstPage = page.entries;
      w.firstMore = page.nextBefore !== 0;
    }
    w.pages++;
    w.entries += page.entries;
    before = page.nextBefore;
  } while (before !== 0 && w.pages < MAX_WALK_PAGES);
  return w;
}

export const opName = (op: number) => (op === ConversationOp.LIST ? 'LIST' : op === ConversationOp.HISTORY ? 'HISTORY' : `op ${op}`);

export interface RequestLoadOptions {
  /** Requester i sends on device i mod count. */
  devices: Device[];
  op: number;
  limit: number;
  /** HISTORY: the conversation. */
  peer: string;
  /** LIST with the user's groups merged in (the first page, again and again). */
  groups?: boolean;
  /** Requests in flight (closed loop: each answer sends the next). */
  inFlight: number;
  warmupMs: number;
  durationMs: number;
  /** Called as the measured interval begins (the caller cuts its process samples there). */
  atStart?: () => void;
  /** Called about once a second with that second. */
  onSecond?: (point: TimelinePoint) => void;
}

export interface RequestLoadResult {
  /** Answered with success within the measured interval. */
  requests: number;
  seconds: number;
  /** Request written → its response read, of those requests. */
  latency: Latency;
  /** Entries and response bytes over those requests. */
  entries: number;
  bytes: number;
  /** Refusals by code, and CONNECTION_CLOSED, over the whole run. */
  errors: Record<string, number>;
  timeline: TimelinePoint[];
}

/** After the measured interval: how long to wait at most for the requests still in flight. */
const DRAIN_MS = 5_000;

/**
 * `inFlight` requesters in a closed loop, each paging through the list (or the history of
 * `peer`) from the newest page to the last and starting over, as a user scrolling back: every
 * page is measured, not only the first.
 */
export async function runRequests(o: RequestLoadOptions): Promise<RequestLoadResult> {
  const latency = new Latency();
  const secondLatency = new Latency();
  const errors: Record<string, number> = {};
  const timeline: TimelinePoint[] = [];
  const r: RequestLoadResult = { requests: 0, seconds: 0, latency, entries: 0, bytes: 0, errors, timeline };
  let running = true;
  let answered = 0;
  let failed = 0;
  let last = { answered: 0, failed: 0 };
  const clock = new LoadClock<'warmup' | 'measure' | 'drain'>('warmup', (phase, t) => {
    const p = secondLatency.percentiles();
    const point: TimelinePoint = { t, phase, requests: answered - last.answered, errors: failed - last.failed, p50Ms: p.p50, p99Ms: p.p99 };
    timeline.push(point);
    o.onSecond?.(point);
    secondLatency.reset();
    last = { answered, failed };
  });
  const fail = (code: string) => {
    failed++;
    errors[code] = (errors[code] ?? 0) + 1;
  };
  const requesters = Array.from({ length: o.inFlight }, (_, i) => {
    const device = o.devices[i % o.devices.length]!;
    let before = 0;
    let sentAt = 0;
    const send = () => {
      sentAt = performance.now();
      device.request(o.op, before, o.limit, o.peer, onResponse, o.groups);
    };
    const onResponse: OnResponse = (scan) => {
      if (scan === undefined) {
        // The connection is gone: this requester stops.
        fail('CONNECTION_CLOSED');
        return;
      }
      const ms = performance.now() - sentAt;
      answered++;
      secondLatency.add(ms);
      if (!scan.result) {
        fail(scan.errorCode || 'SB_ERR_UNKNOWN');
        before = 0;
      } else {
        before = scan.nextBefore;
        if (clock.current === 'measure') {
          r.requests++;
          latency.add(ms);
          r.entries += scan.entries;
          r.bytes += scan.bytes;
        }
      }
      if (running) send();
    };
    return send;
  });
  for (const send of requesters) send();
  clock.start();
  const { from, to } = await clock.measure(o.warmupMs, o.durationMs, o.atStart);
  r.seconds = (to - from) / 1000;
  running = false;
  clock.enter('drain');
  // The next run starts with none of this one's requests still in flight.
  await drain(() => o.devices.some((d) => d.outstanding > 0), DRAIN_MS);
  clock.end();
  return r;
}
