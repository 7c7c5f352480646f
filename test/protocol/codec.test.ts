// The protobuf envelope: round trips of every message kind, exact uint64s, the field numbers of
// PROTOCOL.md §2-§4 checked byte by byte, errors on undecodable bodies, and the reply builders.

import t from 'tap';
import fc from 'fast-check';
import Long from 'long';
import { bodyIdentity, decodeMessage, decodeStoredRequest, encodeMessage, encodeMessageFrame, messageType, ownCopyBody, setsServerFields, storedRequestBody, uint64Number, uint64String } from '../../src/protocol/codec.js';
import { editedBody, inboxEventBody, tombstoneBody } from '../../src/protocol/recall.js';
import { REQUEST_WIRE } from '../../src/protocol/chat-decoder.js';
import { FrameDecoder, HEADER_LENGTH } from '../../src/protocol/frame.js';
import { closingNotification, loginResponse, logoutResponse, messageResponse, notification, resultCodeFor } from '../../src/protocol/messages.js';
import { HeadType, NotificationType, PRE_LOGIN_SESSION_ID, ResultCode, type ImMessage } from '../../src/protocol/types.js';
import { ERROR_CODES, SwitchboardError, httpStatusOf, type ErrorCode } from '../../src/errors.js';
import { catchError } from '../helpers/catch-error.js';

const hex = (s: string): Buffer => Buffer.from(s.replace(/--.*$/gm, '').replace(/\s+/g, ''), 'hex');
const toHex = (b: Uint8Array): string => Buffer.from(b).toString('hex');

const MAX_U64 = '18446744073709551615';
const u64 = (s: string): Long => Long.fromString(s, true);

/** The message as plain JSON-able data, uint64s as decimal strings, only fields present on the wire. */
function plain(msg: ImMessage): Record<string, unknown> {
  return messageType.toObject(messageType.fromObject(msg), { longs: String, enums: Number });
}

function roundTrip(msg: ImMessage): ImMessage {
  return decodeMessage(encodeMessage(msg));
}


