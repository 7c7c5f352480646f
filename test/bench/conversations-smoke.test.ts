// Smoke runs of `bench conversations` with a tiny user: as a user runs it (the CLI, a JSON
// report), the setup really gave the user its conversations and history, and every run answered
// LIST or HISTORY pages with latency recorded; on Redis too. The hand-written request frame is
// checked against protobufjs. No timing assertions: this runs next to other tests.

import t, { type Test } from 'tap';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CliProcess } from '../helpers/cli-process.js';
import { conversationRequestFrame } from '../../bench/src/client-frames.js';
import { conversationsScenario, DEFAULT_RUNS, type ConversationsScenarioOptions } from '../../bench/src/scenarios/conversations.js';
import type { BenchReport, RunReport } from '../../bench/src/report.js';
import { decodeMessage, encodeMessageFrame } from '../../src/protocol/codec.js';
import { ConversationOp, HeadType } from '../../src/protocol/types.js';
import { HEADER_LENGTH } from '../../src/protocol/frame.js';
import { u64 } from '../../testkit/raw-client.js';

t.setTimeout(180_000);

function setupOf(report: BenchReport): RunReport {
  const setup = report.runs.find((r) => r.label === 'setup');
  if (!setup) throw new Error(`no setup run in ${report.runs.map((r) => r.label).join(', ')}`);
  return setup;
}

function checkMeasured(t: Test, run: RunReport, entries: number): void {
  t.ok(run.metrics.requestsPerSec! > 0, `${run.label}: requests answered`);
  const l = run.latency.request!;
  t.ok(l.count > 0 && l.p50 > 0, 'latency recorded');
  t.ok(l.p50 <= l.p90 && l.p90 <= l.p99 && l.p99 <= l.p999 && l.p999 <= l.max, 'percentiles are ordered');
  t.ok(run.metrics.entriesPerResponse! > 0 && run.metrics.entriesPerResponse! <= entries, 'pages hold entries');
  t.ok(run.timeline.some((p) => p.phase === 'measure' && Number(p.requests) > 0), 'measured seconds in the timeline');
  t.ok(run.processes.some((p) => p.role === 'node'), 'the node sampled');
  t.same(run.errors, {}, 'nothing refused');
}

t.test('the request frame is what protobufjs encodes', async (t) => {
  const cases = [
    { sequence: 1, op: ConversationOp.LIST, before: 0, limit: 0, peer: '' },
    { sequence: 300, op: ConversationOp.LIST, before: 123_456, limit: 100, peer: '' },
    { sequence: 2 ** 40, op: ConversationOp.HISTORY, before: 9, limit: 50, peer: 'cv-p0' },
  ];
  for (const { sequence, op, before, limit, peer } of cases) {
    const frame = conversationRequestFrame(sequence, op, before, limit, peer);
    const expected = encodeMessageFrame({ type: HeadType.CONVERSATION_REQUEST, sequence, conversationRequest: { op, ...(peer ? { peer } : {}), ...(before ? { before } : {}), ...(limit ? { limit } : {}) } });
    t.same(frame.toString('hex'), expected.toString('hex'), `op ${op} sequence ${sequence}`);
    const decoded = decodeMessage(frame.subarray(HEADER_LENGTH));
    t.equal(u64(decoded.sequence), String(sequence));
  }
});

t.test('CLI, memory inbox: the user has its conversations, and every run is answered', async (t) => {
  const conversations = 60;
  const json = join(mkdtempSync(join(tmpdir(), 'sb-bench-conversations-')), 'report.json');
  const cli = new CliProcess(t, 'bench', ['bench', 'conversations', '--conversations', String(conversations), '--duration', '1', '--warmup', '0', '--quiet', '--json', json]);
  t.match(await cli.exit(120_000), { code: 0 });
  t.match(cli.stdout, /run\s+req\/s\s+p50 ms/);
  t.match(cli.stdout, /list, limit 50, 1 in flight\s+[\d,]+/);
  const report = JSON.parse(readFileSync(json, 'utf8')) as BenchReport;
  t.equal(report.scenario, 'conversations');
  t.match(report.target, /memory inbox/);
  t.same(report.warnings, [], 'no warnings: the list and history held what was sent');
  // 60 conversations: the first page of 50 is full and says there is more.
  t.match(setupOf(report).metrics, { conversations, listed: conversations, listPages: 2, firstPageEntries: 50, firstPageMore: 1, historyMessages: 500, historyPages: 10 });
  const measured = report.runs.filter((r) => r.label !== 'setup');
  t.equal(measured.length, DEFAULT_RUNS.length);
  t.equal(report.table.rows.length, DEFAULT_RUNS.length);
  for (const [i, run] of measured.entries()) checkMeasured(t, run, DEFAULT_RUNS[i]!.limit);
  t.match(measured.map((r) => r.label), ['list, limit 50, 1 in flight', 'list, limit 50, 8 in flight on 4 connections', 'list, limit 100, 8 in flight on 4 connections', 'history, limit 50, 1 in flight', 'history, limit 50, 8 in flight on 4 connections']);
  // Over 60 conversations a walk is a page of 50 and one of 10, a walk at limit 100 one page of 60.
  t.ok(measured[0]!.metrics.entriesPerResponse! > 10 && measured[0]!.metrics.entriesPerResponse! < 50, 'list pages walked: full ones and the last');
  t.equal(measured[2]!.metrics.entriesPerResponse, conversations, 'limit 100: the whole list in one page');
  t.equal(measured[3]!.metrics.entriesPerResponse, 50, 'history pages of 50 (500 messages)');
});

t.test('redis inbox: a user with fewer conversations than a page', async (t) => {
  const o: ConversationsScenarioOptions = {
    target: 'embedded',
    workers: 1,
    inbox: 'redis',
    fsync: 'none',
    secret: 'bench-smoke-secret-at-least-32-characters',
    connections: 1,
    durationS: 1,
    warmupS: 0,
    drivers: 1,
    conversations: 20,
    historyMessages: 120,
    payloadBytes: 40,
    runs: [
      { op: ConversationOp.LIST, limit: 50, inFlight: 2 },
      { op: ConversationOp.HISTORY, limit: 50, inFlight: 1 },
    ],
    command: 'test',
  };
  const report = await conversationsScenario(o);
  t.match(report.target, /redis inbox/);
  t.same(report.warnings, []);
  t.match(setupOf(report).metrics, { listed: 20, listPages: 1, firstPageEntries: 20, firstPageMore: 0, historyMessages: 120, historyPages: 3 });
  const [list, history] = report.runs.filter((r) => r.label !== 'setup');
  checkMeasured(t, list!, 50);
  t.equal(list!.metrics.entriesPerResponse, 20, 'every LIST answer is the whole list');
  t.ok(list!.processes.some((p) => p.role === 'redis'), 'Redis sampled');
  checkMeasured(t, history!, 50);
  t.ok(history!.metrics.entriesPerResponse! > 20 && history!.metrics.entriesPerResponse! <= 50, 'pages of 50 and the last of 20');
});
