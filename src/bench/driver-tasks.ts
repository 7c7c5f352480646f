// What a driver process can be asked to run. Each task takes plain JSON options (they cross
// the IPC channel) and the driver's channel back to the coordinator.

import { TokenSigner } from '../auth/token.js';
import { runChatLoad, type ChatLoadOptions } from './chat-load.js';

export interface DriverChannel {
  /** Index of this driver among the run's drivers. */
  index: number;
  /** Resolves when every driver of the run is ready: the load starts together. */
  ready(): Promise<void>;
  /** A progress record for the coordinator (about once a second). */
  emit(tick: unknown): void;
}

export type ChatTaskOptions = Omit<ChatLoadOptions, 'token' | 'ready' | 'onSecond'> & { secret?: string; tokenTtlMs?: number };

export const DRIVER_TASKS = {
  chat: (o: ChatTaskOptions, channel: DriverChannel) => {
    const signer = o.secret === undefined ? undefined : new TokenSigner(o.secret);
    return runChatLoad({
      ...o,
      token: signer && ((uid) => signer.mint({ uid, ttlMs: o.tokenTtlMs ?? 3_600_000 })),
      ready: () => channel.ready(),
      onSecond: (second) => channel.emit(second),
    });
  },
} satisfies Record<string, (options: never, channel: DriverChannel) => Promise<unknown>>;

export type DriverTask = keyof typeof DRIVER_TASKS;
export type TaskOptions<T extends DriverTask> = Parameters<(typeof DRIVER_TASKS)[T]>[0];
export type TaskResult<T extends DriverTask> = Awaited<ReturnType<(typeof DRIVER_TASKS)[T]>>;