t.test('every message kind survives encode/decode', async (t) => {
  const messages: Record<string, ImMessage> = {
    LOGIN_REQUEST: {
      type: HeadType.LOGIN_REQUEST,
      sequence: u64(MAX_U64),
      sessionId: PRE_LOGIN_SESSION_ID,
      loginRequest: { uid: 'alice', deviceId: 'phone-1', token: 'sb1.x.y', platform: 2, appVersion: '3.1.4' },
    },
    LOGIN_RESPONSE: {
      type: HeadType.LOGIN_RESPONSE,
      sequence: 7,
      sessionId: 's-1',
      loginResponse: { result: true, code: 0, info: 'login ok', expose: 1, errorCode: '' },
    },
    LOGOUT_REQUEST: { type: HeadType.LOGOUT_REQUEST, sequence: 8, sessionId: 's-1' },
    LOGOUT_RESPONSE: { type: HeadType.LOGOUT_RESPONSE, sequence: 8, sessionId: 's-1' },
    HEART_BEAT: { type: HeadType.HEART_BEAT, sequence: 9, sessionId: 's-1', heartBeat: { seq: 4_000_000_000, uid: 'alice', json: '{"ping":1}' } },
    MESSAGE_REQUEST: {
      type: HeadType.MESSAGE_REQUEST,
      sequence: 10,
      sessionId: 's-1',
      messageRequest: {
        msgId: u64('9007199254740993'),
        from: 'alice',
        to: 'bob',
        time: u64('1700000000123'),
        msgType: 1,
        content: 'héllo 👋',
        url: 'https://example.invalid/a.png',
        property: 'p',
        fromNick: 'Alice',
        json: '{"k":"v"}',
      },
    },
    MESSAGE_RESPONSE: {
      type: HeadType.MESSAGE_RESPONSE,
      sequence: 10,
      sessionId: 's-1',
      messageResponse: { result: false, code: ResultCode.BAD_REQUEST, info: 'too large', expose: 0, errorCode: 'SB_ERR_MESSAGE_TOO_LARGE' },
    },
    MESSAGE_NOTIFICATION: {
      type: HeadType.MESSAGE_NOTIFICATION,
      sessionId: '',
      notification: { noId: u64('1700000000999'), json: '{"type":10,"data":{}}', timestamp: '1700000000999' },
    },
    MESSAGE_ACK: { type: HeadType.MESSAGE_ACK, sessionId: 's-1', ack: { seq: u64('9007199254740993') } },
    CONVERSATION_REQUEST: { type: HeadType.CONVERSATION_REQUEST, sequence: 11, sessionId: 's-1', conversationRequest: { op: 2, peer: 'bob', before: u64('40'), limit: 20, seq: u64('0') } },
    CONVERSATION_RESPONSE: {
      type: HeadType.CONVERSATION_RESPONSE,
      sequence: 11,
      sessionId: 's-1',
      conversationResponse: {
        result: true,
        code: 0,
        info: 'ok',
        errorCode: '',
        conversations: [{ peer: 'bob', lastSeq: u64('39'), lastAt: u64('1700000000123'), readSeq: u64('30'), unread: 4, last: { from: 'bob', to: 'alice', content: 'hé', seq: u64('39') }, truncated: true }],
        messages: [{ from: 'alice', to: 'bob', content: 'x', seq: u64('38'), storedAt: u64('1700000000100'), originDevice: 'phone' }],
        nextBefore: u64('38'),
        oldest: u64('1'),
        pruned: true,
        readSeq: u64('30'),
        unread: 4,
        eventSeq: u64('41'),
      },
    },
    PEER_HELLO: { type: HeadType.PEER_HELLO, peerHello: { nodeId: '0000000001', nonce: Buffer.alloc(16, 1) } },
    PEER_CHALLENGE: { type: HeadType.PEER_CHALLENGE, peerChallenge: { nodeId: '0000000002', nonce: Buffer.alloc(16, 2), mac: Buffer.alloc(32, 3) } },
    PEER_AUTH: { type: HeadType.PEER_AUTH, peerAuth: { mac: Buffer.alloc(32, 4) } },
    PEER_DELIVER: { type: HeadType.PEER_DELIVER, peerDeliver: { uid: 'bob', seq: u64('77'), body: Buffer.from([0x12, 0x01, 0x61]) } },
    PEER_NUDGE: { type: HeadType.PEER_NUDGE, peerNudge: { uids: ['bob', 'carol'], all: false } },
    PEER_GROUP: { type: HeadType.PEER_GROUP, peerGroup: { group: 'gabcdefghijkl', seq: u64('12'), body: Buffer.from([0x12, 0x01, 0x61]) } },
    RECEIPT: { type: HeadType.RECEIPT, receipt: { kind: 2, peer: 'bob', seq: u64('9'), msgId: u64(MAX_U64), at: u64('1764672000000') } },
    PEER_RECEIPT: { type: HeadType.PEER_RECEIPT, peerReceipt: { uid: 'alice', receipt: { kind: 1, peer: 'bob', seq: u64('9'), msgId: u64('42'), at: u64('1764672000000') } } },
  };
  t.strictSame(Object.keys(messages).sort(), Object.keys(HeadType).sort(), 'one fixture per HeadType');
  for (const [name, msg] of Object.entries(messages)) {
    const decoded = roundTrip(msg);
    t.equal(decoded.type, HeadType[name as keyof typeof HeadType], `${name}: type`);
    t.strictSame(plain(decoded), plain(msg), `${name}: all fields`);
  }
  const mr = roundTrip(messages.MESSAGE_REQUEST!).messageRequest!;
  t.equal(mr.content, 'héllo 👋', 'non-ASCII content is UTF-8 exact');
  t.equal(roundTrip(messages.HEART_BEAT!).heartBeat!.seq, 4_000_000_000, 'uint32 above 2^31 stays unsigned');
});

