// Secrets stay out of log lines: fields that hold one, URL passwords, and the arguments of a
// Redis command carried by an error (a refused AUTH carries the password: reproduced here with
// a real redis-server that requires one and a client that offers the wrong one).

import t from 'tap';
import { Redis } from 'ioredis';
import { createLogger } from '../../src/log.js';
import { startRedis } from '../helpers/redis.js';
import { until } from '../../testkit/wait.js';

function capture() {
  const lines: string[] = [];
  const log = createLogger({ level: 'debug' }, { write: (line: string) => void lines.push(line) });
  return { log, lines, text: () => lines.join('') };
}

t.test('a URL password in a url, redis or connect field is redacted; the rest of the URL is kept', async (t) => {
  const { log, text } = capture();
  log.info({ url: 'redis://app:hunter2-url-password@10.0.0.7:6379/2' }, 'connecting');
  log.info({ store: { redis: 'rediss://:only-a-password-here@redis.internal:6380' } }, 'nested');
  log.child({ component: 'x', connect: 'https://tok3n-in-userinfo@zk.example' }).info('binding');
  const out = text();
  for (const secret of ['hunter2-url-password', 'only-a-password-here', 'tok3n-in-userinfo']) t.notMatch(out, secret, `${secret} is not logged`);
  t.match(out, 'redis://app:[redacted]@10.0.0.7:6379/2', 'user, host, port and db stay');
  t.match(out, 'rediss://:[redacted]@redis.internal:6380');
  t.match(out, 'https://[redacted]@zk.example');
});

t.test('secret fields are redacted at the top, one level down and in child bindings', async (t) => {
  const { log, text, lines } = capture();
  log.info({ secret: 'token-secret-value-1', options: { clusterSecret: 'cluster-secret-value-2', password: 'password-value-3', tokenTtlMs: 60_000 } }, 'options');
  log.child({ secret: 'bound-secret-value-4' }).info({ token: 'sb1.token-value-5.sig' }, 'child');
  const out = text();
  for (const value of ['token-secret-value-1', 'cluster-secret-value-2', 'password-value-3', 'bound-secret-value-4', 'token-value-5']) t.notMatch(out, value);
  const first = JSON.parse(lines[0]!) as { options: { tokenTtlMs: number; password: string } };
  t.equal(first.options.tokenTtlMs, 60_000, 'other fields are untouched');
  t.equal(first.options.password, '[redacted]');
});

t.test('an error whose message carries a URL password is logged without it', async (t) => {
  const { log, text } = capture();
  log.error({ err: new Error('cannot connect to redis://app:err-url-password@10.0.0.7:6379') }, 'failed');
  log.error({ err: new Error('wrapped', { cause: new Error('at redis://u:cause-url-password@h') }) }, 'failed');
  t.notMatch(text(), 'err-url-password');
  t.notMatch(text(), 'cause-url-password');
  t.match(text(), 'redis://app:[redacted]@10.0.0.7:6379');
});

t.test('a refused Redis AUTH, logged as the workers log Redis errors, does not show the password', async (t) => {
  const redis = await startRedis(t);
  // Required once the server is up (the harness checks readiness with an unauthenticated PING).
  const admin = new Redis(redis.url);
  await admin.config('SET', 'requirepass', 'the-right-password-for-redis');
  admin.disconnect();
  const wrong = 'a-wrong-password-the-client-offered';
  const { log, text } = capture();
  const client = new Redis(`redis://default:${wrong}@127.0.0.1:${redis.port}`, { maxRetriesPerRequest: 0, retryStrategy: () => null, lazyConnect: true });
  t.teardown(() => client.disconnect());
  client.on('error', (err: Error) => log.warn({ err }, 'redis connection error'));
  await client.connect().catch((err: unknown) => log.warn({ err }, 'redis connection error'));
  await until('the refusal was logged', () => text().includes('WRONGPASS'), 10_000);
  t.notMatch(text(), wrong, 'the offered password is not in the log');
  t.match(text(), /"command":\{"name":"auth"\}/, 'the command name stays, its arguments do not');
});
