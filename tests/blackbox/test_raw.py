"""Raw-socket protocol tests: exact bytes, malformed input, slow and idle peers.

Expected server behaviour comes from shared/reference/aerospike-protocol.md and the Aerospike
CE 8.1.2 source it cites: service.c drops a connection whose proto header has a bad version, a bad
type or a size over the maximum; transaction.c answers a malformed AS_MSG with PARAMETER (4).
Every test that sends hostile bytes uses the `healthy` fixture: afterwards a normal client
put/get on the session server must still work.
"""

from __future__ import annotations

import random
import select
import socket
import struct
import time

import aerospike
import pytest
from aerospike import exception as ex

import aswire
import harness
from aswire import (
    INFO1_GET_ALL,
    INFO1_NOBINDATA,
    INFO1_READ,
    INFO2_DELETE,
    INFO2_WRITE,
    TYPE_INFO,
    TYPE_MSG,
)

CITRUSLEAF_EPOCH = 1262304000  # 2010-01-01T00:00:00Z, base of void times (section 3.1)
CLOSE_WAIT_S = 3.0


def fields_for(uset, k, key_field=None):
    return aswire.record_fields("test", uset, aerospike.calc_digest("test", uset, k), key_field)


def put_frame(uset, k, ops, key_field=None, **hdr):
    hdr.setdefault("info2", INFO2_WRITE)
    return aswire.as_msg(fields_for(uset, k, key_field), ops, **hdr)


def get_frame(uset, k, key_field=None, **hdr):
    hdr.setdefault("info1", INFO1_READ | INFO1_GET_ALL)
    return aswire.as_msg(fields_for(uset, k, key_field), [], **hdr)


def send_quietly(sock: socket.socket, data: bytes) -> None:
    """Send, ignoring a peer that already closed (that is an allowed reaction)."""
    try:
        sock.sendall(data)
    except (BrokenPipeError, ConnectionResetError):
        pass


def assert_usable(sock: socket.socket) -> None:
    pairs = aswire.request_info(sock, ["build"])
    assert pairs[0][0] == "build"


def assert_parameter_error_or_close(server, payload: bytes) -> None:
    """The server answers PARAMETER (4) and keeps the connection usable, or closes it. No hang."""
    with server.raw() as s:
        send_quietly(s, payload)
        reply = aswire.reply_or_close(s, CLOSE_WAIT_S)
        if reply is not None:
            assert reply.result_code == aswire.PARAMETER, reply
            assert reply.ops == []
            s.settimeout(CLOSE_WAIT_S)
            assert_usable(s)


def assert_closed(server, payload: bytes, within: float = CLOSE_WAIT_S) -> float:
    with server.raw() as s:
        send_quietly(s, payload)
        closed, waited = aswire.closed_within(s, within)
        assert closed, f"server kept the connection open {within}s after {payload[:16].hex()}"
        return waited


# -- well-formed traffic ---------------------------------------------------------------------------


def test_info_and_data_requests_share_one_connection(server, uset):
    with server.raw() as s:
        node = aswire.request_info(s, ["node"])[0][1]
        reply = aswire.request_msg(s, put_frame(uset, "k", [aswire.write_int("a", 42)]))
        assert reply.result_code == 0
        assert aswire.request_info(s, ["node"])[0][1] == node
        reply = aswire.request_msg(s, get_frame(uset, "k"))
        assert reply.result_code == 0
        assert reply.bins() == {"a": 42}
        assert aswire.request_info(s, ["namespaces"])[0][0] == "namespaces"


def test_a_get_reply_has_the_documented_layout(server, uset):
    # Section 7.2 byte example: header 22, result 0, generation, void time 0, one READ op per bin.
    with server.raw() as s:
        aswire.request_msg(s, put_frame(uset, "k", [aswire.write_int("a", 42), aswire.write_str("s", "hi")]))
        s.sendall(get_frame(uset, "k", transaction_ttl=1000))
        version, ptype, body = aswire.recv_frame(s)
    assert (version, ptype) == (2, TYPE_MSG)
    m = aswire.parse_msg(body)
    assert m.header_sz == 22
    assert m.result_code == 0
    assert m.generation == 1
    assert m.record_ttl == 0  # never expires
    assert m.info3 & aswire.INFO3_LAST == 0
    by_name = {o.name: o for o in m.ops}
    assert set(by_name) == {"a", "s"}
    assert by_name["a"].ptype == aswire.PT_INTEGER
    assert by_name["a"].value == struct.pack(">q", 42)
    assert by_name["s"].ptype == aswire.PT_STRING
    assert by_name["s"].value == b"hi"
    assert all(o.op == aswire.OP_READ for o in m.ops)