t.test('property: random MessageRequests round-trip exactly', async (t) => {
  const u64arb = fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }).map((n) => n.toString());
  const arb = fc.record({
    sequence: u64arb,
    sessionId: fc.string(),
    msgId: u64arb,
    time: u64arb,
    msgType: fc.nat({ max: 2 ** 32 - 1 }),
    from: fc.string({ unit: 'grapheme' }),
    content: fc.string({ unit: 'grapheme', maxLength: 200 }),
    json: fc.string(),
  });
  fc.assert(
    fc.property(arb, (r) => {
      const decoded = roundTrip({
        type: HeadType.MESSAGE_REQUEST,
        sequence: u64(r.sequence),
        sessionId: r.sessionId,
        messageRequest: { msgId: u64(r.msgId), time: u64(r.time), msgType: r.msgType, from: r.from, content: r.content, json: r.json },
      });
      const m = decoded.messageRequest!;
      return (
        decoded.sequence!.toString() === r.sequence &&
        decoded.sessionId === r.sessionId &&
        m.msgId!.toString() === r.msgId &&
        m.time!.toString() === r.time &&
        m.msgType === r.msgType &&
        m.from === r.from &&
        m.content === r.content &&
        m.json === r.json
      );
    }),
    { numRuns: 300 },
  );
  t.pass('all generated messages round-tripped');
});

t.test('uint64 values are exact, including the pre-login sequence 2^64-1', async (t) => {
  // The bytes an original client sends: field 2 (tag 0x10) with the 10-byte varint of 2^64-1.
  const fromClient = hex('10 ffffffffffffffffff01  1a 02 2d31');
  const decoded = decodeMessage(fromClient);
  t.ok(Long.isLong(decoded.sequence), 'decodes as a Long, not a lossy number');
  t.equal(decoded.sequence!.toString(), MAX_U64);
  t.equal((decoded.sequence as Long).unsigned, true, 'unsigned');
  t.equal(decoded.sessionId, PRE_LOGIN_SESSION_ID);

  // Echoed back in the reply exactly as received.
  const reply = decodeMessage(encodeMessage(loginResponse(decoded.sequence, 's-1', { inboxHead: 0, syncFrom: 0, gap: false, epoch: 1, reset: false })));
  t.equal(reply.sequence!.toString(), MAX_U64, 'echoed sequence is still 2^64-1');
  t.ok(toHex(encodeMessage(loginResponse(decoded.sequence, 's-1', { inboxHead: 0, syncFrom: 0, gap: false, epoch: 1, reset: false }))).includes('10ffffffffffffffffff01'), 're-encodes to the same 10-byte varint');

  // Above 2^53 a JS number would round; the Long must not.
  for (const s of ['9007199254740993', '9223372036854775807', '9223372036854775808', '18446744073709551614']) {
    const msg = roundTrip({ type: HeadType.MESSAGE_REQUEST, messageRequest: { msgId: u64(s), time: u64(s) } });
    t.equal(msg.messageRequest!.msgId!.toString(), s, `msg_id ${s}`);
    t.equal(msg.messageRequest!.time!.toString(), s, `time ${s}`);
  }
  t.equal(roundTrip({ type: HeadType.MESSAGE_NOTIFICATION, notification: { noId: u64(MAX_U64) } }).notification!.noId!.toString(), MAX_U64, 'no_id 2^64-1');
  t.equal(roundTrip({ type: HeadType.MESSAGE_REQUEST, sequence: 42 }).sequence!.toString(), '42', 'plain numbers are accepted when encoding');
});

