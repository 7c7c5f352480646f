// src/redact.ts: URL passwords, fields named like secrets, known secret values (long enough to
// search for), and secret flags on a command line; and the bench report built from them.

import t from 'tap';
import { REDACTED, isSecretKey, redactArgv, redactDeep, redactText, redactUrls } from '../../src/redact.js';
import { redactReport, type BenchReport } from '../../bench/src/report.js';

t.test('redactUrls: the password of every URL, or a user-info without one whole; nothing else', async (t) => {
  t.equal(redactUrls('redis://user:pa55word@host:6379/0'), `redis://user:${REDACTED}@host:6379/0`);
  t.equal(redactUrls('redis://:pa55word@host'), `redis://:${REDACTED}@host`);
  t.equal(redactUrls('https://ghp_tokenvalue@github.com/x'), `https://${REDACTED}@github.com/x`);
  t.equal(redactUrls('redis://:pa@ss@host:6379'), `redis://:${REDACTED}@host:6379`, 'a raw @ in the password: all of it, to the last @');
  t.equal(redactUrls('redis://us@er:pa@ss@host'), `redis://us@er:${REDACTED}@host`);
  t.equal(redactUrls('a redis://a:b@h and rediss://c:d@i, twice'), `a redis://a:${REDACTED}@h and rediss://c:${REDACTED}@i, twice`);
  for (const plain of ['redis://127.0.0.1:6379', '/api/login', 'alice@example.com', 'http://h/path?x=a@b', '127.0.0.1:2181,127.0.0.2:2181/root']) {
    t.equal(redactUrls(plain), plain, `${plain} is unchanged`);
  }
});

t.test('isSecretKey: names that hold secrets, not names that merely mention tokens', async (t) => {
  for (const key of ['secret', 'clusterSecret', 'cluster-secret', 'tokenSecret', 'password', 'PASSWORD', 'authorization', 'token', 'credentials']) t.ok(isSecretKey(key), key);
  for (const key of ['tokenTtlMs', 'token-ttl-s', 'secrets_count_total_x', 'users', 'url', 'deviceId']) t.notOk(isSecretKey(key), key);
});

t.test('redactText: known secrets of 8 characters or more, wherever they are', async (t) => {
  t.equal(redactText('--secret abcdefgh123 and abcdefgh123 again', ['abcdefgh123']), `--secret ${REDACTED} and ${REDACTED} again`);
  t.equal(redactText('a short s stays', ['s']), 'a short s stays', 'a one-character secret is not searched for: it would mangle the text');
});

t.test('redactDeep: a copy with secret fields and values redacted, the original untouched', async (t) => {
  const original = { options: { secret: 'long-secret-value', tokenSecret: undefined, connections: 4, gate: 'redis://u:p4ss@h' }, notes: ['signed with long-secret-value'], n: 1 };
  const copy = redactDeep(original, ['long-secret-value']);
  t.same(copy, { options: { secret: REDACTED, tokenSecret: undefined, connections: 4, gate: `redis://u:${REDACTED}@h` }, notes: [`signed with ${REDACTED}`], n: 1 });
  t.equal(original.options.secret, 'long-secret-value', 'the original is unchanged');
});

t.test('redactArgv: the values of secret flags, in both spellings, and URL passwords in any argument', async (t) => {
  const flags = new Set(['secret', 'cluster-secret']);
  t.same(redactArgv(['chat', '--secret', 'abc', '--secret=def', '--cluster-secret', 'x', '--redis', 'redis://u:pw@h', '--connections', '4'], flags), [
    'chat', '--secret', REDACTED, `--secret=${REDACTED}`, '--cluster-secret', REDACTED, '--redis', `redis://u:${REDACTED}@h`, '--connections', '4',
  ]);
  t.same(redactArgv(['--secret'], flags), ['--secret'], 'a flag without a value stays as it is');
});

t.test('redactReport: nothing of a report keeps a secret the run used', async (t) => {
  const secret = 'the-token-secret-of-this-run-0123456789';
  const report = {
    scenario: 'chat',
    title: 'chat',
    date: '2030-01-01',
    command: `switchboard bench chat --secret ${secret}`,
    machine: { cpuModel: 'x', cpuCount: 1, memoryBytes: 1, node: 'v20', platform: 'linux' },
    options: { secret, connections: 4, workerEndpoints: ['127.0.0.1:9000'] },
    target: 'embedded',
    runs: [{ label: 'r', metrics: {}, latency: {}, timeline: [], processes: [], errors: {}, notes: [`cluster secret ${secret}-cluster`] }],
    table: { columns: ['run'], rows: [['r']] },
    warnings: [],
  } satisfies BenchReport;
  const safe = JSON.stringify(redactReport(report, [secret, `${secret}-cluster`]));
  t.notMatch(safe, secret);
  t.match(safe, '"connections":4', 'the rest is kept');
});
