// `switchboard bench` as a user runs it: scenario dispatch, option errors (the chat-only flags
// too), and a tiny relay run that prints its table and writes the JSON and HTML reports.

import t from 'tap';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CliProcess } from '../helpers/cli-process.js';
import type { BenchReport } from '../../bench/src/report.js';

t.test('--help lists the scenarios and the options', async (t) => {
  const cli = new CliProcess(t, 'bench', ['bench', '--help']);
  t.match(await cli.exit(), { code: 0 });
  for (const word of ['chat', 'relay', '--drivers', '--max', '--html']) t.match(cli.stdout, word);
  t.notMatch(cli.stdout, 'SWITCHBOARD_DURATION', 'bench flags have no environment variables');
});

t.test('an unknown scenario or option value is a clear error', async (t) => {
  const unknown = new CliProcess(t, 'bench', ['bench', 'nope']);
  t.match(await unknown.exit(), { code: 1 });
  t.match(unknown.stderr, /SB_ERR_CONFIG unknown scenario "nope" \(one of chat, relay/);
  const badInbox = new CliProcess(t, 'bench', ['bench', 'chat', '--inbox', 'disk']);
  t.match(await badInbox.exit(), { code: 1 });
  t.match(badInbox.stderr, /SB_ERR_CONFIG --inbox must be one of memory, redis/);
  const strayWorker = new CliProcess(t, 'bench', ['bench', 'chat', '--worker', '127.0.0.1:9000']);
  t.match(await strayWorker.exit(), { code: 1 });
  t.match(strayWorker.stderr, /--target external/);
});

t.test('--memory-baseline and --redis-cluster: chat only, on targets they apply to', async (t) => {
  const cases: [string[], RegExp][] = [
    [['bench', 'idle', '--memory-baseline'], /SB_ERR_CONFIG --memory-baseline is a flag of bench chat only/],
    [['bench', 'group', '--inbox', 'redis', '--redis-cluster'], /SB_ERR_CONFIG --redis-cluster is a flag of bench chat only/],
    [['bench', 'chat', '--redis-cluster'], /SB_ERR_CONFIG --redis-cluster .* --target cluster, or --target embedded --inbox redis/],
    [['bench', 'chat', '--memory-baseline', '--max'], /SB_ERR_CONFIG --memory-baseline .* not with --target external or --max/],
  ];
  for (const [args, error] of cases) {
    const cli = new CliProcess(t, 'bench', args);
    t.match(await cli.exit(), { code: 1 }, args.join(' '));
    t.match(cli.stderr, error);
  }
});

t.test('a tiny relay run: table on stdout, progress on stderr, JSON and HTML written', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'sb-bench-cli-'));
  const json = join(dir, 'report.json');
  const html = join(dir, 'report.html');
  const cli = new CliProcess(t, 'bench', ['bench', 'relay', '--connections', '4', '--duration', '1', '--warmup', '0.2', '--json', json, '--html', html]);
  t.match(await cli.exit(30_000), { code: 0 });
  t.match(cli.stdout, /run\s+deliv\/s/);
  t.match(cli.stdout, /bare relay\s+[\d,]+/);
  t.match(cli.stderr, /\[bare relay\]\s+\d+ s measure delivered/);
  const report = JSON.parse(readFileSync(json, 'utf8')) as BenchReport;
  t.equal(report.scenario, 'relay');
  t.match(report.command, /^switchboard bench relay --connections 4/);
  t.equal(report.runs.length, 1);
  t.ok(report.runs[0]!.metrics.deliveredPerSec! > 0);
  const page = readFileSync(html, 'utf8');
  t.match(page, /^<!doctype html>/i);
  t.match(page, /<svg/);
});

t.test('the reports of a run given --secret contain no trace of it', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'sb-bench-secret-'));
  const json = join(dir, 'report.json');
  const html = join(dir, 'report.html');
  const secret = 'bench-cli-secret-that-no-report-may-contain';
  const cli = new CliProcess(t, 'bench', ['bench', 'relay', '--connections', '2', '--duration', '0.5', '--warmup', '0', '--secret', secret, '--json', json, '--html', html, '--quiet']);
  t.match(await cli.exit(30_000), { code: 0 });
  const written = { json: readFileSync(json, 'utf8'), html: readFileSync(html, 'utf8'), stdout: cli.stdout, stderr: cli.stderr };
  for (const [what, text] of Object.entries(written)) t.notMatch(text, secret, `${what} does not contain the secret`);
  const report = JSON.parse(written.json) as BenchReport;
  t.match(report.command, /--secret \[redacted\] --json/, 'the command line says a secret was given, not which');
  t.equal(report.options.secret, '[redacted]', 'and so do the options');
  t.match(written.html, '[redacted]');
});
