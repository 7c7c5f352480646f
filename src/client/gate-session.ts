// A login at the gate that lasts without the password: GateSession holds the access token and
// the refresh token of one login (PROTOCOL.md §16) and refreshes them, before the access token
// expires and when a worker refuses it as expired. The password is used once, for the first
// login, and never kept. An app that wants the login to survive a restart persists what
// `onTokens` is given (the refresh token above all) and passes it back to GateSession.restore().
// Refreshes are made one at a time: two at once with one refresh token would look like a stolen
// token's reuse to the gate, which then ends the login.

import { SwitchboardError } from '../errors.js';
import { gateFailure, gateRequest, workerEndpoint, type Gate, type GateCredentials, type GateEndpointOptions, type GateLogin, type GateWorker } from './gate-login.js';
import type { Endpoint, EndpointHint } from './options.js';

/** What a login or refresh gives: persist `refreshToken` (a secret) to restore the login later. */
export interface GateTokens {
  uid: string;
  /** The access token: what a worker and the gate's routes are given. */
  token: string;
  expiresAt: number;
  refreshToken: string;
  refreshExpiresAt: number;
}

/** A gate's refresh answer: tokens, and a worker when one is available. */
export type GateRefresh = GateTokens & { worker?: GateWorker; workers?: GateWorker[] };

export interface GateSessionOptions {
  /**
   * Told the tokens after every login and refresh, and `undefined` when the login ended (logout,
   * or the gate refused the refresh token: revoked, reused, expired): forget them then.
   */
  onTokens?: (tokens: GateTokens | undefined) => void;
  /** Refresh when the access token expires within this; default a fifth of its lifetime, at most 60 s. */
  refreshMarginMs?: number;
}

/** Codes of a refresh that end the login: the user must log in with the password again. */
const ENDED_CODES: ReadonlySet<string> = new Set(['SB_ERR_REFRESH_INVALID', 'SB_ERR_REFRESH_REUSED']);

export class GateSession {
  readonly gateUrl: Gate;
  readonly #options: GateSessionOptions;
  #tokens: GateTokens | undefined;
  /** The workers the last login or refresh named, first the one to use. */
  #workers: GateWorker[] = [];
  #lifetimeMs = 0;
  #refreshing: Promise<GateRefresh> | undefined;

  private constructor(gateUrl: Gate, tokens: GateTokens, options: GateSessionOptions) {
    this.gateUrl = gateUrl;
    this.#options = options;
    this.#set(tokens);
  }

  /** A password login; the password is not kept. */
  static async login(gateUrl: Gate, credentials: GateCredentials, options: GateSessionOptions = {}): Promise<GateSession> {
    const login = await gateRequest<GateLogin>(gateUrl, 'POST', '/api/login', credentials).catch((err: unknown) => {
      throw gateFailure(gateUrl, err);
    });
    const session = new GateSession(gateUrl, login, options);
    session.#workers = [login.worker, ...login.workers];
    options.onTokens?.(session.tokens);
    return session;
  }

  /**
   * A login restored from what `onTokens` was given. Only the refresh token is needed (the
   * first access token is then fetched at once); `uid` is checked against the gate's answer.
   */
  static restore(gateUrl: Gate, saved: Pick<GateTokens, 'uid' | 'refreshToken'> & Partial<GateTokens>, options: GateSessionOptions = {}): GateSession {
    return new GateSession(gateUrl, { token: '', expiresAt: 0, refreshExpiresAt: 0, ...saved }, options);
  }

  /** The current tokens, a copy; undefined once the login ended. */
  get tokens(): GateTokens | undefined {
    return this.#tokens && { ...this.#tokens };
  }

  get uid(): string {
    return this.#tokens?.uid ?? '';
  }

