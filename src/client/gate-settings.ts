// The user's settings at the gate (PROTOCOL.md §14): the receipts privacy setting. Each call
// carries the token of a gate login; a refusal rejects with a GateError of the gate's code, a
// gate that cannot be reached with gateFailure()'s SB_ERR_CLIENT_CONNECT_FAILED.

import { gateFailure, gateRequest, type Gate } from './gate-login.js';
import type { TokenSource } from './gate-groups.js';

export interface UserSettings {
  /** Off: this user's devices send no "delivered"/"read" receipts and get none. Default on. */
  receipts: boolean;
}

export class GateSettings {
  readonly #gateUrl: Gate;
  readonly #token: TokenSource;

  constructor(gateUrl: Gate, token: TokenSource) {
    this.#gateUrl = gateUrl;
    this.#token = token;
  }

  get(): Promise<UserSettings> {
    return this.#call('GET');
  }

  /** Applies to every device of the user within 30 s (workers re-read it so often). */
  setReceipts(on: boolean): Promise<UserSettings> {
    return this.#call('PUT', { receipts: on });
  }

  async #call(method: string, body?: unknown): Promise<UserSettings> {
    const token = typeof this.#token === 'function' ? await this.#token() : this.#token;
    return gateRequest<UserSettings>(this.#gateUrl, method, '/api/settings', body, token).catch((err: unknown) => {
      throw gateFailure(this.#gateUrl, err);
    });
  }
}
