// `switchboard chat` with own copies, a real process (the compiled dist/: `npm run build` first)
// against a real node: what the user sends from another device prints as `me → bob: ...`, in
// the conversation with the rest; what the chat itself sends is not printed back.

import t from 'tap';
import { ImClient, type IncomingMessage } from '../../src/client/im-client.js';
import { CliProcess } from '../helpers/cli-process.js';
import { startNode } from '../helpers/node.js';

const SECRET = 'chat-test-secret-of-at-least-32-characters';
const EXIT_MS = 20_000;

t.test('a message sent from another device of the user prints as "me → bob"; the chat\'s own sends do not come back', async (t) => {
  const n = await startNode(t, {}, { secret: SECRET });
  const bob = new ImClient({ host: '127.0.0.1', port: n.port, uid: 'bob', deviceId: 'bob-phone', token: n.token('bob'), retryStrategy: false });
  const bobGot: IncomingMessage[] = [];
  bob.on('message', (m) => bobGot.push(m));
  t.teardown(() => bob.close());
  await bob.connect();
  const phone = new ImClient({ host: '127.0.0.1', port: n.port, uid: 'alice', deviceId: 'alice-phone', token: n.token('alice'), retryStrategy: false });
  t.teardown(() => phone.close());
  await phone.connect();

  const alice = new CliProcess(t, 'chat alice', ['chat', '--user', 'alice', '--port', String(n.port), '--secret', SECRET]);
  await alice.waitFor('logged in', () => alice.stdout.includes('logged in as alice'));
  await phone.send('bob', 'from my phone');
  await alice.waitFor('the copy printed', () => alice.stdout.includes('from my phone'));
  t.match(alice.stdout, /^\[\d\d:\d\d:\d\d\] me → bob: from my phone$/m, 'as said by me, to bob');

  alice.child.stdin.write('@bob from the terminal\n');
  await alice.waitFor('stored', () => alice.stdout.includes('✓ stored (bob #2)'));
  // A barrier: bob's reply follows the chat's own copy in alice's inbox.
  await bob.send('alice', 'got both');
  await alice.waitFor('the reply printed', () => alice.stdout.includes('got both'));
  t.match(alice.stdout, /^\[\d\d:\d\d:\d\d\] bob: got both$/m, "bob's message prints as his");
  t.notMatch(alice.stdout, /me → bob: from the terminal/, 'what the chat sent is not printed back');
  t.same(bobGot.map((m) => m.content), ['from my phone', 'from the terminal']);

  alice.child.stdin.end();
  t.equal((await alice.exit(EXIT_MS)).code, 0);
});
