// scripts/test-services.sh, the step `npm test` and .ci/run take first: on a machine without
// redis-server, java or the ZooKeeper jar it installs them (Debian, root) or stops at once
// naming the command. Run with a PATH of its own: stand-ins for the servers, `id` and apt-get,
// the last recording what it was asked and "installing" by creating the stand-ins.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import t, { type Test } from 'tap';

const SCRIPT = fileURLToPath(new URL('../../scripts/test-services.sh', import.meta.url));
const BASH = '/bin/bash';

interface Machine {
  /** redis-server comes with redis-cli, as Debian's package brings redis-tools. */
  has?: ('redis-server' | 'java' | 'jar')[];
  /** redis-server without redis-cli (redis-tools removed, or a Redis built from source). */
  noRedisCli?: boolean;
  uid?: number;
  aptGet?: boolean;
  aptFails?: 'update' | 'install';
  /** The native ZooKeeper client fails to load. */
  noNativeClient?: boolean;
  /** apt-get succeeds but installs nothing. */
  aptBreaks?: boolean;
  env?: Record<string, string>;
}

function run(t: Test, m: Machine) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sb-services-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const bin = path.join(dir, 'bin');
  fs.mkdirSync(bin);
  const jar = path.join(dir, 'zookeeper.jar');
  const calls = path.join(dir, 'apt-calls');
  const script = (name: string, body: string) => fs.writeFileSync(path.join(bin, name), `#!${BASH}\n${body}\n`, { mode: 0o755 });
  for (const have of m.has ?? []) {
    if (have === 'jar') fs.writeFileSync(jar, '');
    else script(have, 'exit 0');
    if (have === 'redis-server' && !m.noRedisCli) script('redis-cli', 'exit 0');
  }
  script('id', `echo ${m.uid ?? 0}`);
  if (m.noNativeClient) script('node', 'exit 1');
  else fs.symlinkSync(process.execPath, path.join(bin, 'node'));
  if (m.aptGet ?? true) {
    script(
      'apt-get',
      [
        `echo "DEBIAN_FRONTEND=$DEBIAN_FRONTEND $*" >> ${calls}`,
        m.aptFails ? `[ "$1" = ${m.aptFails} ] && exit 100` : '',
        m.aptBreaks ? 'exit 0' : '',
        `if [ "$1" = install ]; then for p in "$@"; do case $p in redis-server) printf '#!${BASH}\\n' > ${bin}/redis-server; printf '#!${BASH}\\n' > ${bin}/redis-cli; /bin/chmod +x ${bin}/redis-server ${bin}/redis-cli;; redis-tools) printf '#!${BASH}\\n' > ${bin}/redis-cli; /bin/chmod +x ${bin}/redis-cli;; default-jre-headless) printf '#!${BASH}\\n' > ${bin}/java; /bin/chmod +x ${bin}/java;; zookeeper) : > ${jar};; esac; done; fi`,
      ].join('\n'),
    );
  }
  const env = { PATH: bin, SWITCHBOARD_ZOOKEEPER_JAR: jar, ...m.env };
  const r = spawnSync(BASH, [SCRIPT], { env, encoding: 'utf8' });
  const aptCalls = fs.existsSync(calls) ? fs.readFileSync(calls, 'utf8').trim().split('\n') : [];
  return { status: r.status, stderr: r.stderr, stdout: r.stdout, aptCalls };
}

t.test('everything present: nothing said, nothing installed', async (t) => {
  const r = run(t, { has: ['redis-server', 'java', 'jar'] });
  t.equal(r.status, 0);
  t.equal(r.stderr, '');
  t.same(r.aptCalls, []);
});

t.test('ZOOKEEPER_CLASSPATH stands in for the Debian jar', async (t) => {
  const r = run(t, { has: ['redis-server', 'java'], env: { ZOOKEEPER_CLASSPATH: '/opt/zookeeper/lib/*' } });
  t.equal(r.status, 0);
  t.same(r.aptCalls, []);
});

