// Which socket errors are TLS's own (a certificate not verified, a name that does not match, the
// other side not speaking TLS), as opposed to the network's: they repeat on every attempt, so
// they are reported as SB_ERR_TLS_HANDSHAKE and at a level an operator sees.

/** OpenSSL's certificate verification codes, as Node reports them (X509_V_ERR_* names). */
const VERIFY_CODES: ReadonlySet<string> = new Set([
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'CERT_SIGNATURE_FAILURE',
  'CERT_REVOKED',
  'CERT_UNTRUSTED',
  'CERT_REJECTED',
  'INVALID_CA',
  'PATH_LENGTH_EXCEEDED',
  'INVALID_PURPOSE',
  'HOSTNAME_MISMATCH',
]);

export function isTlsError(err: unknown): boolean {
  const code = (err as { code?: unknown } | undefined)?.code;
  if (typeof code !== 'string') return false;
  return code.startsWith('ERR_SSL_') || code.startsWith('ERR_TLS_') || VERIFY_CODES.has(code);
}
