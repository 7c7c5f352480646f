// The peer handshake's proofs: each worker shows it knows the cluster secret by MACing the
// other side's fresh nonce, bound to both node ids, so a proof can be neither replayed to
// another worker nor reused on another connection.

import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

const LABEL = 'sb-peer-1';
export const NONCE_BYTES = 16;

export function newNonce(): Buffer {
  return randomBytes(NONCE_BYTES);
}

/** The proof that `prover` knows `secret`, answering `verifier`'s `nonce`. */
export function peerMac(secret: string, prover: string, verifier: string, nonce: Uint8Array): Buffer {
  return createHmac('sha256', secret).update(`${LABEL}|${prover}|${verifier}|`).update(nonce).digest();
}

export function verifyPeerMac(secret: string, prover: string, verifier: string, nonce: Uint8Array, mac: Uint8Array | undefined): boolean {
  if (!mac || mac.length === 0 || nonce.length !== NONCE_BYTES) return false;
  const expected = peerMac(secret, prover, verifier, nonce);
  return mac.length === expected.length && timingSafeEqual(mac, expected);
}
