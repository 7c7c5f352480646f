// Logging in through the HTTP gate: a password for a token and the address of the
// least-loaded worker. `gateEndpoint` turns that into an ImClient endpoint resolver, so every
// (re)connect asks the gate again and a client whose worker went away moves to another one.

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

/** An ImClient `endpoint` option: each connection attempt logs in at the gate again. */
export function gateEndpoint(gateUrl: string, credentials: GateCredentials): () => Promise<Endpoint> {
  return async () => {
    const login = await loginThroughGate(gateUrl, credentials);
    return { host: login.worker.host, port: login.worker.port, token: login.token };
  };
}