  /** An access token valid for at least the margin: the current one, or a refreshed one. */
  async accessToken(now = Date.now()): Promise<string> {
    const tokens = this.#live();
    if (tokens.token !== '' && now < tokens.expiresAt - this.#margin()) return tokens.token;
    return (await this.refresh()).token;
  }

  /** Refreshes now (one refresh at a time: concurrent callers share it). */
  refresh(): Promise<GateRefresh> {
    return (this.#refreshing ??= this.#refresh().finally(() => (this.#refreshing = undefined)));
  }

  /** The next worker to try, with a valid access token: from the last answer's list, refreshing for a new list once it is used up. */
  async nextWorker(refresh = false, usable: (worker: GateWorker) => boolean = () => true): Promise<{ worker: GateWorker; token: string }> {
    this.#workers = this.#workers.filter(usable);
    const token = refresh || this.#workers.length === 0 ? (await this.refresh()).token : await this.accessToken();
    this.#workers = this.#workers.filter(usable);
    const worker = this.#workers.shift();
    if (!worker) throw new SwitchboardError('SB_ERR_NO_WORKER', 'the gate names no worker available (with TLS required: none with a TLS port; is --tls-port set on the workers?); trying again');
    return { worker, token };
  }

  /** Ends this login at the gate (its refresh family, and the device's sessions on every worker). */
  async logout(): Promise<void> {
    const tokens = this.#tokens;
    if (!tokens) return;
    await this.#refreshing?.catch(() => {});
    await gateRequest(this.gateUrl, 'POST', '/api/logout', { refreshToken: this.#tokens?.refreshToken ?? tokens.refreshToken }).catch((err: unknown) => {
      const failure = gateFailure(this.gateUrl, err);
      // Already ended at the gate: logged out all the same.
      if (!ENDED_CODES.has(failure.code)) throw failure;
    });
    this.#end();
  }

  async #refresh(): Promise<GateRefresh> {
    const tokens = this.#live();
    let answer: GateRefresh;
    try {
      answer = await gateRequest<GateRefresh>(this.gateUrl, 'POST', '/api/refresh', { refreshToken: tokens.refreshToken });
    } catch (err) {
      const failure = gateFailure(this.gateUrl, err);
      if (ENDED_CODES.has(failure.code)) this.#end();
      throw failure;
    }
    if (answer.uid !== tokens.uid) throw new SwitchboardError('SB_ERR_TOKEN_MISMATCH', `the gate refreshed a login of ${answer.uid}, not of ${tokens.uid}`);
    this.#set(answer);
    this.#workers = answer.worker ? [answer.worker, ...(answer.workers ?? [])] : [];
    this.#options.onTokens?.(this.tokens);
    return answer;
  }

  #live(): GateTokens {
    if (!this.#tokens) throw new SwitchboardError('SB_ERR_REFRESH_INVALID', 'this login has ended: log in with the password again');
    return this.#tokens;
  }

  #set({ uid, token, expiresAt, refreshToken, refreshExpiresAt }: GateTokens): void {
    this.#tokens = { uid, token, expiresAt, refreshToken, refreshExpiresAt };
    if (token !== '') this.#lifetimeMs = Math.max(0, expiresAt - Date.now());
  }

  #margin(): number {
    return this.#options.refreshMarginMs ?? Math.min(60_000, Math.floor(this.#lifetimeMs / 5));
  }

  #end(): void {
    this.#tokens = undefined;
    this.#workers = [];
    this.#options.onTokens?.(undefined);
  }
}

/** Worker refusals of a token that a refreshed one may get past. */
const REFRESHED_CODES: ReadonlySet<string> = new Set(['SB_ERR_TOKEN_EXPIRED', 'SB_ERR_TOKEN_REVOKED']);

/**
 * An ImClient `endpoint` option. The first attempt logs in at the gate with the password (then
 * forgotten), or starts from a restored GateSession; later attempts try the gate's fallback
 * workers with the same access token, and refresh (no password) once they are used up, once the
 * token is about to expire, or when a worker refused it (SB_ERR_TOKEN_EXPIRED: the ImClient
 * passes the refusal as the hint). So when a worker dies, its clients spread over the
 * fallbacks instead of all queueing at the gate at once. A failure says why: the gate's refusal
 * (GateError, with `retryAfterMs` that ImClient waits out; SB_ERR_REFRESH_INVALID or
 * SB_ERR_REFRESH_REUSED when the login has ended, which ends the client), or gateFailure()'s
 * SB_ERR_CLIENT_CONNECT_FAILED naming the address when the gate cannot be reached.
 * `onLogin` is told the session after its first login (its access token serves the gate's
 * group API too: GateGroups). `tls` chooses between a worker's TLS and plain ports.
 */
export function gateEndpoint(gateUrl: Gate, source: GateCredentials | GateSession, onLogin?: (session: GateSession) => void, options: GateSessionOptions & GateEndpointOptions = {}): (hint?: EndpointHint) => Promise<Endpoint> {
  const tls = options.tls ?? 'auto';
  let session = source instanceof GateSession ? source : undefined;
  let credentials = source instanceof GateSession ? undefined : source;
  return async (hint) => {
    if (!session) {
      session = await GateSession.login(gateUrl, credentials!, options);
      credentials = undefined;
      onLogin?.(session);
    }
    // TLS required: the workers without a TLS port are passed over.
    const { worker, token } = await session.nextWorker(hint?.reason !== undefined && REFRESHED_CODES.has(hint.reason), tls === 'require' ? (w) => w.tlsPort !== undefined : undefined);
    return workerEndpoint(worker, token, tls);
  };
}
