// The bench is a package of its own (bench/, README's Layout): the server's build and its
// dependencies hold nothing of it, and nothing in the server imports it or the testkit. What
// `switchboard bench` needs comes from the bench package, loaded on demand.

import t from 'tap';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const root = fileURLToPath(new URL('../../', import.meta.url));

interface Manifest {
  name: string;
  workspaces?: string[];
  dependencies?: Record<string, string>;
  files?: string[];
}
const manifest = (path: string) => JSON.parse(readFileSync(join(root, path), 'utf8')) as Manifest;

function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? files(join(dir, e.name)) : [join(dir, e.name)]));
}

t.test('the bench has its own package and dependencies; the server has neither', async (t) => {
  const server = manifest('package.json');
  const bench = manifest('bench/package.json');
  t.equal(bench.name, '@switchboard/bench');
  t.same(server.workspaces, ['bench'], 'a workspace of the root: `npm ci` installs its dependencies');
  t.ok(bench.dependencies?.['hdr-histogram-js'], 'the bench depends on hdr-histogram-js');
  t.notOk(server.dependencies?.['hdr-histogram-js'], 'the server does not');
  t.notOk(server.files?.some((f) => f.startsWith('bench') || f.startsWith('testkit')), 'nor does it ship the bench or the testkit');
});

t.test("the server's build compiles nothing of the bench or the testkit", async (t) => {
  const config = ts.getParsedCommandLineOfConfigFile(join(root, 'tsconfig.json'), {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => {} })!;
  const program = ts.createProgram({ rootNames: config.fileNames, options: config.options });
  const sources = program
    .getSourceFiles()
    .map((f) => relative(root, f.fileName))
    .filter((f) => !f.startsWith('node_modules/') && !f.startsWith('..'));
  t.ok(sources.length > 50, `${sources.length} server sources`);
  t.same(sources.filter((f) => !f.startsWith('src/')), [], 'every file of the server build is in src/');
  t.same(program.getSourceFiles().filter((f) => f.fileName.includes('/hdr-histogram-js/')).map((f) => f.fileName), [], 'and none imports hdr-histogram-js');
});

t.test("the server's dist/ holds no bench file", { skip: existsSync(join(root, 'dist')) ? false : 'dist/ is not built' }, async (t) => {
  const built = files(join(root, 'dist')).map((f) => relative(root, f));
  t.ok(built.some((f) => f === 'dist/cli/commands/bench.js'), 'the command is there: it loads the bench on demand');
  t.same(built.filter((f) => f.startsWith('dist/bench/') || f.startsWith('dist/testkit/')), [], 'no bench/ or testkit/ folder');
  const benchModules = ['chat-load', 'relay-server', 'driver-process', 'latency', 'html'];
  t.same(built.filter((f) => benchModules.some((m) => f.endsWith(`/${m}.js`))), [], 'no bench module anywhere in it');
});