t.test('field numbers and wire types match PROTOCOL.md §4 byte for byte', async (t) => {
  const body = encodeMessage({
    type: HeadType.MESSAGE_REQUEST,
    sequence: 1,
    sessionId: 's',
    messageRequest: { msgId: 2, from: 'a', to: 'b', time: 3, msgType: 4, content: 'c', url: 'u', property: 'p', fromNick: 'n', json: 'j' },
  });
  const expected = hex(`
    08 05      -- field 1 type (varint): MESSAGE_REQUEST = 5
    10 01      -- field 2 sequence (varint): 1
    1a 01 73   -- field 3 session_id (len 1): "s"
    32 1b      -- field 6 messageRequest (len 27):
      08 02    --   field 1 msg_id (varint): 2
      12 01 61 --   field 2 from: "a"
      1a 01 62 --   field 3 to: "b"
      20 03    --   field 4 time (varint): 3
      28 04    --   field 5 msg_type (varint): 4
      32 01 63 --   field 6 content: "c"  (tag 0x32 = 6<<3|2)
      42 01 75 --   field 8 url: "u"      (there is no field 7)
      4a 01 70 --   field 9 property: "p"
      52 01 6e --   field 10 from_nick: "n"
      5a 01 6a --   field 11 json: "j"    (tag 0x5a = 11<<3|2)
  `);
  t.equal(toHex(body), toHex(expected));

  // `type` 0 is the proto3 default: an encoder may write it as 08 00 or leave it out, and every
  // decoder reads its absence as 0. Skip it when present, then expect the sub-message.
  const tags = (msg: ImMessage, sub: number): string => {
    let b = Buffer.from(encodeMessage(msg));
    if (b[0] === 0x08 && b[1] === 0x00) b = b.subarray(2);
    t.equal(b[0], (sub << 3) | 2, `sub-message at field ${sub}`);
    t.equal(b[1], b.length - 2, 'its length');
    return toHex(b.subarray(2));
  };
  t.equal(tags({ type: 0, loginRequest: { uid: 'u', deviceId: 'd', token: 't', platform: 1, appVersion: 'v' } }, 4), '0a0175' + '120164' + '1a0174' + '2001' + '2a0176', 'LoginRequest 1..5');
  t.equal(tags({ type: 0, loginResponse: { result: true, code: 1, info: 'i', expose: 1 } }, 5), '0801' + '1001' + '1a0169' + '2001', 'LoginResponse 1..4');
  t.equal(tags({ type: 0, messageResponse: { result: true, code: 2, info: 'i', expose: 3 } }, 7), '0801' + '1002' + '1a0169' + '2003', 'MessageResponse 1..4');
  t.equal(tags({ type: 0, notification: { noId: 5, json: 'j', timestamp: 't' } }, 8), '0805' + '12016a' + '1a0174', 'MessageNotification 1..3');
  t.equal(tags({ type: 0, heartBeat: { seq: 6, uid: 'u', json: 'j' } }, 9), '0806' + '120175' + '1a016a', 'MessageHeartBeat 1..3');

  // The switchboard extension error_code uses field 16 (tag 16<<3|2 = 0x82 0x01), which an
  // original client skips as unknown.
  t.equal(tags({ type: 0, loginResponse: { errorCode: 'E' } }, 5), '820101' + '45', 'LoginResponse.error_code is field 16');
  t.equal(tags({ type: 0, messageResponse: { errorCode: 'E' } }, 7), '820101' + '45', 'MessageResponse.error_code is field 16');
});

t.test('HeadType values match PROTOCOL.md §3 and the proto enum', async (t) => {
  t.strictSame(
    { ...HeadType },
    {
      LOGIN_REQUEST: 0,
      LOGIN_RESPONSE: 1,
      LOGOUT_REQUEST: 2,
      LOGOUT_RESPONSE: 3,
      HEART_BEAT: 4,
      MESSAGE_REQUEST: 5,
      MESSAGE_RESPONSE: 6,
      MESSAGE_NOTIFICATION: 7,
      MESSAGE_ACK: 8,
      CONVERSATION_REQUEST: 9,
      CONVERSATION_RESPONSE: 10,
      RECEIPT: 11,
      PEER_HELLO: 20,
      PEER_CHALLENGE: 21,
      PEER_AUTH: 22,
      PEER_DELIVER: 23,
      PEER_NUDGE: 24,
      PEER_GROUP: 25,
      PEER_RECEIPT: 26,
    },
    'the original 0..7 plus the MESSAGE_ACK, conversation, receipt and peer extensions',
  );
  const protoEnum = messageType.lookupEnum('HeadType').values;
  t.strictSame({ ...protoEnum }, { ...HeadType }, 'proto/im.proto declares the same values');
  t.strictSame({ SUCCESS: ResultCode.SUCCESS, AUTH_FAILED: ResultCode.AUTH_FAILED, NO_TOKEN: ResultCode.NO_TOKEN, UNKNOWN_ERROR: ResultCode.UNKNOWN_ERROR }, { SUCCESS: 0, AUTH_FAILED: 1, NO_TOKEN: 2, UNKNOWN_ERROR: 3 }, 'original result codes');
  t.strictSame({ SESSION_ON: NotificationType.SESSION_ON, SESSION_OFF: NotificationType.SESSION_OFF, CONNECT_FINISHED: NotificationType.CONNECT_FINISHED }, { SESSION_ON: 10, SESSION_OFF: 20, CONNECT_FINISHED: 30 }, 'original notification types');
});

