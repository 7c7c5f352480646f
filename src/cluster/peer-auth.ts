// The peer handshake's proofs (PROTOCOL.md §10). Both sides MAC the whole transcript (both node
// ids and both nonces, in dialer/acceptor order) under the cluster secret, each under a label of
// its own role, every field length-prefixed: so a proof answers one handshake only, and what a
// worker computes as the acceptor can never serve as a dialer's proof (or the reverse), on this
// worker or any other.

import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

export const NONCE_BYTES = 16;

/** Which side proves: the acceptor in PEER_CHALLENGE, the dialer in PEER_AUTH. */
export type ProofRole = 'challenge' | 'auth';

const LABELS: Readonly<Record<ProofRole, Buffer>> = Object.freeze({
  challenge: Buffer.from('sb-peer-2 challenge'),
  auth: Buffer.from('sb-peer-2 auth'),
});

/** What both sides of one handshake have seen: the ids they go by and the nonces they sent. */
export interface Transcript {
  dialer: string;
  acceptor: string;
  dialerNonce: Uint8Array;
  acceptorNonce: Uint8Array;
}

/** 1 to 64 of `A-Z a-z 0-9 . _ -`: ZooKeeper's ids are ten digits. */
const NODE_ID = /^[A-Za-z0-9._-]{1,64}$/;

export function isValidNodeId(id: string): boolean {
  return NODE_ID.test(id);
}

export function newNonce(): Buffer {
  return randomBytes(NONCE_BYTES);
}

/**
 * The bytes MACed: label, dialer id, acceptor id, dialer nonce, acceptor nonce, each as a
 * uint16 big-endian length followed by the bytes (ids in UTF-8).
 */
export function proofInput(role: ProofRole, t: Transcript): Buffer {
  const fields = [LABELS[role], Buffer.from(t.dialer, 'utf8'), Buffer.from(t.acceptor, 'utf8'), t.dialerNonce, t.acceptorNonce];
  const out = Buffer.allocUnsafe(fields.reduce((n, f) => n + 2 + f.length, 0));
  let at = 0;
  for (const field of fields) {
    at = out.writeUInt16BE(field.length, at);
    out.set(field, at);
    at += field.length;
  }
  return out;
}

/** HMAC-SHA256(secret, proofInput(role, transcript)). */
export function peerProof(secret: string, role: ProofRole, t: Transcript): Buffer {
  return createHmac('sha256', secret).update(proofInput(role, t)).digest();
}

export function verifyPeerProof(secret: string, role: ProofRole, t: Transcript, mac: Uint8Array | null | undefined): boolean {
  if (!mac || t.dialerNonce.length !== NONCE_BYTES || t.acceptorNonce.length !== NONCE_BYTES) return false;
  if (!isValidNodeId(t.dialer) || !isValidNodeId(t.acceptor)) return false;
  const expected = peerProof(secret, role, t);
  return mac.length === expected.length && timingSafeEqual(mac, expected);
}
