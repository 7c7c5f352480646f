// The certificate, key and CA files of one TLS role (the client port, the peer links, the gate),
// read into a SecureContext, and read again on reload() (SIGHUP): listeners and dialers take the
// current one for every new connection, so a renewed certificate needs no restart. A reload whose
// files do not load (unreadable, not PEM, a key that does not match) keeps the previous context
// and reports SB_ERR_TLS_FILES: a half-written renewal must not take the port down.

import { readFileSync } from 'node:fs';
import tls from 'node:tls';
import { SwitchboardError } from '../errors.js';

export interface TlsFilePaths {
  /** PEM certificate chain presented to the other side. */
  cert: string;
  /** PEM private key of `cert`. */
  key: string;
  /** PEM CA certificate(s) the other side's certificate is verified against; unset: none asked for. */
  ca?: string;
}

/** The files' contents, as tls.createSecureContext and https.Server#setSecureContext take them. */
export interface TlsMaterial {
  cert: Buffer;
  key: Buffer;
  ca?: Buffer;
}

export class TlsFiles {
  readonly paths: Readonly<TlsFilePaths>;
  #material: TlsMaterial;
  #context: tls.SecureContext;
  readonly #listeners = new Set<(material: TlsMaterial) => void>();

  /** Reads the files at once; throws SB_ERR_TLS_FILES naming the file that failed. */
  constructor(paths: TlsFilePaths) {
    this.paths = Object.freeze({ ...paths });
    ({ material: this.#material, context: this.#context } = load(this.paths));
  }

  /** The context of the files as last loaded: for every new connection. */
  get context(): tls.SecureContext {
    return this.#context;
  }

  get material(): TlsMaterial {
    return this.#material;
  }

  /**
   * Reads the files again. On success the new context is current and every listener is told;
   * on failure the old one stays and the SB_ERR_TLS_FILES is thrown.
   */
  reload(): void {
    const loaded = load(this.paths);
    this.#material = loaded.material;
    this.#context = loaded.context;
    for (const listener of this.#listeners) listener(loaded.material);
  }

  /** Told the new files after each successful reload (a tls.Server's setSecureContext); returns the unsubscribe. */
  onReload(listener: (material: TlsMaterial) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }
}

/** A PEM file's contents; SB_ERR_TLS_FILES naming it when it cannot be read. */
export function readPemFile(path: string, what: string): Buffer {
  let data: Buffer;
  try {
    data = readFileSync(path);
  } catch (err) {
    throw new SwitchboardError('SB_ERR_TLS_FILES', `cannot read the ${what} file ${path}: ${(err as Error).message}`, { cause: err });
  }
  if (!data.includes('-----BEGIN ')) throw new SwitchboardError('SB_ERR_TLS_FILES', `the ${what} file ${path} holds no PEM block`);
  return data;
}

function load(paths: TlsFilePaths): { material: TlsMaterial; context: tls.SecureContext } {
  const material: TlsMaterial = { cert: readPemFile(paths.cert, 'certificate'), key: readPemFile(paths.key, 'key') };
  if (paths.ca !== undefined) material.ca = readPemFile(paths.ca, 'CA');
  try {
    return { material, context: tls.createSecureContext(material) };
  } catch (err) {
    // OpenSSL's words: "key values mismatch", "no start line"...
    throw new SwitchboardError('SB_ERR_TLS_FILES', `the TLS files ${[paths.cert, paths.key, paths.ca].filter(Boolean).join(', ')} do not load: ${(err as Error).message}`, { cause: err });
  }
}
