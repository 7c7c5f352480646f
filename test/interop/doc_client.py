#!/usr/bin/env python3
"""A native switchboard client written only from PROTOCOL.md.

Standard library only; the protobuf encoder/decoder is hand-written from the field tables.

Usage:
    doc_client.py --host 127.0.0.1 --port 9137 --alice-token T1 --bob-token T2 --offline-token T3

The three tokens are for the users alice, bob and the offline user (--alice, --bob,
--offline-user), valid for any device.

Prints one TAP-like line per check ("ok - ..." / "not ok - ...") and exits 0 only if every
check passes. Every wait has a timeout, so it never hangs.
"""

import argparse
import json
import select
import socket
import struct
import sys
import time

# ---------------------------------------------------------------------------------------------
# Protobuf (proto3) by hand
# ---------------------------------------------------------------------------------------------

WT_VARINT, WT_I64, WT_LEN, WT_SGROUP, WT_EGROUP, WT_I32 = 0, 1, 2, 3, 4, 5
U64_MAX = (1 << 64) - 1

# HeadType
LOGIN_REQUEST = 0
LOGIN_RESPONSE = 1
LOGOUT_REQUEST = 2
LOGOUT_RESPONSE = 3
HEART_BEAT = 4
MESSAGE_REQUEST = 5
MESSAGE_RESPONSE = 6
MESSAGE_NOTIFICATION = 7
MESSAGE_ACK = 8  # extension, client -> server only
HEAD_NAMES = {0: "LOGIN_REQUEST", 1: "LOGIN_RESPONSE", 2: "LOGOUT_REQUEST", 3: "LOGOUT_RESPONSE",
              4: "HEART_BEAT", 5: "MESSAGE_REQUEST", 6: "MESSAGE_RESPONSE",
              7: "MESSAGE_NOTIFICATION", 8: "MESSAGE_ACK"}

# Schemas: field number -> (name, kind). kind is a scalar kind or the name of a message schema.
# "opt_uint64" is a proto3 `optional uint64`: encoded whenever set, 0 included (presence counts).
SCHEMAS = {
    "Message": {
        1: ("type", "enum"),
        2: ("sequence", "uint64"),
        3: ("session_id", "string"),
        4: ("loginRequest", "LoginRequest"),
        5: ("loginResponse", "LoginResponse"),
        6: ("messageRequest", "MessageRequest"),
        7: ("messageResponse", "MessageResponse"),
        8: ("notification", "MessageNotification"),
        9: ("heartBeat", "MessageHeartBeat"),
        16: ("ack", "MessageAck"),
    },
    "LoginRequest": {
        1: ("uid", "string"),
        2: ("deviceId", "string"),
        3: ("token", "string"),
        4: ("platform", "uint32"),
        5: ("app_version", "string"),
        16: ("acks", "bool"),
        17: ("last_seq", "opt_uint64"),
        18: ("inbox_epoch", "opt_uint64"),
    },
    "LoginResponse": {
        1: ("result", "bool"),
        2: ("code", "uint32"),
        3: ("info", "string"),
        4: ("expose", "uint32"),
        16: ("error_code", "string"),
        17: ("inbox_head", "uint64"),
        18: ("sync_from", "uint64"),
        19: ("gap", "bool"),
        20: ("inbox_epoch", "uint64"),
        21: ("reset", "bool"),
        22: ("heartbeat_interval_ms", "uint32"),
    },
    "MessageRequest": {
        1: ("msg_id", "uint64"),
        2: ("from", "string"),
        3: ("to", "string"),
        4: ("time", "uint64"),
        5: ("msg_type", "uint32"),
        6: ("content", "string"),
        8: ("url", "string"),
        9: ("property", "string"),
        10: ("from_nick", "string"),
        11: ("json", "string"),
        16: ("seq", "uint64"),
        17: ("stored_at", "uint64"),
    },
    "MessageResponse": {
        1: ("result", "bool"),
        2: ("code", "uint32"),
        3: ("info", "string"),
        4: ("expose", "uint32"),
        16: ("error_code", "string"),
        17: ("seq", "uint64"),
        18: ("duplicate", "bool"),
    },
    "MessageNotification": {
        1: ("no_id", "uint64"),
        2: ("json", "string"),
        3: ("timestamp", "string"),
    },
    "MessageHeartBeat": {
        1: ("seq", "uint32"),
        2: ("uid", "string"),
        3: ("json", "string"),
    },
    "MessageAck": {
        1: ("seq", "uint64"),
    },
}
SCALAR_DEFAULTS = {"enum": 0, "uint64": 0, "uint32": 0, "bool": False, "string": "",
                   "opt_uint64": None}


class ProtobufError(Exception):
    pass


def enc_varint(n):
    if n < 0:
        raise ValueError("negative varint")
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def dec_varint(buf, pos):
    result = 0
    shift = 0
    while True:
        if pos >= len(buf):
            raise ProtobufError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise ProtobufError("varint too long")


def enc_key(field, wt):
    return enc_varint((field << 3) | wt)


