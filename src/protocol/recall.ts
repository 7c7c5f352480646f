// Recall and edit on the wire (PROTOCOL.md §14): the tombstone that replaces a recalled message
// in every inbox that holds it, the edited body that replaces an edited one, and the inbox events
// that tell the devices. An inbox event is a
// MessageRequest whose `event` field is written first, so a delivery tells one by its first two
// bytes without decoding it, as it tells an own copy (codec.ts): no chat request's stored body
// can start so (a request carrying `event` is refused, and storedRequestBody writes msg_id or
// from first).

import { encodeMessageRequest } from './codec.js';
import { Field, type MessageRequest } from './types.js';
import { tagBytes, varintLength, writeVarint, WireType } from './wire.js';

/** What a tombstone's content says, for clients that do not read `recalled` (PROTOCOL.md §4: every message carries a readable content). */
export const RECALLED_CONTENT = '[recalled]';

/** MessageRequest.event: 9a 01. */
const EVENT_TAG = tagBytes(Field.MessageRequest.event, WireType.LEN);

/** True when a stored body is an inbox event (inboxEventBody). */
export function isInboxEvent(body: Uint8Array): boolean {
  return body[0] === EVENT_TAG[0] && body[1] === EVENT_TAG[1];
}

/** An inbox event: `event` (its JSON) first, then `fields` (from, to, stored_at). */
export function inboxEventBody(event: string, fields: MessageRequest): Uint8Array {
  const json = Buffer.from(event, 'utf8');
  const rest = encodeMessageRequest(fields);
  const out = Buffer.allocUnsafe(EVENT_TAG.length + varintLength(json.length) + json.length + rest.length);
  out[0] = EVENT_TAG[0]!;
  out[1] = EVENT_TAG[1]!;
  let pos = writeVarint(out, EVENT_TAG.length, json.length);
  pos += json.copy(out, pos);
  out.set(rest, pos);
  return out;
}

/** The tombstone of stored message `m`: who, to whom, which msg_id and when, and that it was recalled; nothing of what it said. */
export function tombstoneBody(m: MessageRequest): Uint8Array {
  return encodeMessageRequest({ msgId: m.msgId, from: m.from, to: m.to, msgType: m.msgType, content: RECALLED_CONTENT, storedAt: m.storedAt, recalled: true });
}

/**
 * The edited form of stored message `m`: the same msg_id, sender, recipient, type, time and store
 * time (and url, property, from_nick), `content` and `json` the edit's, and `edited` set. An edit
 * replaces both: a `json` left empty clears it.
 */
export function editedBody(m: MessageRequest, content: string, json: string): Uint8Array {
  const { msgId, from, to, time, msgType, url, property, fromNick, storedAt } = m;
  return encodeMessageRequest({ msgId, from, to, time, msgType, content, url, property, fromNick, json, storedAt, edited: true });
}
