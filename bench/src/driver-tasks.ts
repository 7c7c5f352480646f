// What a driver process can be asked to run. Each task takes plain JSON options (they cross
// the IPC channel) and the driver's channel back to the coordinator.

import { TokenSigner } from '../../src/auth/token.js';
import { runChatLoad, type ChatLoadOptions } from './chat-load.js';
import { runLoginLoad, type LoginLoadOptions } from './login-load.js';
import { runIdleLoad, type IdleLoadOptions } from './idle-load.js';
import { runFailoverLoad, type FailoverLoadOptions } from './failover-load.js';
import { runGroupLoad, type GroupLoadOptions } from './group-load.js';

export interface DriverChannel {
  /** Index of this driver among the run's drivers. */
  index: number;
  /** Resolves when every driver of the run is ready: the load starts together. */
  ready(): Promise<void>;
  /** A progress record for the coordinator (about once a second). */
  emit(tick: unknown): void;
}

export type ChatTaskOptions = Omit<ChatLoadOptions, 'token' | 'ready' | 'onSecond'> & { secret?: string; tokenTtlMs?: number };
export type LoginTaskOptions = Omit<LoginLoadOptions, 'token' | 'ready' | 'onSecond'> & { secret: string; tokenTtlMs?: number };
export type IdleTaskOptions = Omit<IdleLoadOptions, 'token' | 'ready' | 'onSecond'> & { secret: string; tokenTtlMs?: number };
export type GroupTaskOptions = Omit<GroupLoadOptions, 'token' | 'ready' | 'onSecond'> & { secret: string };
export type FailoverTaskOptions = Omit<FailoverLoadOptions, 'token' | 'ready' | 'onSecond'> & { secret: string };

export const DRIVER_TASKS = {
  login: (o: LoginTaskOptions, channel: DriverChannel) => {
    const signer = new TokenSigner(o.secret);
    return runLoginLoad({
      ...o,
      token: (uid) => signer.mint({ uid, ttlMs: o.tokenTtlMs ?? 3_600_000 }),
      ready: () => channel.ready(),
      onSecond: (second) => channel.emit(second),
    });
  },
  chat: (o: ChatTaskOptions, channel: DriverChannel) => {
    const signer = o.secret === undefined ? undefined : new TokenSigner(o.secret);
    return runChatLoad({
      ...o,
      token: signer && ((uid) => signer.mint({ uid, ttlMs: o.tokenTtlMs ?? 3_600_000 })),
      ready: () => channel.ready(),
      onSecond: (second) => channel.emit(second),
    });
  },
  group: (o: GroupTaskOptions, channel: DriverChannel) => {
    const signer = new TokenSigner(o.secret);
    return runGroupLoad({
      ...o,
      token: (uid) => signer.mint({ uid, ttlMs: 3_600_000 }),
      ready: () => channel.ready(),
      onSecond: (second) => channel.emit(second),
    });
  },
  failover: (o: FailoverTaskOptions, channel: DriverChannel) => {
    const signer = new TokenSigner(o.secret);
    return runFailoverLoad({
      ...o,
      token: (uid) => signer.mint({ uid, ttlMs: 3_600_000 }),
      ready: () => channel.ready(),
      onSecond: (second) => channel.emit(second),
    });
  },
  idle: (o: IdleTaskOptions, channel: DriverChannel) => {
    const signer = new TokenSigner(o.secret);
    return runIdleLoad({
      ...o,
      token: (uid) => signer.mint({ uid, ttlMs: o.tokenTtlMs ?? 3_600_000 }),
      ready: () => channel.ready(),
      onSecond: (second) => channel.emit(second),
    });
  },
} satisfies Record<string, (options: never, channel: DriverChannel) => Promise<unknown>>;

export type DriverTask = keyof typeof DRIVER_TASKS;
export type TaskOptions<T extends DriverTask> = Parameters<(typeof DRIVER_TASKS)[T]>[0];
export type TaskResult<T extends DriverTask> = Awaited<ReturnType<(typeof DRIVER_TASKS)[T]>>;