def test_a_write_reply_carries_generation_and_void_time(server, uset):
    with server.raw() as s:
        now = int(time.time()) - CITRUSLEAF_EPOCH
        reply = aswire.request_msg(s, put_frame(uset, "k", [aswire.write_int("a", 1)], record_ttl=100))
        assert reply.result_code == 0
        assert reply.generation == 1
        assert now + 99 <= reply.record_ttl <= now + 102
        assert reply.ops == []
        reply = aswire.request_msg(s, put_frame(uset, "k", [aswire.write_int("a", 2)], record_ttl=0xFFFFFFFF))
        assert reply.generation == 2
        assert reply.record_ttl == 0


def test_a_header_only_read_returns_no_bins(server, uset):
    with server.raw() as s:
        aswire.request_msg(s, put_frame(uset, "k", [aswire.write_int("a", 1)]))
        reply = aswire.request_msg(s, get_frame(uset, "k", info1=INFO1_READ | INFO1_NOBINDATA))
    assert reply.result_code == 0
    assert reply.generation == 1
    assert reply.ops == []


def test_a_not_found_reply_is_a_bare_header_with_code_2(server, uset):
    with server.raw() as s:
        reply = aswire.request_msg(s, get_frame(uset, "missing"))
    assert reply.result_code == aswire.NOT_FOUND
    assert reply.generation == 0
    assert reply.ops == []


def test_a_delete_reply_is_ok_then_not_found(server, uset):
    with server.raw() as s:
        aswire.request_msg(s, put_frame(uset, "k", [aswire.write_int("a", 1)]))
        reply = aswire.request_msg(s, aswire.as_msg(fields_for(uset, "k"), [], info2=INFO2_WRITE | INFO2_DELETE))
        assert reply.result_code == 0
        reply = aswire.request_msg(s, aswire.as_msg(fields_for(uset, "k"), [], info2=INFO2_WRITE | INFO2_DELETE))
        assert reply.result_code == aswire.NOT_FOUND


def test_two_requests_in_one_write_are_both_answered_in_order(server, uset):
    with server.raw() as s:
        s.sendall(
            aswire.info_frame(["node"])
            + put_frame(uset, "k", [aswire.write_int("a", 7)])
            + get_frame(uset, "k")
        )
        v, t, body = aswire.recv_frame(s)
        assert t == TYPE_INFO and body.startswith(b"node\t")
        v, t, body = aswire.recv_frame(s)
        assert t == TYPE_MSG and aswire.parse_msg(body).result_code == 0
        v, t, body = aswire.recv_frame(s)
        assert t == TYPE_MSG and aswire.parse_msg(body).bins() == {"a": 7}


def test_a_request_arriving_one_byte_at_a_time_is_answered(server, uset):
    data = put_frame(uset, "k", [aswire.write_str("s", "slow")])
    with server.raw() as s:
        for b in data:
            s.sendall(bytes([b]))
            time.sleep(0.002)
        v, t, body = aswire.recv_frame(s)
        assert aswire.parse_msg(body).result_code == 0
        assert aswire.request_msg(s, get_frame(uset, "k")).bins() == {"s": "slow"}


def test_generation_wraps_from_65535_to_1(server, uset):
    # record_ce.c as_record_increment_generation: 16-bit, 0 reserved, so 65535 + 1 -> 1.
    # Pipelined raw writes keep this fast.
    frame = put_frame(uset, "k", [aswire.write_int("n", 1)])
    with server.raw(timeout=30) as s:
        done = 0
        while done < 65535:
            n = min(2000, 65535 - done)
            s.sendall(frame * n)
            for _ in range(n):
                _, _, body = aswire.recv_frame(s)
            done += n
        last = aswire.parse_msg(body)
        assert last.result_code == 0
        assert last.generation == 65535
        r = aswire.request_msg(s, frame)
        assert r.result_code == 0
        assert r.generation == 1
        r = aswire.request_msg(s, get_frame(uset, "k"))
        assert r.generation == 1


