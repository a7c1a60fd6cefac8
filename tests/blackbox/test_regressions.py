"""Regression tests: each tells the story of a bug found in review and fixed.

They drive the real binary through the session `server` fixture, with the official client and
with raw frames built by `aswire`.
"""

from __future__ import annotations

import socket

import aerospike

import aswire
import harness
from aswire import INFO1_GET_ALL, INFO1_READ, INFO2_WRITE

INFO2_RESPOND_ALL_OPS = 0x80


def test_pipelined_large_reads_each_get_their_full_reply(server, client, uset):
    # The reply-size cap (twice the record size limit plus 1 MiB, against requests that repeat a
    # read of a large bin) first counted the whole connection output buffer. Several pipelined
    # reads of a 600 KB bin, all answered in one write, then tripped it: the sixth reply became
    # PARAMETER although each reply alone was small enough. The cap must count one reply only.
    client.put(("test", uset, "big"), {"v": "x" * 600_000})
    digest = aerospike.calc_digest("test", uset, "big")
    request = aswire.as_msg(aswire.record_fields("test", uset, digest), info1=INFO1_READ | INFO1_GET_ALL)
    pipeline_depth = 6
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(request * pipeline_depth)
        for _ in range(pipeline_depth):
            _, _, body = aswire.recv_frame(sock)
            reply = aswire.parse_msg(body)
            assert reply.result_code == aswire.OK
            assert len(reply.ops[0].value) == 600_000


def test_read_only_request_with_respond_all_ops_answers_every_op(server, client, uset):
    # A read-only operate with RESPOND_ALL_OPS (clients set it for CDT and expression reads)
    # takes the read path, which first dropped the entry of a missing bin, so the results no
    # longer lined up with the ops. Each READ op must get one entry, a missing bin an empty one.
    client.put(("test", uset, "k"), {"a": 1})
    fields = aswire.record_fields("test", uset, aerospike.calc_digest("test", uset, "k"))
    ops = [aswire.read_bin("missing"), aswire.read_bin("a")]
    request = aswire.as_msg(fields, ops, info1=INFO1_READ, info2=INFO2_RESPOND_ALL_OPS)
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        reply = aswire.request_msg(sock, request)
    assert reply.result_code == aswire.OK
    assert [(op.name, op.ptype) for op in reply.ops] == [("missing", aswire.PT_NULL), ("a", aswire.PT_INTEGER)]
    assert reply.ops[1].value == aswire.int_bytes(1)


def test_features_advertise_only_info_commands_that_exist(client):
    # `features` once listed sindex-exists, truncate-namespace and query-show while those info
    # commands answered ERROR:4. A client that trusts a feature must find its command.
    features = harness.info(client, "features").split(";")
    assert "pscans" in features
    # A cut-off 1 ns after the Unix epoch truncates nothing.
    probes = {
        "truncate-namespace": "truncate-namespace:namespace=test;lut=1",
        "query-show": "query-show",
        "sindex-exists": "sindex-exists:ns=test;indexname=none",
    }
    for feature, probe in probes.items():
        assert feature in features
        assert "unrecognized" not in harness.info(client, probe)
    assert harness.info(client, "services") == ""


def test_paginated_scan_with_many_threads_returns_each_record_once(start_server):
    # A partition cut short at its first-pass share of max-records was continued by whichever
    # scan thread came next, while the first thread still held the partition's earlier records
    # in its unsent proto. The client then saw a partition's records out of digest order,
    # resumed after the wrong digest, and the next page repeated records (39 of 2,000 here).
    # The thread that cuts a partition short now continues it itself.
    server = start_server(service={"single-scan-threads": 8})
    client = server.client()
    for i in range(2000):
        client.put(("test", "pages", i), {"v": i}, policy={"key": aerospike.POLICY_KEY_SEND})
    query = client.query("test", "pages")
    query.paginate()
    query.max_records = 333
    seen = []
    while True:
        seen += [key[2] for key, _, _ in query.results()]
        if query.is_done():
            break
    assert len(seen) == len(set(seen)), "a record came back twice"
    assert sorted(seen) == list(range(2000))


def test_write_and_read_on_one_raw_connection_after_a_put(server, uset):
    # Info and data requests share a connection; a write followed by a read on the same socket
    # sees the write (replies are in request order).
    digest = aerospike.calc_digest("test", uset, "k")
    fields = aswire.record_fields("test", uset, digest)
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        reply = aswire.request_msg(sock, aswire.as_msg(fields, [aswire.write_int("n", 7)], info2=INFO2_WRITE))
        assert reply.result_code == aswire.OK
        assert aswire.request_info(sock, ["build"])[0][0] == "build"
        reply = aswire.request_msg(sock, aswire.as_msg(fields, [aswire.read_bin("n")], info1=INFO1_READ))
        assert reply.result_code == aswire.OK
        assert reply.ops[0].value == aswire.int_bytes(7)