def encode(schema_name, msg):
    """Encode a dict as the proto3 message `schema_name`. Default values are omitted, as the
    canonical proto3 encoders of the original clients do."""
    schema = SCHEMAS[schema_name]
    by_name = {name: (num, kind) for num, (name, kind) in schema.items()}
    out = bytearray()
    for name in sorted(msg, key=lambda n: by_name[n][0] if n in by_name else 0):
        if name not in by_name:
            raise KeyError("%s has no field %r" % (schema_name, name))
        num, kind = by_name[name]
        value = msg[name]
        if value is None:
            continue
        if kind == "opt_uint64":
            if not 0 <= value <= U64_MAX:
                raise ValueError("%s.%s out of range" % (schema_name, name))
            out += enc_key(num, WT_VARINT) + enc_varint(value)
        elif kind in ("enum", "uint64", "uint32"):
            if value == 0:
                continue
            limit = U64_MAX if kind == "uint64" else 0xFFFFFFFF if kind == "uint32" else U64_MAX
            if not 0 <= value <= limit:
                raise ValueError("%s.%s out of range" % (schema_name, name))
            out += enc_key(num, WT_VARINT) + enc_varint(value)
        elif kind == "bool":
            if not value:
                continue
            out += enc_key(num, WT_VARINT) + b"\x01"
        elif kind == "string":
            if value == "":
                continue
            data = value.encode("utf-8")
            out += enc_key(num, WT_LEN) + enc_varint(len(data)) + data
        else:  # embedded message: present even when empty
            data = encode(kind, value)
            out += enc_key(num, WT_LEN) + enc_varint(len(data)) + data
    return bytes(out)


def decode(schema_name, buf):
    """Decode bytes as `schema_name`; unknown fields are skipped (kept in '_unknown'),
    missing scalars get their proto3 defaults, missing sub-messages are absent (None)."""
    schema = SCHEMAS[schema_name]
    msg = {}
    unknown = []
    pos = 0
    n = len(buf)
    while pos < n:
        key, pos = dec_varint(buf, pos)
        num, wt = key >> 3, key & 7
        if num == 0:
            raise ProtobufError("field number 0")
        if wt == WT_VARINT:
            value, pos = dec_varint(buf, pos)
        elif wt == WT_I64:
            if pos + 8 > n:
                raise ProtobufError("truncated fixed64")
            value = buf[pos:pos + 8]
            pos += 8
        elif wt == WT_I32:
            if pos + 4 > n:
                raise ProtobufError("truncated fixed32")
            value = buf[pos:pos + 4]
            pos += 4
        elif wt == WT_LEN:
            length, pos = dec_varint(buf, pos)
            if pos + length > n:
                raise ProtobufError("truncated length-delimited field")
            value = bytes(buf[pos:pos + length])
            pos += length
        else:
            raise ProtobufError("unsupported wire type %d" % wt)
        if num not in schema:
            unknown.append((num, wt, value))
            continue
        name, kind = schema[num]
        if kind in ("enum", "uint64", "opt_uint64", "uint32", "bool"):
            if wt != WT_VARINT:
                raise ProtobufError("%s.%s: wire type %d, want varint" % (schema_name, name, wt))
            if kind == "uint32":
                value &= 0xFFFFFFFF
            elif kind == "bool":
                value = value != 0
            else:
                value &= U64_MAX
            msg[name] = value
        elif kind == "string":
            if wt != WT_LEN:
                raise ProtobufError("%s.%s: wire type %d, want bytes" % (schema_name, name, wt))
            try:
                msg[name] = value.decode("utf-8")
            except UnicodeDecodeError:
                raise ProtobufError("%s.%s: invalid UTF-8" % (schema_name, name))
        else:
            if wt != WT_LEN:
                raise ProtobufError("%s.%s: wire type %d, want bytes" % (schema_name, name, wt))
            sub = decode(kind, value)
            if isinstance(msg.get(name), dict):  # proto semantics: repeated sub-message merges
                merged = dict(msg[name])
                merged.update({k: v for k, v in sub.items() if k in sub.get("_present", ())})
                sub = merged
            msg[name] = sub
    present = tuple(msg.keys())
    for num, (name, kind) in schema.items():
        if name not in msg:
            msg[name] = SCALAR_DEFAULTS.get(kind)  # None for sub-messages
    msg["_present"] = present
    if unknown:
        msg["_unknown"] = unknown
    return msg


# ---------------------------------------------------------------------------------------------
# Framing
# ---------------------------------------------------------------------------------------------

MAGIC = 0x0086
VERSION = 1
HEADER = struct.Struct(">HHi")  # magic uint16, version uint16, body length int32
# Our own safety limit on what we accept from the server. Deliberately NOT 65536: the server
# forwards a max-size MESSAGE_REQUEST with `from` added, so frames it sends can be a few bytes
# larger than its own --max-frame-length (PROTOCOL.md gives no limit for server frames).
CLIENT_MAX_FRAME = 16 * 1024 * 1024


class FrameError(Exception):
    pass


def frame(body, magic=MAGIC, version=VERSION):
    return HEADER.pack(magic, version, len(body)) + body


def frame_message(msg):
    return frame(encode("Message", msg))


class FrameDecoder:
    """Decodes a byte stream into frame bodies; bytes may arrive split or coalesced."""

    def __init__(self, max_length=CLIENT_MAX_FRAME):
        self.buf = bytearray()
        self.max_length = max_length

    def feed(self, data):
        self.buf += data
        bodies = []
        while len(self.buf) >= HEADER.size:
            magic, version, length = HEADER.unpack_from(self.buf, 0)
            if magic != MAGIC:
                raise FrameError("bad magic 0x%04x from server" % magic)
            if version != VERSION:
                raise FrameError("bad version %d from server" % version)
            if length < 0 or length > self.max_length:
                raise FrameError("bad length %d from server" % length)
            if len(self.buf) < HEADER.size + length:
                break
            bodies.append(bytes(self.buf[HEADER.size:HEADER.size + length]))
            del self.buf[:HEADER.size + length]
        return bodies


# ---------------------------------------------------------------------------------------------
# Connection
# ---------------------------------------------------------------------------------------------

