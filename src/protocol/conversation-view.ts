// How a stored message is shown outside a delivery (PROTOCOL.md §14): whole in a history page,
// cut to a preview in a chat list. Shared by the worker's CONVERSATION_REQUEST and the gate's
// HTTP routes, so that both show the same thing.

import { decodeStoredRequest, encodeMessageRequest } from './codec.js';
import type { MessageRequest } from './types.js';

/** A chat-list or history page holds this many entries when the client asks for none, and at most MAX_PAGE. */
export const DEFAULT_PAGE = 50;
export const MAX_PAGE = 100;

/** A list entry's last message keeps this many bytes of its content (cut at a character boundary). */
export const PREVIEW_BYTES = 256;

interface Stored {
  seq: number;
  body: Uint8Array;
}

/** A stored message as a delivery carries it, with its seq. */
export function storedMessage(stored: Stored): MessageRequest {
  const request = decodeStoredRequest(stored.body);
  request.seq = stored.seq;
  return request;
}

/**
 * A stored message as a chat list shows it: its content cut to PREVIEW_BYTES, and url, property,
 * json and from_nick left out; `truncated` when anything was cut or left out.
 */
export function previewMessage(stored: Stored): { request: MessageRequest; truncated: boolean } {
  const { url, property, json, fromNick, content, ...kept } = storedMessage(stored);
  const text = content ?? '';
  const cut = cutUtf8(text, PREVIEW_BYTES);
  return { request: { ...kept, content: cut }, truncated: cut.length < text.length || !!url || !!property || !!json || !!fromNick };
}

/** The longest prefix of `text` of at most `bytes` UTF-8 bytes, not splitting a character. */
export function cutUtf8(text: string, bytes: number): string {
  if (Buffer.byteLength(text) <= bytes) return text;
  const buf = Buffer.from(text, 'utf8');
  let end = bytes;
  // Back to the start of a character (a byte that is not 10xxxxxx).
  while (end > 0 && (buf[end]! & 0xc0) === 0x80) end--;
  return buf.toString('utf8', 0, end);
}

/** What a group log entry holds, as far as showing it goes (GroupEntry). */
interface GroupEntryLike {
  kind: 'message' | 'event';
  sender: string;
  storedAt: number;
  body: Buffer;
}

/**
 * The delivered MessageRequest of a group log entry: a message's stored request as it is; an
 * event as { from = actor, to = group, stored_at, group, event = its JSON }.
 */
export function groupEntryBody(group: string, entry: GroupEntryLike): Uint8Array {
  if (entry.kind === 'message') return entry.body;
  return encodeMessageRequest({ from: entry.sender, to: group, storedAt: entry.storedAt, group, event: entry.body.toString('utf8') });
}
