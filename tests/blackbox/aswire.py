"""Raw Aerospike wire protocol for hostile and byte-exact tests.

Layouts from shared/reference/aerospike-protocol.md: proto header (section 1.1), AS_MSG header
(3.1), fields (4), ops (5.1), particle types (5.3). All integers big-endian.
"""

from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass, field as dc_field

PROTO_VERSION = 2
TYPE_INFO = 1
TYPE_SECURITY = 2
TYPE_MSG = 3

INFO1_READ = 0x01
INFO1_GET_ALL = 0x02
INFO1_NOBINDATA = 0x20

INFO2_WRITE = 0x01
INFO2_DELETE = 0x02
INFO2_GENERATION = 0x04
INFO2_GENERATION_GT = 0x08
INFO2_CREATE_ONLY = 0x20
INFO2_RESPOND_ALL_OPS = 0x80

INFO3_LAST = 0x01
INFO3_UPDATE_ONLY = 0x08
INFO3_CREATE_OR_REPLACE = 0x10
INFO3_REPLACE_ONLY = 0x20

FIELD_NAMESPACE = 0
FIELD_SET = 1
FIELD_KEY = 2
FIELD_DIGEST = 4

OP_READ = 1
OP_WRITE = 2
OP_INCR = 5
OP_APPEND = 9
OP_PREPEND = 10
OP_TOUCH = 11
OP_DELETE_ALL = 14

PT_NULL = 0
PT_INTEGER = 1
PT_FLOAT = 2
PT_STRING = 3
PT_BLOB = 4
PT_BOOL = 17

AS_MSG_HEADER_SZ = 22

# Result codes (section 7.3).
OK = 0
NOT_FOUND = 2
GENERATION = 3
PARAMETER = 4
RECORD_EXISTS = 5
INCOMPATIBLE_TYPE = 12
RECORD_TOO_BIG = 13
UNSUPPORTED_FEATURE = 16
KEY_MISMATCH = 19
NAMESPACE = 20
BIN_NAME = 21
FORBIDDEN = 22


class ConnectionClosed(Exception):
    """The peer closed (or reset) the connection."""


# -- building ------------------------------------------------------------------------------------


def proto_header(ptype: int, size: int, version: int = PROTO_VERSION) -> bytes:
    return struct.pack(">Q", (version << 56) | (ptype << 48) | size)


def frame(ptype: int, body: bytes, version: int = PROTO_VERSION) -> bytes:
    return proto_header(ptype, len(body), version) + body


def msg_header(
    info1: int = 0,
    info2: int = 0,
    info3: int = 0,
    info4: int = 0,
    result_code: int = 0,
    generation: int = 0,
    record_ttl: int = 0,
    transaction_ttl: int = 0,
    n_fields: int = 0,
    n_ops: int = 0,
    header_sz: int = AS_MSG_HEADER_SZ,
) -> bytes:
    return struct.pack(
        ">BBBBBBIIIHH",
        header_sz,
        info1,
        info2,
        info3,
        info4,
        result_code,
        generation & 0xFFFFFFFF,
        record_ttl & 0xFFFFFFFF,
        transaction_ttl & 0xFFFFFFFF,
        n_fields,
        n_ops,
    )


def field(ftype: int, data: bytes) -> bytes:
    return struct.pack(">IB", len(data) + 1, ftype) + data


def op(opcode: int, name: bytes | str = b"", value: bytes = b"", ptype: int = PT_NULL, flags: int = 0) -> bytes:
    if isinstance(name, str):
        name = name.encode()
    return struct.pack(">IBBBB", 4 + len(name) + len(value), opcode, ptype, flags, len(name)) + name + value


def int_bytes(i: int) -> bytes:
    return struct.pack(">q", i)


def write_int(name: str, i: int) -> bytes:
    return op(OP_WRITE, name, int_bytes(i), PT_INTEGER)


def write_str(name: str, s: str) -> bytes:
    return op(OP_WRITE, name, s.encode(), PT_STRING)


def read_bin(name: str) -> bytes:
    return op(OP_READ, name)


def key_field_str(s: str) -> bytes:
    return field(FIELD_KEY, bytes([PT_STRING]) + s.encode())


def key_field_int(i: int) -> bytes:
    return field(FIELD_KEY, bytes([PT_INTEGER]) + int_bytes(i))


def ns_field(ns: str) -> bytes:
    return field(FIELD_NAMESPACE, ns.encode())


def set_field(s: str) -> bytes:
    return field(FIELD_SET, s.encode())


def digest_field(d: bytes) -> bytes:
    return field(FIELD_DIGEST, bytes(d))


def as_msg(fields: list[bytes], ops: list[bytes] = (), **hdr) -> bytes:
    """A complete type-3 frame; n_fields/n_ops default to the counts given."""
    hdr.setdefault("n_fields", len(fields))
    hdr.setdefault("n_ops", len(ops))
    body = msg_header(**hdr) + b"".join(fields) + b"".join(ops)
    return frame(TYPE_MSG, body)


def record_fields(ns: str, set_name: str, digest: bytes, key: bytes | None = None) -> list[bytes]:
    fs = [ns_field(ns), set_field(set_name), digest_field(digest)]
    if key is not None:
        fs.append(key)
    return fs


def info_frame(commands: list[str] | str) -> bytes:
    if isinstance(commands, str):
        body = commands.encode()
    else:
        body = "".join(c + "\n" for c in commands).encode()
    return frame(TYPE_INFO, body)


# -- parsing -------------------------------------------------------------------------------------


