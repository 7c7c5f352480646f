// `npm test`'s reporter (test/helpers/compact-reporter.mjs), run by tap itself on a tiny suite
// of one failing and one passing file: passing assertions are left out, a failure keeps its
// diagnostics in full under the subtests leading to it, each file gets its result line, and the
// closing totals line that .ci/run reads is there. No timing in the assertions.

import t from 'tap';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const REPORTER = fileURLToPath(new URL('../helpers/compact-reporter.mjs', import.meta.url));
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string>; tap: Record<string, unknown> };

/** Runs tap on the fixture suite with `reporter`; returns its stdout. */
function runTap(reporter: string): { stdout: string; status: number | null } {
  const dir = mkdtempSync(join(tmpdir(), 'sb-reporter-'));
  try {
    symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
    mkdirSync(join(dir, 'test'));
    // The same plugins as the project's: another set would make tap rebuild its loader.
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'fixture', type: 'module', tap: { plugin: pkg.tap.plugin, 'disable-coverage': true, include: ['test/*.test.mjs'] } }));
    writeFileSync(
      join(dir, 'test', 'a.test.mjs'),
      ["import t from 'tap';", "t.test('group', async (t) => {", "  t.ok(true, 'a passing assertion');", "  t.equal(1, 2, 'one is two');", '});', "t.ok(true, 'top-level pass');", ''].join('\n'),
    );
    writeFileSync(join(dir, 'test', 'b.test.mjs'), ["import t from 'tap';", "for (let i = 0; i < 5; i++) t.ok(true, `b${i}`);", "t.skip('not here', () => {});", ''].join('\n'));
    // Inside tap, TAP=1 is set for the test process: it would force raw TAP on the inner run.
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => k !== 'TAP' && !k.startsWith('TAP_')));
    const result = spawnSync(join(ROOT, 'node_modules', '.bin', 'tap'), [`--reporter=${reporter}`], { cwd: dir, env, encoding: 'utf8' });
    return { stdout: result.stdout, status: result.status };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

t.test('npm test uses the compact reporter', async (t) => {
  t.equal(pkg.tap.reporter, './test/helpers/compact-reporter.mjs');
  t.match(pkg.scripts.test, /\btap$/, 'and npm test runs tap with the package config');
});

t.test('the compact reporter on a failing suite', async (t) => {
  const { stdout, status } = runTap(REPORTER);
  t.equal(status, 1, 'a failure still fails the run');
  const lines = stdout.split('\n');

  t.notOk(lines.some((l) => /^ *ok \d+ - (a passing assertion|top-level pass|b\d)\b/.test(l)), 'passing assertions are left out');
  t.ok(lines.some((l) => /^ok 2 - test\/b\.test\.mjs\b/.test(l)), 'a passing file: one line');
  t.ok(lines.some((l) => /^not ok 1 - test\/a\.test\.mjs\b/.test(l)), 'the failing file\'s result line');
  t.match(stdout, /# SKIP/, 'a skip is shown');

  // The failure in full: its subtests, its line, its YAML block from --- to ..., with the diff.
  const at = lines.findIndex((l) => /^ {8}not ok \d+ - one is two$/.test(l));
  t.ok(at > 1, 'the failed assertion is shown');
  t.same(lines.slice(at - 2, at), ['# Subtest: test/a.test.mjs', '    # Subtest: group'], 'under the subtests leading to it');
  const end = lines.indexOf('          ...', at);
  t.equal(lines[at + 1], '          ---', 'its diagnostics open');
  t.ok(end > at, 'and close');
  const diag = lines.slice(at + 1, end).join('\n');
  for (const part of ['compare: ===', 'fileName: test/a.test.mjs', 'lineNumber: 4', '--- expected', '+++ actual', '-2', '+1', "t.equal(1, 2, 'one is two');"]) {
    t.ok(diag.includes(part), `diagnostics include ${part}`);
  }

  // What .ci/run reads: the totals line, as tap prints it.
  const totals = lines.filter((l) => /^# \{ total: [0-9]+/.test(l));
  t.same(totals, ['# { total: 9, pass: 7, fail: 1, skip: 1 }'], 'the closing totals line');
  t.match(totals[0], /pass: 7/);
  t.match(totals[0], /fail: 1/);
});