t.test('an undecodable body throws SB_ERR_BAD_PROTOBUF with the protobufjs error as cause', async (t) => {
  const bodies: Record<string, string> = {
    'truncated varint': '10 ff',
    'tag without a value': '08',
    'wire type 7': '0f',
    'length-delimited sub-message past the end': '22 10 0a01',
    'varint longer than 10 bytes': '10 ffffffffffffffffffffff01',
    'group end without start': '0c',
  };
  for (const [name, body] of Object.entries(bodies)) {
    const err = catchError(() => decodeMessage(hex(body)));
    t.ok(err instanceof SwitchboardError, `${name}: a SwitchboardError`);
    t.equal((err as SwitchboardError).code, 'SB_ERR_BAD_PROTOBUF', `${name}: code`);
    t.ok((err as Error).cause instanceof Error, `${name}: wraps the original error`);
  }
});

// protobufjs before 8 cut such strings short instead of failing (protobufjs/protobuf.js#2205).
t.test('a string field whose length runs past the end of the body is rejected', async (t) => {
  const err = catchError(() => decodeMessage(hex('1a 0a 6162')));
  t.equal((err as SwitchboardError | undefined)?.code, 'SB_ERR_BAD_PROTOBUF');
});

t.test('fuzz: random bodies decode or throw SB_ERR_BAD_PROTOBUF, nothing else', async (t) => {
  let rejected = 0;
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 120 }), (bytes) => {
      try {
        decodeMessage(Buffer.from(bytes));
      } catch (err) {
        rejected++;
        return err instanceof SwitchboardError && err.code === 'SB_ERR_BAD_PROTOBUF';
      }
      return true;
    }),
    { numRuns: 2000 },
  );
  t.ok(rejected > 0, 'the generator reached the error path');
});

t.test('encodeMessageFrame frames the encoded body', async (t) => {
  const msg: ImMessage = { type: HeadType.HEART_BEAT, sequence: 3, heartBeat: { seq: 1, uid: 'alice' } };
  const frame = encodeMessageFrame(msg);
  const body = encodeMessage(msg);
  t.equal(toHex(frame.subarray(0, HEADER_LENGTH)), '00860001' + body.length.toString(16).padStart(8, '0'), 'header');
  t.equal(toHex(frame.subarray(HEADER_LENGTH)), toHex(body), 'body');

  const decoded: ImMessage[] = [];
  new FrameDecoder((b) => decoded.push(decodeMessage(b))).push(Buffer.concat([frame, encodeMessageFrame({ type: HeadType.LOGOUT_REQUEST })]));
  t.equal(decoded.length, 2);
  t.strictSame(plain(decoded[0]!), plain(msg), 'decoder + codec give the message back');
  t.equal(decoded[1]!.type, HeadType.LOGOUT_REQUEST);
  // A proto3 encoder that omits defaults (the original Java clients) can send an empty body.
  const empty = decodeMessage(new Uint8Array(0));
  t.equal(empty.type, HeadType.LOGIN_REQUEST, 'an empty body is a LOGIN_REQUEST with defaults');
  t.equal(empty.sessionId, '');
  t.equal(empty.loginRequest, null);
});