def test_key_mismatch_when_a_different_key_is_sent_with_the_same_digest(server, uset):
    # The server never hashes keys: it compares a sent KEY with the stored one (section 3.3);
    # write: rw_utils.c check_msg_key, read: read.c, delete: delete.c -> KEY_MISMATCH (19).
    digest = aerospike.calc_digest("test", uset, "a")
    fields_a = aswire.record_fields("test", uset, digest, aswire.key_field_str("a"))
    fields_b = aswire.record_fields("test", uset, digest, aswire.key_field_str("b"))
    fields_int = aswire.record_fields("test", uset, digest, aswire.key_field_int(1))
    fields_none = aswire.record_fields("test", uset, digest)
    with server.raw() as s:
        r = aswire.request_msg(s, aswire.as_msg(fields_a, [aswire.write_int("v", 1)], info2=INFO2_WRITE))
        assert r.result_code == 0
        r = aswire.request_msg(s, aswire.as_msg(fields_b, [aswire.write_int("v", 2)], info2=INFO2_WRITE))
        assert r.result_code == aswire.KEY_MISMATCH
        r = aswire.request_msg(s, aswire.as_msg(fields_int, [aswire.write_int("v", 3)], info2=INFO2_WRITE))
        assert r.result_code == aswire.KEY_MISMATCH
        r = aswire.request_msg(s, aswire.as_msg(fields_b, [], info1=INFO1_READ | INFO1_GET_ALL))
        assert r.result_code == aswire.KEY_MISMATCH
        r = aswire.request_msg(s, aswire.as_msg(fields_b, [], info2=INFO2_WRITE | INFO2_DELETE))
        assert r.result_code == aswire.KEY_MISMATCH
        r = aswire.request_msg(s, aswire.as_msg(fields_a, [], info1=INFO1_READ | INFO1_GET_ALL))
        assert r.result_code == 0
        assert r.bins() == {"v": 1}
        assert r.generation == 1
        r = aswire.request_msg(s, aswire.as_msg(fields_none, [], info1=INFO1_READ | INFO1_GET_ALL))
        assert r.result_code == 0
        assert r.bins() == {"v": 1}


def test_key_mismatch_is_reported_to_the_official_client_as_code_19(server, client, uset):
    # Store key "a" under the digest of "b" with raw bytes; the client then sends key "b".
    digest_b = aerospike.calc_digest("test", uset, "b")
    with server.raw() as s:
        r = aswire.request_msg(
            s,
            aswire.as_msg(
                aswire.record_fields("test", uset, digest_b, aswire.key_field_str("a")),
                [aswire.write_int("v", 1)],
                info2=INFO2_WRITE,
            ),
        )
        assert r.result_code == 0
    with pytest.raises(ex.RecordKeyMismatch) as e:
        client.put(("test", uset, "b"), {"v": 2}, policy={"key": aerospike.POLICY_KEY_SEND})
    assert e.value.code == 19
    assert client.get(("test", uset, "b"))[2] == {"v": 1}  # digest-only read: no key sent


# -- particle encodings on the wire (server particle_*.c) ------------------------------------------


@pytest.mark.parametrize(
    "wire, expected",
    [
        (b"\x05", 5),
        (b"\xff", 255),  # shorter integers are zero-extended, not sign-extended
        (b"\x01\x00", 256),
        (b"\xff\xff\xff\xff", 0xFFFFFFFF),
        (struct.pack(">q", -7), -7),
    ],
    ids=["1_byte", "1_byte_high", "2_bytes", "4_bytes", "8_bytes"],
)
def test_integer_values_of_1_2_4_or_8_bytes_are_accepted(server, uset, wire, expected):
    # particle_integer.c integer_from_wire: sizes 8, 4, 2, 1; always sent back as 8 bytes.
    with server.raw() as s:
        r = aswire.request_msg(s, put_frame(uset, "k", [aswire.op(aswire.OP_WRITE, "i", wire, aswire.PT_INTEGER)]))
        assert r.result_code == 0
        r = aswire.request_msg(s, get_frame(uset, "k"))
    assert r.ops[0].ptype == aswire.PT_INTEGER
    assert len(r.ops[0].value) == 8
    assert r.bins() == {"i": expected}


