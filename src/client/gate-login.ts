// Logging in through the HTTP gate: a password for a token and the address of the
// least-loaded worker. `gateEndpoint` turns that into an ImClient endpoint resolver, so a client
// whose worker went away moves to another one.

import { SwitchboardError, isErrorCode } from '../errors.js';
import type { Endpoint } from './im-client.js';

export interface GateWorker {
  id: string;
  host: string;
  port: number;
}

export interface GateLogin {
  uid: string;
  token: string;
  expiresAt: number;
  worker: GateWorker;
  workers: GateWorker[];
}

export interface GateCredentials {
  username: string;
  password: string;
  deviceId: string;
  platform?: number;
}

async function post<T>(gateUrl: string, path: string, body: unknown): Promise<T> {
  const response = await fetch(new URL(path, gateUrl), {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(15_000),
  });
  const json = (await response.json().catch(() => ({}))) as T & { error?: { code?: string; message?: string } };
  if (!response.ok) {
    const code = json.error?.code;
    throw new SwitchboardError(code && isErrorCode(code) ? code : 'SB_ERR_INTERNAL', json.error?.message ?? `gate answered ${response.status}`);
  }
  return json;
}

export function registerThroughGate(gateUrl: string, username: string, password: string): Promise<{ uid: string }> {
  return post(gateUrl, '/api/users', { username, password });
}

export function loginThroughGate(gateUrl: string, credentials: GateCredentials): Promise<GateLogin> {
  return post(gateUrl, '/api/login', credentials);
}

/** A token this close to its expiry is not reused. */
const TOKEN_MARGIN_MS = 60_000;

/**
 * An ImClient `endpoint` option. The first attempt logs in at the gate; later attempts try the
 * gate's fallback workers with the same token, and log in again (a full password check at the
 * gate) only once they are used up or the token is about to expire. So when a worker dies, its
 * clients spread over the fallbacks instead of all queueing at the gate at once.
 */
export function gateEndpoint(gateUrl: string, credentials: GateCredentials): () => Promise<Endpoint> {
  let login: GateLogin | undefined;
  let candidates: GateWorker[] = [];
  return async () => {
    if (!login || candidates.length === 0 || Date.now() > login.expiresAt - TOKEN_MARGIN_MS) {
      login = await loginThroughGate(gateUrl, credentials);
      candidates = [login.worker, ...login.workers];
    }
    const worker = candidates.shift()!;
    return { host: worker.host, port: worker.port, token: login.token };
  };
}