t.test('resultCodeFor maps error codes to the result codes original clients know', async (t) => {
  t.equal(resultCodeFor('SB_ERR_TOKEN_INVALID'), ResultCode.AUTH_FAILED);
  t.equal(resultCodeFor('SB_ERR_TOKEN_EXPIRED'), ResultCode.AUTH_FAILED);
  t.equal(resultCodeFor('SB_ERR_TOKEN_MISMATCH'), ResultCode.AUTH_FAILED);
  t.equal(ResultCode.AUTH_FAILED, 1);
  t.equal(resultCodeFor('SB_ERR_NO_TOKEN'), ResultCode.NO_TOKEN);
  t.equal(ResultCode.NO_TOKEN, 2);
  t.equal(resultCodeFor('SB_ERR_BAD_REQUEST'), ResultCode.BAD_REQUEST);
  t.equal(resultCodeFor('SB_ERR_ALREADY_LOGGED_IN'), ResultCode.BAD_REQUEST);
  t.equal(resultCodeFor('SB_ERR_SENDER_MISMATCH'), ResultCode.SENDER_MISMATCH);
  t.equal(resultCodeFor('SB_ERR_MESSAGE_TOO_LARGE'), ResultCode.BAD_REQUEST);
  t.equal(resultCodeFor('SB_ERR_TOO_MANY_DEVICES'), ResultCode.TOO_MANY_DEVICES);
  t.equal(resultCodeFor('SB_ERR_NOT_LOGGED_IN'), ResultCode.NOT_LOGGED_IN);
  t.equal(resultCodeFor('SB_ERR_INTERNAL'), ResultCode.UNKNOWN_ERROR, 'anything else is UNKNOWN_ERROR');
  for (const code of Object.keys(ERROR_CODES) as ErrorCode[]) {
    t.not(resultCodeFor(code), ResultCode.SUCCESS, `${code} never maps to SUCCESS`);
  }
});

t.test('httpStatusOf: the gate status each code has in the error catalogue (PROTOCOL.md §0), 500 for the rest', async (t) => {
  const statuses: Partial<Record<ErrorCode, number>> = {
    SB_ERR_BAD_REQUEST: 400,
    SB_ERR_BAD_USERNAME: 400,
    SB_ERR_BAD_PASSWORD: 400,
    SB_ERR_LOGIN_FAILED: 401,
    SB_ERR_REGISTRATION_CLOSED: 403,
    SB_ERR_NOT_FOUND: 404,
    SB_ERR_NO_TOKEN: 401,
    SB_ERR_TOKEN_INVALID: 401,
    SB_ERR_TOKEN_EXPIRED: 401,
    SB_ERR_TOKEN_REVOKED: 401,
    SB_ERR_TOKEN_MISMATCH: 403,
    SB_ERR_REFRESH_INVALID: 401,
    SB_ERR_REFRESH_REUSED: 401,
    SB_ERR_ADMIN_AUTH_FAILED: 401,
    SB_ERR_UNKNOWN_RECIPIENT: 404,
    SB_ERR_NO_CONVERSATION: 404,
    SB_ERR_NO_MESSAGE: 404,
    SB_ERR_RECALL_EXPIRED: 409,
    SB_ERR_EDIT_EXPIRED: 409,
    SB_ERR_BAD_GROUP: 400,
    SB_ERR_GROUP_NOT_FOUND: 404,
    SB_ERR_GROUP_NOT_MEMBER: 403,
    SB_ERR_RECEIPTS_OFF: 403,
    SB_ERR_GROUP_FORBIDDEN: 403,
    SB_ERR_GROUP_FULL: 409,
    SB_ERR_GROUP_TOO_MANY: 409,
    SB_ERR_GROUP_OWNER_CANNOT_LEAVE: 409,
    SB_ERR_GROUP_DISSOLVED: 410,
    SB_ERR_USERNAME_TAKEN: 409,
    SB_ERR_RATE_LIMITED: 429,
    SB_ERR_NO_WORKER: 503,
    SB_ERR_STORE_UNAVAILABLE: 503,
  };
  for (const code of Object.keys(ERROR_CODES) as ErrorCode[]) t.equal(httpStatusOf(code), statuses[code] ?? 500, code);
});