@dataclass
class Op:
    op: int
    ptype: int
    name: str
    value: bytes

    def decoded(self):
        if self.ptype == PT_NULL:
            return None
        if self.ptype == PT_INTEGER:
            return int.from_bytes(self.value, "big", signed=True)
        if self.ptype == PT_FLOAT:
            return struct.unpack(">d", self.value)[0]
        if self.ptype == PT_STRING:
            return self.value.decode()
        if self.ptype == PT_BOOL:
            return bool(self.value[0])
        return self.value


@dataclass
class Msg:
    header_sz: int
    info1: int
    info2: int
    info3: int
    info4: int
    result_code: int
    generation: int
    record_ttl: int
    transaction_ttl: int
    fields: list[tuple[int, bytes]] = dc_field(default_factory=list)
    ops: list[Op] = dc_field(default_factory=list)

    def bins(self) -> dict:
        return {o.name: o.decoded() for o in self.ops}


def parse_msg(body: bytes) -> Msg:
    assert len(body) >= AS_MSG_HEADER_SZ, f"AS_MSG body too short: {len(body)} bytes"
    (hsz, i1, i2, i3, i4, rc, gen, rttl, tttl, nf, no) = struct.unpack(">BBBBBBIIIHH", body[:22])
    m = Msg(hsz, i1, i2, i3, i4, rc, gen, rttl, tttl)
    pos = hsz
    for _ in range(nf):
        (sz, ft) = struct.unpack(">IB", body[pos : pos + 5])
        m.fields.append((ft, body[pos + 5 : pos + 4 + sz]))
        pos += 4 + sz
    for _ in range(no):
        (sz, opc, pt, _flags, nlen) = struct.unpack(">IBBBB", body[pos : pos + 8])
        name = body[pos + 8 : pos + 8 + nlen].decode()
        value = body[pos + 8 + nlen : pos + 4 + sz]
        m.ops.append(Op(opc, pt, name, value))
        pos += 4 + sz
    assert pos == len(body), f"AS_MSG has {len(body) - pos} trailing bytes"
    return m


def split_messages(body: bytes) -> list[Msg]:
    """The AS_MSG messages concatenated in one proto body."""
    msgs = []
    pos = 0
    while pos < len(body):
        hsz = body[pos]
        n_fields, n_ops = struct.unpack(">HH", body[pos + 18 : pos + 22])
        end = pos + hsz
        for _ in range(n_fields):
            end += 4 + struct.unpack(">I", body[end : end + 4])[0]
        for _ in range(n_ops):
            end += 4 + struct.unpack(">I", body[end : end + 4])[0]
        assert end <= len(body), "message runs past its proto"
        msgs.append(parse_msg(body[pos:end]))
        pos = end
    return msgs


def recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        try:
            chunk = sock.recv(n - len(buf))
        except (ConnectionResetError, BrokenPipeError) as e:
            raise ConnectionClosed(str(e)) from e
        if not chunk:
            raise ConnectionClosed(f"EOF after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


def recv_frame(sock: socket.socket) -> tuple[int, int, bytes]:
    """(version, type, body) of one frame; raises ConnectionClosed or socket.timeout."""
    (word,) = struct.unpack(">Q", recv_exact(sock, 8))
    version = word >> 56
    ptype = (word >> 48) & 0xFF
    size = word & 0xFFFFFFFFFFFF
    assert size < 200 * 1024 * 1024, f"absurd response size {size}"
    return version, ptype, recv_exact(sock, size)


def request_msg(sock: socket.socket, frame_bytes: bytes) -> Msg:
    sock.sendall(frame_bytes)
    version, ptype, body = recv_frame(sock)
    assert version == PROTO_VERSION, f"response version {version}"
    assert ptype == TYPE_MSG, f"response type {ptype}"
    return parse_msg(body)


def request_info(sock: socket.socket, commands: list[str] | str) -> list[tuple[str, str]]:
    """Send an info request; returns the (name, value) pairs of the answer, in order."""
    sock.sendall(info_frame(commands))
    version, ptype, body = recv_frame(sock)
    assert version == PROTO_VERSION, f"info response version {version}"
    assert ptype == TYPE_INFO, f"info response type {ptype}"
    text = body.decode()
    pairs = []
    for line in text.split("\n"):
        if line == "":
            continue
        name, tab, value = line.partition("\t")
        assert tab, f"info line without a tab: {line!r}"
        pairs.append((name, value))
    assert text.endswith("\n") or text == "", f"info answer not newline-terminated: {text[-40:]!r}"
    return pairs


def closed_within(sock: socket.socket, timeout: float) -> tuple[bool, float]:
    """Wait for the peer to close. Returns (closed, seconds waited). Drains any data it sends."""
    start = time.monotonic()
    deadline = start + timeout
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False, time.monotonic() - start
        sock.settimeout(remaining)
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            return False, time.monotonic() - start
        except (ConnectionResetError, BrokenPipeError):
            return True, time.monotonic() - start
        if not chunk:
            return True, time.monotonic() - start


def reply_or_close(sock: socket.socket, timeout: float) -> Msg | None:
    """After a malformed request: the server's AS_MSG reply, or None if it closed the connection.

    Fails (socket.timeout propagates) if it neither answers nor closes within the timeout.
    """
    sock.settimeout(timeout)
    try:
        version, ptype, body = recv_frame(sock)
    except ConnectionClosed:
        return None
    assert version == PROTO_VERSION and ptype == TYPE_MSG, f"unexpected reply frame v{version} t{ptype}"
    return parse_msg(body)
