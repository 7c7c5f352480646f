// What every message handler may use: one object per worker, passed down, never global.

import type { WorkerLimits } from '../config.js';
import type { Logger } from '../log.js';
import type { TokenSigner } from '../auth/token.js';
import type { LocalSessionMap } from '../session/local-session-map.js';
import type { SessionDistributed } from '../session/session-distributed.js';
import type { InboxStore } from '../inbox/inbox-store.js';
import type { GroupStore } from '../groups/group-store.js';
import type { Delivery } from './delivery.js';
import type { Receipts } from './receipts.js';
import type { GroupDelivery } from './group-delivery.js';
import type { MessageRouter } from './cluster-seam.js';
import type { MessageRate } from './message-rate.js';
import type { ResendNudges } from './resend-nudges.js';
import type { RecipientCheck } from './recipients.js';
import type { StoreHealth } from './store-health.js';
import type { RevocationCheck } from './revocation-check.js';

export interface ServerContext {
  readonly limits: WorkerLimits;
  readonly sessions: LocalSessionMap;
  /** Where this worker publishes its sessions for the cluster. */
  readonly directory: SessionDistributed;
  readonly inbox: InboxStore;
  readonly delivery: Delivery;
  /** DELIVERED and READ receipts to the senders' devices. */
  readonly receipts: Receipts;
  /** Group chat: the groups' logs and their fan-out to this worker's sessions. */
  readonly groups: { readonly store: GroupStore; readonly delivery: GroupDelivery } | undefined;
  readonly router: MessageRouter;
  /** The senders' message rate. */
  readonly rate: MessageRate;
  /** Nudges caused by resends found stored, paced per sending session. */
  readonly resendNudges: ResendNudges;
  /** Where the accounts are known: recipients must exist. Undefined: any id is a recipient. */
  readonly recipients: RecipientCheck | undefined;
  readonly signer: TokenSigner;
  /** Revoked users and devices: refused at login, their sessions closed. Undefined: no accounts here, nothing is revoked. */
  readonly revocations: RevocationCheck | undefined;
  /** Logins are refused while the stores do not answer. */
  readonly health: StoreHealth;
  readonly log: Logger;
  /** Resolves this worker's registry id once it is registered. */
  readonly nodeId: Promise<string>;
  /** Called after every change of the local session map. */
  sessionsChanged(): void;
}
