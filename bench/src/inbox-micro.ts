// Inbox store microbench: RedisInboxStore alone, no sockets, no protocol: `--pairs` senders each
// send `--burst` messages at once to their own recipient (a message and its own copy, as the chat
// handler stores them), `--rounds` times, against a Redis it starts (or `--redis URL`). Reports
// the messages stored per second, Redis CPU per message (used_cpu_user + used_cpu_sys before and
// after), Redis memory per stored inbox entry (used_memory before and after) and what the
// batches looked like (script calls, messages per call). What a Redis shard can do, apart from
// the worker's own cost.
// `--memory`: MemoryInboxStore instead, filling `--pairs` pairs of inboxes to their bound (a
// message and its own copy each time); reports ns a pair and the RSS and accounted bytes grown.
// Run: npm run bench:inbox [-- --pairs 100 --burst 32 --rounds 100 --no-copies | --memory]

import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { RedisInboxStore } from '../../src/inbox/redis-inbox-store.js';
import { MemoryInboxStore } from '../../src/inbox/memory-inbox-store.js';
import { DEFAULT_INBOX_LIMITS } from '../../src/inbox/inbox-store.js';
import { startRedisServer } from '../../testkit/services.js';
import { startRedisCluster } from '../../testkit/redis-cluster.js';

const { values } = parseArgs({
  options: {
    redis: { type: 'string' },
    pairs: { type: 'string', default: '100' },
    burst: { type: 'string', default: '32' },
    rounds: { type: 'string', default: '100' },
    body: { type: 'string', default: '135' },
    'no-copies': { type: 'boolean', default: false },
    cluster: { type: 'boolean', default: false },
    memory: { type: 'boolean', default: false },
  },
});
const pairs = Number(values.pairs);
const burst = Number(values.burst);
const rounds = Number(values.rounds);
const copies = !values['no-copies'];

if (values.memory) {
  fillMemoryInboxes();
  process.exit(0);
}

/** --memory: every pair's two inboxes filled to the bound with messages and their own copies, as the chat bench's first seconds do. */
function fillMemoryInboxes(): void {
  const store = new MemoryInboxStore({ maxBytes: 16 * 1024 ** 3 });
  const body = Buffer.alloc(Number(values.body), 0x78);
  const own = Buffer.alloc(Number(values.body) + 12, 0x79);
  const ids = new Array<number>(pairs).fill(0);
  const n = pairs * DEFAULT_INBOX_LIMITS.maxMessages;
  const rss = process.memoryUsage().rss;
  const started = process.hrtime.bigint();
  for (let i = 0; i < n; i++) {
    const p = i % pairs;
    const msgId = String(++ids[p]!);
    store.appendPair({ uid: `r${p}`, sender: `s${p}`, msgId, body, conversation: `s${p}` }, { uid: `s${p}`, sender: `s${p}\0r${p}`, msgId, body: own, conversation: `r${p}`, own: true });
  }
  const ns = Number(process.hrtime.bigint() - started) / n;
  const mib = (bytes: number) => (bytes / 2 ** 20).toFixed(0);
  process.stdout.write(
    `${n} messages with their own copies into ${pairs} pairs of inboxes (${DEFAULT_INBOX_LIMITS.maxMessages} each), ${body.length}-byte bodies\n` +
      `filling         ${ns.toFixed(0)} ns a pair\n` +
      `RSS grown       ${mib(process.memoryUsage().rss - rss)} MiB\n` +
      `accounted       ${mib(store.bytes)} MiB\n`,
  );
}

// --cluster: a 3-master Redis Cluster (each inbox's appends one script call, on its master).
const cluster = values.cluster ? await startRedisCluster() : undefined;
const server = values.redis === undefined && !cluster ? await startRedisServer() : undefined;
const urls = cluster ? cluster.nodes.filter((n) => n.role === 'master').map((n) => n.url) : [values.redis ?? server!.url];
const admins = urls.map((url) => new Redis(url));
const info = async () => {
  const total = { memory: 0, cpu: 0, calls: 0 };
  for (const admin of admins) {
    const text = (await admin.info('memory')) + (await admin.info('cpu')) + (await admin.info('commandstats'));
    const field = (name: string) => Number(new RegExp(`${name}[:=]([\\d.]+)`).exec(text)?.[1] ?? 0);
    total.memory += field('used_memory');
    total.cpu += field('used_cpu_user') + field('used_cpu_sys');
    total.calls += field('cmdstat_evalsha:calls');
  }
  return total;
};
const store = new RedisInboxStore({ url: cluster ? { cluster: cluster.seeds } : urls[0]!, keyPrefix: `micro${process.pid}:` });
// Bodies of the size a 100-byte chat message is stored with (from, to, msg_id, times), each
// different (equal ones would be stored more compactly than real ones: a stream entry with the
// same fields as its block's first keeps no copy of them).
const template = Buffer.alloc(Number(values.body), 0x78);
const bodyOf = (msgId: string) => {
  const body = Buffer.from(template);
  body.write(msgId);
  return body;
};
await store.ping();
const before = await info();
const started = process.hrtime.bigint();
let id = Date.now() * 1000;
for (let round = 0; round < rounds; round++) {
  const sends: Promise<unknown>[] = [];
  for (let p = 0; p < pairs; p++) {
    for (let b = 0; b < burst; b++) {
      const msgId = String(++id);
      const body = bodyOf(msgId);
      const message = { uid: `r${p}`, sender: `s${p}`, msgId, body, conversation: `s${p}` };
      sends.push(copies ? store.appendPair(message, { uid: `s${p}`, sender: `s${p}\0r${p}`, msgId, body, conversation: `r${p}`, own: true }) : store.append(message));
    }
  }
  await Promise.all(sends);
}
const seconds = Number(process.hrtime.bigint() - started) / 1e9;
const after = await info();
const messages = pairs * burst * rounds;
const entries = messages * (copies ? 2 : 1);
const calls = after.calls - before.calls;
process.stdout.write(
  `${messages} messages (${entries} inbox entries${copies ? ': each with its own copy' : ''}), ${pairs} pairs, bursts of ${burst}, ${template.length}-byte bodies\n` +
    `stored/s        ${Math.round(messages / seconds)} messages (${seconds.toFixed(2)} s)\n` +
    `Redis CPU       ${(((after.cpu - before.cpu) * 1e6) / messages).toFixed(2)} µs per message, ${(((after.cpu - before.cpu) * 1e6) / entries).toFixed(2)} per entry\n` +
    `Redis memory    ${((after.memory - before.memory) / entries).toFixed(1)} bytes per entry (used_memory delta)\n` +
    `script calls    ${calls}, ${(messages / Math.max(1, calls)).toFixed(1)} messages each\n`,
);
await store.close();
for (const admin of admins) admin.disconnect();
await server?.kill();
await cluster?.kill();