@pytest.mark.parametrize(
    "ptype, wire",
    [
        (aswire.PT_INTEGER, b"\x00\x00\x01"),
        (aswire.PT_INTEGER, b""),
        (aswire.PT_INTEGER, b"\x00" * 9),
        (aswire.PT_FLOAT, b"\x00" * 4),
        (aswire.PT_BOOL, b"\x00\x01"),
        (aswire.PT_BOOL, b"\x02"),
    ],
    ids=["int_3_bytes", "int_empty", "int_9_bytes", "float_4_bytes", "bool_2_bytes", "bool_value_2"],
)
def test_scalar_values_of_a_wrong_size_are_parameter_errors(server, uset, healthy, ptype, wire):
    # particle_integer.c / particle_float.c / particle_bool.c *_from_wire -> AS_ERR_PARAMETER.
    with server.raw() as s:
        r = aswire.request_msg(s, put_frame(uset, "k", [aswire.op(aswire.OP_WRITE, "v", wire, ptype)]))
        assert r.result_code == aswire.PARAMETER
        assert aswire.request_msg(s, get_frame(uset, "k")).result_code == aswire.NOT_FOUND


@pytest.mark.parametrize("ptype", [7, 8, 9, 10, 11, 12])
def test_language_blob_types_are_stored_and_returned_unchanged(server, uset, ptype):
    payload = bytes([ptype]) + b"\x80\x04opaque\x00\xff"
    with server.raw() as s:
        r = aswire.request_msg(s, put_frame(uset, "k", [aswire.op(aswire.OP_WRITE, "b", payload, ptype)]))
        assert r.result_code == 0
        r = aswire.request_msg(s, get_frame(uset, "k"))
    assert [(o.name, o.ptype, o.value) for o in r.ops] == [("b", ptype, payload)]


def test_bool_particles_are_stored_and_returned_as_one_byte(server, uset):
    with server.raw() as s:
        aswire.request_msg(
            s,
            put_frame(
                uset,
                "k",
                [aswire.op(aswire.OP_WRITE, "t", b"\x01", aswire.PT_BOOL), aswire.op(aswire.OP_WRITE, "f", b"\x00", aswire.PT_BOOL)],
            ),
        )
        r = aswire.request_msg(s, get_frame(uset, "k"))
    assert {o.name: (o.ptype, o.value) for o in r.ops} == {"t": (aswire.PT_BOOL, b"\x01"), "f": (aswire.PT_BOOL, b"\x00")}


@pytest.mark.parametrize(
    "ptype, wire",
    [(20, b"\x93\x01"), (20, b"\xc1"), (19, b"\x82\xa2\x03a"), (20, b"")],
    ids=["list_short", "list_bad_byte", "map_short", "list_empty_bytes"],
)
def test_malformed_msgpack_lists_and_maps_are_refused(server, uset, healthy, ptype, wire):
    # particle_list.c / particle_map.c: an invalid packed value is refused (PARAMETER or UNKNOWN)
    # and nothing is stored.
    with server.raw() as s:
        r = aswire.request_msg(s, put_frame(uset, "k", [aswire.op(aswire.OP_WRITE, "c", wire, ptype)]))
        assert r.result_code in (1, aswire.PARAMETER), r.result_code
        assert aswire.request_msg(s, get_frame(uset, "k")).result_code == aswire.NOT_FOUND


# -- malformed requests answered with PARAMETER (or a close) -----------------------------------------


def test_digest_field_of_19_bytes_is_parameter_error(server, uset, healthy):
    fields = [aswire.ns_field("test"), aswire.set_field(uset), aswire.field(aswire.FIELD_DIGEST, b"\x01" * 19)]
    with server.raw() as s:
        r = aswire.request_msg(s, aswire.as_msg(fields, [], info1=INFO1_READ | INFO1_GET_ALL))
        assert r.result_code == aswire.PARAMETER
        assert_usable(s)


def test_unknown_op_code_is_parameter_error(server, uset, healthy):
    bad = aswire.op(99, "a", aswire.int_bytes(1), aswire.PT_INTEGER)
    with server.raw() as s:
        r = aswire.request_msg(s, put_frame(uset, "k", [aswire.write_int("b", 1), bad]))
        assert r.result_code == aswire.PARAMETER
        assert aswire.request_msg(s, get_frame(uset, "k")).result_code == aswire.NOT_FOUND