class Conn:
    def __init__(self, name, host, port, timeout):
        self.name = name
        self.timeout = timeout
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.decoder = FrameDecoder()
        self.inbox = []  # decoded Message dicts, each with "_raw" (the body bytes)
        self.closed = False  # peer closed (EOF or reset)
        self.close_reason = None
        self.session_id = "-1"
        self.next_seq = 1

    def seq(self):
        s = self.next_seq
        self.next_seq += 1
        return s

    def send_raw(self, data):
        self.sock.sendall(data)

    def send(self, msg):
        self.send_raw(frame_message(msg))

    def _pump(self, deadline):
        """Read what is available until `deadline`; returns False when nothing more can come."""
        if self.closed:
            return False
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return True
        r, _, _ = select.select([self.sock], [], [], remaining)
        if not r:
            return True
        try:
            data = self.sock.recv(65536)
        except (ConnectionResetError, OSError) as e:
            self.closed = True
            self.close_reason = "error: %s" % e
            return False
        if not data:
            self.closed = True
            self.close_reason = "EOF"
            return False
        for body in self.decoder.feed(data):
            msg = decode("Message", body)
            msg["_raw"] = body
            self.inbox.append(msg)
        return True

    def expect(self, pred, timeout=None):
        """Return (and remove) the first received message matching pred, or None on timeout or
        close."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            for i, m in enumerate(self.inbox):
                if pred(m):
                    return self.inbox.pop(i)
            if time.monotonic() >= deadline:
                return None
            if not self._pump(deadline):
                # closed: one last look at what arrived before the close
                for i, m in enumerate(self.inbox):
                    if pred(m):
                        return self.inbox.pop(i)
                return None

    def expect_type(self, t, seq=None, timeout=None):
        return self.expect(lambda m: m["type"] == t and (seq is None or m["sequence"] == seq),
                           timeout)

    def wait_closed(self, timeout=None):
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while not self.closed and time.monotonic() < deadline:
            self._pump(deadline)
        return self.closed

    def drain(self, timeout=0.3):
        """Collect whatever arrives within `timeout`; returns and clears the inbox."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self._pump(deadline):
            pass
        got, self.inbox = self.inbox, []
        return got

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


# ---------------------------------------------------------------------------------------------
# Checks
# ---------------------------------------------------------------------------------------------

class Results:
    def __init__(self):
        self.n = 0
        self.failed = 0

    def check(self, cond, desc, detail=None):
        self.n += 1
        if cond:
            print("ok - %s" % desc)
        else:
            self.failed += 1
            print("not ok - %s%s" % (desc, "" if detail is None else "  # %s" % detail))
        sys.stdout.flush()
        return cond

    def info(self, text):
        print("# %s" % text)
        sys.stdout.flush()


def show(m):
    if m is None:
        return "nothing (timeout or connection closed)"
    d = {k: v for k, v in m.items() if not k.startswith("_") and v not in (None, "", 0, False)}
    d["type"] = HEAD_NAMES.get(m["type"], m["type"])
    for k in list(d):
        if isinstance(d[k], dict):
            d[k] = {kk: vv for kk, vv in d[k].items() if not kk.startswith("_")}
    return json.dumps(d, default=str)


def parse_notification(m):
    """Returns the parsed notification json ({type, data}) or None."""
    if m is None or m["type"] != MESSAGE_NOTIFICATION or not m["notification"]:
        return None
    try:
        j = json.loads(m["notification"]["json"])
    except ValueError:
        return None
    data = j.get("data") if isinstance(j, dict) else None
    if isinstance(data, str):  # tolerate data sent as a JSON-encoded string
        try:
            data = json.loads(data)
        except ValueError:
            pass
        j["data"] = data
    return j


def self_test(R):
    # PROTOCOL.md §2 worked example.
    hb = frame_message({"type": HEART_BEAT, "sequence": 7})
    R.check(hb == bytes.fromhex("0086000100000004" "08041007"),
            "encoder reproduces the documented heartbeat frame 00 86 00 01 00 00 00 04 08 04 10 07",
            hb.hex())
    # uint64 extremes round-trip.
    body = encode("Message", {"type": LOGIN_REQUEST, "sequence": U64_MAX, "session_id": "-1"})
    back = decode("Message", body)
    R.check(back["sequence"] == U64_MAX and back["type"] == LOGIN_REQUEST
            and back["session_id"] == "-1", "uint64 2^64-1 sequence round-trips")
    # Split / coalesced stream decoding.
    frames = [frame_message({"type": HEART_BEAT, "sequence": i,
                             "heartBeat": {"seq": i, "uid": "u%d" % i, "json": "x" * (i * 37)}})
              for i in range(1, 6)]
    frames.append(frame(b""))  # an empty body is a valid Message
    stream = b"".join(frames)
    d = FrameDecoder()
    got = []
    for b in stream:  # one byte at a time
        got += d.feed(bytes([b]))
    d2 = FrameDecoder()
    got2 = d2.feed(stream)  # all at once
    d3 = FrameDecoder()
    got3 = []
    for i in range(0, len(stream), 7):  # odd chunks straddling headers
        got3 += d3.feed(stream[i:i + 7])
    want = [f[8:] for f in frames]
    R.check(got == want and got2 == want and got3 == want and not d.buf and not d2.buf
            and not d3.buf, "frame decoder handles split and coalesced frames")
    # optional uint64 last_seq (LoginRequest field 17): 0 is sent, absence is not.
    R.check(encode("LoginRequest", {"last_seq": 0}) == b"\x88\x01\x00"
            and encode("LoginRequest", {"last_seq": None}) == b"",
            "optional last_seq=0 is encoded (field 17, varint 0); an absent one is not")


