// The one place the hand-written wire code takes the schema from, checked against the schema:
// every field number of `Field` (types.ts), the HeadType values, and the wire type the chat
// decoder expects of each field it knows, each against proto/im.proto as protobufjs reads it,
// in both directions (nothing missing, nothing extra).

import t from 'tap';
import protobuf from 'protobufjs';
import { PROTO_PATH } from '../../src/protocol/codec.js';
import { KNOWN_WIRE_TYPES } from '../../src/protocol/chat-decoder.js';
import { Field, HeadType } from '../../src/protocol/types.js';
import { WireType } from '../../src/protocol/wire.js';

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

/** The wire type protobuf gives a field of this type: varint for integers, bools and enums, length-delimited for strings, bytes, messages and (packed or not) repeated strings. */
function wireTypeOf(field: protobuf.Field): number {
  field.resolve();
  if (field.resolvedType instanceof protobuf.Type) return WireType.LEN;
  if (field.resolvedType instanceof protobuf.Enum) return WireType.VARINT;
  if (field.repeated && !(field.type in protobuf.types.packed)) return WireType.LEN;
  return protobuf.types.basic[field.type as keyof typeof protobuf.types.basic];
}

t.test("the chat decoder's wire types are the schema's, for every field of the messages it reads", async (t) => {
  for (const [name, types] of Object.entries(KNOWN_WIRE_TYPES)) {
    const type = root.lookupType(`switchboard.${name}`);
    const schema = Object.fromEntries(type.fieldsArray.map((f) => [f.name, wireTypeOf(f)]));
    t.same(types, schema, name);
  }
});

t.test('the bench scanner reads LoginResponse with MessageResponse numbers: result, error_code, and inbox_head where seq is', async (t) => {
  t.equal(Field.LoginResponse.result, Field.MessageResponse.result);
  t.equal(Field.LoginResponse.errorCode, Field.MessageResponse.errorCode);
  t.equal(Field.LoginResponse.inboxHead, Field.MessageResponse.seq);
});
