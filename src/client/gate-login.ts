// Talking to the HTTP gate: a password for a token and the address of the least-loaded worker,
// and the requests of the gate's other routes. gate-session.ts keeps a login going with its
// refresh token, and its `gateEndpoint` turns that into an ImClient endpoint resolver, so a
// client whose worker went away moves to another one.

import { SwitchboardError, isErrorCode, isSwitchboardError, type ErrorCode } from '../errors.js';
import type { Endpoint } from './options.js';

export interface GateWorker {
  id: string;
  host: string;
  port: number;
}

export interface GateLogin {
  uid: string;
  /** The access token. */
  token: string;
  expiresAt: number;
  /** The refresh token (gate-session.ts); a gate older than refresh tokens sends none. */
  refreshToken: string;
  refreshExpiresAt: number;
  worker: GateWorker;
  workers: GateWorker[];
}

export interface GateCredentials {
  username: string;
  password: string;
  deviceId: string;
  platform?: number;
}

/** A refusal by the gate: its code and message, the HTTP status, and its `retry-after` if any. */
export class GateError extends SwitchboardError {
  constructor(
    code: ErrorCode,
    message: string,
    readonly status: number,
    /** From `retry-after` (a 429, a 503): how long to wait before asking again. */
    readonly retryAfterMs?: number,
  ) {
    super(code, message);
  }
}

const GATE_TIMEOUT_MS = 15_000;

/**
 * One request to the gate: JSON in and out, `token` as `Authorization: Bearer`. A refusal
 * rejects with a GateError of the answer's code (SB_ERR_INTERNAL for a code this client does
 * not know), its HTTP status and its `retry-after`.
 */
export async function gateRequest<T>(gateUrl: string, method: string, path: string, body?: unknown, token?: string): Promise<T> {
  const headers: Record<string, string> = {};
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (token !== undefined) headers.authorization = `Bearer ${token}`;
  const response = await fetch(new URL(path, gateUrl), {
    method,
    headers,
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    signal: AbortSignal.timeout(GATE_TIMEOUT_MS),
  });
  const json = (await response.json().catch(() => ({}))) as T & { error?: { code?: string; message?: string } };
  if (!response.ok) {
    const code = json.error?.code;
    const retryAfterS = Number(response.headers.get('retry-after') ?? '');
    throw new GateError(
      code && isErrorCode(code) ? code : 'SB_ERR_INTERNAL',
      json.error?.message ?? `gate answered ${response.status}`,
      response.status,
      Number.isFinite(retryAfterS) && retryAfterS > 0 ? retryAfterS * 1000 : undefined,
    );
  }
  return json;
}

function post<T>(gateUrl: string, path: string, body: unknown): Promise<T> {
  return gateRequest(gateUrl, 'POST', path, body);
}

export function registerThroughGate(gateUrl: string, username: string, password: string): Promise<{ uid: string }> {
  return post(gateUrl, '/api/users', { username, password });
}

export function loginThroughGate(gateUrl: string, credentials: GateCredentials): Promise<GateLogin> {
  return post(gateUrl, '/api/login', credentials);
}

/**
 * A failure to reach the gate at all, as a switchboard error naming the address: fetch only says
 * "fetch failed" and keeps the socket's error (ECONNREFUSED 127.0.0.1:8080) in its cause. A
 * SwitchboardError (the gate's answer) is returned as it is.
 */
export function gateFailure(gateUrl: string, err: unknown): SwitchboardError {
  if (isSwitchboardError(err)) return err;
  const e = err as Error & { cause?: { code?: unknown; message?: unknown; errors?: { message?: unknown }[] } };
  if (e?.name === 'TimeoutError' || e?.name === 'AbortError') {
    return new SwitchboardError('SB_ERR_CLIENT_TIMEOUT', `the gate ${gateUrl} did not answer within ${GATE_TIMEOUT_MS / 1000} s`, { cause: err });
  }
  // An AggregateError (a name with several addresses) has no message of its own: its errors do.
  const cause = e?.cause;
  const detail = [cause?.message, ...(cause?.errors ?? []).map((x) => x.message)].find((m) => typeof m === 'string' && m !== '') ?? cause?.code ?? e?.message;
  return new SwitchboardError('SB_ERR_CLIENT_CONNECT_FAILED', `cannot reach the gate ${gateUrl}: ${String(detail)}`, { cause: err });
}