def login(conn, uid, token, device, **extensions):
    """Sends a LOGIN_REQUEST (extensions: acks=True, last_seq=N) and returns the response."""
    body = {"uid": uid, "deviceId": device, "token": token, "platform": 1,
            "app_version": "doc-client/1"}
    body.update(extensions)
    conn.send({"type": LOGIN_REQUEST, "sequence": U64_MAX, "session_id": "-1",
               "loginRequest": body})
    return conn.expect_type(LOGIN_RESPONSE)


def logout(conn):
    seq = conn.seq()
    conn.send({"type": LOGOUT_REQUEST, "sequence": seq, "session_id": conn.session_id})
    resp = conn.expect_type(LOGOUT_RESPONSE)
    return resp is not None and resp["sequence"] == seq and conn.wait_closed()


def delivered(conn, content, timeout=None):
    """The next delivered MESSAGE_REQUEST with this content, or None."""
    return conn.expect(lambda m: m["type"] == MESSAGE_REQUEST and m["messageRequest"] is not None
                       and m["messageRequest"]["content"] == content, timeout)


def check_login_ok(R, conn, who, resp):
    lr = resp["loginResponse"] if resp else None
    ok = R.check(resp is not None and lr is not None and lr["result"] is True and lr["code"] == 0,
                 "%s: LOGIN_RESPONSE result=true code=0" % who, show(resp))
    if resp is not None:
        R.check(resp["sequence"] == U64_MAX,
                "%s: LOGIN_RESPONSE echoes the pre-login sequence 2^64-1" % who,
                "sequence=%d" % resp["sequence"])
        sid = resp["session_id"]
        R.check(sid not in ("", "-1"), "%s: LOGIN_RESPONSE carries a session id" % who,
                "session_id=%r" % sid)
        if ok:
            conn.session_id = sid
            # PROTOCOL.md §1: heartbeat every heartbeat_interval_ms of the LOGIN_RESPONSE.
            R.check(lr["heartbeat_interval_ms"] > 0,
                    "%s: LOGIN_RESPONSE tells the heartbeat interval (field 22)" % who,
                    "heartbeat_interval_ms=%d" % lr["heartbeat_interval_ms"])
    return ok


