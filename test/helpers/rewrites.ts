// What the recall and edit tests share (PROTOCOL.md §14): a node on each inbox store (memory, and
// Redis on a real server started for the test), logins, a stored message, the requests.

import type { Test } from 'tap';
import { startNode, type TestNode } from './node.js';
import { startRedis } from './redis.js';
import { connectLoggedIn } from './raw-session.js';
import { u64, type RawClient, type SyncOptions } from '../../testkit/raw-client.js';
import { ConversationOp, type ConversationRequest, type ImMessage } from '../../src/protocol/types.js';
import { RedisInboxStore } from '../../src/inbox/redis-inbox-store.js';
import { MemoryInboxStore } from '../../src/inbox/memory-inbox-store.js';
import type { WorkerLimits } from '../../src/config.js';

export type Start = (t: Test, limits?: Partial<WorkerLimits>) => Promise<TestNode>;
export const memory: Start = (t, limits = {}) => startNode(t, limits, { inbox: new MemoryInboxStore() });
export const redis: Start = async (t, limits = {}) => {
  const server = await startRedis(t);
  return startNode(t, limits, { inbox: new RedisInboxStore({ url: server.url }) });
};
/** Each store, to run a test on both. */
export const STORES = [
  ['memory', memory],
  ['redis', redis],
] as const;

/** `uid` logged in on `device` with acks (and `options`). */
export function login(t: Test, tn: TestNode, uid: string, device: string, options: SyncOptions = {}): Promise<RawClient> {
  return connectLoggedIn(t, tn.port, uid, tn.token(uid, device), device, { acks: true, ...options });
}

/** Sends `content` as `msgId`; resolves its seq in the recipient's inbox. */
export async function sent(client: RawClient, to: string, content: string, msgId: number): Promise<number> {
  const r = (await client.chatAndWait(to, content, { msgId })).messageResponse!;
  if (!r.result) throw new Error(`refused: ${JSON.stringify(r)}`);
  return Number(u64(r.seq));
}

export const conversation = async (client: RawClient, request: ConversationRequest) => (await client.conversation(request)).conversationResponse!;
export const recall = (client: RawClient, peer: string, msgId: number) => conversation(client, { op: ConversationOp.RECALL, peer, msgId });
export const edit = (client: RawClient, peer: string, msgId: number, content: string, json?: string) => conversation(client, { op: ConversationOp.EDIT, peer, msgId, content, json });
export const history = async (client: RawClient, peer: string) => (await conversation(client, { op: ConversationOp.HISTORY, peer })).messages ?? [];
export const eventOf = (m: ImMessage) => JSON.parse(m.messageRequest!.event!) as Record<string, unknown>;