t.test('loginResponse and messageResponse builders', async (t) => {
  const seq = u64(MAX_U64);
  const ok = decodeMessage(encodeMessage(loginResponse(seq, 'sess-1', { inboxHead: 9, syncFrom: 4, gap: true, epoch: 2 ** 53 - 1, reset: true })));
  t.equal(ok.type, HeadType.LOGIN_RESPONSE);
  t.equal(ok.sequence!.toString(), MAX_U64, 'echoes the request sequence');
  t.equal(ok.sessionId, 'sess-1');
  t.match(ok.loginResponse, { result: true, code: ResultCode.SUCCESS, errorCode: '', gap: true });
  t.equal(Number(ok.loginResponse!.inboxHead), 9, 'inbox_head extension');
  t.equal(Number(ok.loginResponse!.syncFrom), 4, 'sync_from extension');
  t.equal(Number(ok.loginResponse!.inboxEpoch), 2 ** 53 - 1, 'inbox_epoch extension, exact');
  t.equal(ok.loginResponse!.reset, true, 'reset extension');

  const failures: [ErrorCode, number][] = [
    ['SB_ERR_TOKEN_EXPIRED', 1],
    ['SB_ERR_TOKEN_INVALID', 1],
    ['SB_ERR_TOKEN_MISMATCH', 1],
    ['SB_ERR_NO_TOKEN', 2],
    ['SB_ERR_TOO_MANY_DEVICES', ResultCode.TOO_MANY_DEVICES],
  ];
  for (const [code, result] of failures) {
    const built = loginResponse(seq, '-1', { code, reason: `because ${code}` });
    const wire = decodeMessage(encodeMessage(built)).loginResponse!;
    t.equal(wire.result, false, `${code}: result=false`);
    t.equal(wire.code, result, `${code}: result code ${result}`);
    t.equal(wire.errorCode, code, `${code}: errorCode on the wire`);
    t.equal(wire.info, `because ${code}`, `${code}: reason as info`);
  }

  const mok = decodeMessage(encodeMessage(messageResponse(5, 's', { seq: 12, duplicate: true }))).messageResponse!;
  t.match(mok, { result: true, code: ResultCode.SUCCESS, duplicate: true });
  t.equal(Number(mok.seq), 12, 'seq extension');
  const mfail = decodeMessage(encodeMessage(messageResponse(5, 's', { code: 'SB_ERR_SENDER_MISMATCH', reason: 'no' }))).messageResponse!;
  t.match(mfail, { result: false, code: ResultCode.SENDER_MISMATCH, errorCode: 'SB_ERR_SENDER_MISMATCH', info: 'no' });

  const out = decodeMessage(encodeMessage(logoutResponse(9, 's')));
  t.equal(out.type, HeadType.LOGOUT_RESPONSE);
  t.equal(out.sequence!.toString(), '9');
});

t.test('notification builders carry {type, data} JSON', async (t) => {
  const n = decodeMessage(encodeMessage(notification(NotificationType.SESSION_ON, { uid: 'bob' }, 's')));
  t.equal(n.type, HeadType.MESSAGE_NOTIFICATION);
  t.equal(n.sessionId, 's');
  t.strictSame(JSON.parse(n.notification!.json!), { type: 10, data: { uid: 'bob' } });
  t.equal(n.notification!.timestamp, n.notification!.noId!.toString(), 'timestamp and no_id agree');

  const c = decodeMessage(encodeMessage(closingNotification({ code: 'SB_ERR_IDLE_TIMEOUT', reason: 'idle' })));
  t.strictSame(JSON.parse(c.notification!.json!), { type: NotificationType.CLOSING, data: { code: 'SB_ERR_IDLE_TIMEOUT', reason: 'idle' } });
});

t.test('uint64String is exact across the whole range', async (t) => {
  // Each side of 2^32 and of 2^53 (where the fast path ends), and the top.
  for (const v of ['0', '1', '4294967295', '4294967296', '1764478800000000', '9007199254740991', '9007199254740992', '9007199254740993', '18446744073709551615']) {
    t.equal(uint64String(Long.fromString(v, true)), v, v);
  }
  fc.assert(fc.property(fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }), (v) => uint64String(Long.fromString(v.toString(), true)) === v.toString()));
  t.equal(uint64String(42), '42');
  t.equal(uint64String(undefined), '0');
});

t.test('uint64Number is the number Number() of the Long gives, without its decimal detour', async (t) => {
  for (const v of ['0', '1', '2147483648', '4294967295', '4294967296', '1764478800000000', '9007199254740991']) {
    t.equal(uint64Number(Long.fromString(v, true)), Number(v), v);
  }
  fc.assert(fc.property(fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }), (v) => uint64Number(Long.fromString(v.toString(), true)) === Number(v)));
  t.equal(uint64Number(42), 42);
  t.equal(uint64Number(undefined), 0);
  t.equal(uint64Number(null), 0);
});

