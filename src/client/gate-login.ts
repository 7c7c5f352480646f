// Talking to the HTTP gate: a password for a token and the address of the least-loaded worker,
// and the requests of the gate's other routes. gate-session.ts keeps a login going with its
// refresh token, and its `gateEndpoint` turns that into an ImClient endpoint resolver, so a
// client whose worker went away moves to another one. The gate may be https://, verified
// against Node's CA list or a CA of the caller's (`Gate` with `ca`); the workers it names may
// have a TLS port (workerEndpoint).

import https from 'node:https';
import { SwitchboardError, isErrorCode, isSwitchboardError, type ErrorCode } from '../errors.js';
import type { Endpoint } from './options.js';

export interface GateWorker {
  id: string;
  host: string;
  /** Plaintext client port; 0 when the worker has none (then `tlsPort`). */
  port: number;
  /** TLS client port, when the worker has one (a gate or worker of an older version names none). */
  tlsPort?: number;
}

/** The gate's URL, or the URL and the CA (PEM) an https:// gate's certificate must be issued by. */
export type Gate = string | { url: string; ca?: string | Buffer };

function gateUrlOf(gate: Gate): string {
  return typeof gate === 'string' ? gate : gate.url;
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
export async function gateRequest<T>(gate: Gate, method: string, path: string, body?: unknown, token?: string): Promise<T> {
  const headers: Record<string, string> = {};
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (token !== undefined) headers.authorization = `Bearer ${token}`;
  const url = new URL(path, gateUrlOf(gate));
  const init = { method, headers, ...(body !== undefined ? { body: JSON.stringify(body) } : {}), signal: AbortSignal.timeout(GATE_TIMEOUT_MS) };
  const ca = typeof gate === 'string' ? undefined : gate.ca;
  const response = ca !== undefined && url.protocol === 'https:' ? await httpsWithCa(url, init, ca) : await fetch(url, init);
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

/** What gateRequest reads of an answer: fetch's Response, or httpsWithCa's. */
interface GateAnswer {
  ok: boolean;
  status: number;
  headers: { get(name: string): string | null };
  json(): Promise<unknown>;
}

/**
 * One request over node:https with a CA of the caller's: fetch takes no CA (short of a
 * dispatcher from the undici package, which switchboard does not depend on). Fails as fetch
 * does, the socket's error as the cause, so gateFailure() reads both alike.
 */
function httpsWithCa(url: URL, init: { method: string; headers: Record<string, string>; body?: string; signal: AbortSignal }, ca: string | Buffer): Promise<GateAnswer> {
  return new Promise((resolve, reject) => {
    const request = https.request(url, { method: init.method, headers: init.headers, ca, signal: init.signal }, (response) => {
      const chunks: Buffer[] = [];
      let size = 0;
      response.on('data', (chunk: Buffer) => {
        size += chunk.length;
        // A gate's answers are small: more is not a gate.
        if (size > MAX_ANSWER_BYTES) request.destroy(new Error(`the answer exceeds ${MAX_ANSWER_BYTES} bytes`));
        else chunks.push(chunk);
      });
      response.on('end', () => {
        const status = response.statusCode ?? 0;
        const text = Buffer.concat(chunks).toString('utf8');
        resolve({
          ok: status >= 200 && status < 300,
          status,
          headers: { get: (name) => [response.headers[name.toLowerCase()] ?? null].flat()[0] ?? null },
          json: async () => JSON.parse(text) as unknown,
        });
      });
      response.on('error', (err) => reject(Object.assign(new Error('fetch failed', { cause: err }), { name: 'TypeError' })));
    });
    request.on('error', (err) => reject(err.name === 'AbortError' ? err : Object.assign(new Error('fetch failed', { cause: err }), { name: 'TypeError' })));
    request.end(init.body);
  });
}

/** The largest answer httpsWithCa reads. */
const MAX_ANSWER_BYTES = 1024 * 1024;

function post<T>(gate: Gate, path: string, body: unknown): Promise<T> {
  return gateRequest(gate, 'POST', path, body);
}

export function registerThroughGate(gate: Gate, username: string, password: string): Promise<{ uid: string }> {
  return post(gate, '/api/users', { username, password });
}

export function loginThroughGate(gate: Gate, credentials: GateCredentials): Promise<GateLogin> {
  return post(gate, '/api/login', credentials);
}

/**
 * A failure to reach the gate at all, as a switchboard error naming the address: fetch only says
 * "fetch failed" and keeps the socket's error (ECONNREFUSED 127.0.0.1:8080) in its cause. A
 * SwitchboardError (the gate's answer) is returned as it is.
 */
export function gateFailure(gate: Gate, err: unknown): SwitchboardError {
  if (isSwitchboardError(err)) return err;
  const gateUrl = gateUrlOf(gate);
  const e = err as Error & { cause?: { code?: unknown; message?: unknown; errors?: { message?: unknown }[] } };
  if (e?.name === 'TimeoutError' || e?.name === 'AbortError') {
    return new SwitchboardError('SB_ERR_CLIENT_TIMEOUT', `the gate ${gateUrl} did not answer within ${GATE_TIMEOUT_MS / 1000} s`, { cause: err });
  }
  // An AggregateError (a name with several addresses) has no message of its own: its errors do.
  const cause = e?.cause;
  const detail = [cause?.message, ...(cause?.errors ?? []).map((x) => x.message)].find((m) => typeof m === 'string' && m !== '') ?? cause?.code ?? e?.message;
  return new SwitchboardError('SB_ERR_CLIENT_CONNECT_FAILED', `cannot reach the gate ${gateUrl}: ${String(detail)}`, { cause: err });
}

export interface GateEndpointOptions {
  /**
   * `auto` (default): the worker's TLS port when the gate names one, else its plain port;
   * `require`: TLS only (workers without a TLS port are passed over); `off`: the plain port.
   */
  tls?: 'auto' | 'require' | 'off';
}

/** Where to reach `worker` under `tls`. */
export function workerEndpoint(worker: GateWorker, token: string, tls: GateEndpointOptions['tls'] = 'auto'): Endpoint {
  if (worker.tlsPort !== undefined && (tls !== 'off' || worker.port === 0)) return { host: worker.host, port: worker.tlsPort, token, tls: true };
  return { host: worker.host, port: worker.port, token };
}
