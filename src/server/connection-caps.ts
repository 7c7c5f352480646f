// Caps on what a worker accepts, checked at accept before anything is built for the socket:
// connections per client address, and connections that have not logged in (nor proven a
// peer). Without them one host holding idle sockets takes every file descriptor and nobody
// else can log in. A refused socket gets one CLOSING frame (made at most once a second per
// cause) and is closed once that is written: no Connection, no timer, no listener of its own.
//
// At the cap on connections not logged in, the one that has waited longest is shed to make room
// (ConnectionCaps asks the server for it): holding idle sockets then no longer keeps everyone
// else from logging in, since a client logs in within a round trip or two while an attacker
// must open a cap's worth of sockets in that time to shed it. Only when there is none to shed
// is the new socket refused.
//
// IPv4 addresses count one by one. IPv6 counts per /64: a single host commonly holds a whole
// /64 and can pick any address in it, so a per-address cap would not hold it.

import type net from 'node:net';
import { encodeMessageFrame } from '../protocol/codec.js';
import { closingNotification, type Failure } from '../protocol/messages.js';

export interface CapLimits {
  /** 0: no cap. */
  maxConnectionsPerIp: number;
  /** 0: no cap. */
  maxUnauthenticated: number;
}

/** How many sockets each cap refused since the last report, and the last address refused. */
export interface Refusals {
  perIp: number;
  unauthenticated: number;
  /** Connections not logged in that were closed to make room for newer ones. */
  shed: number;
  lastAddress: string | undefined;
}

export class ConnectionCaps {
  readonly #limits: CapLimits;
  /** Open connections per address key (only while the per-address cap is on). */
  readonly #perIp = new Map<string, number>();
  #unauthenticated = 0;
  #refusals: Refusals = { perIp: 0, unauthenticated: 0, shed: 0, lastAddress: undefined };
  readonly #ipFailure: Failure;
  readonly #busyFailure: Failure;
  readonly #frames = new Map<Failure, { frame: Buffer; second: number }>();

  constructor(limits: CapLimits) {
    this.#limits = limits;
    this.#ipFailure = { code: 'SB_ERR_TOO_MANY_CONNECTIONS', reason: `this address has ${limits.maxConnectionsPerIp} connections open` };
    this.#busyFailure = { code: 'SB_ERR_SERVER_BUSY', reason: `${limits.maxUnauthenticated} connections were waiting to log in and this one waited longest; log in at once after connecting` };
  }

  /** Connections counted as not logged in. */
  get unauthenticated(): number {
    return this.#unauthenticated;
  }

  /** Open connections of the address key `key` (see addressKey). */
  connectionsOf(key: string): number {
    return this.#perIp.get(key) ?? 0;
  }

  /**
   * Admits a new socket, counting it as unauthenticated and under its address; returns the
   * address key to hand back to closed(). At the cap on connections not logged in, `shedOldest`
   * is asked to close the longest waiting one (it calls shed() and returns true, or returns
   * false when there is none). A socket over a cap is answered and closed here, and null is
   * returned; on a TLS port (`plaintext: false`) it is closed without an answer.
   */
  admit(socket: net.Socket, shedOldest: () => boolean = () => false, { plaintext = true }: { plaintext?: boolean } = {}): string | undefined | null {
    const { maxConnectionsPerIp, maxUnauthenticated } = this.#limits;
    // Read only when needed: reading it makes the socket keep its peer address object.
    const key = maxConnectionsPerIp > 0 ? addressKey(socket.remoteAddress) : undefined;
    const open = key === undefined ? 0 : (this.#perIp.get(key) ?? 0);
    if (key !== undefined && open >= maxConnectionsPerIp) {
      this.#refusals.perIp++;
      this.#refuse(socket, this.#ipFailure, key, plaintext);
      return null;
    }
    if (maxUnauthenticated > 0 && this.#unauthenticated >= maxUnauthenticated && !shedOldest()) {
      this.#refusals.unauthenticated++;
      this.#refuse(socket, this.#busyFailure, key, plaintext);
      return null;
    }
    if (key !== undefined) this.#perIp.set(key, open + 1);
    this.#unauthenticated++;
    return key;
  }

  /**
   * An admitted connection not logged in is being shed: it no longer counts as waiting (its
   * closed() must say so); returns the failure and the CLOSING frame to end it with.
   */
  shed(): { failure: Failure; frame: Buffer } {
    this.#unauthenticated--;
    this.#refusals.shed++;
    return { failure: this.#busyFailure, frame: this.#frame(this.#busyFailure) };
  }

  /** An admitted connection logged in (or proved a peer). */
  authenticated(): void {
    this.#unauthenticated--;
  }

  /** An admitted connection's socket closed. */
  closed(key: string | undefined, wasAuthenticated: boolean): void {
    if (!wasAuthenticated) this.#unauthenticated--;
    if (key === undefined) return;
    const open = this.#perIp.get(key) ?? 0;
    if (open <= 1) this.#perIp.delete(key);
    else this.#perIp.set(key, open - 1);
  }

  /** The refusals since the last call (for a periodic summary in the log), and starts counting anew. */
  takeRefusals(): Refusals | undefined {
    const refusals = this.#refusals;
    if (refusals.perIp === 0 && refusals.unauthenticated === 0 && refusals.shed === 0) return undefined;
    this.#refusals = { perIp: 0, unauthenticated: 0, shed: 0, lastAddress: undefined };
    return refusals;
  }

  #refuse(socket: net.Socket, failure: Failure, key: string | undefined, plaintext: boolean): void {
    if (key !== undefined) this.#refusals.lastAddress = key;
    // A TLS port's client would read a plaintext frame as a broken handshake: it is just closed.
    if (!plaintext) {
      socket.destroy();
      return;
    }
    socket.on('error', ignore);
    // Closed once the frame is written, whether or not the client ever reads or closes.
    socket.once('finish', destroyThis);
    socket.end(this.#frame(failure));
    socket.resume();
  }

  /** The CLOSING frame of `failure`, made again when the one cached is from an earlier second. */
  #frame(failure: Failure): Buffer {
    const second = Math.floor(Date.now() / 1000);
    let cached = this.#frames.get(failure);
    if (cached?.second !== second) this.#frames.set(failure, (cached = { frame: encodeMessageFrame(closingNotification(failure)), second }));
    return cached.frame;
  }
}

function ignore(): void {}

function destroyThis(this: net.Socket): void {
  this.destroy();
}

/**
 * The key a client address counts under: an IPv4 address itself (also when IPv4-mapped), an
 * IPv6 address's /64 prefix ("2001:db8:0:1::/64"); undefined when the socket has no address
 * (it closed before it was accepted).
 */
export function addressKey(address: string | undefined): string | undefined {
  if (!address) return undefined;
  if (!address.includes(':')) return address;
  const lower = address.toLowerCase();
  if (lower.startsWith('::ffff:') && lower.includes('.')) return lower.slice(7);
  const zone = lower.indexOf('%');
  const bare = zone < 0 ? lower : lower.slice(0, zone);
  const gap = bare.indexOf('::');
  let groups: string[];
  if (gap < 0) groups = bare.split(':');
  else {
    const head = gap === 0 ? [] : bare.slice(0, gap).split(':');
    const tail = gap + 2 === bare.length ? [] : bare.slice(gap + 2).split(':');
    groups = [...head, ...Array<string>(Math.max(0, 8 - head.length - tail.length)).fill('0'), ...tail];
  }
  const prefix = groups.slice(0, 4).map((g) => (parseInt(g, 16) || 0).toString(16));
  return `${prefix.join(':')}::/64`;
}
