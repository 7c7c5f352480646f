// LOGIN_REQUEST: verify the token, apply the device rules (replace the same device, cap the
// number of devices), bind a LocalSession to the socket, publish it (SessionDistributed) and
// decide where its inbox replay starts. Any refusal is a LoginResponse with a code and a
// reason, then the close.

import { uint64Number } from '../../protocol/codec.js';
import { randomUUID } from 'node:crypto';
import { SwitchboardError, isSwitchboardError } from '../../errors.js';
import { loginResponse, type Failure, type SyncStart } from '../../protocol/messages.js';
import { PRE_LOGIN_SESSION_ID, type ImMessage } from '../../protocol/types.js';
import { LocalSession } from '../../session/local-session.js';
import { SESSION, type Connection } from '../connection.js';
import { isDeviceId } from '../../groups/group-store.js';
import type { ServerContext } from '../context.js';
import type { SyncRequest } from '../delivery.js';

export async function handleLogin(ctx: ServerContext, conn: Connection, message: ImMessage): Promise<void> {
  const sequence = message.sequence;
  const existing = conn.session;
  if (existing) {
    conn.send(loginResponse(sequence, existing.sessionId, { code: 'SB_ERR_ALREADY_LOGGED_IN', reason: 'this connection is already logged in' }));
    return;
  }
  const request = message.loginRequest;
  const refuse = (failure: Failure): void => {
    conn.send(loginResponse(sequence, PRE_LOGIN_SESSION_ID, failure));
    conn.close(failure, { notify: false });
  };

  const uid = request?.uid ?? '';
  const deviceId = request?.deviceId ?? '';
  let issuedAt: number;
  try {
    if (!request?.token) throw new SwitchboardError('SB_ERR_NO_TOKEN', 'login carries no token');
    if (!uid) throw new SwitchboardError('SB_ERR_BAD_REQUEST', 'login needs loginRequest.uid');
    if (request.groups && !request.acks) throw new SwitchboardError('SB_ERR_BAD_REQUEST', 'loginRequest.groups needs acks: group deliveries are acknowledged');
    // The group store keeps a position per device, and refuses an id outside the device id rule
    // (which the worker does not enforce otherwise, PROTOCOL.md §0): refused here, not at the
    // first group read, where it would be the store failing.
    if (request.groups && !isDeviceId(deviceId)) throw new SwitchboardError('SB_ERR_BAD_REQUEST', 'loginRequest.groups needs a deviceId of 1 to 128 characters: group positions are kept per device');
    issuedAt = ctx.signer.verifyFor(request.token, uid, deviceId).issuedAt;
    await ctx.revocations?.admit(uid, deviceId, issuedAt);
  } catch (err) {
    if (!isSwitchboardError(err)) throw err;
    refuse({ code: err.code, reason: err.message });
    return;
  }
  // Its logins would fail in the store calls below, after a wait: say so at once.
  if (!ctx.health.ready) {
    refuse({ code: 'SB_ERR_STORE_UNAVAILABLE', reason: 'this worker cannot reach its stores; log in again later, through the gate' });
    return;
  }

  const nodeId = await ctx.nodeId;
  if (conn.state !== 'open') return;

  // Everything below up to the store write is synchronous, so two logins of the same device
  // cannot both pass the checks.
  const replaced = ctx.sessions.find(uid, deviceId);
  if (!replaced && ctx.sessions.byUser(uid).length >= ctx.limits.maxDevicesPerUser) {
    refuse({ code: 'SB_ERR_TOO_MANY_DEVICES', reason: `${uid} is logged in on ${ctx.limits.maxDevicesPerUser} devices already` });
    return;
  }
  if (replaced) {
    ctx.sessions.remove(replaced);
    replaced.outbound.close({ code: 'SB_ERR_SESSION_REPLACED', reason: `device ${deviceId || '(none)'} logged in again on another connection` });
  }
  const session = new LocalSession(randomUUID(), uid, deviceId, request!.platform ?? 0, conn);
  session.tokenIssuedAt = issuedAt;
  session.acks = request!.acks === true;
  session.ownCopies = request!.ownCopies === true;
  session.receipts = request!.receipts === true;
  session.inboxEvents = request!.inboxEvents === true;
  // In the map before the awaits below, so messages stored meanwhile raise its knownHead and
  // are part of the replay (Delivery holds them until start()).
  ctx.sessions.add(session);
  conn.attrs.set(SESSION, session);
  conn.authenticated = true;
  conn.bindLog({ uid, deviceId, sessionId: session.sessionId });
  ctx.sessionsChanged();

  const requested: SyncRequest = {
    seq: Object.hasOwn(request!, 'lastSeq') && request!.lastSeq != null ? uint64Number(request!.lastSeq) : undefined,
    epoch: request!.inboxEpoch != null ? uint64Number(request!.inboxEpoch) : undefined,
    noReplay: request!.noReplay === true,
  };
  let sync: SyncStart;
  try {
    await ctx.directory.publish(session, nodeId);
    // The receipts setting before the replay (its acks may produce receipts), read beside it.
    [, sync] = await Promise.all([ctx.receipts.prepare(session), ctx.delivery.prepare(session, requested)]);
    if (request!.groups && ctx.groups) await ctx.groups.delivery.prepare(session);
  } catch (err) {
    conn.log.error({ err }, 'login storage failed');
    if (isSwitchboardError(err) && err.code === 'SB_ERR_STORE_UNAVAILABLE') refuse({ code: err.code, reason: 'a store did not answer; log in again later' });
    else refuse({ code: 'SB_ERR_INTERNAL', reason: 'the session could not be set up' });
    return;
  }
  // Closed meanwhile: the close handler has removed the session again.
  if (conn.state !== 'open') return;
  conn.send(loginResponse(sequence, session.sessionId, sync, ctx.limits.heartbeatIntervalMs));
  ctx.delivery.start(session);
  ctx.groups?.delivery.start(session);
  ctx.router.sessionOpened(session);
  // Through the worker's logger: an idle connection keeps no child logger (Connection.log).
  ctx.log.info({ ...conn.logFields, replaced: replaced !== undefined, acks: session.acks, ownCopies: session.ownCopies, receipts: session.receipts, inboxEvents: session.inboxEvents, noReplay: requested.noReplay, ...sync }, 'login');
}