def test_a_message_that_neither_reads_nor_writes_is_parameter_error(server, uset, healthy):
    with server.raw() as s:
        r = aswire.request_msg(s, aswire.as_msg(fields_for(uset, "k"), []))
        assert r.result_code == aswire.PARAMETER


def test_a_write_without_ops_is_parameter_error(server, uset, healthy):
    # write.c write_master_policies: "bin op(s) expected, none present".
    with server.raw() as s:
        r = aswire.request_msg(s, put_frame(uset, "k", []))
        assert r.result_code == aswire.PARAMETER


def test_a_bin_name_of_16_bytes_is_bin_name_error_21(server, uset, healthy):
    with server.raw() as s:
        r = aswire.request_msg(s, put_frame(uset, "k", [aswire.write_int("x" * 16, 1)]))
        assert r.result_code == aswire.BIN_NAME
        assert aswire.request_msg(s, get_frame(uset, "k")).result_code == aswire.NOT_FOUND


def test_a_bin_name_containing_a_nul_byte_is_bin_name_error_21(server, uset, healthy):
    # datamodel.h as_bin_name_check: NUL bytes are not allowed in bin names.
    with server.raw() as s:
        r = aswire.request_msg(s, put_frame(uset, "k", [aswire.write_int("a\x00b", 1)]))
        assert r.result_code == aswire.BIN_NAME


def test_header_sz_other_than_22_is_refused(server, uset, healthy):
    # The reference server ignores header_sz; Osprey validates it: PARAMETER or a close.
    for hsz in (0, 21, 23, 255):
        body = aswire.msg_header(info1=INFO1_READ | INFO1_GET_ALL, n_fields=3, header_sz=hsz)
        body += b"".join(fields_for(uset, "k"))
        assert_parameter_error_or_close(server, aswire.frame(TYPE_MSG, body))


def test_as_msg_body_shorter_than_its_header_is_refused(server, healthy):
    for n in (0, 1, 21):
        assert_parameter_error_or_close(server, aswire.frame(TYPE_MSG, b"\x16" * n))


def test_field_size_running_past_the_end_is_refused(server, uset, healthy):
    body = aswire.msg_header(info1=INFO1_READ | INFO1_GET_ALL, n_fields=1)
    body += struct.pack(">IB", 1000, aswire.FIELD_NAMESPACE) + b"test"
    assert_parameter_error_or_close(server, aswire.frame(TYPE_MSG, body))


def test_zero_field_size_is_refused(server, uset, healthy):
    body = aswire.msg_header(info1=INFO1_READ | INFO1_GET_ALL, n_fields=2)
    body += struct.pack(">I", 0) + aswire.ns_field("test")
    assert_parameter_error_or_close(server, aswire.frame(TYPE_MSG, body))


def test_more_fields_declared_than_present_is_refused(server, uset, healthy):
    body = aswire.msg_header(info1=INFO1_READ | INFO1_GET_ALL, n_fields=5) + b"".join(fields_for(uset, "k"))
    assert_parameter_error_or_close(server, aswire.frame(TYPE_MSG, body))


def test_op_size_running_past_the_end_is_refused(server, uset, healthy):
    fields = fields_for(uset, "k")
    body = aswire.msg_header(info2=INFO2_WRITE, n_fields=len(fields), n_ops=1) + b"".join(fields)
    body += struct.pack(">IBBBB", 5000, aswire.OP_WRITE, aswire.PT_INTEGER, 0, 1) + b"a" + aswire.int_bytes(1)
    assert_parameter_error_or_close(server, aswire.frame(TYPE_MSG, body))
    with server.raw() as s:
        assert aswire.request_msg(s, get_frame(uset, "k")).result_code == aswire.NOT_FOUND


def test_op_name_longer_than_the_op_is_refused(server, uset, healthy):
    fields = fields_for(uset, "k")
    body = aswire.msg_header(info2=INFO2_WRITE, n_fields=len(fields), n_ops=1) + b"".join(fields)
    body += struct.pack(">IBBBB", 6, aswire.OP_WRITE, aswire.PT_INTEGER, 0, 10) + b"ab"
    assert_parameter_error_or_close(server, aswire.frame(TYPE_MSG, body))


