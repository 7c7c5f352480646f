// The one place the hand-written wire code takes the schema from, checked against the schema:
// every field number of `Field` (types.ts) and the HeadType values, each against
// proto/im.proto as protobufjs reads it, in both directions (nothing missing, nothing extra).

import t from 'tap';
import protobuf from 'protobufjs';
import { PROTO_PATH } from '../../src/protocol/codec.js';
import { Field, HeadType } from '../../src/protocol/types.js';

const root = protobuf.loadSync(PROTO_PATH);
const pkg = root.lookup('switchboard') as protobuf.Namespace;
const messages = pkg.nestedArray.filter((n): n is protobuf.Type => n instanceof protobuf.Type);

t.test('Field holds every message of the schema and no other', async (t) => {
  t.same(Object.keys(Field).sort(), messages.map((m) => m.name).sort());
});

t.test('Field numbers are the schema numbers, every field, both ways', async (t) => {
  for (const type of messages) {
    const table = (Field as Record<string, Record<string, number>>)[type.name] ?? {};
    const schema = Object.fromEntries(type.fieldsArray.map((f) => [f.name, f.id]));
    t.same(table, schema, type.name);
  }
});

t.test('HeadType is the schema enum, both ways', async (t) => {
  const schema = root.lookupEnum('switchboard.HeadType').values;
  t.same({ ...HeadType }, schema);
});

t.test('the bench scanner reads LoginResponse with MessageResponse numbers: result, error_code, and inbox_head where seq is', async (t) => {
  t.equal(Field.LoginResponse.result, Field.MessageResponse.result);
  t.equal(Field.LoginResponse.errorCode, Field.MessageResponse.errorCode);
  t.equal(Field.LoginResponse.inboxHead, Field.MessageResponse.seq);
});
