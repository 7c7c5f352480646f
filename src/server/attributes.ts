// Per-socket attributes, after Netty's `channel.attr(key)`: typed slots carried by the socket
// itself, so whoever holds the socket can reach what is bound to it (its LocalSession) without
// a lookup table that could outlive it.

import type { Socket } from 'node:net';

/** A typed attribute name. Keys compare by identity, so two keys never collide. */
export class AttributeKey<T> {
  declare readonly __type?: T;
  constructor(readonly name: string) {}
}

export class AttributeMap {
  readonly #values = new Map<AttributeKey<unknown>, unknown>();

  get<T>(key: AttributeKey<T>): T | undefined {
    return this.#values.get(key) as T | undefined;
  }

  set<T>(key: AttributeKey<T>, value: T): void {
    this.#values.set(key, value);
  }

  delete(key: AttributeKey<unknown>): boolean {
    return this.#values.delete(key);
  }
}

const ATTRIBUTES = Symbol('switchboard.attributes');
type WithAttributes = Socket & { [ATTRIBUTES]?: AttributeMap };

/** The socket's attribute map, created on first use. */
export function attrs(socket: Socket): AttributeMap {
  const s = socket as WithAttributes;
  return (s[ATTRIBUTES] ??= new AttributeMap());
}
