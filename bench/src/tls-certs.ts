// `bench chat --tls`: a throwaway CA and a certificate for localhost and 127.0.0.1, made with
// openssl in a temporary directory that remove() deletes. ECDSA P-256, as most deployments now
// use: what a handshake and a record cost depends on it.

import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

export interface BenchCertificate {
  cert: string;
  key: string;
  /** The CA certificate, PEM (what the drivers verify against). */
  ca: string;
  remove(): void;
}

export function benchCertificate(): BenchCertificate {
  const dir = mkdtempSync(path.join(tmpdir(), 'sb-bench-tls-'));
  const run = (args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  try {
    run(['req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.crt', '-subj', '/CN=switchboard-bench-ca', '-days', '2']);
    run(['req', ...ec, '-keyout', 'worker.key', '-out', 'worker.csr', '-subj', '/CN=localhost']);
    writeFileSync(path.join(dir, 'worker.ext'), 'subjectAltName=DNS:localhost,IP:127.0.0.1\n');
    run(['x509', '-req', '-in', 'worker.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'worker.crt', '-days', '2', '-extfile', 'worker.ext']);
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`--tls needs openssl on the PATH to make a certificate: ${(err as Error).message}`, { cause: err });
  }
  return {
    cert: path.join(dir, 'worker.crt'),
    key: path.join(dir, 'worker.key'),
    ca: readFileSync(path.join(dir, 'ca.crt'), 'utf8'),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}
