// RECALL and EDIT (PROTOCOL.md §14): the sender of a 1:1 message replaces it in place, with its
// tombstone or its edited form, in the recipient's inbox and in its own copy, each with an inbox
// event appended in the same store step for the devices that take them (delivery.ts passes over
// it for the others). Both find the message and rewrite the two inboxes the same way (rewriteSent);
// what differs is the new body, what the event carries, and the window.
//
// The two inboxes are two store steps: a repeat completes one the first left undone, and finds
// the rest done (nothing stored). An edit rewrites only the body it read, so that a recall made
// meanwhile (from another device, on another worker) is never undone by it.

import { isOwnCopy, ownCopyBody, uint64String } from '../../protocol/codec.js';
import { deliveryFits } from '../../protocol/chat-frames.js';
import { MAX_PAGE, storedMessage } from '../../protocol/conversation-view.js';
import { editedBody, inboxEventBody, tombstoneBody } from '../../protocol/recall.js';
import { originOf } from '../../protocol/receipts.js';
import type { Failure } from '../../protocol/messages.js';
import type { ConversationRequest, ConversationResponse, MessageRequest } from '../../protocol/types.js';
import type { StoredMessage } from '../../inbox/inbox-store.js';
import type { ErrorCode } from '../../errors.js';
import type { LocalSession } from '../../session/local-session.js';
import type { ServerContext } from '../context.js';

/** A RECALL or an EDIT looks for the message among this many of the conversation's newest (in each of the two inboxes). */
export const SENT_SCAN = 1000;
/** An edit that finds the message changed under it this many times in a row gives up (another device keeps editing it). */
const EDIT_ATTEMPTS = 3;

/**
 * RECALL: the message `msg_id` this user sent `peer` becomes a tombstone in both inboxes, within
 * --recall-window-s of when it was stored. Idempotent: a repeat finds the tombstones.
 */
export async function recall(ctx: ServerContext, session: LocalSession, request: ConversationRequest, peer: string | undefined): Promise<ConversationResponse | Failure> {
  const msgId = uint64String(request.msgId ?? 0);
  if (peer === undefined || msgId === '0') return { code: 'SB_ERR_BAD_REQUEST', reason: 'a RECALL request needs conversationRequest.peer and msg_id' };
  const windowMs = ctx.limits.recallWindowMs;
  if (windowMs === 0) return { code: 'SB_ERR_RECALL_EXPIRED', reason: 'recall is off on this server (--recall-window-s 0)' };
  const found = await findBoth(ctx, session.uid, peer, msgId);
  if (found === undefined) return noMessage(msgId, peer);
  const late = expired(found, windowMs, 'SB_ERR_RECALL_EXPIRED', 'recalled');
  if (late) return late;
  const outcome = await rewriteSent(ctx, session, peer, msgId, found, { type: 'recall', body: tombstoneBody, event: {}, guarded: false });
  // Unguarded, a rewrite is never refused as changed: a tombstone goes over whatever is there.
  if (outcome === CHANGED) throw new Error('an unguarded rewrite was refused as changed');
  return outcome;
}

/**
 * EDIT: the message `msg_id` this user sent `peer` gets the request's content and json (both
 * replaced) and `edited`, in both inboxes, within --edit-window-s of when it was stored (the
 * original message's time: editing does not extend it). Not a recalled message. The content it
 * has already: nothing stored (a repeat, or an edit to the same words).
 */
export async function edit(ctx: ServerContext, session: LocalSession, request: ConversationRequest, peer: string | undefined): Promise<ConversationResponse | Failure> {
  const msgId = uint64String(request.msgId ?? 0);
  const content = request.content ?? '';
  const json = request.json ?? '';
  if (peer === undefined || msgId === '0') return { code: 'SB_ERR_BAD_REQUEST', reason: 'an EDIT request needs conversationRequest.peer and msg_id' };
  if (content === '' && json === '') return { code: 'SB_ERR_BAD_REQUEST', reason: 'an EDIT request needs the new conversationRequest.content (or json); to take a message back, recall it' };
  const windowMs = ctx.limits.editWindowMs;
  if (windowMs === 0) return { code: 'SB_ERR_EDIT_EXPIRED', reason: 'edit is off on this server (--edit-window-s 0)' };
  const rewrite: Rewrite = {
    type: 'edit',
    body: (m) => ((m.content ?? '') === content && (m.json ?? '') === json ? undefined : editedBody(m, content, json)),
    event: { content, json },
    guarded: true,
  };
  for (let attempt = 1; ; attempt++) {
    const found = await findBoth(ctx, session.uid, peer, msgId);
    if (found === undefined) return noMessage(msgId, peer);
    if (found.recalled) return { code: 'SB_ERR_NO_MESSAGE', reason: `your message with msg_id ${msgId} to ${quoted(peer)} was recalled: it cannot be edited` };
    const late = expired(found, windowMs, 'SB_ERR_EDIT_EXPIRED', 'edited');
    if (late) return late;
    const outcome = await rewriteSent(ctx, session, peer, msgId, found, rewrite);
    if (outcome !== CHANGED) return outcome;
    // Recalled or edited from another device since it was read: read it again.
    if (attempt === EDIT_ATTEMPTS) return { code: 'SB_ERR_STORE_UNAVAILABLE', reason: `the message changed under this edit ${EDIT_ATTEMPTS} times (another device is changing it); ask again` };
  }
}

