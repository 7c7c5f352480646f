// What a worker logs about a connection (OPERATIONS.md, Logs): every line carries `connId`, and
// after login `uid`, `deviceId` and `sessionId`, although a connection keeps no child logger of
// its own until it logs something after its login.

import t from 'tap';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { startNode } from '../helpers/node.js';
import { until } from '../../testkit/wait.js';
import { DEFAULT_TIMEOUT_MS } from '../../testkit/raw-client.js';
import { connectLoggedIn } from '../helpers/raw-client.js';
import { encodeMessageFrame } from '../../src/protocol/codec.js';

interface Line {
  msg: string;
  [field: string]: unknown;
}

function capturingLogger(level: 'info' | 'debug') {
  const lines: Line[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const text of chunk.toString().split('\n')) if (text) lines.push(JSON.parse(text) as Line);
      done();
    },
  });
  return { log: pino({ level }, stream), lines };
}

for (const level of ['info', 'debug'] as const) {
  t.test(`at ${level} level, the login and the close carry the connection's fields`, async (t) => {
    const { log, lines } = capturingLogger(level);
    const tn = await startNode(t, {}, { log });
    const client = await connectLoggedIn(t, tn.port, 'alice', tn.token('alice'), 'phone');
    const sessionId = tn.node.server.sessions.byUser('alice')[0]!.sessionId;
    client.sendRaw(encodeMessageFrame({ type: 99, sequence: 1 }));
    await client.waitClosed();
    await until('the closing line', () => lines.some((l) => l.msg === 'closing connection'), DEFAULT_TIMEOUT_MS);

    const fields = { component: 'worker', uid: 'alice', deviceId: 'phone', sessionId };
    const login = lines.find((l) => l.msg === 'login');
    t.match(login, { ...fields, connId: Number, replaced: false, acks: false, inboxHead: 0, syncFrom: 0, gap: false });
    const connId = login!.connId;
    t.match(
      lines.find((l) => l.msg === 'closing connection'),
      { ...fields, connId, code: 'SB_ERR_UNKNOWN_TYPE' },
    );
    if (level === 'debug') {
      await until('the closed line', () => lines.some((l) => l.msg === 'connection closed'), DEFAULT_TIMEOUT_MS);
      t.match(lines.find((l) => l.msg === 'connection accepted'), { component: 'worker', connId, remote: /^127\.0\.0\.1:\d+$/ });
      t.match(lines.find((l) => l.msg === 'connection closed'), { ...fields, connId, code: 'SB_ERR_UNKNOWN_TYPE' });
    } else {
      t.notOk(lines.some((l) => l.msg === 'connection accepted'), 'debug lines stay out at info level');
    }
  });
}