def run(args):
    R = Results()
    T = args.timeout
    self_test(R)

    alice_id, bob_id = args.alice, args.bob
    offline_id = args.offline_user

    alice = Conn("alice", args.host, args.port, T)
    bob = Conn("bob", args.host, args.port, T)

    # ---- login ------------------------------------------------------------------------------
    # Bob's login is sent split into single-byte writes to check the server reassembles frames.
    a_resp = login(alice, alice_id, args.alice_token, "doc-client-alice")
    ok_a = check_login_ok(R, alice, "alice", a_resp)

    bob_login = frame_message({"type": LOGIN_REQUEST, "sequence": U64_MAX, "session_id": "-1",
                               "loginRequest": {"uid": bob_id, "deviceId": "doc-client-bob",
                                                "token": args.bob_token, "platform": 1,
                                                "app_version": "doc-client/1"}})
    for i in range(len(bob_login)):
        bob.send_raw(bob_login[i:i + 1])
        if i % 16 == 0:
            time.sleep(0.002)
    b_resp = bob.expect_type(LOGIN_RESPONSE)
    ok_b = check_login_ok(R, bob, "bob (login frame sent one byte per write)", b_resp)
    if not (ok_a and ok_b):
        R.info("login failed; skipping the logged-in checks")
        return finish(R, [alice, bob])

    # Anything unsolicited right after login (e.g. presence notifications)?
    for c in (alice, bob):
        for m in c.drain(0.3):
            R.info("%s received unsolicited after login: %s" % (c.name, show(m)))

    # ---- chat alice -> bob ------------------------------------------------------------------
    seq = alice.seq()
    msg_id = 0xFFFFFFFFFFFFFFF0  # exercises uint64 exactness
    now_ms = int(time.time() * 1000)
    content = "hello bob \u2603 from the doc client"
    req = {"msg_id": msg_id, "to": bob_id, "time": now_ms, "msg_type": 1, "content": content,
           "from_nick": "Alice", "json": '{"k":1}', "property": "p", "url": "u"}
    alice.send({"type": MESSAGE_REQUEST, "sequence": seq, "session_id": alice.session_id,
                "messageRequest": req})
    resp = alice.expect_type(MESSAGE_RESPONSE, seq)
    mr = resp["messageResponse"] if resp else None
    R.check(mr is not None and mr["result"] is True and mr["code"] == 0,
            "alice: MESSAGE_RESPONSE result=true code=0 echoing her sequence %d" % seq, show(resp))
    first_seq = mr["seq"] if mr else 0
    if resp is not None:
        R.check(resp["session_id"] == alice.session_id,
                "alice: MESSAGE_RESPONSE carries her session id",
                "got %r, want %r" % (resp["session_id"], alice.session_id))
        R.check(first_seq > 0 and mr["duplicate"] is False,
                "alice: MESSAGE_RESPONSE has the seq in bob's inbox (field 17) and duplicate=false",
                show(resp))
    got = bob.expect_type(MESSAGE_REQUEST)
    gr = got["messageRequest"] if got else None
    R.check(gr is not None and gr["from"] == alice_id and gr["content"] == content,
            "bob: receives MESSAGE_REQUEST from=alice with the content", show(got))
    if gr is not None:
        # PROTOCOL.md §5: stored_at is the server's clock when it accepted the message; the
        # server runs on this machine, so it is between the send and now.
        R.check(now_ms <= gr["stored_at"] <= int(time.time() * 1000) + 1,
                "bob: the delivery carries stored_at (field 17), the server's time of acceptance",
                "stored_at=%d sent at %d" % (gr["stored_at"], now_ms))
        same = all(gr[k] == v for k, v in req.items())
        R.check(same, "bob: the other messageRequest fields arrive unchanged (msg_id 2^64-16, "
                "to, time, msg_type, from_nick, json, property, url)", show(got))
        R.check(gr["seq"] == first_seq and got["sequence"] == first_seq
                and got["session_id"] == "",
                "bob: the delivery carries the inbox seq (MessageRequest field 16, and the "
                "envelope sequence) and an empty session_id",
                "seq=%d sequence=%d session_id=%r, want seq %d"
                % (gr["seq"], got["sequence"], got["session_id"], first_seq))

    # ---- spoofed from ------------------------------------------------------------------------
    seq = alice.seq()
    alice.send({"type": MESSAGE_REQUEST, "sequence": seq, "session_id": alice.session_id,
                "messageRequest": {"msg_id": 2, "from": "mallory", "to": bob_id,
                                   "content": "spoofed"}})
    resp = alice.expect_type(MESSAGE_RESPONSE, seq)
    mr = resp["messageResponse"] if resp else None
    R.check(mr is not None and mr["result"] is False and mr["code"] == 5
            and mr["error_code"] == "SB_ERR_SENDER_MISMATCH",
            "spoofed from: MESSAGE_RESPONSE result=false code=5 SB_ERR_SENDER_MISMATCH",
            show(resp))
    leaked = bob.expect_type(MESSAGE_REQUEST, timeout=0.5)
    R.check(leaked is None, "spoofed from: nothing is delivered to bob", show(leaked))

    # `from` equal to the sender is allowed.
    seq = alice.seq()
    alice.send({"type": MESSAGE_REQUEST, "sequence": seq, "session_id": alice.session_id,
                "messageRequest": {"msg_id": 3, "from": alice_id, "to": bob_id,
                                   "content": "explicit from"}})
    resp = alice.expect_type(MESSAGE_RESPONSE, seq)
    got = bob.expect_type(MESSAGE_REQUEST)
    R.check(resp is not None and resp["messageResponse"] is not None
            and resp["messageResponse"]["result"] is True and got is not None
            and got["messageRequest"]["content"] == "explicit from",
            "from set to the sender itself is accepted and delivered", show(resp))

    # ---- offline recipient: stored, then delivered at login ------------------------------------
    seq = alice.seq()
    alice.send({"type": MESSAGE_REQUEST, "sequence": seq, "session_id": alice.session_id,
                "messageRequest": {"msg_id": 4, "to": offline_id, "content": "anyone?"}})
    resp = alice.expect_type(MESSAGE_RESPONSE, seq)
    mr = resp["messageResponse"] if resp else None
    R.check(mr is not None and mr["result"] is True and mr["code"] == 0 and mr["seq"] > 0
            and mr["duplicate"] is False,
            "offline recipient: MESSAGE_RESPONSE result=true code=0 with a seq (field 17)",
            show(resp))
    offline_seq = mr["seq"] if mr else 0
    # alice logged in without acks, like an original client: her msg_ids are not a dedupe
    # key, so the same msg_id again is another message.
    seq = alice.seq()
    alice.send({"type": MESSAGE_REQUEST, "sequence": seq, "session_id": alice.session_id,
                "messageRequest": {"msg_id": 4, "to": offline_id, "content": "anyone? (again)"}})
    resp = alice.expect_type(MESSAGE_RESPONSE, seq)
    mr = resp["messageResponse"] if resp else None
    R.check(mr is not None and mr["result"] is True and mr["seq"] > offline_seq
            and mr["duplicate"] is False,
            "same msg_id from a client without acks: stored again with a new seq, "
            "duplicate=false", show(resp))
    again_seq = mr["seq"] if mr else 0
    # From a client that declared acks, msg_id is the dedupe key: a resend after a lost
    # answer is stored once and answered with the original seq.
    acker = Conn("bob-acks", args.host, args.port, T)
    try:
        if check_login_ok(R, acker, "bob on a second device, acks=true",
                          login(acker, bob_id, args.bob_token, "doc-client-bob-acks",
                                acks=True)):
            results = []
            for _ in range(2):
                seq = acker.seq()
                acker.send({"type": MESSAGE_REQUEST, "sequence": seq,
                            "session_id": acker.session_id,
                            "messageRequest": {"msg_id": 77, "to": offline_id,
                                               "content": "from an ack client"}})
                resp = acker.expect_type(MESSAGE_RESPONSE, seq)
                results.append(resp["messageResponse"] if resp else None)
            first, second = results
            R.check(first is not None and first["result"] is True and first["seq"] > again_seq
                    and first["duplicate"] is False,
                    "ack client: the first send is stored (duplicate=false)", str(first))
            R.check(second is not None and first is not None and second["result"] is True
                    and second["seq"] == first["seq"] and second["duplicate"] is True,
                    "ack client: the same msg_id again gets the same seq and duplicate=true "
                    "(field 18)", str(second))
            R.check(logout(acker), "bob's second device logs out")
    finally:
        acker.close()

    # ---- missing `to` -----------------------------------------------------------------------
    seq = alice.seq()
    alice.send({"type": MESSAGE_REQUEST, "sequence": seq, "session_id": alice.session_id,
                "messageRequest": {"msg_id": 5, "content": "to nobody"}})
    resp = alice.expect_type(MESSAGE_RESPONSE, seq)
    mr = resp["messageResponse"] if resp else None
    R.check(mr is not None and mr["result"] is False and mr["code"] == 4
            and mr["error_code"] == "SB_ERR_BAD_REQUEST",
            "no to: MESSAGE_RESPONSE result=false code=4 SB_ERR_BAD_REQUEST", show(resp))

    # ---- ordering: a burst of messages, coalesced into one write ------------------------------
    seqs = [alice.seq() for _ in range(20)]
    burst = b"".join(frame_message({"type": MESSAGE_REQUEST, "sequence": s,
                                    "session_id": alice.session_id,
                                    "messageRequest": {"msg_id": 100 + i, "to": bob_id,
                                                       "content": "n%d" % i}})
                     for i, s in enumerate(seqs))
    alice.send_raw(burst)
    resps = [alice.expect_type(MESSAGE_RESPONSE, s) for s in seqs]
    recv = [bob.expect_type(MESSAGE_REQUEST) for _ in seqs]
    R.check(all(r is not None and r["messageResponse"]["result"] for r in resps),
            "20 coalesced MESSAGE_REQUESTs each get a successful MESSAGE_RESPONSE")
    R.check([r["messageRequest"]["content"] if r else None for r in recv]
            == ["n%d" % i for i in range(20)],
            "bob receives the 20 messages in the order alice sent them")
    sent_seqs = [r["messageResponse"]["seq"] if r else None for r in resps]
    got_seqs = [r["messageRequest"]["seq"] if r else None for r in recv]
    R.check(None not in sent_seqs and sent_seqs == list(range(sent_seqs[0], sent_seqs[0] + 20))
            and got_seqs == sent_seqs,
            "the 20 get consecutive inbox seqs, delivered with the seqs alice was told",
            "told %s, delivered %s" % (sent_seqs, got_seqs))

    # ---- heartbeat ---------------------------------------------------------------------------
    seq = alice.seq()
    hb = {"type": HEART_BEAT, "sequence": seq, "session_id": alice.session_id,
          "heartBeat": {"seq": 4242, "uid": alice_id, "json": '{"ping":true}'}}
    raw = encode("Message", hb)
    alice.send_raw(frame(raw))
    echo = alice.expect_type(HEART_BEAT)
    ok = echo is not None and echo["sequence"] == seq and echo["heartBeat"] is not None \
        and echo["heartBeat"]["seq"] == 4242 and echo["heartBeat"]["uid"] == alice_id \
        and echo["heartBeat"]["json"] == '{"ping":true}'
    R.check(ok, "HEART_BEAT after login is echoed with its sequence and body", show(echo))
    if echo is not None:
        R.info("heartbeat echo byte-identical to what was sent: %s; session_id in echo: %r"
               % (echo["_raw"] == raw, echo["session_id"]))

    # ---- logout ------------------------------------------------------------------------------
    seq = alice.seq()
    alice.send({"type": LOGOUT_REQUEST, "sequence": seq, "session_id": alice.session_id})
    resp = alice.expect_type(LOGOUT_RESPONSE)
    R.check(resp is not None and resp["sequence"] == seq,
            "logout: LOGOUT_RESPONSE echoing sequence %d" % seq, show(resp))
    closed = alice.wait_closed()
    R.check(closed, "logout: the server then closes the connection",
            "still open after %.1fs" % T)
    for m in alice.inbox:
        R.info("alice received after LOGOUT_RESPONSE, before close: %s" % show(m))
    alice.inbox = []

    # After alice logged out, a message to her is stored and reaches her next login.
    seq = bob.seq()
    bob.send({"type": MESSAGE_REQUEST, "sequence": seq, "session_id": bob.session_id,
              "messageRequest": {"msg_id": 1, "to": alice_id, "content": "still there?"}})
    resp = bob.expect_type(MESSAGE_RESPONSE, seq)
    mr = resp["messageResponse"] if resp else None
    R.check(mr is not None and mr["result"] is True and mr["code"] == 0 and mr["seq"] > 0,
            "after alice logs out, a message to her gets result=true and a seq", show(resp))
    alice_seq = mr["seq"] if mr else 0
    bob.close()
    alice.close()

    alice = Conn("alice", args.host, args.port, T)
    try:
        a_resp = login(alice, alice_id, args.alice_token, "doc-client-alice")
        if check_login_ok(R, alice, "alice again (no acks)", a_resp):
            lr = a_resp["loginResponse"]
            R.check(lr["inbox_head"] >= alice_seq and lr["sync_from"] < alice_seq,
                    "alice again: LOGIN_RESPONSE inbox_head covers it, sync_from is before it",
                    show(a_resp))
            got = delivered(alice, "still there?")
            gr = got["messageRequest"] if got else None
            R.check(gr is not None and gr["from"] == bob_id and gr["seq"] == alice_seq,
                    "alice again: the message sent while she was away is replayed with seq %d "
                    "(field 16)" % alice_seq, show(got))
    finally:
        alice.close()

    # ---- an ack client: the offline user logs in with acks ------------------------------------
    check_acks(R, args, alice_id, offline_id, offline_seq)

    # ---- refused logins ----------------------------------------------------------------------
    cases = [
        ("bad token", alice_id, "not-a-token", 1, "SB_ERR_TOKEN_INVALID"),
        ("bad signature", alice_id, tamper(args.alice_token), 1, "SB_ERR_TOKEN_INVALID"),
        ("bob's token used for alice", alice_id, args.bob_token, 1, "SB_ERR_TOKEN_MISMATCH"),
        ("no token", alice_id, "", 2, "SB_ERR_NO_TOKEN"),
        ("no uid", "", args.alice_token, 4, "SB_ERR_BAD_REQUEST"),
    ]
    for desc, uid, token, code, err in cases:
        c = Conn("refused", args.host, args.port, T)
        try:
            if desc == "bad token":
                # a HEART_BEAT is accepted (and echoed) before login
                c.send({"type": HEART_BEAT, "sequence": 99, "session_id": "-1",
                        "heartBeat": {"seq": 1}})
                echo = c.expect_type(HEART_BEAT)
                R.check(echo is not None and echo["sequence"] == 99,
                        "HEART_BEAT before login is echoed", show(echo))
            resp = login(c, uid, token, "doc-client-x")
            lr = resp["loginResponse"] if resp else None
            R.check(lr is not None and lr["result"] is False and lr["code"] == code
                    and lr["error_code"] == err,
                    "%s: LOGIN_RESPONSE result=false code=%d error_code=%s" % (desc, code, err),
                    show(resp))
            if lr is not None and desc == "bad token":
                R.check(lr["info"] != "", "bad token: LOGIN_RESPONSE has an info reason",
                        show(resp))
                R.check(resp["sequence"] == U64_MAX,
                        "bad token: refused LOGIN_RESPONSE echoes sequence 2^64-1",
                        "sequence=%d" % resp["sequence"])
            closed = c.wait_closed()
            R.check(closed, "%s: the server then closes the connection" % desc)
            for m in c.inbox:
                R.info("%s: received after the refusal: %s" % (desc, show(m)))
        finally:
            c.close()

    # ---- framing errors ----------------------------------------------------------------------
    bad_frames = [
        ("bad magic", frame(encode("Message", {"type": HEART_BEAT, "sequence": 1}), magic=0x0087),
         "SB_ERR_FRAME_BAD_MAGIC"),
        ("bad version", frame(encode("Message", {"type": HEART_BEAT, "sequence": 1}), version=2),
         "SB_ERR_FRAME_BAD_VERSION"),
        ("negative length", HEADER.pack(MAGIC, VERSION, -1), "SB_ERR_FRAME_NEGATIVE_LENGTH"),
        ("length 65537 (header only)", HEADER.pack(MAGIC, VERSION, 65537),
         "SB_ERR_FRAME_TOO_LONG"),
        ("body not protobuf", frame(b"\xff\xff\xff"), "SB_ERR_BAD_PROTOBUF"),
        # loginRequest {uid as a varint}: a known field with the wrong wire type (section 2).
        ("known field with the wrong wire type", frame(b"\x22\x02\x08\x01"), "SB_ERR_BAD_PROTOBUF"),
        ("type LOGIN_RESPONSE from a client",
         frame(encode("Message", {"type": LOGIN_RESPONSE, "sequence": 1})),
         "SB_ERR_UNKNOWN_TYPE"),
        ("MESSAGE_REQUEST before login",
         frame(encode("Message", {"type": MESSAGE_REQUEST, "sequence": 1,
                                  "messageRequest": {"to": bob_id, "content": "x"}})),
         "SB_ERR_NOT_LOGGED_IN"),
    ]
    for desc, data, err in bad_frames:
        c = Conn("bad", args.host, args.port, T)
        try:
            c.send_raw(data)
            m = c.expect_type(MESSAGE_NOTIFICATION)
            n = parse_notification(m)
            ok = n is not None and n.get("type") == 90 and isinstance(n.get("data"), dict) \
                and n["data"].get("code") == err
            R.check(ok, "%s: CLOSING notification (type 90) with code %s" % (desc, err),
                    show(m))
            if desc == "bad magic" and m is not None:
                R.info("bad magic CLOSING notification: %s" % show(m))
            closed = c.wait_closed()
            R.check(closed, "%s: then the server closes the connection" % desc)
            for extra in c.inbox:
                R.info("%s: received after CLOSING: %s" % (desc, show(extra)))
        finally:
            c.close()

    return finish(R, [])


