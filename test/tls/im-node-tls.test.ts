// ImNode's tlsPort in the registry's JSON: written when the worker has one, read back, absent
// from an older worker's entry (which still parses), and part of what makes two entries differ.

import t from 'tap';
import { encodeNode, parseNode, sameNode, viewHash, type ImNode } from '../../src/registry/im-node.js';

const base: ImNode = { id: '0000000001', host: 'w1.example.com', port: 9001, peerPort: 7001, balance: 3, startedAt: 1, version: '0.1.0', ready: true };

t.test('tlsPort round-trips; an older entry without it parses as before', async (t) => {
  const withTls = { ...base, tlsPort: 8883 };
  t.same(parseNode(base.id, encodeNode(withTls)), withTls);
  const old = Buffer.from(JSON.stringify({ id: base.id, host: base.host, port: 9001, peerPort: 7001, balance: 3, startedAt: 1, version: '0.0.9', ready: true }));
  const parsed = parseNode(base.id, old)!;
  t.equal(parsed.port, 9001);
  t.notOk('tlsPort' in parsed, 'no tlsPort field at all');
  t.equal(parseNode(base.id, Buffer.from(JSON.stringify({ ...withTls, tlsPort: 'x' }))), undefined, 'a malformed tlsPort is not a worker');
  t.same(parseNode(base.id, encodeNode({ ...base, port: 0, tlsPort: 8883 })), { ...base, port: 0, tlsPort: 8883 }, 'a TLS-only worker: port 0');
});

t.test('entries differing only in tlsPort differ', async (t) => {
  const withTls = { ...base, tlsPort: 8883 };
  t.notOk(sameNode(base, withTls));
  t.not(viewHash([base]), viewHash([withTls]));
});
