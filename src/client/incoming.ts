// What a device is delivered from its own inbox, as the SDK shows it: a 1:1 message (received,
// or an own copy from another device) and the read event of a mark made on another device
// (PROTOCOL.md §14). Shared by the deliveries (event-handler.ts) and history pages (conversations.ts).

import { uint64Number, uint64String } from '../protocol/codec.js';
import { ReceiptKind, type MessageRequest, type Receipt } from '../protocol/types.js';

export interface IncomingMessage {
  /** Position in the recipient's inbox (0 from a server without inboxes). */
  seq: number;
  from: string;
  to: string;
  /**
   * A copy of a message this user sent from another device (ownCopies): `from` is this user,
   * `to` the peer, and `seq` its place in this user's own inbox.
   */
  own: boolean;
  /** With `own`: the device that sent it ('' for one without an id); '' otherwise. */
  originDevice: string;
  content: string;
  /** The sender's message id, as a decimal string (uint64). */
  msgId: string;
  /** The sender's clock (ms) when it sent the message: not to be trusted for display. */
  time: number;
  /**
   * When the server stored the message (ms, the server's clock: MessageRequest.stored_at);
   * undefined from a server that does not send it.
   */
  storedAt: number | undefined;
  msgType: number;
  json: string;
  url: string;
  property: string;
  fromNick: string;
  /** The sender recalled it: this is its tombstone, and `content` says so (PROTOCOL.md §14). */
  recalled: boolean;
  /** The sender edited it: `content` and `json` are the latest edit's (PROTOCOL.md §14). */
  edited: boolean;
}

/** Another device of this user marked a conversation read (its read event, PROTOCOL.md §14). */
export interface ReadEvent {
  /** The 1:1 conversation ('' for a group's). */
  peer: string;
  /** A group read mark: the group id ('' for a 1:1 conversation); `seq` is the group's then. */
  group: string;
  /** The conversation is read up to this seq (the inbox's; a group's for a group). */
  seq: number;
  /** The device that marked it. */
  originDevice: string;
  /** The event's own seq in this user's inbox. */
  eventSeq: number;
  storedAt: number | undefined;
}

/** A delivered (or paged) 1:1 message of `uid`'s inbox as the SDK shows it. */
export function incomingMessage(m: MessageRequest, uid: string): IncomingMessage {
  const from = m.from ?? '';
  const to = m.to ?? '';
  const originDevice = m.originDevice ?? '';
  return {
    seq: uint64Number(m.seq),
    from,
    to,
    // A copy from a device with no id carries an empty origin_device, which decodes as none: but
    // in this user's inbox only an own copy is from this user to someone else.
    own: originDevice !== '' || (from === uid && to !== uid),
    originDevice,
    content: m.content ?? '',
    msgId: String(m.msgId ?? 0),
    time: uint64Number(m.time),
    storedAt: m.storedAt ? uint64Number(m.storedAt) : undefined,
    msgType: m.msgType ?? 0,
    json: m.json ?? '',
    url: m.url ?? '',
    property: m.property ?? '',
    fromNick: m.fromNick ?? '',
    recalled: m.recalled === true,
    edited: m.edited === true,
  };
}

/** A read event's JSON ({"type":"read","peer","seq"}) as {peer, seq}; undefined for anything else. */
/** An inbox event of this user's (PROTOCOL.md §14), parsed; undefined for a kind this client does not know. */
export type InboxEvent = { type: 'read'; peer: string; group: string; seq: number } | { type: 'recall' | 'edit'; peer: string; seq: number; msgId: string };

export function parseInboxEvent(json: string): InboxEvent | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(json);
  } catch {
    return undefined;
  }
  if (typeof parsed !== 'object' || parsed === null) return undefined;
  const { type, peer, group, seq, msgId } = parsed as Record<string, unknown>;
  if (typeof seq !== 'number' || !Number.isSafeInteger(seq) || seq < 0) return undefined;
  // A group read mark names the group instead of a peer.
  if (type === 'read' && typeof group === 'string' && peer === undefined) return { type, peer: '', group, seq };
  if (typeof peer !== 'string') return undefined;
  if (type === 'read') return { type, peer, group: '', seq };
  if ((type === 'recall' || type === 'edit') && typeof msgId === 'string') return { type, peer, seq, msgId };
  return undefined;
}

/**
 * A message of this user's conversation with `peer` was recalled by its sender (login with
 * `inboxEvents`, or `ownCopies` for what this user recalled from another device): show the
 * message at inbox `seq` (msg_id `msgId`) as recalled. Later replays and history pages carry
 * its tombstone (`recalled` set) instead of the message.
 */
export interface RecallEvent {
  peer: string;
  seq: number;
  msgId: string;
  /** Who sent (and recalled) it: `peer`, or this user for its own message. */
  from: string;
  /** The event's own seq in this user's inbox. */
  eventSeq: number;
}

/**
 * A message of this user's conversation with `peer` was edited by its sender (login with
 * `inboxEvents`, or `ownCopies` for what this user edited from another device): show the message
 * at inbox `seq` (msg_id `msgId`) with `content` and `json` instead, as edited. Later replays and
 * history pages carry the edited message (`edited` set). A message may be edited more than once:
 * each edit is an event, in the inbox's order, the last one is what the message says.
 */
export interface EditEvent {
  peer: string;
  seq: number;
  msgId: string;
  /** Who sent (and edited) it: `peer`, or this user for its own message. */
  from: string;
  /** The message's new content and json (an edit replaces both). */
  content: string;
  json: string;
  /** When the server stored the edit (ms, its clock). */
  editedAt: number | undefined;
  /** The event's own seq in this user's inbox. */
  eventSeq: number;
}

/**
 * A receipt for messages this user sent (login with `receipts`): `peer` has every message this
 * user sent it up to `seq` (the peer's inbox seq, as SendResult.seq gives it) delivered to a
 * device, or read. `msgId` is the newest of them ('0' when unknown): a device that did not send
 * them (it has their own copies, not their seq) marks that message and those before it in the
 * conversation. At most once: a lost one is covered by the next.
 */
export interface ReceiptEvent {
  kind: 'delivered' | 'read';
  peer: string;
  seq: number;
  msgId: string;
  /** Server time of the delivery or the mark. */
  at: number;
}

export function receiptEvent(r: Receipt): ReceiptEvent | undefined {
  const kind = r.kind === ReceiptKind.DELIVERED ? 'delivered' : r.kind === ReceiptKind.READ ? 'read' : undefined;
  if (kind === undefined || !r.peer) return undefined;
  return { kind, peer: r.peer, seq: uint64Number(r.seq), msgId: uint64String(r.msgId ?? 0), at: uint64Number(r.at) };
}
