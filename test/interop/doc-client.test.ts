// Runs doc_client.py, a Python client written only from PROTOCOL.md (standard library, its own
// protobuf and framing), against a real node: if the docs and the server disagree, one of its
// checks fails. Skipped when python3 is not installed.

import t from 'tap';
import path from 'node:path';
import { spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { startNode } from '../helpers/node.js';

const SCRIPT = path.join(path.dirname(fileURLToPath(import.meta.url)), 'doc_client.py');
const python = spawnSync('python3', ['--version'], { encoding: 'utf8' });
const missing = python.error || python.status !== 0 ? 'python3 is not installed: the documentation client cannot run' : false;

t.test('the client written from PROTOCOL.md passes every check against a node', { skip: missing }, async (t) => {
  const n = await startNode(t);
  const args = [
    SCRIPT,
    '--host',
    '127.0.0.1',
    '--port',
    String(n.port),
    '--alice-token',
    n.token('alice'),
    '--bob-token',
    n.token('bob'),
    '--offline-token',
    n.token('doc-client-nobody'),
  ];
  // -B: no __pycache__ next to the script.
  const child = spawn('python3', ['-B', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (s: string) => (stdout += s));
  child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  const code = await new Promise<number | null>((resolve) => child.on('close', (c) => resolve(c)));

  const failures = stdout.split('\n').filter((line) => line.startsWith('not ok'));
  const summary = /# (\d+) checks, (\d+) failed/.exec(stdout);
  t.equal(code, 0, 'doc_client.py exits 0', { failures, stderr: stderr || undefined, output: code === 0 ? undefined : stdout });
  t.same(failures, [], 'no failed check');
  t.ok(summary && Number(summary[1]) > 50, `it ran its checks (${summary?.[1] ?? 'none'})`);
  t.comment(summary?.[0] ?? 'no summary line');
});
