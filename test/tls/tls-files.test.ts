// TlsFiles: the files read at construction (a bad one refused with SB_ERR_TLS_FILES naming it),
// read again by reload(), whose listeners get the new files and whose context is the one new
// dials take; a reload that fails keeps everything as it was.

import t from 'tap';
import { X509Certificate } from 'node:crypto';
import { TlsFiles } from '../../src/net/tls-files.js';
import { testPki } from '../helpers/tls.js';

const serial = (pem: Buffer) => new X509Certificate(pem).serialNumber;

t.test('construction refuses a missing file, no PEM, and a key of another certificate', async (t) => {
  const pki = testPki(t);
  const ca = pki.ca('ca');
  const a = ca.issue('a');
  const b = ca.issue('b');
  const refused = (paths: { cert: string; key: string; ca?: string }) => {
    try {
      new TlsFiles(paths);
    } catch (err) {
      return err as Error & { code?: string };
    }
    throw new Error('not refused');
  };
  t.match(refused({ cert: `${pki.dir}/none.crt`, key: a.key }), { code: 'SB_ERR_TLS_FILES', message: /cannot read the certificate file .*none\.crt/ });
  t.match(refused({ cert: pki.write('junk.crt', 'hello'), key: a.key }), { code: 'SB_ERR_TLS_FILES', message: /holds no PEM block/ });
  t.match(refused({ cert: a.cert, key: b.key }), { code: 'SB_ERR_TLS_FILES', message: /do not load/ });
  t.match(refused({ cert: a.cert, key: a.key, ca: `${pki.dir}/none-ca.crt` }), { code: 'SB_ERR_TLS_FILES', message: /CA file/ });
});

t.test('reload: new files and context, listeners told; a failed reload keeps the old ones', async (t) => {
  const pki = testPki(t);
  const ca = pki.ca('ca');
  const live = ca.issue('live');
  const files = new TlsFiles({ ...live, ca: ca.ca });
  const firstSerial = serial(files.material.cert);
  const firstContext = files.context;
  const told: string[] = [];
  files.onReload((m) => told.push(serial(m.cert)));

  const renewed = ca.issue('renewed');
  pki.copy(renewed.cert, live.cert);
  pki.copy(renewed.key, live.key);
  files.reload();
  t.not(serial(files.material.cert), firstSerial, 'the renewed certificate');
  t.not(files.context, firstContext, 'a new context for new dials');
  t.same(told, [serial(files.material.cert)], 'the listener was told');

  const before = { material: files.material, context: files.context };
  pki.write('live.key', 'not a key');
  t.throws(() => files.reload(), { code: 'SB_ERR_TLS_FILES' });
  t.equal(files.material, before.material, 'the previous files stay');
  t.equal(files.context, before.context, 'and their context');
  t.equal(told.length, 1, 'no listener told of a failed reload');
});