/** What an op makes of the message. */
interface Rewrite {
  /** The event's `type`. */
  type: 'recall' | 'edit';
  /** The new body from the stored message (an own copy's without its origin_device); undefined: it is that already. */
  body(stored: MessageRequest): Uint8Array | undefined;
  /** What the event carries besides from, to and stored_at. */
  event: MessageRequest;
  /** Rewrite only the body read (InboxStore.rewrite's `expected`). */
  guarded: boolean;
}

/** A guarded rewrite found the message changed since it was read; nothing more was done. */
const CHANGED = Symbol('changed');

interface Sent extends StoredMessage {
  /** Its body, decoded (an own copy's with its origin_device). */
  request: MessageRequest;
}

interface Found {
  /** In the peer's inbox. */
  theirs: Sent | undefined;
  /** The own copy in this user's (none for a note to oneself, or from a worker started with --no-own-copies). */
  mine: Sent | undefined;
  storedAt: number;
  /** Either copy is a tombstone (a recall done in one inbox counts). */
  recalled: boolean;
}

async function findBoth(ctx: ServerContext, uid: string, peer: string, msgId: string): Promise<Found | undefined> {
  const theirs = await findSent(ctx, peer, uid, msgId, uid, false);
  const mine = peer === uid ? undefined : await findSent(ctx, uid, peer, msgId, uid, true);
  const either = theirs ?? mine;
  if (either === undefined) return undefined;
  return { theirs, mine, storedAt: either.storedAt, recalled: theirs?.request.recalled === true || mine?.request.recalled === true };
}

/**
 * Both inboxes' new bodies and events, checked against the frame limit before anything is
 * stored, then each inbox rewritten with its event, which goes to the owner's devices.
 */
async function rewriteSent(ctx: ServerContext, session: LocalSession, peer: string, msgId: string, found: Found, rewrite: Rewrite): Promise<ConversationResponse | Failure | typeof CHANGED> {
  const uid = session.uid;
  const now = Date.now();
  const event = (other: string, seq: number) => inboxEventBody(JSON.stringify({ type: rewrite.type, peer: other, seq, msgId }), { from: uid, to: peer, storedAt: now, ...rewrite.event });
  const steps: { owner: string; sent: Sent; body: Uint8Array; event: Uint8Array; own: boolean }[] = [];
  const { theirs, mine } = found;
  const theirBody = theirs && rewrite.body(theirs.request);
  if (theirBody) steps.push({ owner: peer, sent: theirs!, body: theirBody, event: event(uid, theirs!.seq), own: false });
  const myBody = mine && rewrite.body(mine.request);
  // The user's own entry: its other devices with own_copies get it, not this one (it has the answer).
  if (myBody) steps.push({ owner: uid, sent: mine!, body: ownCopyBody(myBody, mine!.request.originDevice ?? ''), event: ownCopyBody(event(peer, mine!.seq), session.deviceId), own: true });
  for (const step of steps) {
    const owner = Buffer.byteLength(step.owner);
    if (!deliveryFits(step.body.length, owner, ctx.limits.maxFrameLength) || !deliveryFits(step.event.length, owner, ctx.limits.maxFrameLength)) {
      return { code: 'SB_ERR_MESSAGE_TOO_LARGE', reason: `the ${rewrite.type}ed message or its event would exceed ${ctx.limits.maxFrameLength} bytes once delivered` };
    }
  }
  let eventSeq = 0;
  for (const step of steps) {
    const done = await ctx.inbox.rewrite(step.owner, step.sent.seq, step.body, { uid: step.owner, sender: uid, msgId: '0', body: step.event }, rewrite.guarded ? step.sent.body : undefined);
    if (done.changed) return CHANGED;
    if (done.eventSeq === undefined) continue;
    ctx.router.deliver(step.owner, done.eventSeq, step.event, done.epoch);
    if (step.own) eventSeq = done.eventSeq;
  }
  return { seq: theirs?.seq ?? 0, eventSeq };
}

/**
 * The message `msgId` from `from` in `owner`'s conversation with `conversation` (`own`: its own
 * copy), among that conversation's newest SENT_SCAN messages.
 */
async function findSent(ctx: ServerContext, owner: string, conversation: string, msgId: string, from: string, own: boolean): Promise<Sent | undefined> {
  let before = 0;
  for (let scanned = 0; scanned < SENT_SCAN; ) {
    const page = await ctx.inbox.history(owner, conversation, before, MAX_PAGE);
    for (let i = page.messages.length - 1; i >= 0; i--) {
      const m = page.messages[i]!;
      if (isOwnCopy(m.body) !== own) continue;
      const origin = originOf(m.body);
      if (origin?.from !== from || uint64String(origin.msgId) !== msgId) continue;
      return { ...m, request: storedMessage(m) };
    }
    scanned += page.messages.length;
    if (!page.more || page.messages.length === 0) return undefined;
    before = page.messages[0]!.seq;
  }
  return undefined;
}

function noMessage(msgId: string, peer: string): Failure {
  return { code: 'SB_ERR_NO_MESSAGE', reason: `no message of yours with msg_id ${msgId} among the latest ${SENT_SCAN} of the conversation with ${quoted(peer)}` };
}

function expired(found: Found, windowMs: number, code: ErrorCode, done: string): Failure | undefined {
  const age = Date.now() - found.storedAt;
  if (age <= windowMs) return undefined;
  return { code, reason: `the message was stored ${Math.round(age / 1000)} s ago; it can be ${done} for ${windowMs / 1000} s` };
}

/** A peer as a reason names it: quoted, cut at 40 characters. */
export function quoted(peer: string): string {
  return JSON.stringify(peer.length > 40 ? `${peer.slice(0, 40)}...` : peer);
}
