"""Batch, scan, query and truncate: each works as in Aerospike, or (batch) is refused cleanly.

"Cleanly" means: an error code the client surfaces at once (UNSUPPORTED_FEATURE 16 is the natural
one), never a client timeout caused by a reply stream that does not end. Multi-record replies are
streams terminated by a message with info3 LAST (reference 8.1, 8.2); an error reply to a batch
must therefore carry LAST too. Scans and truncate are implemented: their detailed tests are in
test_scan.py, test_set_index.py and test_truncate.py; the ones here are the smoke tests.
"""

from __future__ import annotations

import struct
import time

import aerospike
import pytest
from aerospike import exception as ex

import aswire
import harness

PROMPT_S = 0.8  # the client's own timeout would show as >= 1 s and code 9


def test_batch_read_returns_each_row_or_is_refused_promptly(client, uset, healthy):
    client.put(("test", uset, 1), {"a": 1})
    keys = [("test", uset, 1), ("test", uset, 2)]
    t0 = time.monotonic()
    try:
        res = client.batch_read(keys)
    except ex.AerospikeError as e:
        assert e.code == 16, (e.code, e.msg)
        return
    elapsed = time.monotonic() - t0
    codes = [br.result for br in res.batch_records]
    if res.result == 0:
        assert codes == [0, 2]
        assert res.batch_records[0].record[2] == {"a": 1}
    else:
        # Refused: every row and the whole batch say UNSUPPORTED_FEATURE, without a timeout.
        assert res.result == 16, (res.result, codes)
        assert elapsed < PROMPT_S, f"batch took {elapsed:.2f}s: the reply stream never ended"


def test_scan_returns_the_set_promptly(client, uset, healthy):
    for i in range(3):
        client.put(("test", uset, i), {"i": i})
    t0 = time.monotonic()
    recs = client.scan("test", uset).results()
    assert time.monotonic() - t0 < PROMPT_S
    assert sorted(r[2]["i"] for r in recs) == [0, 1, 2]


def test_query_without_a_filter_returns_the_set_promptly(client, uset, healthy):
    client.put(("test", uset, "q"), {"i": 1})
    t0 = time.monotonic()
    recs = client.query("test", uset).results()
    assert time.monotonic() - t0 < PROMPT_S
    assert [r[2] for r in recs] == [{"i": 1}]


def test_truncate_removes_the_set(client, uset, healthy):
    client.put(("test", uset, "t"), {"i": 1})
    client.truncate("test", uset, 0)
    with pytest.raises(ex.RecordNotFound):
        client.get(("test", uset, "t"))


def _batch_frame(ns: str, set_name: str, digests: list[bytes]) -> bytes:
    # Batch-index body (reference 8.1): n_rows, parent flags, then rows of
    # index, digest, flags (0 = legacy read row), info1, n_fields, n_ops, fields.
    body = struct.pack(">IB", len(digests), 0x04)
    for i, d in enumerate(digests):
        body += struct.pack(">I", i) + bytes(d) + bytes([0x00, aswire.INFO1_READ | aswire.INFO1_GET_ALL])
        body += struct.pack(">HH", 2, 0) + aswire.ns_field(ns) + aswire.set_field(set_name)
    return aswire.as_msg(
        [aswire.field(41, body)], [], info1=0x08 | aswire.INFO1_READ | aswire.INFO1_GET_ALL, transaction_ttl=2000
    )


def _read_stream(sock) -> list[aswire.Msg]:
    """All messages of a multi-record reply up to and including the LAST one."""
    msgs: list[aswire.Msg] = []
    sock.settimeout(3.0)
    while True:
        _, ptype, body = aswire.recv_frame(sock)
        assert ptype == aswire.TYPE_MSG
        messages = aswire.split_messages(body)
        assert not any(m.info3 & aswire.INFO3_LAST for m in messages[:-1]), "bytes after the LAST message"
        msgs.extend(messages)
        if messages and messages[-1].info3 & aswire.INFO3_LAST:
            return msgs


def test_a_raw_batch_reply_stream_ends_with_a_last_message(server, uset, healthy):
    d1 = aerospike.calc_digest("test", uset, 1)
    d2 = aerospike.calc_digest("test", uset, 2)
    with server.raw() as s:
        aswire.request_msg(s, aswire.as_msg(aswire.record_fields("test", uset, d1), [aswire.write_int("a", 1)], info2=aswire.INFO2_WRITE))
        s.sendall(_batch_frame("test", uset, [d1, d2]))
        try:
            msgs = _read_stream(s)
        except TimeoutError:
            pytest.fail("the batch reply never sent a message with info3 LAST")
        last = msgs[-1]
        rows = msgs[:-1]
        if last.result_code == 0:
            by_index = {m.transaction_ttl: m for m in rows}
            assert sorted(by_index) == [0, 1]
            assert by_index[0].result_code == 0 and by_index[0].bins() == {"a": 1}
            assert by_index[1].result_code == aswire.NOT_FOUND
        else:
            assert last.result_code == aswire.UNSUPPORTED_FEATURE
        # The connection is still in step afterwards.
        assert aswire.request_info(s, ["node"])[0][0] == "node"


def test_a_raw_scan_reply_stream_ends_with_a_last_message(server, client, uset, healthy):
    client.put(("test", uset, 1), {"a": 1})
    pids = b"".join(struct.pack("<H", p) for p in range(4096))
    frame = aswire.as_msg(
        [aswire.ns_field("test"), aswire.set_field(uset), aswire.field(7, struct.pack(">Q", 12345)), aswire.field(11, pids)],
        [],
        info1=aswire.INFO1_READ,
        info3=0x04,  # PARTITION_DONE: the client understands partition scans
    )
    with server.raw() as s:
        s.sendall(frame)
        try:
            msgs = _read_stream(s)
        except TimeoutError:
            pytest.fail("the scan reply never sent a message with info3 LAST")
        assert msgs[-1].result_code == 0
        assert [m.bins() for m in msgs[:-1]] == [{"a": 1}]
        assert aswire.request_info(s, ["node"])[0][0] == "node"
