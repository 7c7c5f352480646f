// Per-socket attributes, after Netty's `channel.attr(key)`: typed slots carried by the socket
// itself, so whoever holds the socket can reach what is bound to it (its LocalSession) without
// a lookup table that could outlive it.

import type { Socket } from 'node:net';

/** A typed attribute name. Keys compare by identity, so two keys never collide. */
export class AttributeKey<T> {
  declare readonly __type?: T;
  constructor(readonly name: string) {}
}

/**
 * A socket carries one or two attributes, so they are kept as key, value, key, value in one
 * small array (made on the first set) rather than a Map, whose hash table costs every idle
 * connection a couple of hundred bytes.
 */
export class AttributeMap {
  #slots: unknown[] | undefined;

  get<T>(key: AttributeKey<T>): T | undefined {
    const slots = this.#slots;
    if (!slots) return undefined;
    for (let i = 0; i < slots.length; i += 2) if (slots[i] === key) return slots[i + 1] as T;
    return undefined;
  }

  set<T>(key: AttributeKey<T>, value: T): void {
    const slots = this.#slots;
    if (!slots) {
      // Exactly two elements: push() onto an empty array would reserve room for seventeen.
      this.#slots = [key, value];
      return;
    }
    for (let i = 0; i < slots.length; i += 2) {
      if (slots[i] === key) {
        slots[i + 1] = value;
        return;
      }
    }
    slots.push(key, value);
  }

  delete(key: AttributeKey<unknown>): boolean {
    const slots = this.#slots;
    if (!slots) return false;
    for (let i = 0; i < slots.length; i += 2) {
      if (slots[i] === key) {
        slots.splice(i, 2);
        return true;
      }
    }
    return false;
  }
}

const ATTRIBUTES = Symbol('switchboard.attributes');
type WithAttributes = Socket & { [ATTRIBUTES]?: AttributeMap };

/** The socket's attribute map, created on first use. */
export function attrs(socket: Socket): AttributeMap {
  const s = socket as WithAttributes;
  return (s[ATTRIBUTES] ??= new AttributeMap());
}
