// Interim, until the gate's group API (POST /api/groups and /api/groups/:id/members, issue 13)
// is on main: the node `bench group` measures, a `switchboard start` worker without its gate,
// assembled from the same flags by the CLI's own parsers (limits, inbox, group limits), with
// its groups in Redis under --redis (as the composition root will have them) and else in
// memory. The bench creates groups through this process's stdin, one JSON request a line
// ({"n", "op": "create" | "add", ...}), the calls the gate's API will make: a create with at
// most 500 members, then adds of at most 500 uids each. Each is answered by a log line
// {"msg": "bench group op", "n", "group", "seq" (of the event appended) | "error"} on stdout. Run by targets.ts, never by a user.

import { createInterface } from 'node:readline';
import { createNode } from '../../src/node.js';
import { createLogger } from '../../src/log.js';
import { parseOptions } from '../../src/cli/options.js';
import { SERVE_COMMAND_OPTIONS } from '../../src/cli/commands/serve.js';
import { groupLimitsFrom, inboxLimitsFrom, limitsFrom, memoryInboxBytesFrom, redisPrefixFrom, redisTimeoutFrom } from '../../src/cli/common.js';
import { MemoryInboxStore } from '../../src/inbox/memory-inbox-store.js';
import { RedisInboxStore } from '../../src/inbox/redis-inbox-store.js';
import { MemoryGroupStore } from '../../src/groups/memory-group-store.js';
import { RedisGroupStore } from '../../src/groups/redis-group-store.js';
import type { GroupStore } from '../../src/groups/group-store.js';

/** A request on stdin. */
export type GroupOp = { n: number; op: 'create'; owner: string; name: string; members: string[] } | { n: number; op: 'add'; group: string; actor: string; uids: string[] };

const o = parseOptions(SERVE_COMMAND_OPTIONS.start, process.argv.slice(2), {});
const log = createLogger({ level: o['log-level'] });
const keyPrefix = redisPrefixFrom(o['redis-prefix']);
const timeoutMs = redisTimeoutFrom(o);
const groupLimits = groupLimitsFrom(o);
const inbox = o.redis
  ? new RedisInboxStore({ url: o.redis, keyPrefix, limits: inboxLimitsFrom(o), timeoutMs })
  : new MemoryInboxStore({ ...inboxLimitsFrom(o), maxBytes: memoryInboxBytesFrom(o) }, Date.now, log.child({ component: 'inbox' }));
const groups: GroupStore = o.redis ? new RedisGroupStore({ url: o.redis, keyPrefix, limits: groupLimits, timeoutMs }) : new MemoryGroupStore(groupLimits);
const node = createNode({ host: o.host, port: o.port, secret: o.secret!, limits: limitsFrom(o), inbox, groups, maxGroupsPerUser: groupLimits.maxGroupsPerUser, log });
await node.start();

const answer = (fields: Record<string, unknown>) => log.info(fields, 'bench group op');
createInterface({ input: process.stdin }).on('line', (line) => {
  const request = JSON.parse(line) as GroupOp;
  const done =
    request.op === 'create'
      ? groups.create(request.owner, request.name, request.members).then((g) => ({ group: g.id, seq: g.head }))
      : groups.addMembers(request.group, request.actor, request.uids).then((change) => ({ group: request.group, seq: change.seq }));
  done.then(
    (result) => answer({ n: request.n, ...result }),
    (err: Error & { code?: string }) => answer({ n: request.n, error: `${err.code ?? 'Error'}: ${err.message}` }),
  );
});

const stop = () => {
  void node.stop().finally(() => process.exit(0));
};
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
