// Certificates for TLS tests, made with openssl in a temporary directory removed after the test:
// a CA, and certificates it issues for names (DNS and IP entries) with their keys. A second
// CA is "another CA": what it issues must be refused wherever the first is trusted.

import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync, readFileSync, copyFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Test } from 'tap';

export interface TestCertificate {
  cert: string;
  key: string;
}

export interface TestCa {
  /** The CA certificate's file. */
  ca: string;
  /** Issues a certificate for `names` (default localhost and 127.0.0.1), files named after `name`. */
  issue(name: string, names?: readonly string[]): TestCertificate;
}

export interface TestPki {
  dir: string;
  /** Makes a CA (its files named after `name`). */
  ca(name: string): TestCa;
  /** A file in the directory with this content (a broken certificate, a key that matches nothing). */
  write(name: string, content: string): string;
  read(file: string): Buffer;
  copy(from: string, to: string): void;
}

function openssl(dir: string, args: string[]): void {
  execFileSync('/usr/bin/openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
}

export function testPki(t: Test): TestPki {
  const dir = mkdtempSync(path.join(tmpdir(), 'sb-tls-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  return {
    dir,
    ca(name) {
      openssl(dir, ['req', '-x509', ...ec, '-keyout', `${name}.key`, '-out', `${name}.crt`, '-subj', `/CN=${name}`, '-days', '2']);
      return {
        ca: path.join(dir, `${name}.crt`),
        issue(leaf, names = ['localhost', '127.0.0.1']) {
          const san = names.map((n) => (/^[\d.]+$|:/.test(n) ? `IP:${n}` : `DNS:${n}`)).join(',');
          writeFileSync(path.join(dir, `${leaf}.ext`), `subjectAltName=${san}\n`);
          openssl(dir, ['req', ...ec, '-keyout', `${leaf}.key`, '-out', `${leaf}.csr`, '-subj', `/CN=${leaf}`]);
          openssl(dir, ['x509', '-req', '-in', `${leaf}.csr`, '-CA', `${name}.crt`, '-CAkey', `${name}.key`, '-set_serial', String(Date.now() * 1000 + Math.floor(Math.random() * 1000)), '-out', `${leaf}.crt`, '-days', '2', '-extfile', `${leaf}.ext`]);
          return { cert: path.join(dir, `${leaf}.crt`), key: path.join(dir, `${leaf}.key`) };
        },
      };
    },
    write(name, content) {
      const file = path.join(dir, name);
      writeFileSync(file, content);
      return file;
    },
    read: (file) => readFileSync(file),
    copy: (from, to) => copyFileSync(from, to),
  };
}