t.test('bodyIdentity: one number for every body of one message, another for another message', async (t) => {
  const id = bodyIdentity;
  const request = { msgId: Long.fromString('1764478800000', true), to: 'bob', time: 1_764_478_800_000, msgType: 1, content: 'hi' };
  // As a worker stores it: spliced from the client's frame (the fast path), or encoded (the slow one).
  const frame = Buffer.from(encodeMessage({ type: HeadType.MESSAGE_REQUEST, sequence: 3, messageRequest: request }));
  const wired = decodeMessage(frame).messageRequest!;
  const stored = storedRequestBody(wired, 'alice', 1_764_478_800_123);
  const m = decodeStoredRequest(stored);
  const same: [string, Uint8Array][] = [
    ['encoded rather than spliced', storedRequestBody({ ...request }, 'alice', 1_764_478_800_123)],
    ['a resend that found it stored: another stored_at and time', storedRequestBody({ ...request, time: 1_764_478_801_000 }, 'alice', 1_764_478_801_234)],
    ['its tombstone', tombstoneBody(m)],
    ['its edited form', editedBody(m, 'hello', '{"x":1}')],
    ['its own copy, in the sender\'s inbox', ownCopyBody(stored, 'alice-phone')],
  ];
  for (const [what, body] of same) t.equal(id(body), id(stored), what);
  const other: [string, Uint8Array][] = [
    ['another msg_id', storedRequestBody({ ...request, msgId: Long.fromString('1764478800001', true) }, 'alice', 1_764_478_800_123)],
    ['another sender', storedRequestBody({ ...request }, 'carol', 1_764_478_800_123)],
    ['another recipient (an own copy of the same msg_id to someone else)', ownCopyBody(storedRequestBody({ ...request, to: 'dave' }, 'alice', 1_764_478_800_123), 'alice-phone')],
  ];
  for (const [what, body] of other) t.not(id(body), id(stored), what);
  // Without a msg_id (an inbox event), the whole body: two events differ.
  const read = (seq: number) => inboxEventBody(JSON.stringify({ type: 'read', peer: 'bob', seq }), { from: 'alice', to: 'bob', storedAt: 1_764_478_800_000 });
  t.equal(id(read(4)), id(read(4)), 'an event: the same body, the same number');
  t.not(id(read(4)), id(read(5)), 'another event, another number');
  // A message without msg_id (an original client's) is hashed whole, its own copy without its origin_device: one number for both.
  const { msgId: _, ...noId } = request;
  const plain = storedRequestBody({ ...noId }, 'alice', 1_764_478_800_123);
  t.equal(id(ownCopyBody(plain, 'alice-phone')), id(plain), 'without msg_id: the own copy has its message\'s number');
  t.not(id(ownCopyBody(plain, 'alice-phone')), id(storedRequestBody({ ...noId, content: 'ho' }, 'alice', 1_764_478_800_123)), 'and another message without msg_id another');
  // Whatever a body holds, a number (an unreadable one is hashed whole).
  fc.assert(fc.property(fc.uint8Array({ maxLength: 64 }), (bytes) => Number.isInteger(id(bytes)) && id(bytes) >= 0 && id(bytes) < 2 ** 32));
});

t.test('setsServerFields: any server-only field a request carries, and none of a plain request', async (t) => {
  const plainRequest = decodeMessage(encodeMessage({ type: HeadType.MESSAGE_REQUEST, sequence: 3, messageRequest: { msgId: 7, to: 'bob', content: 'hi' } })).messageRequest!;
  t.ok(REQUEST_WIRE in plainRequest, 'read by the hand decoder: the case the shortcut serves');
  t.equal(setsServerFields(plainRequest), false, "a plain request (the hand decoder's)");
  // Encoded as every encoder writes them (fields ascending): the form the hand decoder takes,
  // were it ever to accept one of these fields, the check must still see it.
  for (const [field, value] of [['originDevice', 'phone'], ['event', '{}'], ['recalled', true], ['edited', true]] as const) {
    const request = decodeMessage(encodeMessage({ type: HeadType.MESSAGE_REQUEST, sequence: 3, messageRequest: { msgId: 7, to: 'bob', content: 'hi', [field]: value } })).messageRequest!;
    t.equal(setsServerFields(request), true, `${field} = ${JSON.stringify(value)}`);
  }
});