def test_trailing_bytes_after_the_ops_do_not_break_the_connection(server, uset, healthy):
    fields = fields_for(uset, "k")
    body = aswire.msg_header(info1=INFO1_READ | INFO1_GET_ALL, n_fields=len(fields)) + b"".join(fields) + b"junk"
    with server.raw() as s:
        send_quietly(s, aswire.frame(TYPE_MSG, body))
        reply = aswire.reply_or_close(s, CLOSE_WAIT_S)
        if reply is not None:
            assert reply.result_code in (aswire.PARAMETER, aswire.NOT_FOUND)
            assert_usable(s)


# -- broken frames: the connection is dropped ----------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 3, 0xFF])
def test_a_bad_proto_version_closes_the_connection(server, uset, healthy, version):
    assert_closed(server, aswire.frame(TYPE_MSG, get_frame(uset, "k")[8:], version=version))


@pytest.mark.parametrize("ptype", [0, 9, 0xFF])
def test_a_bad_proto_type_closes_the_connection(server, healthy, ptype):
    assert_closed(server, aswire.frame(ptype, b"node\n"))


def test_a_declared_size_over_the_maximum_closes_without_waiting_for_the_body(server, healthy):
    # Default frame-size-max-bytes is 128 MiB (PROTO_SIZE_MAX); only the header is sent, and
    # the session server's frame-read-timeout is 10 s, so a close within 2 s proves it did not wait.
    waited = assert_closed(server, aswire.proto_header(TYPE_MSG, 128 * 1024 * 1024 + 1), within=2.0)
    assert waited < 2.0
    assert_closed(server, aswire.proto_header(TYPE_INFO, (1 << 48) - 1), within=2.0)


def test_a_truncated_frame_followed_by_a_close_leaves_the_server_healthy(server, uset, healthy):
    data = put_frame(uset, "k", [aswire.write_int("a", 1)])
    for cut in (1, 7, 8, 20, len(data) - 1):
        with server.raw() as s:
            s.sendall(data[:cut])
    with server.raw() as s:
        assert aswire.request_msg(s, get_frame(uset, "k")).result_code == aswire.NOT_FOUND


def test_random_garbage_closes_the_connection(server, healthy):
    rng = random.Random(20240611)
    for _ in range(5):
        junk = bytearray(rng.randbytes(4096))
        junk[0] = 0x99  # never version 2
        assert_closed(server, bytes(junk))