t.test('Debian as root: installs exactly what is missing, once, saying so', async (t) => {
  const r = run(t, {});
  t.equal(r.status, 0, r.stderr);
  t.same(r.aptCalls, ['DEBIAN_FRONTEND=noninteractive update -qq', 'DEBIAN_FRONTEND=noninteractive install -y -qq --no-install-recommends redis-server default-jre-headless zookeeper']);
  t.match(r.stderr, 'installing the Debian packages redis-server default-jre-headless zookeeper (once)');

  const one = run(t, { has: ['redis-server', 'jar'] });
  t.equal(one.status, 0, one.stderr);
  t.same(one.aptCalls, ['DEBIAN_FRONTEND=noninteractive update -qq', 'DEBIAN_FRONTEND=noninteractive install -y -qq --no-install-recommends default-jre-headless'], 'only java was missing');
});

t.test('redis-server without redis-cli: installs redis-tools alone, or names it', async (t) => {
  const r = run(t, { has: ['redis-server', 'java', 'jar'], noRedisCli: true });
  t.equal(r.status, 0, r.stderr);
  t.same(r.aptCalls, ['DEBIAN_FRONTEND=noninteractive update -qq', 'DEBIAN_FRONTEND=noninteractive install -y -qq --no-install-recommends redis-tools']);
  const elsewhere = run(t, { aptGet: false, has: ['redis-server', 'java', 'jar'], noRedisCli: true });
  t.equal(elsewhere.status, 1);
  t.match(elsewhere.stderr, 'this machine lacks: redis-tools.');
  t.match(elsewhere.stderr, "Install Redis's command line tool (redis-cli); on Debian");
});

t.test('not root: stops at once, naming the command', async (t) => {
  const r = run(t, { uid: 1000, has: ['java', 'jar'] });
  t.equal(r.status, 1);
  t.same(r.aptCalls, [], 'nothing installed');
  t.match(r.stderr, 'this machine lacks: redis-server.');
  t.match(r.stderr, 'Install them:  sudo apt-get update && sudo apt-get install -y --no-install-recommends redis-server');
});

t.test('SWITCHBOARD_TEST_INSTALL=no: says what is missing instead of installing', async (t) => {
  const r = run(t, { env: { SWITCHBOARD_TEST_INSTALL: 'no' } });
  t.equal(r.status, 1);
  t.same(r.aptCalls, []);
  t.match(r.stderr, 'apt-get install -y --no-install-recommends redis-server default-jre-headless zookeeper');
});

t.test('no apt-get (another OS): names what to install', async (t) => {
  const r = run(t, { aptGet: false, has: ['redis-server'] });
  t.equal(r.status, 1);
  t.match(r.stderr, 'this machine lacks: default-jre-headless zookeeper.');
  t.match(r.stderr, 'Install a Java runtime (java), Apache ZooKeeper (or set ZOOKEEPER_CLASSPATH to its server jars); on Debian');
  t.notMatch(r.stderr, 'Redis', 'only what is missing');
});

t.test('a failed install stops the run with the command to look at', async (t) => {
  for (const step of ['update', 'install'] as const) {
    const r = run(t, { aptFails: step });
    t.equal(r.status, 1, `${step} fails`);
    t.same(r.aptCalls.length, step === 'update' ? 1 : 2);
    t.match(r.stderr, 'Installing redis-server default-jre-headless zookeeper failed: run apt-get update && apt-get install');
  }
});

t.test('an install that leaves something missing says what', async (t) => {
  // apt-get "succeeds" but makes no java: a package of another name, a broken mirror.
  const broken = run(t, { has: ['redis-server', 'jar'], aptBreaks: true });
  t.equal(broken.status, 1);
  t.match(broken.stderr, 'Installed default-jre-headless, but still missing: default-jre-headless');
});

t.test('the native ZooKeeper client missing: stops, naming the toolchain and npm install', async (t) => {
  const r = run(t, { has: ['redis-server', 'java', 'jar'], noNativeClient: true });
  t.equal(r.status, 1);
  t.same(r.aptCalls, [], 'no compiler is installed behind the user\'s back');
  t.match(r.stderr, 'apt-get update && apt-get install -y python3 make g++), then run npm install again');
});

t.test('npm test takes this step before anything else', async (t) => {
  const pkg = JSON.parse(fs.readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { scripts: Record<string, string> };
  t.match(pkg.scripts.test, /^bash scripts\/test-services\.sh && /);
});