def check_acks(R, args, alice_id, offline_id, offline_seq):
    """The offline user logs in with acks=true (LoginRequest field 16), gets what was sent while
    it was away, acknowledges it with MESSAGE_ACK (HeadType 8, Message field 16 = {1: seq}), and a
    later login of the same device starts after the acknowledged position; last_seq=0 (field 17)
    replays from the start. A device that never acknowledges gets the replay again."""
    T = args.timeout
    token = args.offline_token

    # A second device that never acknowledges: its position does not move (control).
    lazy = Conn("lazy", args.host, args.port, T)
    try:
        if check_login_ok(R, lazy, "offline user, device 2, acks",
                          login(lazy, offline_id, token, "doc-client-lazy", acks=True)):
            R.check(delivered(lazy, "anyone?") is not None,
                    "device 2 (acks, never acknowledging) gets the message")
            R.check(logout(lazy), "device 2 logs out")
    finally:
        lazy.close()
    lazy = Conn("lazy", args.host, args.port, T)
    try:
        resp = login(lazy, offline_id, token, "doc-client-lazy", acks=True)
        if check_login_ok(R, lazy, "offline user, device 2 again", resp):
            got = delivered(lazy, "anyone?")
            R.check(resp["loginResponse"]["sync_from"] < offline_seq and got is not None
                    and got["messageRequest"]["seq"] == offline_seq,
                    "device 2 again: nothing acknowledged, so the message is replayed",
                    "%s / %s" % (show(resp), show(got)))
            R.check(logout(lazy), "device 2 logs out again")
    finally:
        lazy.close()

    c = Conn("offline", args.host, args.port, T)
    last = offline_seq
    try:
        resp = login(c, offline_id, token, "doc-client-offline", acks=True)
        if not check_login_ok(R, c, "offline user with acks=true", resp):
            return
        lr = resp["loginResponse"]
        R.check(lr["inbox_head"] >= offline_seq and lr["sync_from"] < offline_seq
                and lr["gap"] is False,
                "offline user: LOGIN_RESPONSE inbox_head >= %d, sync_from before it, no gap"
                % offline_seq, show(resp))
        got = delivered(c, "anyone?")
        gr = got["messageRequest"] if got else None
        R.check(gr is not None and gr["from"] == alice_id and gr["seq"] == offline_seq
                and got["sequence"] == offline_seq and got["session_id"] == "",
                "offline user: the message sent while it was offline arrives with seq %d "
                "(MessageRequest field 16)" % offline_seq, show(got))
        rest = [delivered(c, "anyone? (again)"), delivered(c, "from an ack client")]
        seqs = [m["messageRequest"]["seq"] if m else None for m in [got] + rest]
        R.check(None not in seqs and seqs == sorted(seqs) and len(set(seqs)) == 3,
                "offline user: the other two stored messages follow, in seq order", str(seqs))
        extra = [m for m in c.drain(0.5) if m["type"] == MESSAGE_REQUEST]
        R.check(extra == [], "offline user: each arrives once (the ack client's resend was "
                "stored once)", "; ".join(show(m) for m in extra))
        last = max(s for s in seqs if s is not None) if any(seqs) else offline_seq
        # Cumulative: one ack for the highest processed seq covers them all.
        c.send({"type": MESSAGE_ACK, "session_id": c.session_id, "ack": {"seq": last}})
        R.check(logout(c), "offline user: MESSAGE_ACK has no answer; logout works after it")
    finally:
        c.close()

    c = Conn("offline", args.host, args.port, T)
    try:
        resp = login(c, offline_id, token, "doc-client-offline", acks=True)
        if check_login_ok(R, c, "offline user again", resp):
            R.check(resp["loginResponse"]["sync_from"] >= last,
                    "offline user again: the replay starts after the acknowledged seq %d"
                    % last, show(resp))
            again = [m for m in c.drain(0.5) if m["type"] == MESSAGE_REQUEST]
            R.check(again == [], "offline user again: nothing acknowledged is replayed",
                    "; ".join(show(m) for m in again))
            R.check(logout(c), "offline user logs out")
    finally:
        c.close()

    c = Conn("offline", args.host, args.port, T)
    try:
        resp = login(c, offline_id, token, "doc-client-offline", acks=True, last_seq=0)
        if check_login_ok(R, c, "offline user with last_seq=0", resp):
            got = delivered(c, "anyone?")
            R.check(resp["loginResponse"]["sync_from"] == 0 and got is not None
                    and got["messageRequest"]["seq"] == offline_seq,
                    "last_seq=0 (field 17) wins over the saved position: replay from the start",
                    "%s / %s" % (show(resp), show(got)))
    finally:
        c.close()

    # Section 6, epochs: the position is kept with the inbox_epoch the login reported.
    epoch = resp["loginResponse"]["inbox_epoch"] if resp and resp.get("loginResponse") else 0
    R.check(epoch > 0, "LOGIN_RESPONSE inbox_epoch (field 20) is set", show(resp))
    c = Conn("offline", args.host, args.port, T)
    try:
        resp = login(c, offline_id, token, "doc-client-offline", acks=True, last_seq=last,
                     inbox_epoch=epoch)
        if check_login_ok(R, c, "offline user with last_seq and its inbox_epoch", resp):
            lr = resp["loginResponse"]
            R.check(lr["reset"] is False and lr["sync_from"] == last and lr["inbox_epoch"] == epoch,
                    "the same epoch: no reset, the replay starts after last_seq", show(resp))
    finally:
        c.close()
    c = Conn("offline", args.host, args.port, T)
    try:
        resp = login(c, offline_id, token, "doc-client-offline", acks=True, last_seq=last,
                     inbox_epoch=epoch + 1)
        if check_login_ok(R, c, "offline user with a position of another epoch", resp):
            lr = resp["loginResponse"]
            got = delivered(c, "anyone?")
            R.check(lr["reset"] is True and lr["gap"] is False and lr["sync_from"] < offline_seq
                    and lr["inbox_epoch"] == epoch and got is not None,
                    "another epoch (LoginRequest field 18): reset=true (field 21), the replay "
                    "starts at the oldest retained message", "%s / %s" % (show(resp), show(got)))
    finally:
        c.close()


def tamper(token):
    if not token:
        return "x"
    last = token[-1]
    return token[:-1] + ("A" if last != "A" else "B")


def finish(R, conns):
    for c in conns:
        c.close()
    print("# %d checks, %d failed" % (R.n, R.failed))
    return 0 if R.failed == 0 else 1


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=9000)
    p.add_argument("--alice-token", required=True)
    p.add_argument("--bob-token", required=True)
    p.add_argument("--offline-token", required=True, help="a token for --offline-user")
    p.add_argument("--alice", default="alice", help="alice's user id (default alice)")
    p.add_argument("--bob", default="bob", help="bob's user id (default bob)")
    p.add_argument("--offline-user", default="doc-client-nobody",
                   help="a user id that is not online when the run starts (default "
                        "doc-client-nobody)")
    p.add_argument("--timeout", type=float, default=3.0, help="seconds per wait (default 3)")
    args = p.parse_args()
    try:
        code = run(args)
    except (OSError, FrameError, ProtobufError) as e:
        print("not ok - aborted: %s: %s" % (type(e).__name__, e))
        code = 1
    sys.exit(code)


if __name__ == "__main__":
    main()