def test_an_http_request_closes_the_connection(server, healthy):
    assert_closed(server, b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")


def test_a_tls_client_hello_closes_the_connection(server, healthy):
    # service.c detects a TLS ClientHello on a clear port and drops it.
    hello = bytes([22, 3, 1, 0, 0x40, 1]) + b"\x00" * 0x40
    assert_closed(server, hello)


def test_random_as_msg_bodies_never_hang_or_crash_the_server(server, healthy):
    rng = random.Random(424242)
    for i in range(150):
        n = rng.choice([0, 1, 21, 22, 23, 30, 64, 200, 1000])
        body = bytearray(rng.randbytes(n))
        if n >= 22 and rng.random() < 0.7:
            body[0] = 22
            # small field/op counts so that parsing gets past the header
            struct.pack_into(">HH", body, 18, rng.randrange(0, 4), rng.randrange(0, 4))
        with server.raw() as s:
            send_quietly(s, aswire.frame(TYPE_MSG, bytes(body)))
            s.settimeout(CLOSE_WAIT_S)
            try:
                v, t, reply = aswire.recv_frame(s)
            except aswire.ConnectionClosed:
                continue
            except socket.timeout:
                pytest.fail(f"case {i}: no answer and no close for body {bytes(body).hex()}")
            assert t == TYPE_MSG
            # Nothing random names namespace "test", so no body can succeed.
            assert aswire.parse_msg(reply).result_code != 0


def test_random_info_bodies_are_answered_or_closed(server, healthy):
    rng = random.Random(777)
    for i in range(50):
        body = rng.randbytes(rng.randrange(0, 300))
        with server.raw() as s:
            send_quietly(s, aswire.frame(TYPE_INFO, body))
            s.settimeout(CLOSE_WAIT_S)
            try:
                v, t, _ = aswire.recv_frame(s)
            except aswire.ConnectionClosed:
                continue
            except socket.timeout:
                pytest.fail(f"case {i}: no answer and no close for info body {body.hex()}")
            assert t == TYPE_INFO


# -- limits on a server with custom timeouts -------------------------------------------------------


def test_a_slow_client_is_dropped_after_frame_read_timeout_while_others_are_served(start_server):
    srv = start_server(service={"frame-read-timeout-ms": 1000})
    c = srv.client()
    uset = harness.unique("s")
    c.put(("test", uset, "k"), {"a": 0})
    slow = srv.raw()
    slow.sendall(aswire.proto_header(TYPE_MSG, 100 * 1024 * 1024))
    start = time.monotonic()
    closed_after = None
    latencies = []
    i = 0
    while time.monotonic() - start < 5.0:
        try:
            slow.send(b"\x00")
        except (BrokenPipeError, ConnectionResetError):
            closed_after = time.monotonic() - start
            break
        readable, _, _ = select.select([slow], [], [], 0.1)
        if readable:
            try:
                data = slow.recv(1024)
            except ConnectionResetError:
                data = b""
            if not data:
                closed_after = time.monotonic() - start
                break
        i += 1
        t0 = time.monotonic()
        c.put(("test", uset, "k"), {"a": i})
        assert c.get(("test", uset, "k"))[2] == {"a": i}
        latencies.append(time.monotonic() - t0)
    slow.close()
    assert closed_after is not None, "slow client was never dropped"
    assert 0.8 <= closed_after <= 2.5, closed_after
    assert latencies and max(latencies) < 0.5, max(latencies)


def test_an_idle_connection_is_closed_after_idle_timeout_but_a_busy_one_is_not(start_server):
    srv = start_server(service={"idle-timeout-ms": 500})
    idle = srv.raw()
    busy = srv.raw()
    start = time.monotonic()
    idle_closed_after = None
    while time.monotonic() - start < 2.5:
        busy.settimeout(2.0)
        assert aswire.request_info(busy, ["node"])[0][0] == "node"
        if idle_closed_after is None:
            closed, _ = aswire.closed_within(idle, 0.15)
            if closed:
                idle_closed_after = time.monotonic() - start
        else:
            time.sleep(0.15)
    assert idle_closed_after is not None, "idle connection was not closed"
    assert 0.4 <= idle_closed_after <= 1.8, idle_closed_after
    # The busy connection survived 2.5 s of 0.15 s gaps; left alone it is closed too.
    closed, waited = aswire.closed_within(busy, 3.0)
    assert closed
    assert waited >= 0.3
    idle.close()
    busy.close()


def test_frame_size_max_bytes_is_enforced_and_smaller_frames_work(start_server):
    srv = start_server(service={"frame-size-max-bytes": 65536})
    uset = harness.unique("s")
    with srv.raw() as s:
        r = aswire.request_msg(s, put_frame(uset, "k", [aswire.op(aswire.OP_WRITE, "b", b"x" * 60000, aswire.PT_BLOB)]))
        assert r.result_code == 0
    with srv.raw() as s:
        send_quietly(s, aswire.proto_header(TYPE_MSG, 65537))
        closed, waited = aswire.closed_within(s, 2.0)
        assert closed and waited < 2.0
    c = srv.client()
    assert bytes(c.get(("test", uset, "k"))[2]["b"]) == b"x" * 60000


def test_connections_over_connections_max_are_refused(start_server):
    srv = start_server(service={"connections-max": 5})
    socks = [srv.raw() for _ in range(5)]
    for s in socks:
        assert aswire.request_info(s, ["node"])[0][0] == "node"
    extra = srv.raw()
    send_quietly(extra, aswire.info_frame(["node"]))
    closed, _ = aswire.closed_within(extra, 3.0)
    assert closed, "a sixth connection was served with connections-max = 5"
    extra.close()
    socks.pop().close()

    def another_works():
        try:
            with srv.raw() as s:
                s.settimeout(1.0)
                return aswire.request_info(s, ["node"])[0][0] == "node"
        except (aswire.ConnectionClosed, OSError):
            return False

    assert harness.wait_until(another_works, timeout=3.0, interval=0.1)
    for s in socks:
        s.close()
